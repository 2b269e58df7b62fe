"""`audit` (step 5): every ported file's per-file pin status, with a positive control."""

from __future__ import annotations

import argparse
from typing import Any

from sync.cli.context import Context, add_json
from sync.headers import citations as headers
from sync.headers import verify
from sync.infra.errors import CheckFailed
from sync.steps import audit, surface


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("audit", help="step 5: every ported file's per-file pin status",
                       description="Audit per-file pins against the parity pin by content: "
                       "at-pin, behind-unchanged (safe to bump to the pin), behind-changed (a "
                       "finding without a ledger note), path-gone (a finding), ahead, "
                       "not-upstream, no-sha (a vLLM citation that pins no commit), "
                       "other-oracle, original, no-header. Mentions and watched paths are "
                       "listed as references. Counts come with a positive control.")
    add_json(p)
    p.set_defaults(func=run)


def citation_doc(c: headers.Citation, status: str | None, detail: str = "",
                 content: verify.Content | None = None) -> dict[str, Any]:
    return {"path": c.path, "upstream_path": c.upstream_path, "sha": c.sha, "oracle": c.oracle,
            "status": status, "detail": detail, "line": c.line, "lines": c.lines,
            "symbol": c.symbol, "symbols": list(c.symbols),
            "since": list(content.since) if content and content.kind == "changed" else [],
            "renamed_to": content.new_path if content else None,
            "gone_in": content.gone_in if content else None}


def _references(f: audit.FileStatus) -> list[dict[str, Any]]:
    return ([{"path": m.path, "line": m.line, "kind": "mention", "why": m.why}
             for m in f.references]
            + [{"path": c.upstream_path, "line": c.line, "kind": "watched", "why": "original",
                "oracle": c.oracle} for c in f.watched])


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
                          "pin did not come out at-pin): the counts are not trustworthy",
                          "report this; the header probe is broken")
    if severity == "error" and result.findings:
        raise CheckFailed(f"{len(result.findings)} file(s) behind a changed upstream file "
                          "without a ledger note, or citing a path that is gone",
                          "fix each file listed")
    return 0


def _doc(result: audit.Audit, pin: str, upstream: str, severity: str) -> dict[str, Any]:
    return {
        "pin": pin, "upstream_ref": upstream,
        "control": {"ok": result.control_ok, "path": audit.CONTROL_PATH},
        "counts": result.counts(),
        "files": [{"path": f.path, "status": f.status, "noted": f.noted, "finding": f.finding,
                   "citations": [citation_doc(c.citation, c.status, c.detail, c.content)
                                 for c in f.cites],
                   "references": _references(f)} for f in result.files],
        "findings": [f.path for f in result.findings], "severity": severity,
        "ledger_problem": result.ledger_problem,
        "unusable_checkouts": list(result.unusable_checkouts),
        "no_sha": list(audit.no_sha_texts(result)),  # the warnings the text says of them
        "not_utf8": list(result.not_utf8),  # the same: the text's lines, "warning: " off
    }


def _print(result: audit.Audit, severity: str, ctx: Context) -> None:
    for line in audit.summary_lines(result).lines:
        ctx.say(line)
    # In `check`'s order and words: audited as read, such a file is refused by bump-headers.
    for text in result.not_utf8:
        ctx.say(f"warning: {text}")
    for problem in result.unusable_checkouts:
        ctx.say(f"warning: {problem}")
    for f in result.findings:
        ctx.say(f"{'error' if severity == 'error' else 'warning'}: {audit.finding_text(f)}")
    # As `check` warns of them: a header that pins nothing is a warning whatever the severity.
    for text in audit.no_sha_texts(result):
        ctx.say(f"warning: {text}")
