"""`rollback` (step 7): undo the last advance (pin surfaces only), as a superseding event."""

from __future__ import annotations

import argparse
import contextlib

from sync.cli.context import Context, add_json
from sync.infra import txn
from sync.infra.errors import UsageError
from sync.port import Port
from sync.records import events
from sync.steps.advance import advance, rollback, synccommit
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("rollback", help="step 7: undo the last advance (pin surfaces only)",
                       description="Restore every pin surface from before the last advance and "
                       "append a rollback event that supersedes it.")
    what = r.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    what.add_argument("--commit", action="store_true", help="commit the sync-owned changes")
    add_json(r)
    r.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    # Planned from what is read under the lock it is written under (a dry run reads only).
    with contextlib.nullcontext() if args.dry_run else port.lock():
        return _rollback(args, ctx, port)


def _rollback(args: argparse.Namespace, ctx: Context, port: Port) -> int:
    if args.commit:
        _refuse_owed(port)
    plan = rollback.plan_rollback(port)
    undone, pin = plan.undone, plan.pin
    doc = {"rolled_back": not args.dry_run, "dry_run": bool(args.dry_run),
           "pin_before": undone.pin_after, "pin_after": pin.commit, "oracle_env": plan.oracle_env,
           "event": port.rel(plan.event), **_files(port, plan)}
    moved = f"{short(undone.pin_after)} → {short(pin.commit)}"
    if args.dry_run:
        olds = {p: (p.read_bytes() if p.exists() else b"") for p in plan.writes}
        diff = advance.unified(port, plan.writes, olds)
        ctx.emit_json({**doc, "diff": diff, "commit": None})
        if not ctx.json:
            ctx.text.write(diff)
            ctx.say(f"dry run: would roll back the parity pin {moved}; nothing written")
        return 0
    done = _write(args, port, plan)
    ctx.emit_json({**doc, **synccommit.as_doc(done)})
    if not ctx.json:
        ctx.say(f"rolled back the parity pin {moved}; previous oracle environment: "
                f"{plan.oracle_env}")
        ctx.say("note: the reference checkout was not moved back (it is never reset)")
        synccommit.tell(done, ctx.say, ctx.note)
    return 0


def _refuse_owed(port: Port) -> None:
    """The last rollback written and never committed (its run killed before the commit):
    said with what commits it, where running again only said there was nothing to undo."""
    evs = events.load_all(port)
    if not evs or evs[-1].kind != "rollback":
        return
    line = synccommit.owed(port, evs[-1].path)
    if line is not None:
        message, _, fix = line.partition(" — ")
        raise UsageError(f"the last rollback is done: {message}", fix)


def _files(port: Port, plan: rollback.Rollback) -> dict[str, list[str]]:
    """The files the rollback writes, and those it removes."""
    return {"files": sorted(port.rel(k) for k, v in plan.writes.items() if v is not None),
            "removed": sorted(port.rel(k) for k, v in plan.writes.items() if v is None)}


def _write(args: argparse.Namespace, port: Port,
           plan: rollback.Rollback) -> synccommit.Committed | None:
    """The writes, in one transaction; then the commit, when asked for."""
    synccommit.refuse(port, args.commit, plan.writes)
    with port.lock():
        txn.commit(port.sync_dir, plan.writes)
    if not args.commit:
        return None
    undone = plan.undone
    return synccommit.commit(port, plan.writes, synccommit.Commit(
        f"sync(upstream): roll back parity pin {short(undone.pin_after)} → "
        f"{short(plan.pin.commit)}",
        f"Supersedes state event {undone.index}.\nOracle: {plan.oracle_env}"))
