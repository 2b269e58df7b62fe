"""`audit` (step 5): every ported file's per-file pin status, with a positive control."""

from __future__ import annotations

import argparse
from typing import Any

from sync.cli.context import Context, add_json
from sync.headers import citations as headers
from sync.infra.errors import CheckFailed
from sync.steps import audit, surface


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("audit", help="step 5: every ported file's per-file pin status",
                       description="Audit per-file pins against the parity pin: at-pin, behind, "
                       "ahead, not-upstream, original, no-header; behind without a ledger note "
                       "is a finding. Counts come with a positive control.")
    add_json(p)
    p.set_defaults(func=run)


def citation_doc(c: headers.Citation, status: str | None) -> dict[str, Any]:
    return {"path": c.path, "sha": c.sha, "status": status, "line": c.line, "lines": c.lines,
            "symbol": c.symbol}


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = port.reference(), port.upstream_ref
    pin = port.pin_record().pin.commit
    result = audit.run_audit(port, ref, pin, upstream, surface.build(port))
    severity = port.config.behind_without_note
    if ctx.json:
        ctx.emit_json(_doc(result, pin, upstream, severity))
    else:
        _print(result, severity, ctx)
    if not result.control_ok:
        raise CheckFailed("the per-file pin audit's positive control failed (a header citing the "
                          "pin was not counted at-pin): the counts are not trustworthy",
                          "report this; the header probe is broken")
    if severity == "error" and result.findings:
        raise CheckFailed(f"{len(result.findings)} file(s) behind the pin without a ledger note",
                          "bump their headers or add ledger rows naming them")
    return 0


def _doc(result: audit.Audit, pin: str, upstream: str, severity: str) -> dict[str, Any]:
    return {
        "pin": pin, "upstream_ref": upstream,
        "control": {"ok": result.control_ok, "path": audit.CONTROL_PATH},
        "counts": result.counts(),
        "files": [{"path": f.path, "status": f.status, "noted": f.noted, "finding": f.finding,
                   "citations": [citation_doc(c, dict(f.sha_status).get(c.sha or ""))
                                 for c in f.citations]} for f in result.files],
        "findings": [f.path for f in result.findings], "severity": severity,
    }


def _print(result: audit.Audit, severity: str, ctx: Context) -> None:
    for line in audit.summary_lines(result).lines:
        ctx.say(line)
    for f in result.findings:
        ctx.say(f"{'error' if severity == 'error' else 'warning'}: {f.path}: behind the parity "
              "pin with no ledger note — bump the header or add a ledger row naming it")
