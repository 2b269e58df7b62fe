"""The record invariants `check` verifies, one line per violation (file:line: what is wrong).

This is what a port's CI runs on every change, so it needs no reference checkout:
the per-file pin audit runs only when one is configured, and says when it is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from sync.infra import atomic
from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord, SyncError
from sync.port import Port
from sync.records import (
    carryover,
    config,
    cycle,
    decisions,
    events,
    gates,
    inventory,
    ledger,
    oraclefile,
    paragraph,
    pins,
    reportdoc,
    spans,
)
from sync.steps import audit, surface
from sync.steps.advance import pincopies
from sync.steps.surface import Surface
from sync.upstream import gitio


@dataclass(frozen=True)
class Finding:
    text: str
    severity: str = "error"  # "error" fails the check, "warning" is printed only


def _guarded(fn: Callable[[], list[Finding]]) -> list[Finding]:
    """What `fn` finds, or the one refusal it raised."""
    try:
        return fn()
    except SyncError as exc:
        return [Finding(str(exc))]


def _loads(load: Callable[[], object]) -> list[Finding]:
    """Loading is the check: only its refusal matters."""
    try:
        load()
    except SyncError as exc:
        return [Finding(str(exc))]
    return []


SKIPPED = ("per-file pin audit skipped", "no oracle registry")  # notes that skip a check


def skipped(notes: list[str]) -> list[str]:
    """Of `findings`' notes, those that say a check did not run (an all-clear names them)."""
    return [n for n in notes if n.startswith(SKIPPED)]


def findings(port: Port, *, with_audit: bool = True) -> tuple[list[Finding], list[str]]:
    """All violations plus notes (what was skipped and why)."""
    notes: list[str] = []
    pin, out = _pin(port)
    out += _paragraph(port, pin)
    out += _oracle_files(port, pin, notes)
    if pin is not None:
        out += [Finding(x) for x in spans.check(port.root, port.config.span_globs, pin,
                                                      (port.config.sync_dir,))]
    out += _records(port)
    out += _events(port, pin)
    out += _temp_files(port)
    if pin is not None:
        out += [Finding(text, sev) for text, sev in pincopies.findings(port, pin)]
    surf = surface.build(port)
    # Said here, not by the audit: such a file needs no reference checkout to be found,
    # and CI often runs without one (the audit skipped).
    out += [Finding(text, "warning") for text in audit.not_utf8_texts(surf)]
    if with_audit and pin is not None:
        out += _audit(port, pin, surf, notes)
    # One record that two checks read (the protocol file holds the pin block and the
    # PARITY PIN paragraph) can fail both the same way: it is one violation, said once.
    return list(dict.fromkeys(Finding(_relative(port, f.text), f.severity) for f in out)), notes


def _pin(port: Port) -> tuple[pins.Pin | None, list[Finding]]:
    try:
        return port.pin_record().pin, []
    except SyncError as exc:
        return None, [Finding(str(exc))]


def _paragraph(port: Port, pin: pins.Pin | None) -> list[Finding]:
    """The PARITY PIN line parses and, when the pin does, agrees with it."""
    if not port.protocol.exists():
        return []
    rel = port.rel(port.protocol)

    def agree() -> list[Finding]:
        text = read_record(port.protocol, rel=rel)
        p = paragraph.find(text, path=rel)
        return [] if pin is None else [Finding(x) for x in paragraph.agrees(p, pin, path=rel)]

    return _guarded(agree)


def _oracle_files(port: Port, pin: pins.Pin | None,
                  notes: list[str]) -> list[Finding]:
    """Every oracle file against the port's record rules (all problems of each); the core
    oracle's file agrees with the pin block. A port with no registry yet is told so."""
    files = port.oracle_files()
    if not files:
        registry = port.root / port.config.oracles.rsplit("/", 1)[0]
        if not registry.is_dir():
            notes.append(f"no oracle registry ({port.config.oracles}): the oracle-file checks "
                         "were skipped; create it with the core oracle's file vllm.md when "
                         "the port records its oracles")
            return []
        return [Finding(f"{port.config.oracles}: the oracle registry has no oracle file — "
                        "add the core oracle's file vllm.md")]
    out: list[Finding] = []
    for path in files:
        found = oraclefile.lint(path, port.root)
        out += [Finding(str(x)) for x in found]
        if not found:
            out += _guarded(partial(_oracle_file, path, port.root, pin))
    return out


def _oracle_file(path: Path, root: Path, pin: pins.Pin | None) -> list[Finding]:
    of = oraclefile.load(path, root)
    if of.id != "vllm" or pin is None:
        return []
    return [Finding(x) for x in oraclefile.agreement(of, pin)]


def _records(port: Port) -> list[Finding]:
    """The ledger, the decisions, the carry-over record and the cycle load; an inventory the
    configuration names exists."""
    out: list[Finding] = []
    # A ledger that does not exist is one sync, queue and advance cannot read (and say
    # so, sending the user here): named like an empty one, never passed over.
    out += _ledger(port, port.root / port.config.ledger)
    dec = port.sync_dir / decisions.FILE
    out += _loads(lambda: decisions.load(dec, rel=port.rel(dec)))
    out += _loads(lambda: carryover.load(port.carry_over_path, rel=port.rel(port.carry_over_path)))
    out += _loads(lambda: cycle.load(port))
    out += _loads(lambda: inventory.load(port))  # it must read as text, like every record
    out += _inventory_missing(port)
    out += _loads(lambda: _report(port))
    out += _guarded(lambda: _gates(port))
    return out


def _inventory_missing(port: Port) -> list[Finding]:
    """The inventory is optional, but a configuration that names it says the port has one:
    then a missing file is a lost record (the report could read no deviation), not a port
    without an inventory. `init` names it only when it found one."""
    path = port.root / port.config.inventory
    if not port.config.sets("paths", "inventory") or path.exists():
        return []
    return [Finding(f"{port.rel(path)}: the porting inventory does not exist, though "
                    f"{config.CONFIG_PATH} names it — restore it from git, or remove "
                    "[paths] inventory if the port has none")]


def _gates(port: Port) -> list[Finding]:
    """The open cycle's gate record reads (each gate's shape, a gate's time) and holds no
    result dated in the future: CI would pass what `advance` then refuses."""
    try:
        c = port.cycle()
    except SyncError:
        return []  # the cycle's own finding says why
    if c is None:
        return []
    rel = port.rel(gates.path(port, c.target))
    return [Finding(f"{rel}: gate {g.name!r} is dated {g.time}, in the future (no run wrote "
                    "that) — run the gate again, or set the gate host's clock")
            for g in port.gates(c.target) if gates.future(g)]


def _report(port: Port) -> None:
    """The open cycle's report JSON, when written, is what `sync` writes (status, queue and
    advance read it); the state its markdown says is one the state events record."""
    try:
        c = port.cycle()
    except SyncError:
        return  # the cycle's own finding says why
    if c is None:
        return
    path = port.sync_dir / cycle.report_name(c)
    text = port.text(path.with_suffix(".json"))
    if text is not None:
        reportdoc.load_doc(text, port.rel(path.with_suffix(".json")))
    state = reportdoc.state_of(port.text(path) or "")
    try:
        evs = events.load_all(port)
    except SyncError:
        return  # the events' own finding says why
    if state is not None and not events.backs(evs, port.rel(path), state):
        raise MalformedRecord(f"'- Cycle state: {state}' is recorded by no state event (a "
                              "hand edit?)", "run 'upstream-sync sync', which writes the "
                              "state the events record", path=port.rel(path))


def _temp_files(port: Port) -> list[Finding]:
    """Temp files an interrupted write left anywhere in the port (start-up removes those
    in the record folders; these are elsewhere, or from before writers named themselves)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(port.root):
        dirnames[:] = [d for d in dirnames if d not in spans.SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            if atomic.is_orphan(name) or atomic.LEGACY_TEMP.match(name):
                out.append(Finding(f"{port.rel(path)}: temp file of an interrupted write — "
                                   "delete it (its record was never replaced by it)",
                                   "warning"))
    return out


def _ledger(port: Port, path: Path) -> list[Finding]:
    """The ledger reads, and every malformed row in it (all of them, each with its line)."""
    rel = port.rel(path)
    read = port.ledger_read()
    if read.table is None:
        try:
            ledger.load(path, rel=rel)
        except SyncError as exc:
            return [Finding(str(exc))]
        return []
    return [Finding(x) for x in ledger.malformed_findings(read.table, rel=rel)]


def _events(port: Port, pin: pins.Pin | None) -> list[Finding]:
    out: list[Finding] = []
    try:
        evs = events.load_all(port)
        out += [Finding(x) for x in events.verify(port, evs)]
        out += [Finding(x) for x in events.git_edits(port)]
        if pin is not None:
            out += [Finding(x) for x in events.pin_problems(port, evs, pin.commit)]
    except SyncError as exc:
        out.append(Finding(str(exc)))
    return out


def _relative(port: Port, text: str) -> str:
    """Loaders name a file by its absolute path; every line of `check` names it port-relative."""
    root = f"{port.root}/"
    return text[len(root):] if text.startswith(root) else text


def _carried(port: Port, ref: gitio.Reference) -> list[Finding]:
    """Carried SHAs that name no commit (`carryover.mistyped`); a record that does not load
    is `_records`' finding already."""
    try:
        record = port.carried()
    except MalformedRecord:
        return []
    path = port.carry_over_path
    return [Finding(str(exc)) for exc in carryover.mistyped(path, port.rel(path), record, ref)]


def _audit(port: Port, pin: pins.Pin, surf: Surface, notes: list[str]) -> list[Finding]:
    try:
        prefs = port.preferences()
    except MalformedRecord as exc:
        return [Finding(str(exc))]  # a preferences file that exists must parse
    try:
        ref = port.reference()
    except SyncError as exc:
        if not prefs.get("reference_checkout"):
            # CI without a reference checkout still runs check: the audit is skipped, said.
            notes.append(f"per-file pin audit skipped: {exc}")
            return []
        # One is configured but is missing, not git or shallow: the audit cannot run, and
        # a CI maintainer must see that (a warning, in the output and the JSON).
        return [Finding(f"per-file pin audit not run: {exc} (or pass --no-audit)",
                        "warning")]
    out = _carried(port, ref)
    result = audit.run_audit(port, ref, pin.commit, f"{prefs.remote}/{prefs.branch}", surf)
    # `result.not_utf8` is `findings`' warning already (it is said with or without the audit).
    if not result.control_ok:
        out.append(Finding("per-file pin audit: the positive control failed (a header citing the "
                           "pin did not come out at-pin) — the header probe is broken"))
    if result.ledger_problem is not None:
        notes.append(result.ledger_problem)
    out += [Finding(problem, "warning") for problem in result.unusable_checkouts]
    severity = port.config.behind_without_note
    for f in result.findings:
        out.append(Finding(audit.finding_text(f), severity))
    # A header that pins nothing breaks the protocol's per-file pin rule, but says nothing
    # about unported changes: a warning whatever `behind_without_note` says.
    out += [Finding(text, "warning") for text in audit.no_sha_texts(result)]
    return out
