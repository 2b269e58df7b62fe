"""Step 1: choose the cycle's target and freeze its SHA (the fetch itself is `gitio.fetch`).

The fetch only moves `refs/remotes/<remote>/<branch>`; the reference checkout's
work tree and branches stay where they are, so mid-cycle work (or a dirty tree)
is never disturbed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sync.infra.errors import UsageError
from sync.port import Port
from sync.records import cycle
from sync.upstream import gitio


@dataclass(frozen=True)
class Wanted:
    """What a command asks of the cycle's target."""

    pin: str
    target: str | None = None  # commit, tag or ref; None: the open cycle's, else upstream's
    retarget: bool = False  # move an open cycle's target to upstream's


@dataclass(frozen=True)
class Frozen:
    cycle: cycle.Cycle
    moved: str | None  # the remote's new SHA when it moved past the frozen target


def freeze(port: Port, ref: gitio.Reference, wanted: Wanted) -> Frozen:
    """Resolve and freeze the target; an open cycle keeps its target unless told otherwise."""
    with port.lock():  # the cycle is read under the lock it is saved under
        return _freeze(port, ref, wanted)


def _freeze(port: Port, ref: gitio.Reference, wanted: Wanted) -> Frozen:
    want = wanted.target or port.upstream_ref
    sha = gitio.resolve(ref, want)
    if sha is None:
        raise UsageError(f"target {want!r} does not name a commit in {ref.path}",
                         "give a SHA, tag or branch that exists (run fetch first)")
    current = port.cycle()
    kept = _kept(current, wanted, sha)
    if kept is not None:
        return kept
    previous = ""
    if current is not None and (port.sync_dir / cycle.report_name(current)).exists():
        previous = cycle.report_name(current)
    saved = cycle.save(port, wanted.pin, sha, want, previous)
    port.keep("cycle", saved)
    return Frozen(saved, None)


def _kept(current: cycle.Cycle | None, wanted: Wanted, sha: str) -> Frozen | None:
    """The open cycle, when what is wanted leaves it as it is."""
    if current is None or current.pin != wanted.pin:
        return None
    if wanted.target is None and not wanted.retarget:
        return Frozen(current, sha if sha != current.target else None)
    if sha == current.target:
        # Naming the frozen target again is the same cycle: re-saving would restamp its date
        # and start a second report for it instead of updating the one it has.
        return Frozen(current, None)
    return None
