"""Enumerate an upstream range (sync step 2): commits, their changes, stats, reverts, cherry-picks.

The whole range comes from one `git log -z` process parsed here in a single pass;
range stats from one `git diff --shortstat`; duplicate detection confirms its
candidates with one `git diff-tree` piped into one `git patch-id`; the symbol pass
reads the patches of the commits that touch cited paths with one more `git
diff-tree --stdin` (`commit_patches`); where paths went between two commits (a rename
git finds across them) is one `git diff --name-status` (`renamed_since`). The number of
git processes never depends on the number of commits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from sync.infra.errors import EnvironmentUnresolved
from sync.upstream import gitio, patch
from sync.upstream.gitio import short

ChangeStatus = Literal["A", "M", "D", "R", "C", "T"]

_STATUSES = frozenset(b"AMDRCT")
_TWO_PATHS = frozenset(b"RC")

# A byte no header field starts with; it marks the first field of every record so a
# name-status entry (which always starts with a status letter) is never mistaken for one.
_MARK = b"\x1e"
# Fields are NUL-separated like the -z name-status entries, so one split covers both.
# %s/%b are git's own subject/body split; NUL cannot occur inside them (git stops there).
_FORMAT = "--format=%x1e%H%x00%P%x00%an <%ae>%x00%aI%x00%s%x00%b"
_HEADER_FIELDS = 6

_PR = re.compile(r"\(#([0-9]{1,12})\)\s*$")
_TAGS = re.compile(r"\s*\[([^\[\]]*)\]")
_HEX = re.compile(r"[0-9a-f]{7,64}")
_FULL = re.compile(r"[0-9a-f]{40}")
_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,64})\b")
_CHERRY = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,64})\)")
_PR_SUFFIX = re.compile(r"(?:\s*\(#[0-9]+\))+\s*$")
_SHORTSTAT_PART = re.compile(
    r"(?P<n>[0-9]+) (?:(?P<files>files? changed)|(?P<ins>insertions?\(\+\))"
    r"|(?P<dels>deletions?\(-\)))"
)


@dataclass(frozen=True)
class Change:
    status: ChangeStatus
    path: str
    old_path: str | None = None
    score: int | None = None


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    author: str
    date: str
    subject: str
    body: str
    changes: tuple[Change, ...]

    @property
    def pr(self) -> int | None:
        return parse_pr(self.subject)

    @property
    def tags(self) -> tuple[str, ...]:
        return parse_tags(self.subject)

    @property
    def paths(self) -> tuple[str, ...]:
        seen = {c.path for c in self.changes}
        seen.update(c.old_path for c in self.changes if c.old_path is not None)
        return tuple(sorted(seen))


@dataclass(frozen=True)
class RangeStats:
    commits: int
    files_changed: int
    insertions: int
    deletions: int


def parse_pr(subject: str) -> int | None:
    """The PR number of a squash-merged subject: its trailing `(#N)` (a cherry-pick may add a
    second one; the last is the PR that landed this commit)."""
    match = _PR.search(subject)
    return int(match.group(1)) if match else None


def parse_tags(subject: str) -> tuple[str, ...]:
    """Leading bracket tags: `[Core][Bugfix] x` and `[Core] [Bugfix] x` give ("Core", "Bugfix")."""
    tags: list[str] = []
    pos = 0
    while match := _TAGS.match(subject, pos):
        tag = match.group(1).strip()
        if tag:
            tags.append(tag)
        pos = match.end()
    return tuple(tags)


def _text(raw: bytes) -> str:
    # Commits without an encoding header are passed through raw; a legacy Latin-1
    # message must not stop the cycle, so undecodable bytes become U+FFFD.
    return raw.decode("utf-8", "replace")


def _malformed(why: str) -> EnvironmentUnresolved:
    return EnvironmentUnresolved(
        f"unexpected git log output ({why})",
        "check that git >= 2.39 is on PATH and the reference checkout is not corrupt",
    )


def parse_log(data: bytes) -> list[Commit]:
    """Parse `git log -z --name-status` output made with this module's format, newest first."""
    if data and not data.endswith(b"\0"):
        raise _malformed("output does not end with a NUL")
    tokens = data[:-1].split(b"\0") if data else []
    commits: list[Commit] = []
    i = 0
    while i < len(tokens):
        commit, i = _record(tokens, i)
        commits.append(commit)
    return commits


def _record(tokens: list[bytes], i: int) -> tuple[Commit, int]:
    """The commit whose header starts at field `i`, and the field after its last change."""
    count = len(tokens)
    head = tokens[i]
    if head[:1] != _MARK or i + _HEADER_FIELDS > count:
        raise _malformed(f"no commit record at field {i}")
    sha = head[1:].decode("ascii", "replace")
    if not _HEX.fullmatch(sha):
        raise _malformed(f"bad commit id at field {i}")
    parents = tuple(tokens[i + 1].decode("ascii", "replace").split())
    author = _text(tokens[i + 2])
    date = tokens[i + 3].decode("ascii", "replace")
    subject = _text(tokens[i + 4])
    body = _text(tokens[i + 5]).strip()
    i += _HEADER_FIELDS
    changes: list[Change] = []
    while i < count and tokens[i][:1] != _MARK:
        change, i = _change(tokens, i, sha)
        changes.append(change)
    return Commit(sha, parents, author, date, subject, body, tuple(changes)), i


def _change(tokens: list[bytes], i: int, sha: str) -> tuple[Change, int]:
    """The name-status entry at field `i` (a status, then one path or two), and the next field."""
    entry = tokens[i]
    # git separates the message from the first entry with a newline.
    if entry[:1] == b"\n":
        entry = entry[1:]
    letter, digits = entry[:1], entry[1:]
    # A similarity score is at most 100; bounding its length also keeps int() cheap.
    if (not letter or letter[0] not in _STATUSES
            or (digits and not (digits.isdigit() and len(digits) <= 3))):
        raise _malformed(f"bad change status {entry[:8]!r} in {short(sha)}")
    score = int(digits) if digits else None
    status = cast(ChangeStatus, letter.decode())
    if letter[0] in _TWO_PATHS:
        if i + 3 > len(tokens):
            raise _malformed(f"truncated rename entry in {short(sha)}")
        return Change(status, _text(tokens[i + 2]), _text(tokens[i + 1]), score), i + 3
    if i + 2 > len(tokens):
        raise _malformed(f"truncated change entry in {short(sha)}")
    return Change(status, _text(tokens[i + 1]), None, score), i + 2


def begin_log(ref: gitio.Reference, base: str, target: str, *,
              merges: bool = False) -> gitio.Started:
    """Start the range's one `git log -z` in the background (see `finish_log`); `merges`
    keeps merge commits (without their diffs), for walking the range's ancestry."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    # Options a user's config could otherwise switch on are pinned off so the output
    # shape is ours; --encoding makes git convert messages that declare an encoding.
    return gitio.start(ref.path, [
        "log", "-z", *(() if merges else ("--no-merges",)), "-M", "--name-status",
        "--encoding=UTF-8", "--no-color",
        "--no-show-signature", "--no-relative", _FORMAT,
        "--end-of-options", f"{base}..{target}", "--",
    ])


def finish_log(job: gitio.Started) -> list[Commit]:
    commits = parse_log(job.wait())
    commits.reverse()
    return commits


def log_range(ref: gitio.Reference, base: str, target: str) -> list[Commit]:
    """Every non-merge commit in base..target, oldest first, with its changes (renames found)."""
    try:
        return finish_log(begin_log(ref, base, target))
    except EnvironmentUnresolved as exc:
        raise gitio.range_error(ref, base, target, exc) from None


def log_commits(ref: gitio.Reference, shas: Sequence[str]) -> list[Commit]:
    """These commits (full SHAs, in any order) with their changes: one `git log -z
    --no-walk`, whatever their number. Commits the checkout lacks are left out."""
    wanted = [gitio.check_rev(s) for s in dict.fromkeys(shas) if _FULL.fullmatch(s)]
    known = [s for s, row in zip(wanted, gitio.batch_check(ref, wanted), strict=True)
             if row is not None and row[1] == "commit"]
    if not known:
        return []
    data = ref.git("log", "-z", "--no-walk=unsorted", "-M", "--name-status", "--encoding=UTF-8",
                   "--no-color", "--no-show-signature", "--no-relative", _FORMAT,
                   "--end-of-options", *known, "--")
    found = {c.sha: c for c in parse_log(data)}
    return [found[s] for s in known if s in found]


def not_reached(ref: gitio.Reference, shas: Sequence[str], target: str) -> set[str]:
    """Of these commits (full SHAs the checkout has), those `target` does not reach: one
    `git rev-list`, bounded by what lies between them and the target."""
    wanted = [gitio.check_rev(s) for s in dict.fromkeys(shas) if _FULL.fullmatch(s)]
    if not wanted:
        return set()
    listed = ref.git("rev-list", "--end-of-options", *wanted, f"^{gitio.check_rev(target)}",
                     "--")
    return set(wanted) & set(listed.decode("ascii", "replace").split())


def parse_shortstat(text: str) -> tuple[int, int, int]:
    """(files changed, insertions, deletions) from one `git diff --shortstat` line; "" is 0s."""
    line = text.strip()
    if not line:
        return (0, 0, 0)
    files = insertions = deletions = None
    for part in line.split(", "):
        match = _SHORTSTAT_PART.fullmatch(part)
        if match is None:
            raise EnvironmentUnresolved(
                f"unexpected git diff --shortstat output: {line[:80]!r}",
                "check that git >= 2.39 is on PATH and runs with LC_ALL=C",
            )
        number = int(match.group("n"))
        if match.group("files"):
            files = number
        elif match.group("ins"):
            insertions = number
        else:
            deletions = number
    if files is None:
        raise EnvironmentUnresolved(
            f"git diff --shortstat gave no file count: {line[:80]!r}",
            "check that git >= 2.39 is on PATH and runs with LC_ALL=C",
        )
    return (files, insertions or 0, deletions or 0)


def begin_stats(ref: gitio.Reference, base: str, target: str) -> gitio.Started:
    """Start `git diff --shortstat BASE TARGET` in the background (rename detection on, the
    porcelain default, made explicit so a user's diff.renames cannot change the numbers)."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    return gitio.start(ref.path, [
        "diff", "--shortstat", "-M", "--no-ext-diff", "--no-textconv", "--no-relative",
        "--end-of-options", base, target, "--",
    ])


def finish_stats(job: gitio.Started, commits: int) -> RangeStats:
    files, insertions, deletions = parse_shortstat(job.wait().decode("utf-8", "replace"))
    return RangeStats(commits, files, insertions, deletions)


def range_stats(ref: gitio.Reference, base: str, target: str, commits: int) -> RangeStats:
    """Range stats as `git diff --shortstat BASE TARGET` gives them."""
    return finish_stats(begin_stats(ref, base, target), commits)


def renamed_since(ref: gitio.Reference, base: str, target: str,
                  paths: Iterable[str]) -> dict[str, str]:
    """Path -> its name at `target`, for each of `paths` that git's rename detection (`-M`,
    as the log's) pairs with a file added between `base` and `target`; a path it pairs with
    nothing (deleted) is not listed. One `git diff --name-status` of the whole tree: with
    the paths as its pathspec, git would not see the new names to pair them with."""
    wanted = set(paths)
    gitio.check_rev(base)
    gitio.check_rev(target)
    data = ref.git("diff", "-z", "--name-status", "-M", "--diff-filter=R", "--no-relative",
                   "--end-of-options", base, target, "--")
    tokens = data.split(b"\0")[:-1]  # each field ends with a NUL
    out: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        change, i = _change(tokens, i, target)
        if change.old_path in wanted:
            out[change.old_path] = change.path
    return out


def _quoted_target(subject: str) -> str | None:
    """The subject a `Revert "X"` / `Reapply "X"` subject names, as it was before reverting."""
    text = _PR_SUFFIX.sub("", subject)
    for prefix, reverted in (('Revert "', "{}"), ('Reapply "', 'Revert "{}"')):
        if text.startswith(prefix) and text.endswith('"') and len(text) > len(prefix):
            return reverted.format(text[len(prefix):-1])
    return None


def _lookup(named: str, listed: set[str], shas: Sequence[str]) -> str | None:
    """The listed commit a (possibly abbreviated) SHA from a message names, if exactly one."""
    if named in listed:
        return named
    if len(named) >= 40:
        return None  # a full SHA outside the list: no scan needed
    hits = [s for s in shas if s.startswith(named)]
    return hits[0] if len(hits) == 1 else None


def find_reverts(commits: list[Commit]) -> dict[str, str]:
    """Reverting sha -> reverted sha, for reverts whose target is in `commits` (upstream order).

    The SHA in "This reverts commit X." is authoritative: when it names a commit outside
    the list the revert is not paired, even if a listed commit has the same subject (a
    re-land). Without it, `Revert "S"` pairs with the latest earlier commit whose subject
    is S (or, failing that, S without its `(#N)`), and `Reapply "S"` with the latest
    earlier `Revert "S"`.
    """
    shas = [c.sha for c in commits]
    listed = set(shas)
    latest: dict[str, str] = {}
    latest_bare: dict[str, str] = {}
    pairs: dict[str, str] = {}
    for commit in commits:
        named = _REVERTS.search(commit.body)
        if named is not None:
            target = _lookup(named.group(1), listed, shas)
        else:
            subject = _quoted_target(commit.subject)
            target = None if subject is None else (
                latest.get(subject) or latest_bare.get(_PR_SUFFIX.sub("", subject)))
        if target is not None and target != commit.sha:
            pairs[commit.sha] = target
        latest[commit.subject] = commit.sha
        latest_bare[_PR_SUFFIX.sub("", commit.subject)] = commit.sha
    return pairs


def _normalised_subject(subject: str) -> str:
    return " ".join(_PR_SUFFIX.sub("", subject).casefold().split())


def _candidate_keys(commit: Commit, listed: set[str], shas: Sequence[str]) -> Iterable[object]:
    subject = _normalised_subject(commit.subject)
    if subject:
        yield ("subject", subject)
    # A pick shares a key with its origin when that is listed, and with its siblings
    # (other picks of the same origin) when it is not.
    yield ("picked", commit.sha)
    picked = _CHERRY.search(commit.body)
    if picked is not None:
        origin = _lookup(picked.group(1), listed, shas) or picked.group(1)
        if origin != commit.sha:
            yield ("picked", origin)


def find_duplicates(ref: gitio.Reference, commits: list[Commit]) -> list[tuple[str, ...]]:
    """Groups (size >= 2, upstream order) of patch-identical commits, e.g. cherry-picks.

    Candidates are chosen in Python (same normalised subject, or a cherry-pick trailer
    naming another listed commit or the same origin); only those are diffed, in one
    `git diff-tree --stdin` fed to one `git patch-id`. Both run even with no candidates,
    so the number of git processes per sync never depends on the range.
    """
    shas = [c.sha for c in commits]
    ids = _patch_ids(ref, [shas[i] for i in _candidates(commits, shas)])
    order = {sha: i for i, sha in enumerate(shas)}
    groups: dict[str, list[int]] = {}
    for line in ids.decode("ascii", "replace").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] in order:
            groups.setdefault(fields[0], []).append(order[fields[1]])
    found = sorted(sorted(members) for members in groups.values() if len(members) > 1)
    return [tuple(shas[i] for i in members) for members in found]


def _candidates(commits: list[Commit], shas: list[str]) -> list[int]:
    """Indices of the commits sharing a candidate key with another (upstream order)."""
    listed = set(shas)
    buckets: dict[object, list[int]] = {}
    for index, commit in enumerate(commits):
        if not commit.changes:
            continue  # no patch, so no patch identity to share
        for key in _candidate_keys(commit, listed, shas):
            buckets.setdefault(key, []).append(index)
    return sorted({i for members in buckets.values() if len(members) > 1 for i in members})


def _patch_ids(ref: gitio.Reference, shas: list[str]) -> bytes:
    """`git patch-id --stable` lines (`<patch id> <sha>`) for `shas`, in two git processes."""
    stdin = b"".join(sha.encode() + b"\n" for sha in shas)
    # Renames off, as `git cherry` computes patch ids, so identity is about content;
    # full blob ids so binary changes (hashed by id, having no hunks) cannot collide.
    patches = gitio.run(ref.path, [
        "diff-tree", "--stdin", "-p", "-r", "--root", "--no-renames", "--full-index",
        "--no-ext-diff", "--no-textconv",
    ], input=stdin).stdout
    return gitio.run(ref.path, ["patch-id", "--stable"], input=patches).stdout


def commit_patches(ref: gitio.Reference, shas: Sequence[str],
                   paths: Iterable[str]) -> dict[str, patch.CommitPatch]:
    """sha -> its patch of `paths` (renames found, on either side), for every commit in
    `shas`: one `git diff-tree --stdin` whatever their number.

    No pathspec: git matches every tree entry against every pathspec item, which cost 30x
    the listing itself for 600 paths; the other files' patches are dropped here instead.
    """
    wanted = set(paths)
    if not shas or not wanted:
        return {}
    stdin = b"".join(sha.encode() + b"\n" for sha in shas if _HEX.fullmatch(sha))
    out = gitio.run(ref.path, [
        "-c", "core.quotePath=false", "diff-tree", "--stdin", "-p", "-r", "-M", "--root",
        "--full-index", "--no-color", "--no-ext-diff", "--no-textconv", "--no-relative",
        "--src-prefix=a/", "--dst-prefix=b/",
    ], input=stdin).stdout
    return {c.sha: patch.CommitPatch(c.sha, tuple(f for f in c.files
                                                  if wanted.intersection(f.paths())))
            for c in patch.parse(out)}
