"""`gates merge` (step 6): fold gate records from sharded gate runners into the port's."""

from __future__ import annotations

import argparse
from pathlib import Path

from sync.cli.context import Context, add_json, refreshed
from sync.records import gates
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gm = sub.add_parser("gates", help="step 6: fold gate records from other hosts into the port",
                        description="Merge gate records (.agents/sync/gates/<target7>.json "
                        "files from sharded gate runners' artifacts) into this port's record "
                        "for the same target: a run beats PENDING, then the later run.")
    gsub = gm.add_subparsers(dest="gates_command", metavar="ACTION", required=True)
    merge = gsub.add_parser("merge", help="merge gate record files into the port's record")
    merge.add_argument("files", nargs="+", type=Path, help="gate record JSON files")
    merge.add_argument("--target", help="full target SHA (default: the open cycle's, else the "
                       "pin)")
    add_json(merge)
    merge.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    target = gates.check_target(port, args.target) if args.target else gates.current_target(port)
    changes = gates.merge(port, target, list(args.files))
    if changes:
        refreshed(port, ctx)  # the report's Gates section shows the merged results
    if ctx.json:
        ctx.emit_json({"target": target, "changed": changes})
    else:
        for line in changes:
            ctx.say(line)
        ctx.say(f"merged {len(args.files)} file(s) into the gate record for {short(target)}: "
              f"{len(changes)} gate(s) changed")
    return 0
