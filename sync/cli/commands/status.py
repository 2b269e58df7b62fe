"""`status`: the pin, the reference checkout, how far behind upstream, oracle agreement,
disagreeing spans, and the open cycle's blockers."""

from __future__ import annotations

import argparse
from typing import Any

from sync.cli.context import Context, add_json
from sync.steps.status import collect


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="how far behind upstream the port is, and what blocks "
                       "the advance", description="Show the pin, the reference checkout, the "
                       "distance to <remote>/<branch>, oracle agreement and the open cycle.")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    doc, problem = collect(ctx.port)
    if ctx.json:
        ctx.emit_json(doc)
    else:
        _print(doc, ctx)
    if problem is not None:
        raise problem
    return 0


def _print(doc: dict[str, Any], ctx: Context) -> None:
    def say(line: str = "") -> None:
        print(line, file=ctx.out)

    pin = doc["pin"]
    say(f"port: {doc['port']}" + (" (bundled example)" if doc["example"] else ""))
    say(f"pin: {pin['vllm_commit']}")
    say(f"  runtime version:      {pin['vllm_runtime_version']}")
    say(f"  distribution version: {pin['vllm_distribution_version']}"
        + (f" (build mode: {doc['build_suffix']})" if doc["build_suffix"] else ""))
    say(f"  flashinfer:           {pin['flashinfer_version']}")
    r = doc["reference"]
    if r and r.get("error"):
        say(f"reference checkout: unresolved ({r['error']})")
    elif r:
        say(f"reference checkout: {r['path']} at {str(r['head'])[:10]}"
            f"{', SHALLOW' if r['shallow'] else ''}{', dirty' if r.get('dirty') else ''}; "
            f"pin {'present' if r['pin_present'] else 'MISSING'}")
    b = doc["behind"]
    if b:
        say(f"behind {b['ref']}: {b['commits']} commits"
            + (f", newest {b['newest_date']}" if b["newest_date"] else ""))
    for o in doc["oracles"]:
        verdict = "agrees" if o["agrees"] else "DISAGREES: " + "; ".join(o["problems"])
        say(f"oracle {o['id']}: pin {o['pin']} — {verdict}")
    for s in doc["spans"]:
        say(f"span: {s}")
    c = doc["cycle"]
    if c:
        say(f"cycle: target {c['target'][:10]} ({c['target_ref']}), frozen {c['frozen_at']}")
        if c["report"]:
            counts = ", ".join(f"{v} {k}" for k, v in c["counts"].items())
            say(f"  report {c['report']} [{c['state']}]: {counts}")
            for line in c["carry_over"] or []:
                say(f"  carry-over: {line.removeprefix('- ')}")
    else:
        say("cycle: none open (run 'upstream-sync fetch' or 'nox -s sync')")
