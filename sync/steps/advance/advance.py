"""Step 7: advance the pin (all or nothing), or stall with what is left.

The pin moves only from a measured oracle: the new block is built from
`oracle verify` at the target, never from a typed version string. Every pin
surface (block, PARITY PIN paragraph, core oracle file, every pin span), the
state event and the report move in one journaled transaction under the lock.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle, events, gates, oraclefile, paragraph, pins, spans
from sync.steps import carry, report, syncrun
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify.probe import Probe
from sync.upstream import gitio

CORE = "vllm"
ADVANCED = re.compile(r"^- Cycle state: ADVANCED(?=\r?$)", re.MULTILINE)


@dataclass(frozen=True)
class Plan:
    old: pins.Pin
    new: pins.Pin
    target: str
    report: Path
    writes: dict[Path, bytes]  # every pin surface, the report ADVANCED, the state event
    olds: dict[Path, bytes]
    detail: dict[str, dict[str, str]]
    event: Path  # the advance event among the writes


@dataclass(frozen=True)
class Measured:
    """What the precondition checks measured: complete only when nothing is unmet."""

    cycle: cycle.Cycle
    result: syncrun.Result | None = None
    verification: oracle_verify.Verification | None = None


def _required_gates(port: Port) -> list[str]:
    names = []
    if port.config.golden_scripts:
        names.append("golden")
    names += [f"parity:{s.name}" for s in port.config.suites]
    return names


def preconditions(port: Port, ctx: Notes | None) -> tuple[list[str], Measured]:
    """Every unmet precondition, one line each, plus what a passing check measured."""
    c = port.open_cycle()
    unmet = _report_unmet(port, c, ctx)
    if unmet:
        return unmet, Measured(c)
    result = syncrun.run_cycle(port, ctx, syncrun.CycleRequest(write_report=False))
    unmet = _unclassified(result) + _unported(port, result) + _gates_unmet(port, c.target)
    oracle_unmet, verification = _oracle_unmet(port, c.target)
    unmet += oracle_unmet + _reference_unmet(port, c.target)
    return unmet, Measured(c, result, verification)


def _report_unmet(port: Port, c: cycle.Cycle, ctx: Notes | None) -> list[str]:
    """The cycle has a report and has not advanced yet (then nothing else is checked)."""
    path = syncrun.report_path(port, c)
    if not path.exists():
        return [f"no sync report for the target {c.target[:10]} — run 'upstream-sync sync'"]
    if _advanced(port.text(path) or ""):
        finish_fast_forward(port, c.target, ctx)
        return [f"the cycle to {c.target[:10]} already advanced — fetch a new target"]
    return []


def _unclassified(result: syncrun.Result) -> list[str]:
    n = result.model.counts()["UNCLASSIFIED"]
    if not n:
        return []
    return [f"{n} commit(s) UNCLASSIFIED — classify each with "
            "'upstream-sync decide <sha> <DISPOSITION> <reason>'"]


def _unported(port: Port, result: syncrun.Result) -> list[str]:
    """PORT-NOW commits with neither a ledger row nor a carry-over decision."""
    led = carry.ledger_refs(port)
    out = []
    for e in result.model.entries:
        if e.disposition == "PORT-NOW" and not carry.ported(e, led) and not (
                e.reason.lower().startswith("carry-over")):
            pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
            out.append(f"PORT-NOW `{e.sha[:10]}` {pr} has no ledger row — port it and run "
                       "'upstream-sync ledger add', or carry it over with 'upstream-sync "
                       f"decide {e.sha[:10]} PORT-NOW \"carry-over: <why>\"'")
    return out


def _gates_unmet(port: Port, target: str) -> list[str]:
    """Every required gate PASSed at the target, and no other recorded gate failed."""
    recorded = {g.name: g for g in port.gates(target)}
    required = _required_gates(port)
    out = [line for name in required
           if (line := _required_gate_unmet(name, recorded, target)) is not None]
    out += [f"gate {g.name} is {g.status}" for g in recorded.values()
            if g.status != "PASS" and not any(g.name.startswith(n) for n in required)]
    return out


def _required_gate_unmet(name: str, recorded: dict[str, gates.GateResult],
                         target: str) -> str | None:
    # A sharded gate is recorded per shard (`golden[1/2]`): any shard stands for it.
    g = recorded.get(name) or next((r for r in recorded.values()
                                    if r.name.startswith(name + "[")), None)
    if g is None:
        return (f"gate {name} has not run at {target[:10]} — run 'nox -s "
                f"{name.split(':')[0]}'")
    if g.status != "PASS":
        return f"gate {g.name} is {g.status}" + (f" — run `{g.handoff}` on a gate host"
                                                 if g.handoff else "")
    return None


def _oracle_unmet(port: Port, target: str
                  ) -> tuple[list[str], oracle_verify.Verification | None]:
    """The core oracle at the target verifies (its measurement is what the pin becomes)."""
    prefs = port.preferences()
    try:
        v = oracle_verify.verify(port, prefs, CORE, target)
    except SyncError as exc:
        return [f"oracle {CORE} at the target cannot be verified: {exc}"], None
    if not v.ok:
        return [f"oracle {CORE} at {target[:10]} fails verification: "
                + "; ".join(str(m) for m in v.mismatches[:3])], None
    return [], v


def _reference_unmet(port: Port, target: str) -> list[str]:
    """The reference checkout is clean and can fast-forward to the target."""
    ref = port.reference()
    out = []
    if gitio.is_dirty(ref):
        out.append(f"the reference checkout {ref.path} has uncommitted changes — commit or "
                   "stash them (it is fast-forwarded, never reset)")
    head = gitio.head_sha(ref)
    if head and not gitio.is_ancestor(ref, head, target):
        out.append(f"the reference checkout's HEAD {head[:10]} cannot fast-forward to "
                   f"{target[:10]} — check out the pin's branch")
    return out


def plan(port: Port, m: Measured, *, release_label: str | None) -> Plan:
    """Every write of the advance: pin surfaces, the report marked ADVANCED, the event."""
    result, probe, new = _new_pin(port, m)
    record = port.pin_record()
    old = record.pin
    writes, before = _surfaces(port, record, new, release_label)
    writes.update(span_writes(port, writes, new))
    detail = {"before": {**old.fields(), **before},
              "after": {**new.fields(), "oracle_env": str(probe.env)}}
    ev_path, ev_bytes = events.staged(
        port, "advance", pin_before=old.commit, pin_after=new.commit,
        report=port.rel(result.path), detail=json.dumps(detail, sort_keys=True))
    writes.update(report_bytes(port, result, "ADVANCED"))
    writes[ev_path] = ev_bytes
    olds = {p: (p.read_bytes() if p.exists() else b"") for p in writes}
    return Plan(old, new, m.cycle.target, result.path, writes, olds, detail, ev_path)


def _new_pin(port: Port, m: Measured) -> tuple[syncrun.Result, Probe, pins.Pin]:
    """The pin the measured oracle at the target makes: never a typed version string."""
    v, result = m.verification, m.result
    if v is None or result is None:
        raise BlockedCycle("the advance was planned before its preconditions held",
                           "run 'upstream-sync advance' again")
    probe = v.probe
    if probe.runtime_version is None or probe.distribution_version is None:
        raise BlockedCycle("the oracle measurement has no version strings",
                           "rebuild the oracle at the target")
    new = oracle_verify.measured_pin(port, probe)  # at m.cycle.target: verified there
    return result, probe, new


def _surfaces(port: Port, record: pins.PinRecord, new: pins.Pin, release_label: str | None
              ) -> tuple[dict[Path, bytes], dict[str, str]]:
    """The pin block with its PARITY PIN paragraph and the core oracle file moved to `new`,
    and what the paragraph and the oracle file said before (for a rollback)."""
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    text = pins.render(record, new)
    para = paragraph.find(text, path=port.rel(port.protocol))
    text = paragraph.render(text, para, date=today, sha=new.commit[:9],
                            release_label=release_label or para.release_label
                            or new.public_version)
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), CORE)
    if core is None:
        raise UsageError(f"no core oracle file ({CORE}.md) among {port.config.oracles}",
                         "add .agents/oracles/vllm.md")
    writes = {port.protocol: text.encode(),
              core.path: oraclefile.render(core, pin=new.commit, pin_label=new.public_version,
                                           pinned_on=today).encode()}
    before = {"paragraph_date": para.date, "paragraph_sha": para.sha,
              "paragraph_label": para.release_label or "", "oracle_pin": core.pin,
              "oracle_pin_label": core.pin_label, "oracle_pinned_on": core.pinned_on}
    return writes, before


def span_writes(port: Port, writes: dict[Path, bytes], pin: pins.Pin) -> dict[Path, bytes]:
    """Every pin span rewritten to `pin` (over `writes` already planned for the same file)."""
    out: dict[Path, bytes] = {}
    for path in spans.files(port.root, port.config.span_globs):
        current = writes.get(path, path.read_bytes()).decode()
        found = spans.scan_text(current, path=path)
        if found:
            out[path] = spans.rewrite(current, found, commit=pin.commit,
                                      label=pin.public_version).encode()
    return out


def report_bytes(port: Port, result: syncrun.Result, state: report.State) -> dict[Path, bytes]:
    model = replace(result.model, state=state,
                    carry_over=tuple(x for x in result.model.carry_over
                                     if not x.startswith("- unmet: ")))
    doc = report.to_json(model, port.rel(result.path))
    return {result.path: report.render(model).encode(),
            result.json_path: report.dump_json(doc).encode()}


def diff(p: Plan, port: Port) -> str:
    out: list[str] = []
    for path, data in p.writes.items():
        old = p.olds[path].decode("utf-8", "replace").splitlines(keepends=True)
        new = data.decode("utf-8", "replace").splitlines(keepends=True)
        out += difflib.unified_diff(old, new, f"a/{port.rel(path)}", f"b/{port.rel(path)}")
    return "".join(out)


def fast_forward(port: Port, commit: str) -> None:
    """Move the reference checkout to the advanced pin (fast-forward only: never a reset)."""
    gitio.run(port.reference().path, ["merge", "--ff-only", "-q", "--end-of-options", commit])


def finish_fast_forward(port: Port, target: str, ctx: Notes | None) -> None:
    """Finish an advance that died after its records were written but before the reference
    checkout moved: the pin is the target and the checkout is clean and behind it."""
    if port.pin_record().pin.commit != target:
        return
    ref = port.reference()
    head = gitio.head_sha(ref)
    if head in (None, target) or gitio.is_dirty(ref) or not gitio.is_ancestor(ref, head or "",
                                                                               target):
        return
    fast_forward(port, target)
    if ctx is not None:
        ctx.note(f"finished the interrupted advance: fast-forwarded {ref.path} to {target[:10]}")


def stall(port: Port, ctx: Notes, unmet: list[str]) -> bool:
    """Mark the report STALLED and append one stall event; False when the cycle advanced."""
    c = port.open_cycle()
    path = syncrun.report_path(port, c)
    if path.exists() and _advanced(port.text(path) or ""):
        return False  # a re-run after the advance: nothing stalled
    if not path.exists():
        return False  # nothing was synced yet: no report to stall, no event to link it
    syncrun.run_cycle(port, ctx, syncrun.CycleRequest(state="STALLED", unmet=tuple(unmet)))
    evs = events.load_all(port)
    rel = port.rel(path)
    if not (evs and evs[-1].kind == "stall" and evs[-1].report == rel):
        pin = port.pin_record().pin
        with port.lock():
            events.append(port, "stall", pin_before=pin.commit, pin_after=pin.commit,
                          report=rel, detail="; ".join(unmet)[:2000])
    return True


def _advanced(report_text: str) -> bool:
    return ADVANCED.search(report_text) is not None


def staged_elsewhere(port: Port, own: set[str]) -> list[str]:
    out = gitio.run(port.root, ["diff", "--cached", "--name-only", "-z"]).stdout.decode()
    return [p for p in out.split("\0") if p and p not in own]


def refuse_foreign_staged(port: Port, commit: bool, writes: dict[Path, bytes]) -> None:
    if not commit:
        return
    if not (port.root / ".git").exists():
        raise UsageError(f"{port.root} is not a git repository", "drop --commit")
    other = staged_elsewhere(port, {port.rel(k) for k in writes})
    if other:
        raise UsageError(f"other paths are staged: {', '.join(other[:5])}",
                         "unstage them: a sync commit carries sync records only")


def git_commit(port: Port, paths: list[Path], subject: str, body: str) -> str:
    rels = [port.rel(p) for p in paths]
    gitio.run(port.root, ["add", "--", *rels])
    gitio.run(port.root, ["commit", "-q", "-m", subject, "-m", body, "--", *rels])
    return gitio.run(port.root, ["rev-parse", "HEAD"]).stdout.decode().strip()
