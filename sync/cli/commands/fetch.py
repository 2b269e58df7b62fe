"""`fetch` (step 1): fetch the upstream and freeze the cycle's target SHA."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.infra.errors import UsageError
from sync.steps.target import Wanted, freeze, moved_note
from sync.upstream import gitio, health
from sync.upstream.gitio import short


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
    prefs = port.preferences()
    ref = port.reference()
    pin = port.pin_record().pin
    ctx.note(f"fetching {prefs.remote} {prefs.branch} in {ref.path}")
    gitio.fetch(ref, prefs.remote, prefs.branch, progress=ctx.note, live=ctx.on_terminal(),
                tag=args.target)
    if gitio.has_commit(ref, pin.commit):
        check = health.assess(ref, pin.commit, port.upstream_ref)
        for problem in check.problems:
            ctx.note(f"note: {problem}")
        if check.error is not None:
            raise check.error  # nothing is frozen on a checkout that cannot read the range
        if check.upstream.relation in ("behind", "diverged") and args.target is None:
            raise UsageError(f"{port.upstream_ref} does not move past the pin after the fetch "
                             f"({check.summary()})", "check the remote and branch in the "
                             "developer preferences, or pass --target")
    frozen = freeze(port, ref, Wanted(pin.commit, args.target, args.retarget))
    c = frozen.cycle
    behind = gitio.count_range(ref, pin.commit, c.target) if gitio.has_commit(
        ref, pin.commit) else None
    tree = health.tree(ref)
    if ctx.json:
        ctx.emit_json({"pin": pin.commit, "target": c.target, "target_ref": c.target_ref,
                       "frozen_at": c.frozen_at, "remote_moved_to": frozen.moved,
                       "commits": behind, "dirty": not tree.clean, "state": tree.describe()})
        return 0
    if frozen.moved:
        ctx.note(moved_note(ref, f"{prefs.remote}/{prefs.branch}", frozen.moved, c.target))
    if c.target == pin.commit:
        ctx.say(f"nothing to sync: the target {short(c.target)} is the pin")
        return 0
    ctx.say(f"target {c.target} ({c.target_ref}) frozen for this cycle; "
            f"{behind if behind is not None else '?'} commits after the pin {short(pin.commit)}")
    return 0
