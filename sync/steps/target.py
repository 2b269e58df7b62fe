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
from sync.records.prefs import Preferences
from sync.upstream import gitio


@dataclass(frozen=True)
class Frozen:
    cycle: cycle.Cycle
    moved: str | None  # the remote's new SHA when it moved past the frozen target


def freeze(port: Port, ref: gitio.Reference, prefs: Preferences, pin: str,
           target: str | None, retarget: bool) -> Frozen:
    """Resolve and freeze the target; an open cycle keeps its target unless told otherwise."""
    default_ref = f"{prefs.remote}/{prefs.branch}"
    want = target or default_ref
    sha = gitio.resolve(ref, want)
    if sha is None:
        raise UsageError(f"target {want!r} does not name a commit in {ref.path}",
                         "give a SHA, tag or branch that exists (run fetch first)")
    current = cycle.load(port)
    if current is not None and current.pin == pin and target is None and not retarget:
        moved = sha if sha != current.target else None
        return Frozen(current, moved)
    if current is not None and current.pin == pin and sha == current.target:
        # Naming the frozen target again is the same cycle: re-saving would restamp its date
        # and start a second report for it instead of updating the one it has.
        return Frozen(current, None)
    previous = ""
    if current is not None and (port.sync_dir / cycle.report_name(current)).exists():
        previous = cycle.report_name(current)
    return Frozen(cycle.save(port, pin, sha, want, previous), None)
