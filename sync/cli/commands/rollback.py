"""`rollback` (step 7): undo the last advance (pin surfaces only), as a superseding event."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.infra import txn
from sync.steps.advance import advance, rollback


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("rollback", help="step 7: undo the last advance (pin surfaces only)",
                       description="Restore every pin surface from before the last advance and "
                       "append a rollback event that supersedes it.")
    r.add_argument("--commit", action="store_true", help="commit the sync-owned changes")
    add_json(r)
    r.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    with port.lock():  # planned from what is read under the lock it is written under
        plan = rollback.plan_rollback(port)
        advance.refuse_foreign_staged(port, args.commit, plan.writes)
        txn.commit(port.sync_dir, plan.writes)
    undone, pin, env_note = plan.undone, plan.pin, plan.oracle_env
    sha = None
    if args.commit:
        sha = advance.git_commit(port, list(plan.writes), f"sync(upstream): roll back parity pin "
                                 f"{undone.pin_after[:10]} → {pin.commit[:10]}",
                                 f"Supersedes state event {undone.index}.\nOracle: {env_note}")
    if ctx.json:
        ctx.emit_json({"rolled_back": True, "pin_before": undone.pin_after,
                       "pin_after": pin.commit, "oracle_env": env_note,
                       "event": port.rel(plan.event), "commit": sha})
    else:
        print(f"rolled back the parity pin {undone.pin_after[:10]} → {pin.commit[:10]}; "
              f"previous oracle environment: {env_note}", file=ctx.out)
        print("note: the reference checkout was not moved back (it is never reset)",
              file=ctx.out)
    return 0
