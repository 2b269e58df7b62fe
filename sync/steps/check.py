"""The record invariants `check` verifies, one line per violation (file:line: what is wrong).

This is what a port's CI runs on every change, so it needs no reference checkout:
the per-file pin audit runs only when one is configured, and says when it is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sync.infra.atomic import read_text
from sync.infra.errors import MalformedRecord, SyncError
from sync.port import Port
from sync.records import cycle, decisions, events, ledger, oraclefile, paragraph, pins, spans
from sync.steps.advance import pincopies


@dataclass(frozen=True)
class Finding:
    text: str
    severity: str = "error"  # "error" fails the check, "warning" is printed only


def _guard(out: list[Finding], fn: Callable[[], None]) -> None:
    try:
        fn()
    except SyncError as exc:
        out.append(Finding(str(exc)))


def _discard(_: object) -> None:
    """Loading is the check: only its exception matters."""


def findings(port: Port, *, with_audit: bool = True) -> tuple[list[Finding], list[str]]:
    """All violations plus notes (what was skipped and why)."""
    out: list[Finding] = []
    notes: list[str] = []
    rel = port.rel(port.protocol)
    pin: pins.Pin | None = None
    try:
        pin = port.pin_record().pin
    except SyncError as exc:
        out.append(Finding(str(exc)))
    if port.protocol.exists():
        text = read_text(port.protocol)

        def para() -> None:
            p = paragraph.find(text, path=rel)
            if pin is not None:
                out.extend(Finding(x) for x in paragraph.agrees(p, pin, path=rel))

        _guard(out, para)
    oracle_files = port.oracle_files()
    if not oracle_files:
        out.append(Finding(f"{port.config.oracles}: no oracle files found (expected at least "
                           "the core oracle vllm.md)"))
    for path in oracle_files:
        try:
            of = oraclefile.load(path, port.root)
        except SyncError as exc:
            out.append(Finding(str(exc)))
            continue
        if of.id == "vllm" and pin is not None:
            out.extend(Finding(x) for x in oraclefile.agreement(of, pin))
    if pin is not None:
        out.extend(Finding(x) for x in spans.check(port.root, port.config.span_globs, pin))
    ledger_path = port.root / port.config.ledger
    if ledger_path.exists():
        _guard(out, lambda: _discard(ledger.load(ledger_path, rel=port.rel(ledger_path))))
    dec = port.sync_dir / decisions.FILE
    _guard(out, lambda: _discard(decisions.load(dec, rel=port.rel(dec))))
    _guard(out, lambda: _discard(cycle.load(port)))
    try:
        out.extend(Finding(x) for x in events.verify(port))
        out.extend(Finding(x) for x in events.git_edits(port))
    except SyncError as exc:
        out.append(Finding(str(exc)))
    if pin is not None:
        out.extend(Finding(text, sev) for text, sev in pincopies.findings(port, pin))
    if with_audit and pin is not None:
        out.extend(_audit(port, pin, notes))
    return [Finding(_relative(port, f.text), f.severity) for f in out], notes


def _relative(port: Port, text: str) -> str:
    """Loaders name a file by its absolute path; every line of `check` names it port-relative."""
    root = f"{port.root}/"
    return text[len(root):] if text.startswith(root) else text


def _audit(port: Port, pin: pins.Pin, notes: list[str]) -> list[Finding]:
    from sync.steps import audit, surface

    try:
        prefs = port.preferences()
    except MalformedRecord as exc:
        return [Finding(str(exc))]  # a preferences file that exists must parse
    try:
        ref = port.reference()
    except SyncError as exc:
        notes.append(f"per-file pin audit skipped: {exc}")
        return []
    result = audit.run_audit(port, ref, pin.commit, f"{prefs.remote}/{prefs.branch}",
                             surface.build(port))
    out = []
    if not result.control_ok:
        out.append(Finding("per-file pin audit: the positive control failed (a header citing the "
                           "pin was not counted at-pin) — the header probe is broken"))
    severity = port.config.behind_without_note
    for f in result.findings:
        cited = ", ".join(f"{c.path} @ {c.sha}" for c in f.citations if c.sha)
        out.append(Finding(f"{f.path}:1: per-file pin behind the parity pin ({cited}) with no "
                           "ledger note — bump the header or add a ledger row naming the file",
                           severity))
    return out
