"""`gates merge` (step 6): fold gate records from sharded gate runners into the port's."""

from __future__ import annotations

import argparse
from pathlib import Path

from sync.cli.context import Context, add_json, refreshed
from sync.records import gates
from sync.records.config import CONFIG_PATH
from sync.steps.advance import blockers
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gm = sub.add_parser("gates", help="step 6: fold gate records from other hosts into the port",
                        description="Merge gate records (.agents/sync/gates/<target7>.json "
                        "files from sharded gate runners' artifacts) into this port's record "
                        "for the same target: a run beats PENDING, then the later run.")
    gsub = gm.add_subparsers(dest="gates_command", metavar="ACTION", required=True)
    merge = gsub.add_parser("merge", help="merge gate record files into the port's record")
    merge.add_argument("files", nargs="+", type=Path, help="gate record JSON files")
    # It asserts, never selects: gates are only merged into this checkout's gate target.
    merge.add_argument("--target", help="the target the files were gated at, as a handoff "
                       "names it (7 to 40 hex digits); refused unless it is this checkout's "
                       "gate target (the open cycle's, else the pin), the one merged into "
                       "with or without it")
    add_json(merge)
    merge.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    target = gates.check_target(port, args.target) if args.target else gates.current_target(port)
    merged = gates.merge(port, target, list(args.files))
    if merged.changes:
        refreshed(port, ctx)  # the report's Gates section shows the merged results
    unrequired = blockers.unrequired(port, merged.names)
    if ctx.json:
        ctx.emit_json({"target": target, "changed": list(merged.changes),
                       "unrequired": unrequired})
        return 0
    for line in merged.changes:
        ctx.say(line)
    for name in unrequired:
        ctx.say(f"{name}: merged, but {CONFIG_PATH} does not require it — the advance needs "
                "no result of it, yet refuses one that is not a PASS")
    named = "" if merged.files == len(args.files) else f" (of {len(args.files)} named)"
    ctx.say(f"merged {merged.files} file(s){named} into the gate record for {short(target)}: "
            f"{len(merged.changes)} gate(s) changed")
    return 0
