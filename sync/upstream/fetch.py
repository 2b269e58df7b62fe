"""Step 1: fetch the upstream and freeze the cycle's target SHA.

The fetch only moves `refs/remotes/<remote>/<branch>`; the reference checkout's
work tree and branches stay where they are, so mid-cycle work (or a dirty tree)
is never disturbed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from sync.cli import Context, add_json
from sync.infra.errors import UsageError
from sync.port import Port
from sync.records import cycle
from sync.records.prefs import Preferences
from sync.records.prefs import load as load_prefs
from sync.upstream import gitio


def preferences(port: Port) -> Preferences:
    return load_prefs(port.root / port.config.preferences)


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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fetch", help="step 1: fetch the upstream and freeze the cycle's target",
                       description="Fetch <remote> <branch> in the reference checkout (its work "
                       "tree never moves) and freeze the target SHA for the cycle.")
    p.add_argument("--target", help="commit, tag or ref to sync to (default: <remote>/<branch>)")
    p.add_argument("--retarget", action="store_true",
                   help="move an open cycle's frozen target to the fetched remote head")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    prefs = preferences(port)
    ref = prefs.reference()
    pin = port.pin_record().pin
    ctx.note(f"fetching {prefs.remote} {prefs.branch} in {ref.path}")
    gitio.fetch(ref, prefs.remote, prefs.branch, progress=ctx.note)
    frozen = freeze(port, ref, prefs, pin.commit, args.target, args.retarget)
    c = frozen.cycle
    behind = gitio.count_range(ref, pin.commit, c.target) if gitio.has_commit(
        ref, pin.commit) else None
    if ctx.json:
        ctx.emit_json({"pin": pin.commit, "target": c.target, "target_ref": c.target_ref,
                       "frozen_at": c.frozen_at, "remote_moved_to": frozen.moved,
                       "commits": behind, "dirty": gitio.is_dirty(ref)})
        return 0
    if frozen.moved:
        ctx.note(f"{prefs.remote}/{prefs.branch} moved to {frozen.moved[:10]}; the open cycle "
                 f"keeps its target {c.target[:10]} (pass --retarget to move it)")
    if c.target == pin.commit:
        print(f"nothing to sync: the target {c.target[:10]} is the pin", file=ctx.out)
        return 0
    if gitio.is_dirty(ref):
        ctx.note(f"note: {ref.path} has uncommitted changes; the fetch did not touch them")
    print(f"target {c.target} ({c.target_ref}) frozen for this cycle; "
          f"{behind if behind is not None else '?'} commits after the pin {pin.commit[:10]}",
          file=ctx.out)
    return 0
