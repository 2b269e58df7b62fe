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

from sync.infra.atomic import read_text
from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle, events, oraclefile, paragraph, pins, spans
from sync.steps import carry, report, syncrun
from sync.steps.verify import identity as oracle_verify
from sync.upstream import gitio

CORE = "vllm"
_ADVANCED = re.compile(r"^- Cycle state: ADVANCED(?=\r?$)", re.MULTILINE)


@dataclass(frozen=True)
class Plan:
    old: pins.Pin
    new: pins.Pin
    target: str
    report: Path
    writes: dict[Path, bytes]
    olds: dict[Path, bytes]
    detail: dict[str, dict[str, str]]


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
    unmet: list[str] = []
    c = port.open_cycle()
    path = syncrun.report_path(port, c)
    if not path.exists():
        unmet.append(f"no sync report for the target {c.target[:10]} — run 'upstream-sync sync'")
        return unmet, Measured(c)
    if _advanced(port.text(path) or ""):
        finish_fast_forward(port, c.target, ctx)
        unmet.append(f"the cycle to {c.target[:10]} already advanced — fetch a new target")
        return unmet, Measured(c)
    result = syncrun.run_cycle(port, ctx, syncrun.CycleRequest(write_report=False))
    verification = None
    counts = result.model.counts()
    if counts["UNCLASSIFIED"]:
        unmet.append(f"{counts['UNCLASSIFIED']} commit(s) UNCLASSIFIED — classify each with "
                     "'upstream-sync decide <sha> <DISPOSITION> <reason>'")
    led = carry.ledger_refs(port)
    for e in result.model.entries:
        if e.disposition == "PORT-NOW" and not carry.ported(e, led) and not (
                e.reason.lower().startswith("carry-over")):
            pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
            unmet.append(f"PORT-NOW `{e.sha[:10]}` {pr} has no ledger row — port it and run "
                         "'upstream-sync ledger add', or carry it over with 'upstream-sync "
                         f"decide {e.sha[:10]} PORT-NOW \"carry-over: <why>\"'")
    recorded = {g.name: g for g in port.gates(c.target)}
    for name in _required_gates(port):
        g = recorded.get(name) or next((r for r in recorded.values()
                                        if r.name.startswith(name + "[")), None)
        if g is None:
            unmet.append(f"gate {name} has not run at {c.target[:10]} — run 'nox -s "
                         f"{name.split(':')[0]}'")
        elif g.status != "PASS":
            unmet.append(f"gate {g.name} is {g.status}" + (f" — run `{g.handoff}` on a gate host"
                                                         if g.handoff else ""))
    for g in recorded.values():
        if g.status != "PASS" and not any(g.name.startswith(n) for n in _required_gates(port)):
            unmet.append(f"gate {g.name} is {g.status}")
    prefs = port.preferences()
    try:
        v = oracle_verify.verify(port, prefs, CORE, c.target)
    except SyncError as exc:
        unmet.append(f"oracle {CORE} at the target cannot be verified: {exc}")
    else:
        if not v.ok:
            unmet.append(f"oracle {CORE} at {c.target[:10]} fails verification: "
                         + "; ".join(str(m) for m in v.mismatches[:3]))
        else:
            verification = v
    ref = port.reference()
    if gitio.is_dirty(ref):
        unmet.append(f"the reference checkout {ref.path} has uncommitted changes — commit or "
                     "stash them (it is fast-forwarded, never reset)")
    head = gitio.head_sha(ref)
    if head and not gitio.is_ancestor(ref, head, c.target):
        unmet.append(f"the reference checkout's HEAD {head[:10]} cannot fast-forward to "
                     f"{c.target[:10]} — check out the pin's branch")
    return unmet, Measured(c, result, verification)


def plan(port: Port, m: Measured, *, release_label: str | None) -> Plan:
    c, v, result = m.cycle, m.verification, m.result
    if v is None or result is None:
        raise BlockedCycle("the advance was planned before its preconditions held",
                           "run 'upstream-sync advance' again")
    record = port.pin_record()
    old = record.pin
    probe = v.probe
    if probe.runtime_version is None or probe.distribution_version is None:
        raise BlockedCycle("the oracle measurement has no version strings",
                           "rebuild the oracle at the target")
    new = pins.from_values(c.target, probe.runtime_version, probe.distribution_version,
                           probe.flashinfer_version or old.flashinfer_version,
                           path=port.rel(port.protocol))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    writes: dict[Path, bytes] = {}
    text = pins.render(record, new)
    para = paragraph.find(text, path=port.rel(port.protocol))
    text = paragraph.render(text, para, date=today, sha=new.commit[:9],
                            release_label=release_label or para.release_label
                            or new.public_version)
    writes[port.protocol] = text.encode()
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), CORE)
    if core is None:
        raise UsageError(f"no core oracle file ({CORE}.md) among {port.config.oracles}",
                         "add .agents/oracles/vllm.md")
    writes[core.path] = oraclefile.render(core, pin=new.commit, pin_label=new.public_version,
                                          pinned_on=today).encode()
    writes.update(span_writes(port, writes, new))
    detail = {
        "before": {**old.fields(), "paragraph_date": para.date, "paragraph_sha": para.sha,
                   "paragraph_label": para.release_label or "", "oracle_pin": core.pin,
                   "oracle_pin_label": core.pin_label, "oracle_pinned_on": core.pinned_on},
        "after": {**new.fields(), "oracle_env": str(probe.env)},
    }
    olds = {p: (p.read_bytes() if p.exists() else b"") for p in writes}
    return Plan(old, new, c.target, result.path, writes, olds, detail)


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
    gitio.run(ref.path, ["merge", "--ff-only", "-q", "--end-of-options", target])
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
    return _ADVANCED.search(report_text) is not None


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


def reopened(port: Port, rel: str) -> dict[Path, bytes]:
    """The rolled-back cycle's report and JSON marked ACTIVE again: its target is open anew.

    Left ADVANCED, the report would refuse every later advance to the same target.
    """
    path = port.root / rel
    if not path.is_file():
        return {}
    text = read_text(path)
    out = {path: _ADVANCED.sub("- Cycle state: ACTIVE", text, count=1).encode()}
    jpath = path.with_suffix(".json")
    if jpath.is_file():
        try:
            doc = json.loads(read_text(jpath))
        except ValueError:
            doc = None  # the next 'sync' rewrites it from the report
        if isinstance(doc, dict) and doc.get("state") == "ADVANCED":
            doc["state"] = "ACTIVE"
            out[jpath] = report.dump_json(doc).encode()
    return out
