"""Reference checkout health: can it read what a cycle needs, and is it what it says it is?

A checkout that lost objects reads "clean" to a work-tree check, and one whose checkout
failed (or whose index is gone: every file a staged deletion) reads "clean" to GitPython,
which skips the index when the file is missing. So health is measured, cheaply (`status`
is a hot command; no fsck): one `git status --porcelain -z`, two `git rev-list
--missing=print` (the range's commits, the target's tree), and the relation of the
upstream branch to the pin (`origin/main` older than the pin is "behind the pin", not "0
commits behind"). A git command that later fails on a missing object says how to fix it
(`gitio`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sync.infra.errors import EnvironmentUnresolved
from sync.infra.notes import counted
from sync.upstream import gitio
from sync.upstream.gitio import short

Relation = Literal["ahead", "at-pin", "behind", "diverged", "missing"]


@dataclass(frozen=True)
class Tree:
    """What `git status` says of the work tree and the index."""

    staged: int = 0  # paths whose index entry differs from HEAD
    staged_deleted: int = 0
    unstaged: int = 0  # paths whose work-tree file differs from the index
    unstaged_deleted: int = 0
    index_missing: bool = False
    bare: bool = False  # a bare repository: no work tree, no index

    @property
    def clean(self) -> bool:
        return not (self.staged or self.unstaged or self.index_missing or self.bare)

    def describe(self) -> str:
        if self.bare:
            return "bare (no work tree)"
        if self.clean:
            return "clean"
        parts = []
        if self.index_missing:
            parts.append("the index is missing (every file reads as a staged deletion)")
        elif self.staged_deleted and self.staged_deleted == self.staged:
            parts.append(f"{counted(self.staged, 'staged deletion')} (a checkout that failed?)")
        elif self.staged:
            parts.append(counted(self.staged, "staged change"))
        if self.unstaged:
            deleted = f", {self.unstaged_deleted} of them deleted" if self.unstaged_deleted \
                else ""
            parts.append(counted(self.unstaged, "unstaged change") + deleted)
        return "dirty: " + "; ".join(parts)


def tree(ref: gitio.Reference) -> Tree:
    """The work tree's state from one `git status --porcelain -z` (untracked files ignored)."""
    return finish_tree(ref, begin_tree(ref))


def begin_tree(ref: gitio.Reference) -> gitio.Started:
    """Start the `git status` of `tree` in the background: on a checkout of vLLM it stats
    every tracked file (and hashes each one its index marks racily clean, which no status of
    ours rewrites: a tenth to a quarter of a second), so a `sync` runs it while it works."""
    return gitio.start(ref.path, ["status", "--porcelain=v1", "-z", "--untracked-files=no",
                                  "--ignore-submodules"])


def finish_tree(ref: gitio.Reference, job: gitio.Started) -> Tree:
    """The state `begin_tree`'s status reports."""
    index = ref.git_dir / "index"
    out = job.wait(check=False)
    if ref.bare:
        return Tree(bare=True)  # its status failed: a bare repository has no work tree
    staged = staged_deleted = unstaged = unstaged_deleted = 0
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        x, y = chr(entry[0]), chr(entry[1])
        if x in "RC":
            i += 1  # a rename names its source in the next field
        if x not in " ?":
            staged += 1
            staged_deleted += x == "D"
        if y not in " ?":
            unstaged += 1
            unstaged_deleted += y == "D"
    has_head = gitio.head_sha(ref) is not None
    return Tree(staged, staged_deleted, unstaged, unstaged_deleted,
                has_head and not index.exists())


@dataclass(frozen=True)
class Objects:
    """Whether the objects of a range (its commits, trees and blobs) can all be read."""

    missing: int
    first: str | None  # one missing object id, for the message
    walk_failed: bool = False  # a commit or tree is unreadable: git could not even list them

    @property
    def ok(self) -> bool:
        return self.missing == 0 and not self.walk_failed


def objects(ref: gitio.Reference, base: str, target: str) -> Objects:
    """The objects a cycle to `target` needs that this checkout lacks: every commit of
    `base..target`, and the target's whole tree (what its diffs end at and what the advance
    checks out). Two `git rev-list` processes, whatever the range: not an fsck (a blob only
    an intermediate commit has is named by the git command that fails to read it)."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    missing: list[str] = []
    for args in (["--missing=print", "--end-of-options", f"{base}..{target}"],
                 ["--objects", "--missing=print", "--no-walk", "--end-of-options", target]):
        proc = gitio.run(ref.path, ["rev-list", *args], check=False)
        if proc.returncode != 0:
            return Objects(0, None, walk_failed=True)
        missing += [line[1:].split()[0] for line in proc.stdout.decode().splitlines()
                    if line.startswith("?")]
    return Objects(len(missing), missing[0] if missing else None)


@dataclass(frozen=True)
class Upstream:
    """Where the upstream branch stands against the pin."""

    ref: str
    tip: str | None
    relation: Relation
    commits: int  # ahead: commits past the pin; behind: commits the tip lacks


def upstream(ref: gitio.Reference, pin: str, upstream_ref: str) -> Upstream:
    tip = gitio.resolve(ref, upstream_ref)
    if tip is None:
        return Upstream(upstream_ref, None, "missing", 0)
    if tip == pin:
        return Upstream(upstream_ref, tip, "at-pin", 0)
    if gitio.is_ancestor(ref, pin, tip):
        return Upstream(upstream_ref, tip, "ahead", gitio.count_range(ref, pin, tip))
    if gitio.is_ancestor(ref, tip, pin):
        return Upstream(upstream_ref, tip, "behind", gitio.count_range(ref, tip, pin))
    return Upstream(upstream_ref, tip, "diverged", 0)


def relation_phrase(u: Upstream) -> str:
    """Where the upstream branch stands against the pin, in words."""
    tip = f"{u.ref} ({short(u.tip or '')})"
    if u.relation == "behind":
        return f"{tip} is {u.commits} commit(s) older than the pin"
    if u.relation == "diverged":
        return f"{tip} does not descend from the pin"
    return f"{tip} is {u.relation}" if u.tip else f"{u.ref} does not resolve"


def upstream_problem(u: Upstream, remote: str, branch: str) -> str | None:
    """One sentence when the upstream branch cannot give a target past the pin."""
    if u.relation == "behind":
        return (f"{relation_phrase(u)} — run 'upstream-sync fetch' (or 'git fetch {remote} "
                f"{branch}') to bring it past the pin")
    if u.relation == "diverged":
        return (f"{relation_phrase(u)} — fetch it, or check that the pin is on the upstream "
                "line")
    if u.relation == "missing":
        return f"{u.ref} does not resolve — run 'upstream-sync fetch'"
    return None


def objects_error(o: Objects, path: Path, base: str, target: str
                  ) -> EnvironmentUnresolved | None:
    """The refusal for a checkout that cannot read what a cycle over base..target needs."""
    if o.ok:
        return None
    what = "a commit or tree" if o.walk_failed else f"{o.missing} object(s)"
    example = f" (e.g. {o.first})" if o.first else ""
    return EnvironmentUnresolved(
        f"the reference checkout {path} cannot read {what} of {short(base)}..{short(target)}"
        f"{example}", gitio.refetch(path))



@dataclass(frozen=True)
class Health:
    """The reference checkout as `status`, `fetch` and the report header show it."""

    tree: Tree
    upstream: Upstream
    objects: Objects | None  # None: not checked (no range to check)
    problems: tuple[str, ...]  # one sentence each: what is wrong and what to do
    error: EnvironmentUnresolved | None = None  # the objects a cycle needs are unreadable

    @property
    def readable(self) -> bool:
        return self.objects is None or self.objects.ok

    def summary(self) -> str:
        """One phrase: the work tree's state, and anything else that is wrong."""
        parts = [self.tree.describe()]
        if self.objects is not None and not self.objects.ok:
            parts.append("OBJECTS MISSING" + (f" ({self.objects.missing})"
                                              if self.objects.missing else ""))
        if self.upstream.relation == "behind":
            parts.append(f"{self.upstream.ref} {self.upstream.commits} commit(s) older than "
                         "the pin")
        elif self.upstream.relation == "diverged":
            parts.append(f"{self.upstream.ref} diverged from the pin")
        return ", ".join(parts)


def assess(ref: gitio.Reference, pin: str, upstream_ref: str, *,
           target: str | None = None) -> Health:
    """The checkout's health against `pin` and `upstream_ref` (`target`: the range end whose
    objects must be readable; the upstream tip by default)."""
    job = begin_tree(ref)  # the status runs while the other questions are asked
    u = upstream(ref, pin, upstream_ref)
    end = target or (u.tip if u.relation == "ahead" else None)
    o = objects(ref, pin, end) if end and end != pin else None
    t = finish_tree(ref, job)
    remote, _, branch = upstream_ref.partition("/")
    error = objects_error(o, ref.path, pin, end) if o and end else None
    unnamed = gitio.no_remote(ref, upstream_ref) if u.relation == "missing" else None
    problems = [p for p in (str(unnamed) if unnamed else upstream_problem(u, remote, branch),
                            str(error) if error else None, tree_problem(t, ref.path)) if p]
    return Health(t, u, o, tuple(problems), error)


def bare_problem(path: Path) -> str:
    """Why a bare repository cannot be the reference checkout (the advance moves its work
    tree), and what to point at instead."""
    return (f"the reference checkout {path} is a bare repository: it has no work tree for "
            f"the advance to fast-forward — clone it ('git clone {path} <dir>') and set "
            "reference_checkout (or VLLM_SOURCE) to the clone")


def tree_problem(t: Tree, path: Path) -> str | None:
    if t.bare:
        return bare_problem(path)
    if t.index_missing:
        return (f"the reference checkout {path} has no index (every file reads as a staged "
                f"deletion) — run 'git -C {path} reset' to rebuild it from HEAD")
    if t.staged_deleted and t.staged_deleted == t.staged and t.staged > 0:
        return (f"the reference checkout {path} has {t.staged} staged deletions (a checkout "
                f"that failed?) — restore it with 'git -C {path} reset --hard HEAD' once its "
                "objects are complete")
    if not t.clean:
        return (f"the reference checkout {path} has uncommitted changes ({t.describe()}) — "
                "commit or stash them: it is fast-forwarded at the advance, never reset")
    return None


def _leaves_nothing(ref: gitio.Reference, head: str, commit: str) -> bool:
    """Moving HEAD to `commit` loses no commit: HEAD is behind it or an upstream ref has it."""
    return gitio.is_ancestor(ref, head, commit) or bool(
        gitio.refs_containing(ref, head, "refs/remotes", "refs/tags"))


def move_problem(ref: gitio.Reference, commit: str, upstream_ref: str) -> str | None:
    """Why the reference checkout cannot be moved to `commit` without losing work or moving
    a branch the preferences do not name, if so (`target.move` moves it, fast-forwarding
    the branch checked out; the advance refuses then, and `fetch` and `status` say it)."""
    head = gitio.head_sha(ref)
    if head is None or head == commit:
        return None
    other = branch_problem(ref, upstream_ref)
    if other is not None:
        return other
    if _leaves_nothing(ref, head, commit):
        return None
    return (f"the reference checkout's HEAD {short(head)} cannot fast-forward to "
            f"{short(commit)} — check out the pin's branch")


def branch_problem(ref: gitio.Reference, upstream_ref: str) -> str | None:
    """HEAD on a branch that is not the preferences' (`upstream_ref` is `<remote>/<branch>`):
    neither named `<branch>` nor tracking `upstream_ref`. The advance would fast-forward it,
    a branch no record or preference names; a detached HEAD moves no branch."""
    on = gitio.head_branch(ref)
    branch = upstream_ref.partition("/")[2]
    if on is None or on[0] == branch or on[1] == upstream_ref:
        return None
    return (f"the reference checkout {ref.path} has branch {on[0]} checked out, not {branch} "
            f"(the developer preferences' branch), which the advance would fast-forward — "
            f"check out {branch} ('git -C {ref.path} checkout {branch}')")
