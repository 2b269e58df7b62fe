"""Step 1: choose the cycle's target and freeze its SHA (the fetch itself is `gitio.fetch`).

The fetch only moves `refs/remotes/<remote>/<branch>` (and a tag the user names);
the reference checkout's work tree and branches stay where they are, so mid-cycle
work (or a dirty tree) is never disturbed.

A target the user chose (a tag or a commit, on any upstream branch: a release tag on
a release branch) is as valid as `<remote>/<branch>` for every step; `provenance`
says where it came from, and `move` brings the reference checkout to it when the pin
advances (a fast-forward of the checkout's branch when the target is on the upstream
line, a detached checkout otherwise; never a reset).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from sync.infra import txn
from sync.infra.atomic import write_text
from sync.infra.errors import EnvironmentUnresolved, SyncError, UsageError
from sync.port import Port
from sync.records import cycle
from sync.records.mdtext import code
from sync.steps import report
from sync.upstream import gitio
from sync.upstream.gitio import short


@dataclass(frozen=True)
class Wanted:
    """What a command asks of the cycle's target."""

    pin: str
    target: str | None = None  # commit, tag or ref; None: the open cycle's, else upstream's
    retarget: bool = False  # move an open cycle's target to upstream's
    allow_divergent: bool = False  # accept, for the whole cycle, a target off the pin's line


@dataclass(frozen=True)
class Frozen:
    cycle: cycle.Cycle
    moved: str | None  # the remote's new SHA when it moved past the frozen target


def peek(port: Port, ref: gitio.Reference, wanted: Wanted) -> tuple[str, bool]:
    """(the SHA `freeze` would freeze, whether the cycle accepted divergence already), with
    nothing written: a target refused for its ancestry must not replace the open one."""
    want, sha, current, kept = _wanted(port, ref, wanted)
    if kept is None:
        _needs_retarget(ref, current, wanted, (want, sha))
    return (kept.cycle.target, kept.cycle.divergent_ok) if kept else (sha, False)


def refuse_behind(ref: gitio.Reference, pin: str, sha: str) -> None:
    """A target behind the pin is never one: an advance to it would move the pin back, with a
    range of no commits (`--allow-divergent` or not)."""
    if gitio.is_ancestor(ref, sha, pin):
        raise UsageError(f"target {short(sha)} is behind the pin {short(pin)} (an ancestor of "
                         "it): a sync only moves forward",
                         "pick a target after the pin ('upstream-sync rollback' undoes an "
                         "advance)")


def refuse_off_line(ref: gitio.Reference, pin: str, sha: str, *, allow_divergent: bool = False,
                    divergent_fix: str = "or pass --allow-divergent") -> None:
    """A target that does not descend from the pin: behind it, never; elsewhere, only when
    allowed (`divergent_fix`: how the command that refuses allows it)."""
    if gitio.is_ancestor(ref, pin, sha):
        return
    refuse_behind(ref, pin, sha)
    if not allow_divergent:
        raise UsageError(f"target {short(sha)} does not descend from the pin {short(pin)}",
                         f"pick a target on the pin's line, {divergent_fix}")


def _wanted(port: Port, ref: gitio.Reference, wanted: Wanted
            ) -> tuple[str, str, cycle.Cycle | None, Frozen | None]:
    """(the target as asked, its SHA, the open cycle, that cycle when it keeps its target)."""
    want = wanted.target or port.upstream_ref
    sha = gitio.resolve(ref, want)
    if sha is None:
        raise _unresolved(ref, wanted, want)
    current = port.cycle()
    return want, sha, current, _kept(current, wanted, sha, want)


def _unresolved(ref: gitio.Reference, wanted: Wanted, want: str) -> SyncError:
    """Why `want` names no commit: a target the user named is a usage error; the upstream
    ref (no target named) is the checkout's state, as `status` and the audit say it (3)."""
    if wanted.target is not None:
        return UsageError(f"target {want!r} does not name a commit in {ref.path}",
                          "give a SHA, tag or branch that exists (run fetch first)")
    unnamed = gitio.no_remote(ref, want)
    if unnamed is not None:
        return unnamed
    return EnvironmentUnresolved(
        f"{want} does not resolve in the reference checkout {ref.path} (never fetched, "
        "pruned, a broken ref, or a remote or branch the preferences misname)",
        "run 'upstream-sync fetch' (a ref git reports as bad: delete it first, "
        f"'git -C {ref.path} update-ref -d refs/remotes/{want}')")


def _needs_retarget(ref: gitio.Reference, current: cycle.Cycle | None, wanted: Wanted,
                    asked: tuple[str, str]) -> None:
    """Another target for the open cycle is refused unless `retarget` says so (one behind the
    pin first: a retarget would not make it one); the pin itself, always: a cycle moved onto
    it has no range, so its report is never written and queue and sync send each other round."""
    want, sha = asked
    if current is None or current.pin != wanted.pin:
        return
    if sha == wanted.pin != current.target:
        raise UsageError(f"the target {short(sha)} is the pin: there is nothing to retarget to",
                         f"the open cycle to {short(current.target)} is kept: leave --target "
                         "out to sync it, or name a target past the pin")
    if not wanted.retarget:
        refuse_behind(ref, wanted.pin, sha)
        raise UsageError(
            f"the open cycle is frozen at {short(current.target)} ({current.target_ref}); "
            f"{want} is {short(sha)}", "pass --retarget to move the cycle to it, or leave "
            "--target out to keep the frozen target")


def freeze(port: Port, ref: gitio.Reference, wanted: Wanted) -> Frozen:
    """Resolve and freeze the target; an open cycle keeps its target unless told otherwise.

    Naming another target for an open cycle is refused without `retarget`: the cycle's
    report, decisions and gates are for the frozen one.
    """
    with port.lock():  # the cycle is read under the lock it is saved under
        return _freeze(port, ref, wanted)


def _freeze(port: Port, ref: gitio.Reference, wanted: Wanted) -> Frozen:
    want, sha, current, kept = _wanted(port, ref, wanted)
    if kept is not None:
        if wanted.allow_divergent and not kept.cycle.divergent_ok:
            kept = Frozen(cycle.store(port, replace(kept.cycle, divergent_ok=True)), kept.moved)
            port.keep("cycle", kept.cycle)
        return kept
    _needs_retarget(ref, current, wanted, (want, sha))
    if _opens_none(current, wanted, sha):
        return Frozen(cycle.Cycle(wanted.pin, sha, want, cycle.now()), None)
    previous = ""
    if current is not None and (port.sync_dir / cycle.report_name(current)).exists():
        previous = cycle.report_name(current)
    saved = cycle.Cycle(wanted.pin, sha, want, cycle.now(), previous,
                        divergent_ok=wanted.allow_divergent)
    texts = {cycle.path(port): cycle.render(saved)}
    if previous and previous != cycle.report_name(saved):
        texts.update(_retired(port, port.sync_dir / previous))
    _write(port, texts)
    port.keep("cycle", saved)
    return Frozen(saved, None)


def _write(port: Port, texts: dict[Path, str]) -> None:
    """The new cycle and the report it retires in one transaction (a kill between them left
    the cycle moved on and its old report ACTIVE, its JSON too)."""
    if len(texts) > 1:
        txn.commit(port.sync_dir, {p: text.encode("utf-8") for p, text in texts.items()})
    else:
        for p, text in texts.items():
            write_text(p, text)
    for p, text in texts.items():
        port.wrote(p, text)


def _opens_none(current: cycle.Cycle | None, wanted: Wanted, sha: str) -> bool:
    """The remote at the pin (as right after an advance) opens no cycle: there is nothing to
    sync, the last cycle's record stays as it was and the tree stays clean. A target named on
    the command line is frozen, even the pin; so is a retarget of an open cycle."""
    open_here = current is not None and current.pin == wanted.pin
    return sha == wanted.pin and wanted.target is None and not open_here


def _retired(port: Port, path: Path) -> dict[Path, str]:
    """The report a retarget left, out of ACTIVE (STALLED keeps its state): its files'
    new texts, those that change."""
    out = {}
    for file, restate in ((path, report.restate), (path.with_suffix(".json"),
                                                    report.restate_json)):
        text = port.text(file)
        new = restate(text, ("ACTIVE",), "RETARGETED") if text is not None else None
        if new is not None:
            out[file] = new
    return out


def moved_note(ref: gitio.Reference, remote: str, moved: str, target: str, pin: str) -> str:
    """What the remote's move means for the open cycle: ahead of its target (new commits),
    or not (walk-s11 U1: a force-push back was told as a plain move, and a retarget then
    dropped commits from the cycle without a word). A retarget is offered only where it is
    taken: never behind the pin, off the pin's line only with --allow-divergent (the note
    offered `--retarget` where fetch refuses it)."""
    keeps = f"the open cycle keeps its target {short(target)}"
    if gitio.is_ancestor(ref, target, moved):
        return f"{remote} moved to {short(moved)}; {keeps} (pass --retarget to move it)"
    if gitio.is_ancestor(ref, moved, pin):
        return (f"{remote} moved back, behind the pin {short(pin)}, to {short(moved)} (a "
                f"force-push?); {keeps}, and no retarget can move it there (a sync only "
                "moves forward)")
    dropped = gitio.count_range(ref, moved, target)
    if not gitio.is_ancestor(ref, pin, moved):
        return (f"{remote} moved off the pin's line, to {short(moved)} (a force-push?); "
                f"{keeps}: only 'upstream-sync sync --retarget --allow-divergent' moves it "
                f"there, and would drop {dropped} of its commits")
    where = "back, behind" if gitio.is_ancestor(ref, moved, target) else "off the line of"
    return (f"{remote} moved {where} the open cycle's target, to {short(moved)} (a "
            f"force-push?); {keeps}: --retarget would drop {dropped} of its commits")


def _kept(current: cycle.Cycle | None, wanted: Wanted, sha: str, want: str) -> Frozen | None:
    """The open cycle, when what is wanted leaves it as it is."""
    if current is None or current.pin != wanted.pin:
        return None
    if wanted.target is None and not wanted.retarget:
        # "The remote moved" only of a cycle that follows the remote, not of a chosen tag.
        follows = current.target_ref == want
        return Frozen(current, sha if follows and sha != current.target else None)
    if sha == current.target:
        # Naming the frozen target again is the same cycle: re-saving would restamp its date
        # and start a second report for it instead of updating the one it has.
        return Frozen(current, None)
    return None


# -- where a target came from, and moving the reference checkout to it -----------------------


def tag_of(ref: gitio.Reference, c: cycle.Cycle) -> str | None:
    """The tag the cycle's target was named by, when it names a tag pointing at it."""
    name = c.target_ref.removeprefix("refs/tags/")
    if not name or name.startswith("-"):
        return None
    try:
        sha = gitio.resolve(ref, f"refs/tags/{name}")
    except UsageError:
        return None
    return name if sha == c.target else None


@dataclass(frozen=True)
class Provenance:
    """Where a cycle's target came from."""

    named: str  # what the user named (a tag, a branch, a SHA)
    kind: Literal["tag", "branch", "commit"]
    on_upstream: bool  # on `<remote>/<branch>`
    upstream_ref: str
    branches: tuple[str, ...]  # remote-tracking branches that hold it (when not on upstream)

    def describe(self) -> str:
        """`tag v0.24.0 on origin/releases/v0.24.0 (not on origin/main)`, for the report."""
        # Branch names are upstream's (a ref may hold a backtick or a `<`): `code` them.
        named, upstream = code(self.named), code(self.upstream_ref)
        what = {"tag": f"tag {named}", "branch": named, "commit": f"commit {named}"}[self.kind]
        if self.kind == "branch" and self.named == self.upstream_ref:
            return what
        if self.on_upstream:
            return f"{what} on {upstream}"
        held = ", ".join(code(b) for b in self.branches[:3]) or "no remote branch"
        return f"{what} on {held} (not on {upstream})"


def provenance(ref: gitio.Reference, c: cycle.Cycle, upstream_ref: str) -> Provenance:
    """Where the cycle's target came from: a constant handful of git processes."""
    tag = tag_of(ref, c)
    kind: Literal["tag", "branch", "commit"] = "tag" if tag else (
        "commit" if c.target.startswith(c.target_ref.lower()) else "branch")
    on = gitio.resolve(ref, upstream_ref) is not None and gitio.is_ancestor(
        ref, c.target, upstream_ref)
    branches: tuple[str, ...] = ()
    if not on:
        remote = upstream_ref.split("/", 1)[0]
        branches = tuple(gitio.refs_containing(ref, c.target, f"refs/remotes/{remote}"))
    return Provenance(tag or c.target_ref, kind, on, upstream_ref, branches)


def move(ref: gitio.Reference, commit: str, upstream_ref: str) -> str:
    """Move the reference checkout to `commit` (never a reset); say how.

    Its branch fast-forwards when `commit` is on the upstream line and descends from
    HEAD; otherwise (a tag on a release branch, a checkout detached at an earlier pin)
    the commit is checked out detached, which leaves every branch where it was.
    """
    gitio.check_rev(commit)
    head = gitio.head_sha(ref)
    if head == commit:
        return "kept"
    on_branch = not gitio.is_detached(ref)
    if (on_branch and head is not None and gitio.is_ancestor(ref, head, commit)
            and gitio.resolve(ref, upstream_ref) is not None
            and gitio.is_ancestor(ref, commit, upstream_ref)):
        gitio.run(ref.path, ["merge", "--ff-only", "-q", "--end-of-options", commit])
        return "fast-forwarded"
    gitio.run(ref.path, ["checkout", "-q", "--detach", commit, "--"])
    return "checked out (detached)"
