"""`sync` (steps 2-4): enumerate the range, classify every commit, write the report."""

from __future__ import annotations

import argparse
from typing import Any

from sync.cli.context import Context, add_json
from sync.infra.notes import counted
from sync.steps import report
from sync.steps.syncrun import CycleRequest, Result, run_cycle
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sync", help="steps 2-4: enumerate, classify, write the sync report",
                       description="Enumerate PIN..TARGET, classify every commit (decisions, "
                       "rules, defaults) and write .agents/sync/YYYY-MM-DD-<target7>.md + .json.")
    p.add_argument("--target", help="commit, tag or ref to sync to (default: the open cycle's "
                   "frozen target, else <remote>/<branch>)")
    p.add_argument("--retarget", action="store_true",
                   help="move an open cycle's frozen target to <remote>/<branch>")
    p.add_argument("--allow-divergent", action="store_true",
                   help="accept a target that does not descend from the pin")
    add_json(p)
    p.set_defaults(func=run)


def _this_run(result: Result) -> dict[str, Any]:
    """What only this run says, beside the report's JSON as written (none with nothing to
    sync), under the same keys either way: the unusable checkouts are warned of on stderr,
    and a machine reading stdout must see them too."""
    return {"nothing_to_sync": result.nothing,
            "unusable_checkouts": list(result.unusable_checkouts)}


def run(args: argparse.Namespace, ctx: Context) -> int:
    result = run_cycle(ctx.port, ctx, CycleRequest(target=args.target, retarget=args.retarget,
                                                   allow_divergent=args.allow_divergent))
    for w in result.warnings:
        ctx.note(f"warning: {w}")
    m = result.model
    if m.reference_dirty:
        # The report records it; say it where the maintainer looks now (advance refuses it).
        ctx.note(f"warning: the reference checkout is {m.reference_state or 'dirty'}; the "
                 "report records it, and advance refuses until it is clean")
    if result.nothing:
        if ctx.json:
            ctx.emit_json({"pin": m.pin, "target": m.target, "report": None,
                           **_this_run(result)})
        else:
            ctx.say(f"nothing to sync: the target {short(m.target)} is the pin")
        return 0
    rel = ctx.port.rel(result.path)
    if ctx.json:
        ctx.emit_json({**report.to_json(m, rel), **_this_run(result)})
        return 0
    counts = m.counts()
    if result.new_decisions:
        edited = counted(result.new_decisions, "hand-edited entry", "hand-edited entries")
        ctx.note(f"read back {edited} into decisions.toml")
    ctx.say(f"{counted(m.stats.commits, 'commit')} {short(m.pin)}..{short(m.target)}: "
          + ", ".join(f"{counts[d]} {d}" for d in report.SECTIONS))
    ctx.say(f"report: {result.path}")
    return 0

