"""`advance` (step 7): advance the parity pin from the measured oracle, or stall."""

from __future__ import annotations

import argparse
import contextlib
from typing import NoReturn

from sync.cli.context import Context, add_json
from sync.infra import txn
from sync.infra.errors import BlockedCycle, UsageError
from sync.port import Port
from sync.records import events
from sync.steps.advance import advance


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advance", help="step 7: advance the parity pin to the target (all or "
                       "nothing), or stall", description="Check every precondition; then "
                       "rewrite every pin surface from the measured oracle, fast-forward the "
                       "reference checkout, append a state event and mark the report ADVANCED.")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    p.add_argument("--commit", action="store_true",
                   help="commit the sync-owned changes (refused when other paths are staged)")
    p.add_argument("--release-label", help="release label for the PARITY PIN line (default: "
                   "keep the current one)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if args.commit and not (port.root / ".git").exists():
        raise UsageError(f"{port.root} is not a git repository", "drop --commit")
    # Preconditions, plan and writes under one lock: what is written is what was read.
    with contextlib.nullcontext() if args.dry_run else port.lock():
        return _advance(args, ctx, port)


def _advance(args: argparse.Namespace, ctx: Context, port: Port) -> int:
    unmet, measured = advance.preconditions(port, ctx)
    if unmet:
        _refuse(ctx, unmet, dry_run=args.dry_run)
    p = advance.plan(port, measured, release_label=args.release_label)
    if args.dry_run:
        ctx.out.write(advance.diff(p, port))
        print(f"dry run: would advance {p.old.commit[:10]} → {p.new.commit[:10]}; nothing "
              "written", file=ctx.out)
        return 0
    advance.refuse_foreign_staged(port, args.commit, p.writes)
    with port.lock():
        if events.staged(port, "advance")[0] != p.event:
            raise BlockedCycle("another run appended a state event meanwhile", "run again")
        txn.commit(port.sync_dir, p.writes)
    advance.fast_forward(port, p.new.commit)
    sha = _git_commit(port, p) if args.commit else None
    _print(ctx, p, sha)
    return 0


def _print(ctx: Context, p: advance.Plan, sha: str | None) -> None:
    port = ctx.port
    if ctx.json:
        ctx.emit_json({"advanced": True, "pin_before": p.old.commit, "pin_after": p.new.commit,
                       "runtime_version": p.new.runtime_version, "report": port.rel(p.report),
                       "event": port.rel(p.event), "commit": sha,
                       "files": sorted(port.rel(k) for k in p.writes)})
        return
    print(f"advanced the parity pin {p.old.commit[:10]} → {p.new.commit[:10]} "
          f"({p.new.runtime_version}); {len(p.writes)} files; event {port.rel(p.event)}",
          file=ctx.out)
    if sha:
        print(f"committed {sha[:10]}", file=ctx.out)


def _refuse(ctx: Context, unmet: list[str], *, dry_run: bool) -> NoReturn:
    for line in unmet:
        print(f"unmet: {line}", file=ctx.out)
    stalled = not dry_run and advance.stall(ctx.port, ctx, unmet)
    raise BlockedCycle(f"the advance is refused: {len(unmet)} unmet precondition(s)",
                       "fix each 'unmet' line above, then run advance again"
                       + ("; the cycle is STALLED with them" if stalled else ""))


def _git_commit(port: Port, p: advance.Plan) -> str:
    gates_line = ", ".join(f"{g.name} {g.status}" for g in port.gates(p.target))
    return advance.git_commit(port, list(p.writes), f"sync(upstream): advance parity pin "
                              f"{p.old.commit[:10]} → {p.new.commit[:10]}",
                              f"Range: {p.old.commit}..{p.new.commit}\nReport: "
                              f"{port.rel(p.report)}\nGates: {gates_line or 'none configured'}")
