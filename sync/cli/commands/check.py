"""`check` (CI): every record invariant, one line per violation."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.infra.errors import CheckFailed
from sync.steps import check
from sync.steps.check import Finding, findings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="verify every record invariant (for CI)",
                       description="Check the pin block, PARITY PIN paragraph, oracle files, pin "
                       "spans, ledger, decisions and per-file pins; one line per violation.")
    p.add_argument("--no-audit", action="store_true",
                   help="skip the per-file pin audit (it needs the reference checkout)")
    add_json(p)
    p.set_defaults(func=run)


def _say(ctx: Context, found: list[Finding], notes: list[str]) -> None:
    for f in found:
        ctx.say(f.text if f.severity == "error" else f"warning: {f.text}")
    for n in notes:
        ctx.note(f"note: {n}")


def run(args: argparse.Namespace, ctx: Context) -> int:
    found, notes = findings(ctx.port, with_audit=not args.no_audit)
    errors = [f for f in found if f.severity == "error"]
    if ctx.json:
        ctx.emit_json({"ok": not errors, "errors": [f.text for f in errors],
                       "warnings": [f.text for f in found if f.severity != "error"],
                       "notes": notes, "skipped": check.skipped(notes)})
    else:
        _say(ctx, found, notes)
    if errors:
        raise CheckFailed(f"{len(errors)} record invariant(s) violated",
                          "fix each error listed, then run check again")
    if not ctx.json:
        gaps = check.skipped(notes)
        # An all-clear that skipped a check says so: CI must not read it as a full pass.
        ctx.say(f"check: all record invariants hold in {ctx.port.root}" + (
            f", but {len(gaps)} check(s) did not run (see the note{'s' if len(gaps) > 1 else ''}"
            " above)" if gaps else ""))
    return 0
