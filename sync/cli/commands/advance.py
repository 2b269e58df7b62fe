"""`advance` (step 7): advance the parity pin from the measured oracle, or stall."""

from __future__ import annotations

import argparse
import json

from sync.cli.context import Context, add_json
from sync.infra.errors import BlockedCycle, UsageError
from sync.records import events
from sync.steps.advance import advance, txn
from sync.upstream import gitio


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
    unmet, measured = advance.preconditions(port, ctx)
    if unmet:
        for line in unmet:
            print(f"unmet: {line}", file=ctx.out)
        stalled = not args.dry_run and advance.stall(port, ctx, unmet)
        raise BlockedCycle(f"the advance is refused: {len(unmet)} unmet precondition(s)",
                           "fix each 'unmet' line above, then run advance again"
                           + ("; the cycle is STALLED with them" if stalled else ""))
    p = advance.plan(port, measured, release_label=args.release_label)
    assert measured.result is not None  # plan() refuses otherwise
    result = measured.result
    ev_path, ev_bytes = events.staged(
        port, "advance", pin_before=p.old.commit, pin_after=p.new.commit,
        report=port.rel(p.report), detail=json.dumps(p.detail, sort_keys=True))
    writes = {**p.writes, **advance.report_bytes(port, result, "ADVANCED"), ev_path: ev_bytes}
    p = advance.Plan(p.old, p.new, p.target, p.report, writes,
             {k: (k.read_bytes() if k.exists() else b"") for k in writes}, p.detail)
    if args.dry_run:
        ctx.out.write(advance.diff(p, port))
        print(f"dry run: would advance {p.old.commit[:10]} → {p.new.commit[:10]}; nothing "
              "written", file=ctx.out)
        return 0
    advance.refuse_foreign_staged(port, args.commit, writes)
    with port.lock():
        again = events.staged(port, "advance")[0]
        if again != ev_path:
            raise BlockedCycle("another run appended a state event meanwhile", "run again")
        txn.commit(port.sync_dir, writes)
    ref = port.reference()
    gitio.run(ref.path, ["merge", "--ff-only", "-q", "--end-of-options", p.new.commit])
    sha = None
    if args.commit:
        gates_line = ", ".join(f"{g.name} {g.status}" for g in port.gates(p.target))
        sha = advance.git_commit(port, list(writes), f"sync(upstream): advance parity pin "
                          f"{p.old.commit[:10]} → {p.new.commit[:10]}",
                          f"Range: {p.old.commit}..{p.new.commit}\nReport: "
                          f"{port.rel(p.report)}\nGates: {gates_line or 'none configured'}")
    if ctx.json:
        ctx.emit_json({"advanced": True, "pin_before": p.old.commit, "pin_after": p.new.commit,
                       "runtime_version": p.new.runtime_version, "report": port.rel(p.report),
                       "event": port.rel(ev_path), "commit": sha,
                       "files": sorted(port.rel(k) for k in writes)})
    else:
        print(f"advanced the parity pin {p.old.commit[:10]} → {p.new.commit[:10]} "
              f"({p.new.runtime_version}); {len(writes)} files; event {port.rel(ev_path)}",
              file=ctx.out)
        if sha:
            print(f"committed {sha[:10]}", file=ctx.out)
    return 0


