"""`explain` (steps 3-4): the whole derivation of one commit's classification."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.steps import explain


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="steps 3-4: how one commit of the open cycle was "
                       "classified", description="Recompute one commit's classification and "
                       "print every step: the decision, each rule and why it does not match, "
                       "the paths, the hunks with their line ranges, the definitions they "
                       "change, and the citations (port file:line) they were compared with.")
    p.add_argument("commit", metavar="SHA|#N", help="a SHA prefix, or #N for the PR")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    d = explain.derive(ctx.port, args.commit, ctx)
    if ctx.json:
        ctx.emit_json(explain.to_json(d))
    else:
        for line in explain.render(d):
            ctx.say(line)
    return 0
