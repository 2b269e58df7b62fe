"""`fetch` (step 1): fetch the upstream and freeze the cycle's target SHA."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.port import Port
from sync.steps.target import Wanted, freeze, moved_note, peek, refuse_off_line
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
    wanted = Wanted(pin.commit, args.target, args.retarget)
    _refuse_unsyncable(port, ref, wanted, ctx)
    frozen = freeze(port, ref, wanted)
    c = frozen.cycle
    behind = gitio.count_range(ref, pin.commit, c.target)
    tree = health.tree(ref)
    # Local commits on top of the pin (or a HEAD detached at one, or another branch checked
    # out): the advance refuses to move the checkout then, so say it now, in its words, not
    # only at the advance.
    upstream = f"{prefs.remote}/{prefs.branch}"
    stuck = None if c.target == pin.commit else health.move_problem(ref, c.target, upstream)
    if ctx.json:
        ctx.emit_json({"pin": pin.commit, "target": c.target, "target_ref": c.target_ref,
                       "frozen_at": c.frozen_at, "remote_moved_to": frozen.moved,
                       "commits": behind, "dirty": not tree.clean, "state": tree.describe(),
                       "move_problem": stuck})
        return 0
    if frozen.moved:
        ctx.note(moved_note(ref, f"{prefs.remote}/{prefs.branch}", frozen.moved, c.target,
                            pin.commit))
    if stuck is not None:
        ctx.note(f"note: {stuck}")
    if c.target == pin.commit:
        ctx.say(f"nothing to sync: the target {short(c.target)} is the pin")
        return 0
    ctx.say(f"target {c.target} ({c.target_ref}) frozen for this cycle; "
            f"{behind} commits after the pin {short(pin.commit)}")
    return 0


def _refuse_unsyncable(port: Port, ref: gitio.Reference, wanted: Wanted, ctx: Context) -> None:
    """Refuse, before anything is frozen, what `sync` would refuse of the fetched checkout:
    the pin not in it, objects of the range it cannot read, a target behind the pin or off
    its line (a cycle frozen there is one no later step can run)."""
    if not gitio.has_commit(ref, wanted.pin):
        raise EnvironmentUnresolved(
            f"the pin {short(wanted.pin)} is not in the reference checkout {ref.path}, even "
            f"after fetching {port.upstream_ref}",
            f"fetch the branch or tag that holds it ('git -C {ref.path} fetch "
            f"{port.preferences().remote} <ref>'), or check vllm_commit in the pin block")
    check = health.assess(ref, wanted.pin, port.upstream_ref)
    if check.error is not None:
        raise check.error  # nothing is frozen on a checkout that cannot read the range
    problem = health.tree_problem(check.tree, ref.path)
    if problem is not None:
        ctx.note(f"note: {problem}")
    if (check.upstream.relation in ("behind", "diverged") and wanted.target is None
            and not _keeps_cycle(port, wanted)):
        raise UsageError(f"{port.upstream_ref} does not move past the pin after the fetch: "
                         f"{health.relation_phrase(check.upstream)}",
                         "check the remote and branch in the developer preferences, or pass "
                         "--target")
    sha, accepted = peek(port, ref, wanted)
    if not accepted:
        refuse_off_line(ref, wanted.pin, sha, divergent_fix="or freeze it with "
                        f"'upstream-sync sync --target {sha} --allow-divergent'")


def _keeps_cycle(port: Port, wanted: Wanted) -> bool:
    """An open cycle keeps its frozen target whatever the remote did (a force-push back, off
    the pin's line): `freeze` says how the remote moved, and nothing is refused."""
    current = port.cycle()
    return current is not None and current.pin == wanted.pin and not wanted.retarget
