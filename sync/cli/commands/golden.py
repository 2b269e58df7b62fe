"""`golden` (step 6): regenerate goldens with a verified oracle; PENDING off gate hosts."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_gate_args, gate_store
from sync.steps.verify import golden


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    g = sub.add_parser("golden", help="step 6: regenerate goldens with a verified oracle",
                       description="Runs the configured dump scripts with the oracle's Python "
                       "on an eligible gate host (PENDING with a handoff elsewhere) and "
                       "prints the drift against the committed goldens.")
    g.add_argument("--oracle", default=None, metavar="ID",
                   help="oracle id (default: [golden] oracle in the config, else vllm)")
    g.add_argument("--shard", metavar="i/n", default=None, help="run shard i of n")
    add_gate_args(g)
    g.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    shard = golden.parse_shard(args.shard) if args.shard else None
    request = golden.Request(oracle_id=args.oracle, shard=shard, strict=args.strict,
                             target=args.target)
    # The report's Gates section shows what is recorded, FAIL too, written with the record.
    outcome = golden.run(port, port.preferences(), request, note=ctx.note,
                         store=gate_store(port, ctx))
    g = outcome.gate
    ctx.emit_json({**g.as_doc(), "cases": [
        {"case": c.name, "drift": c.drift, "changed": list(c.changed)} for c in outcome.cases]})
    if outcome.refused is not None:
        raise outcome.refused  # under --json, merged into the gate's document
    if ctx.json:
        return 0
    if g.status == "PENDING":
        ctx.say(f"{g.name} PENDING — {g.detail}")
        ctx.say(f"handoff: {g.handoff}")
    else:
        ctx.say(f"{g.name} {g.status} ({g.duration_s:.1f} s)")
        for c in outcome.cases:
            if c.drift != "unchanged":
                ctx.say(f"  {c.drift}: {c.name}" + (f" ({', '.join(c.changed)})"
                                                  if c.drift == "changed" else ""))
        ctx.say(f"golden drift: {outcome.summary}")
    return 0


