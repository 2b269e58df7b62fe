"""`parity` (step 6): run the parity suites as gates."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_gate_args, gate_store
from sync.steps.verify import parity


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pa = sub.add_parser("parity", help="step 6: run the parity suites as gates",
                        description="Runs the configured suites (op, behavioral, model) and "
                        "records PASS/FAIL, duration and command per suite.")
    pa.add_argument("--suite", metavar="NAME", default=None, help="run only this suite")
    add_gate_args(pa)
    pa.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    # The report's Gates section shows what is recorded, written with each suite's record.
    results = parity.run(port, port.preferences(), suite=args.suite, target=args.target,
                         say=ctx.note, store=gate_store(port, ctx))
    ctx.emit_json({"gates": [r.as_doc() for r in results]})
    if not ctx.json:
        if not results:
            ctx.say(parity.NONE_CONFIGURED)
        for r in results:
            extra = f" ({r.duration_s:.1f} s)" if r.duration_s is not None else ""
            tail = f"; handoff: {r.handoff}" if r.handoff else ""
            ctx.say(f"{r.name} {r.status}{extra}{tail}")
    refused = parity.refusal(results, strict=args.strict)
    if refused is not None:
        raise refused
    return 0
