"""SHA verification: where each SHA a header cites stands against the parity pin.

A SHA in a header is a claim, not a fact; this checks every one against the
reference checkout with three git processes whatever their number.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sync.infra.errors import EnvironmentUnresolved
from sync.upstream import gitio, history

ShaStatus = Literal["at-pin", "behind", "ahead", "not-upstream"]

_SHA_WORD = re.compile(r"[0-9a-f]{7,40}")  # a SHA as a header writes it


@dataclass(frozen=True)
class Probe:
    """Where each cited SHA stands against the pin, and the full commit each one names."""

    pin: str  # full SHA
    status: dict[str, ShaStatus]
    full: dict[str, str]  # cited SHA -> the one commit it names (absent: names none)


def classify_shas(ref: gitio.Reference, pin: str, shas: Iterable[str],
                  upstream_ref: str) -> dict[str, ShaStatus]:
    """Where each cited SHA (as written) stands against `pin` on the upstream line."""
    return probe(ref, pin, shas, upstream_ref).status


def probe(ref: gitio.Reference, pin: str, shas: Iterable[str], upstream_ref: str) -> Probe:
    """Where each cited SHA (as written) stands against `pin` on the upstream line.

    Three git processes whatever the number of SHAs: one cat-file to resolve
    them all, one rev-list for those the pin does not reach, one for `pin..upstream_ref`.
    """
    gitio.check_rev(pin)
    gitio.check_rev(upstream_ref)
    wanted = list(dict.fromkeys(shas))
    probe = [s for s in wanted if _SHA_WORD.fullmatch(s)]
    pin_sha, up_sha, commits = _resolve(ref, pin, upstream_ref, probe)
    behind = _reached(ref, pin_sha, set(commits.values()))
    ahead = set(ref.git("rev-list", "--end-of-options", up_sha, f"^{pin_sha}").decode().split())
    out: dict[str, ShaStatus] = {s: "not-upstream" for s in wanted}
    for s, commit in commits.items():
        if commit == pin_sha:
            out[s] = "at-pin"
        elif commit in behind:
            out[s] = "behind"
        elif commit in ahead:
            out[s] = "ahead"
    return Probe(pin_sha, out, commits)


def _reached(ref: gitio.Reference, pin: str, commits: set[str]) -> set[str]:
    """Which of `commits` the pin reaches: those `rev-list COMMITS ^PIN` does not list.

    Bounded by what lies between the commits and the pin, never the pin's whole history
    (about 18,000 commits upstream, a third of a second).
    """
    listed = ref.git("rev-list", "--stdin", "--end-of-options", f"^{pin}",
                     input="".join(f"{c}\n" for c in sorted(commits)).encode())
    return commits - set(listed.decode().split())


def _resolve(ref: gitio.Reference, pin: str, upstream_ref: str,
             probe: list[str]) -> tuple[str, str, dict[str, str]]:
    """(pin commit, upstream commit, cited SHA -> the one commit it names), one cat-file.

    A SHA that is missing, ambiguous, or names a tag, tree or blob names no commit.
    """
    names = [f"{pin}^{{commit}}", f"{upstream_ref}^{{commit}}"]
    for s in probe:
        names += [s, f"{s}^{{commit}}"]  # plain: is it a commit at all; peeled: which commit
    found = gitio.batch_check(ref, names)
    if found[0] is None:
        raise EnvironmentUnresolved(f"the pin {pin} is not a commit in {ref.path}",
                                    "fetch the reference checkout, or fix the pin")
    if found[1] is None:
        raise gitio.no_remote(ref, upstream_ref) or EnvironmentUnresolved(
            f"{upstream_ref} does not resolve in {ref.path}", "run the fetch step first")
    commits = {}
    for i, s in enumerate(probe):
        plain, peeled = found[2 + 2 * i], found[3 + 2 * i]
        if peeled is not None and (plain is None or plain[1] == "commit"):
            commits[s] = peeled[0]
    return found[0][0], found[1][0], commits


# -- content: is the cited file still what the port mirrors? -------------------------------------

ContentKind = Literal["unchanged", "changed", "renamed", "deleted", "missing"]


@dataclass(frozen=True)
class Content:
    """What became of a cited path between the cited commit and a later one (`against`).

    unchanged: the same blob (or tree) at both; changed: a different one, `since` names the
    commits that touched it; renamed / deleted: gone at `against`, `gone_in` says in which
    commit (and `new_path` to what); missing: not at the cited commit either (a wrong or
    relative path that no unique match resolves).
    """

    kind: ContentKind
    path: str  # the upstream path compared (resolved when the cited one is relative)
    since: tuple[str, ...] = ()  # full SHAs, oldest first
    new_path: str | None = None
    gone_in: str | None = None
    # missing: the files of that name `against` has (a hint for a mistyped directory)
    namesakes: tuple[str, ...] = ()
    # missing: `against` has no top folder of that name either (`aten/`: another project's)
    outside: bool = False
    # changed: the PR and the day (YYYY-MM-DD, its author's) of each of `since`: a ledger
    # row older than a commit cannot be a note of it (unless it names it)
    since_prs: tuple[int | None, ...] = ()
    since_days: tuple[str, ...] = ()

    @property
    def first_day(self) -> str:
        return min(self.since_days, default="")


@dataclass(frozen=True)
class Cited:
    """One citation to compare: the full commit it names, its path, and the full path cited
    before it in its statement (a relative path resolves against it)."""

    commit: str
    path: str
    near: str | None = None


class Tree:
    """The file paths of one commit, for resolving a relative cited path by a unique match,
    and the blob each names (to tell a path the tree lacks from one whose blob is lost)."""

    def __init__(self, paths: list[str], blobs: dict[str, str] | None = None) -> None:
        self.files = frozenset(paths)
        self.blobs = blobs or {}
        self._sorted = sorted(paths)
        self._by_name: dict[str, list[str]] = {}
        for p in paths:
            self._by_name.setdefault(p.rsplit("/", 1)[-1], []).append(p)

    def namesakes(self, path: str, most: int = 3) -> tuple[str, ...]:
        """The files named as `path` is (its last component), when there are at most `most`:
        more is no hint."""
        found = self._by_name.get(path.rstrip("/").rsplit("/", 1)[-1], [])
        return tuple(sorted(found)) if 0 < len(found) <= most else ()

    def has(self, path: str) -> bool:
        if path.endswith("/"):
            i = bisect_left(self._sorted, path)
            return i < len(self._sorted) and self._sorted[i].startswith(path)
        return path in self.files

    def resolve(self, path: str, near: str | None) -> str | None:
        """`path` as the tree has it: itself, beside `near` (or one of its parents), or the
        one file whose path ends with it."""
        if self.has(path):
            return path
        if near:
            parts = near.split("/")[:-1]
            while parts:
                cand = "/".join(parts) + "/" + path
                if self.has(cand):
                    return cand
                parts.pop()
        if path.endswith("/"):
            return None
        hits = [p for p in self._by_name.get(path.rsplit("/", 1)[-1], ())
                if p.endswith("/" + path)]
        return hits[0] if len(hits) == 1 else None


def _spec(commit: str, path: str) -> str:
    return f"{commit}:{path.rstrip('/')}"


def content(ref: gitio.Reference, against: str, cited: list[Cited]) -> dict[Cited, Content]:
    """What became of each cited path from its cited commit to `against` (a full SHA).

    A constant number of git processes whatever the number of citations: one
    `cat-file --batch-check` for the blobs at both ends, one `ls-tree` when a path reads as
    absent at `against` (and one more batch check when a relative path must be resolved),
    one `merge-base` and one `git log` for the commits that changed, renamed or deleted them.
    Refused (the checkout is missing objects) when `against`'s tree names a cited path whose
    blob the checkout cannot read: that is no deletion.
    """
    gitio.check_rev(against)
    wanted = list(dict.fromkeys(cited))
    ids = _blob_ids(ref, against, [(c.commit, c.path) for c in wanted])
    paths = {c: c.path for c in wanted}
    lost = [c for c in wanted if ids[(c.commit, c.path)] == (None, None)]
    absent = any(ids[(c.commit, c.path)][1] is None for c in wanted)
    tree = _tree(ref, against) if absent else None
    if tree is not None and lost:
        moved = {c: tree.resolve(c.path, c.near) for c in lost}
        again = _blob_ids(ref, against, [(c.commit, p) for c, p in moved.items() if p])
        for c, p in moved.items():
            if p is not None and again[(c.commit, p)] != (None, None):
                paths[c], ids[(c.commit, p)] = p, again[(c.commit, p)]
    if tree is not None:
        _unreadable(ref, against, tree, [paths[c] for c in wanted
                                         if ids[(c.commit, paths[c])][1] is None])
    kinds = {c: _kind(ids[(c.commit, paths[c])]) for c in wanted}
    moving = [c for c in wanted if kinds[c] in ("changed", "gone")]
    history_of = _history(ref, against, sorted({c.commit for c in moving}))
    out: dict[Cited, Content] = {}
    for c in wanted:
        kind, path = kinds[c], paths[c]
        if kind == "unchanged":
            out[c] = Content("unchanged", path)
        elif kind == "missing":
            out[c] = _missing(path, tree)
        else:
            out[c] = history_of.explain(c.commit, path, changed=kind == "changed")
    return out


def _tree(ref: gitio.Reference, against: str) -> Tree:
    """`against`'s tree from one `git ls-tree` (which reads trees, never blobs)."""
    entries = gitio.tree_entries(ref.path, against)
    return Tree([e.path for e in entries],
                {e.path: e.object_id for e in entries if e.kind == "blob"})


def _unreadable(ref: gitio.Reference, against: str, tree: Tree, absent: list[str]) -> None:
    """Refuse when `against`'s tree names a blob of `absent` (paths the batch check could not
    read there): the checkout lost the object; upstream did not delete the file."""
    lost = [(p, tree.blobs[p]) for p in dict.fromkeys(absent) if p in tree.blobs]
    if lost:
        path, oid = lost[0]
        more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
        raise EnvironmentUnresolved(
            f"the reference checkout {ref.path} cannot read {path} at {gitio.short(against)} "
            f"(object {gitio.short(oid)}){more}", gitio.refetch_fix(ref.path))


def _missing(path: str, tree: Tree | None) -> Content:
    if tree is None:
        return Content("missing", path)
    head, sep, _rest = path.partition("/")
    return Content("missing", path, namesakes=tree.namesakes(path),
                   outside=bool(sep) and not tree.has(head + sep))


def _kind(pair: tuple[str | None, str | None]) -> str:
    at_cited, at_against = pair
    if at_cited is None:
        # Not at the cited commit: a wrong path, unless the later commit has it (then what
        # the port read is unknowable; it changed as far as anyone can tell).
        return "missing" if at_against is None else "changed"
    if at_against is None:
        return "gone"
    return "unchanged" if at_cited == at_against else "changed"


def _blob_ids(ref: gitio.Reference, against: str, pairs: list[tuple[str, str]]
              ) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """(object at the cited commit, object at `against`) per (commit, path): one batch."""
    keys = [k for k in dict.fromkeys(pairs) if "\n" not in k[1]]
    names = [n for commit, path in keys for n in (_spec(commit, path), _spec(against, path))]
    rows = gitio.batch_check(ref, names)
    out: dict[tuple[str, str], tuple[str | None, str | None]] = {k: (None, None) for k in pairs}
    for i, k in enumerate(keys):
        a, b = rows[2 * i], rows[2 * i + 1]
        out[k] = (a[0] if a else None, b[0] if b else None)
    return out


@dataclass(frozen=True)
class _History:
    """The commits between the oldest cited commit and `against`, with their ancestry."""

    commits: tuple[history.Commit, ...]  # oldest first
    against: str

    def _after(self, commit: str) -> list[history.Commit]:
        """The range's commits that `commit` does not reach (those after it), oldest first."""
        by_sha = {c.sha: c for c in self.commits}
        reached = {commit}
        todo = [commit]
        while todo:
            node = by_sha.get(todo.pop())
            for p in node.parents if node is not None else ():
                if p not in reached:
                    reached.add(p)
                    todo.append(p)
        return [c for c in self.commits if c.sha not in reached]

    def explain(self, commit: str, path: str, *, changed: bool) -> Content:
        after = self._after(commit)
        if changed:
            return _changed(path, after)
        for c in after:
            for ch in c.changes:
                if ch.status == "R" and ch.old_path == path:
                    return Content("renamed", path, (c.sha,), ch.path, c.sha)
                if ch.status == "D" and ch.path == path:
                    return Content("deleted", path, (c.sha,), None, c.sha)
        return Content("deleted", path)  # gone, but by no commit git names (a merge's tree)


def _changed(path: str, after: list[history.Commit]) -> Content:
    """`path` changed: by which of `after`, and on what day the first of them was made."""
    since = [c for c in after if any(_under(path, ch.path) or (
        ch.old_path is not None and _under(path, ch.old_path)) for ch in c.changes)]
    return Content("changed", path, tuple(c.sha for c in since),
                   since_prs=tuple(c.pr for c in since),
                   since_days=tuple(c.date[:10] for c in since))


def _under(cited: str, changed: str) -> bool:
    """A change to the cited path: the file itself, or a file in a cited folder (a tree's
    blob id changes with any file under it)."""
    return changed == cited or changed.startswith(cited.rstrip("/") + "/")


def _history(ref: gitio.Reference, against: str, commits: list[str]) -> _History:
    if not commits:
        return _History((), against)
    base = gitio.merge_base(ref, commits)
    if base is None:
        return _History((), against)
    log = history.finish_log(history.begin_log(ref, base, against, merges=True))
    return _History(tuple(log), against)
