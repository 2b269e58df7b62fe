"""`gates merge` (step 6): fold gate records from sharded gate runners into the port's."""

from __future__ import annotations

import argparse
from pathlib import Path

from sync.cli.context import Context, add_json, gate_store
from sync.port import Port
from sync.records import gates
from sync.records.config import CONFIG_PATH
from sync.steps.advance import blockers
from sync.steps.verify import golden
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gm = sub.add_parser("gates", help="step 6: fold gate records from other hosts into the port",
                        description="Merge gate records (.agents/sync/gates/<target7>.json "
                        "files from sharded gate runners' artifacts) into this port's record "
                        "for the same target: a run beats PENDING, then the later run.")
    gsub = gm.add_subparsers(dest="gates_command", metavar="ACTION", required=True)
    merge = gsub.add_parser("merge", help="merge gate record files into the port's record",
                           description="Fold FILES (gate records from gate runners' "
                           "artifacts) into this checkout's record for its gate target: a "
                           "run beats PENDING, then the later run; a file for another "
                           "target, or dated in the future, is refused.")
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
    got = gates.incoming(port, target, list(args.files))
    with gates.locked(port):
        merged = gates.merging(port, target, got)
        if merged.text is not None:
            # The report's Gates section shows the merged results: the record and the report
            # land together or not at all.
            gate_store(port, ctx)(target, merged.text)
    unrequired = blockers.unrequired(port, merged.names)
    missing = _missing_shards(port, target, [n for n in merged.names if n not in unrequired])
    if ctx.json:
        ctx.emit_json({"target": target, "changed": list(merged.changes),
                       "unrequired": unrequired, "missing_shards": missing})
        return 0
    for line in merged.changes:
        ctx.say(line)
    for name in unrequired:
        ctx.say(f"{name}: merged, but {CONFIG_PATH} does not require it — the advance needs "
                "no result of it, yet refuses one that is not a PASS")
    if missing:
        ctx.say(f"{', '.join(missing)}: not in the gate record for {short(target)} yet — the "
                "advance needs every shard: run it on a gate host and merge its record too")
    named = "" if merged.files == len(args.files) else f" (of {len(args.files)} named)"
    ctx.say(f"merged {merged.files} file(s){named} into the gate record for {short(target)}: "
            f"{len(merged.changes)} gate(s) changed")
    return 0


def _missing_shards(port: Port, target: str, merged: list[str]) -> list[str]:
    """The shards of each required sharded gate merged (`golden[1/2]`) that the port's record
    still lacks (`golden[2/2]`): the advance refuses until they are there, so the merge says
    it (it said nothing, and only the advance named them)."""
    have = [r.name for r in gates.load(port, target)]
    sharded = sorted({n.partition("[")[0] for n in merged if n.endswith("]")})
    return [m for name in sharded for m in golden.missing_shards(name, have)]
