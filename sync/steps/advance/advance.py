"""Step 7: advance the pin (all or nothing), or stall with what is left.

The pin moves only from a measured oracle: the new block is built from
`oracle verify` at the target, never from a typed version string, and the PARITY PIN
paragraph is rewritten from what was measured (`records/paragraph.rewrite`). Every pin
surface (block, paragraph, core oracle file, every pin span), the carry-over record,
the state event and the report move in one journaled transaction under the lock.

A refused advance only reports: stalling is its own act (`stall`, from `advance
--stall`), which marks the report STALLED, carries every open item into the record and
appends one stall event.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from sync.infra import clock
from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle, events, gates, oraclefile, paragraph, pins, schema, spans
from sync.records.mdtext import code
from sync.steps import audit, carry, report, surface, syncrun
from sync.steps import target as target_mod
from sync.steps.advance import blockers
from sync.steps.advance import evidence as gate_evidence
from sync.steps.verify import golden, oracle, parity
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify.probe import Probe
from sync.upstream import gitio, health
from sync.upstream.gitio import short

CORE = blockers.CORE
ADVANCED = re.compile(r"^- Cycle state: ADVANCED(?=\r?$)", re.MULTILINE)


@dataclass(frozen=True)
class Plan:
    old: pins.Pin
    new: pins.Pin
    target: str
    report: Path
    writes: dict[Path, bytes]  # every pin surface, the report ADVANCED, the state event
    olds: dict[Path, bytes]
    detail: dict[str, dict[str, object]]
    event: Path  # the advance event among the writes


@dataclass(frozen=True)
class Measured:
    """What the precondition checks measured: complete only when nothing is unmet."""

    cycle: cycle.Cycle
    result: syncrun.Result | None = None
    verification: oracle_verify.Verification | None = None
    new: pins.Pin | None = None  # the pin the measured oracle makes
    rewrite: paragraph.Rewrite | None = None  # the protocol file with both moved to it


def preconditions(port: Port, ctx: Notes | None, *, release_label: str | None = None
                  ) -> tuple[list[str], Measured]:
    """Every unmet precondition, one line each, plus what a passing check measured."""
    c = port.last_cycle()  # an advanced one says so (`_report_unmet`)
    unmet = _report_unmet(port, c, ctx)
    if unmet:
        return unmet, Measured(c)
    result = syncrun.run_cycle(port, ctx, syncrun.CycleRequest(write_report=False))
    unmet = (_unclassified(result) + _unported(port, result) + blockers.gates_declared(port)
             + _gates_unmet(port, c.target) + blockers.paragraph_stale(port)
             + blockers.core_file_unmet(port))
    oracle_unmet, verification = _oracle_unmet(port, c.target)
    if verification is not None:
        oracle_unmet += gate_evidence.unmet(port, c.target, verification.probe)
    unmet += oracle_unmet + _reference_unmet(port, c.target)
    measured = Measured(c, result, verification)
    if verification is not None and not oracle_unmet:
        new = _new_pin(port, measured)
        rw = _rewrite(port, measured, new, release_label)
        unmet += _paragraph_unmet(port, rw)
        measured = replace(measured, new=new, rewrite=rw)
    return unmet, measured


def _report_unmet(port: Port, c: cycle.Cycle, ctx: Notes | None) -> list[str]:
    """The cycle has a report and has not advanced yet (then nothing else is checked)."""
    path = syncrun.report_path(port, c)
    if not path.exists():
        return [f"no sync report for the target {short(c.target)} — run 'upstream-sync sync'"]
    if _advanced(port.text(path) or ""):
        if not events.backs(events.load_all(port), port.rel(path), "ADVANCED"):
            return [f"{port.rel(path)} says ADVANCED, but no state event records an advance "
                    "to it (a hand edit?) — run 'upstream-sync sync' to restore its state"]
        finish_fast_forward(port, c.target, ctx)
        return [f"the cycle to {short(c.target)} already advanced — fetch a new target"]
    return []


def _unclassified(result: syncrun.Result) -> list[str]:
    n = result.model.counts()["UNCLASSIFIED"]
    if not n:
        return []
    return [f"{n} commit(s) UNCLASSIFIED — classify each with "
            "'upstream-sync decide <sha> <DISPOSITION> <reason>'"]


def _unported(port: Port, result: syncrun.Result) -> list[str]:
    """PORT-NOW commits (of the range, or carried into it) with neither a ledger row nor a
    carry-over decision."""
    led = carry.ledger_refs(port)
    unread = led.unreadable("no PORT-NOW commit can be checked for its ledger row")
    if unread is not None:
        return [unread]  # once: whether each has a row is not known (walk-s11 U7)
    out = []
    outside = [i.entry for i in result.carried if not i.in_range]
    for e in [*result.model.entries, *outside]:
        if e.disposition == "PORT-NOW" and not carry.ported(e, led) and not carry.is_carry_over(e):
            pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
            force = " --force" if e.sha in port.decisions() else ""
            out.append(f"PORT-NOW `{short(e.sha)}` {pr} has no ledger row — port it and run "
                       "'upstream-sync ledger add', or carry it over with 'upstream-sync "
                       f"decide {short(e.sha)} PORT-NOW \"carry-over: <why>\"{force}'")
    return out


def _gates_unmet(port: Port, target: str) -> list[str]:
    """Every required gate PASSed at the target, and no other recorded gate failed."""
    recorded = {g.name: g for g in port.gates(target)}
    required = blockers.required_gates(port)
    out = [line for name in required
           for line in _required_gate_unmet(name, recorded, target,
                                            _gate_command(port, name, target))]
    # Any other recorded gate (`oracle:vllm`) must not have failed or be dated ahead either.
    out += [line for g in recorded.values() if not blockers.covers(required, g.name)
            and (line := _one_gate_unmet(g, g.command)) is not None]
    return out


def _gate_command(port: Port, name: str, target: str) -> str:
    """The command that runs a required gate at the target: the one its PENDING handoff
    names, less `--strict` (off a gate host it records PENDING with that handoff)."""
    if name.startswith("parity:"):
        return parity.command(name.removeprefix("parity:"), target, strict=False)
    return golden.command(port.config.golden_oracle, target, None, strict=False)


def _required_gate_unmet(name: str, recorded: dict[str, gates.GateResult],
                         target: str, run: str) -> list[str]:
    """A required gate, or every shard of it (`golden[1/2]`, `golden[2/2]`), PASSed."""
    shards = [r for r in recorded.values() if r.name == name or r.name.startswith(name + "[")]
    if not shards:
        return [f"gate {name} has not run at {short(target)} — run {code(run)}"]
    out = [f"gate {n} has not run at {short(target)} — run "
           f"{code(run + ' --shard ' + n[len(name) + 1:-1])}"
           for n in golden.missing_shards(name, [r.name for r in shards])]
    return out + [line for g in shards if (line := _one_gate_unmet(g, run)) is not None]


def _one_gate_unmet(g: gates.GateResult, run: str) -> str | None:
    if g.status == "PASS" and gates.future(g):
        return (f"gate {g.name} is dated {g.time}, in the future — run {code(run)} again (or "
                "set the gate host's clock)")
    if g.status == "FAIL":
        # What the run said (its last line); then what runs it again.
        said = f": {g.detail}" if g.detail else ""
        return f"gate {g.name} is FAIL{said} — fix the cause, then run {code(run)} again"
    if g.status != "PASS":
        return f"gate {g.name} is {g.status}" + (
            f" — run {code(g.handoff)} on a gate host" if g.handoff else "")
    return None


@dataclass(frozen=True)
class LeftBehind:
    """The ported files an advance leaves for `check` to warn of: behind the new pin with
    upstream changes no ledger row notes, and citing a path the new pin no longer has (gone
    in the range, or already gone at the pin: said again, or a cycle that left one would be
    the only one to say it). `behind` is None when the ledger cannot be read: which files a
    row notes is unknown, and `unknown` says why (walk N4: the count read 0, unsaid)."""

    behind: tuple[str, ...] | None
    gone: tuple[str, ...]
    still_gone: tuple[str, ...] = ()
    unknown: str | None = None  # one line: the ledger could not be read, why, what to do

    def lines(self, target: str, *, listed: bool = True) -> list[str]:
        """One `warning:` line per group, then (`listed`) its files indented. Unlisted (a
        refused advance), each group says where its files are: its unmet lines come first to
        hand, and most files are behind only because the open PORT-NOW items are not ported
        yet (walk-s14 N2: 105 paths before the unmet lines)."""
        out = [f"warning: {self.unknown}"] if self.unknown is not None else []
        for head, files in self._groups(target):
            if not files:
                continue
            out.append(f"warning: {len(files)} {head}" + (":" if listed else (
                " (each listed once the preconditions hold; now in --json: left_behind)")))
            out += [f"  {f}" for f in files] if listed else []
        return out

    def _groups(self, target: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return (
            (f"ported file(s) will be behind the new pin {short(target)} with upstream changes "
             "no ledger row notes — bump those whose changes need nothing from the port "
             "('upstream-sync bump-headers FILE...'), or add a ledger row naming each of the "
             "others", self.behind or ()),
            (f"ported file(s) will cite a path the new pin {short(target)} does not have "
             "(renamed or deleted) — re-point or drop each such citation", self.gone),
            ("ported file(s) already cite a path the current pin does not have, and will still "
             "(check warns of them now) — re-point or drop each such citation", self.still_gone),
        )

    def doc(self) -> dict[str, list[str] | str | None]:
        return {"behind": None if self.behind is None else list(self.behind),
                "gone": list(self.gone), "still_gone": list(self.still_gone),
                "warning": self.unknown}


def left_behind(port: Port, pin: str, target: str) -> LeftBehind:
    """What `check` will warn of after the advance that it does not warn of now: said
    before the advance writes, so each can be bumped, noted or fixed first."""
    ref = port.reference()
    surf = surface.build(port)
    day = port.last_cycle().frozen_at[:10]
    after = audit.run_audit(port, ref, target, port.upstream_ref, surf,
                            audit.Advancing(pin, target, day))
    before = audit.run_audit(port, ref, pin, port.upstream_ref, surf)
    was_gone = {f.path for f in before.files if f.status == "path-gone"}
    gone = [f.path for f in after.files if f.status == "path-gone"]
    # An unreadable ledger notes nothing: every behind file's `noted` is None, not False.
    unknown = port.ledger_read().unreadable(
        f"the ported files that will be behind the new pin {short(target)} with upstream "
        "changes no ledger row notes cannot be counted")
    behind = None if unknown is not None else tuple(
        f.path for f in after.files if f.status == "behind-changed" and f.noted is False)
    return LeftBehind(behind, tuple(f for f in gone if f not in was_gone),
                      tuple(f for f in gone if f in was_gone), unknown)


def _oracle_unmet(port: Port, target: str
                  ) -> tuple[list[str], oracle_verify.Verification | None]:
    """The core oracle at the target verifies (its measurement is what the pin becomes)."""
    prefs = port.preferences()
    try:
        v = oracle_verify.verify(port, prefs, CORE, target)
    except SyncError as exc:
        return [blockers.unverifiable(exc)], None
    if not v.ok:
        return [f"oracle {CORE} at {short(target)} fails verification: "
                + "; ".join(str(m) for m in v.mismatches[:3])], None
    return [], v


def _reference_unmet(port: Port, target: str) -> list[str]:
    """The reference checkout is clean and can fast-forward to the target."""
    ref = port.reference()
    if ref.bare:
        return [health.bare_problem(ref.path)]  # nothing to fast-forward: it would fail late
    out = []
    if gitio.is_dirty(ref):
        out.append(f"the reference checkout {ref.path} has uncommitted changes — commit or "
                   "stash them (it is fast-forwarded, never reset)")
    problem = health.move_problem(ref, target, port.upstream_ref)
    if problem is not None:
        out.append(problem)
    return out


def _env_label(port: Port, env: str) -> str:
    try:
        home: Path | None = oracle.oracle_home(port, port.preferences())
    except SyncError:
        home = None
    return oracle.env_label(env, home)


def plan(port: Port, m: Measured) -> Plan:
    """Every write of the advance: pin surfaces, the carry-over record, the report marked
    ADVANCED, the event."""
    result, probe, new, rw = _complete(m)
    record = port.pin_record()
    old = record.pin
    writes, before = _surfaces(port, rw, new)
    writes.update(span_writes(port, writes, new))
    writes.update(carry_writes(port, result, "advance"))
    # What a rollback restores besides the pin surfaces: the cycle (a `sync` after the
    # advance opens the next one) and whether there was a carry-over record at all. After:
    # the ledger's length, so that a row appended later is known to be of a later cycle.
    table = port.ledger_read().table
    detail: dict[str, dict[str, object]] = {
        "before": {**old.fields(), **before, "cycle": schema.as_doc(m.cycle),
                   "carry_over": port.carry_over_path.exists()},
        "after": {**new.fields(), "oracle_env": _env_label(port, probe.env),
                  **({"ledger_rows": len(table.rows)} if table is not None else {})}}
    ev_path, ev_bytes = events.staged(
        port, "advance", pin_before=old.commit, pin_after=new.commit,
        report=port.rel(result.path), detail=json.dumps(detail, sort_keys=True))
    writes.update(report_bytes(port, result, "ADVANCED"))
    writes[ev_path] = ev_bytes
    olds = {p: (p.read_bytes() if p.exists() else b"") for p in writes}
    return Plan(old, new, m.cycle.target, result.path, writes, olds, detail, ev_path)


def _complete(m: Measured) -> tuple[syncrun.Result, Probe, pins.Pin, paragraph.Rewrite]:
    v, result, new, rw = m.verification, m.result, m.new, m.rewrite
    if v is None or result is None or new is None or rw is None:
        raise BlockedCycle("the advance was planned before its preconditions held",
                           "run 'upstream-sync advance' again")
    return result, v.probe, new, rw


def flashinfer_kept(m: Measured) -> str | None:
    """The pin's FlashInfer version where the advance keeps it as it was: the oracle at the
    target has no FlashInfer to measure (a build mode without it), so the new pin block
    says what the old one said."""
    v = m.verification
    if v is None or m.new is None or v.probe.flashinfer_version is not None:
        return None
    return m.new.flashinfer_version


def _new_pin(port: Port, m: Measured) -> pins.Pin:
    """The pin the measured oracle at the target makes: never a typed version string."""
    v = m.verification
    if v is None:
        raise BlockedCycle("the advance was planned before its preconditions held",
                           "run 'upstream-sync advance' again")
    probe = v.probe
    if probe.runtime_version is None or probe.distribution_version is None:
        raise BlockedCycle("the oracle measurement has no version strings",
                           "rebuild the oracle at the target")
    return oracle_verify.measured_pin(port, probe)  # verified at the target


def release_label(port: Port, c: cycle.Cycle, new: pins.Pin, given: str | None) -> str:
    """The release the paragraph names: given, else the tag the target came from, else the
    oracle's measured version (its public part)."""
    if given:
        return given
    tag = target_mod.tag_of(port.reference(), c)
    return tag.removeprefix("v") if tag else new.public_version


def _golden_drift(port: Port, target_sha: str) -> str | None:
    """The golden gate's measured drift at the target (shards folded), None when none ran."""
    passed = [g for g in port.gates(target_sha)
              if gate_evidence.is_golden(g.name) and g.status == "PASS"]
    details = [g.detail or "" for g in passed]
    if not details:
        return None
    if len(details) == 1:
        return details[0]
    if all(d.startswith("zero drift") for d in details):
        return f"zero drift ({len(details)} shards)"
    return "; ".join(f"{g.name} {g.detail}" for g in passed
                     if not (g.detail or "").startswith("zero drift"))


def _rewrite(port: Port, m: Measured, new: pins.Pin, given: str | None) -> paragraph.Rewrite:
    """The protocol file with the pin block and the PARITY PIN paragraph moved to `new`."""
    record = port.pin_record()
    text = pins.render(record, new)
    para = paragraph.find(text, path=port.rel(port.protocol))
    probe = m.verification.probe if m.verification is not None else None
    entries = m.result.model.entries if m.result is not None else ()
    measured = paragraph.Measured(
        date=clock.now().strftime("%Y-%m-%d"), commit=new.commit,
        release_label=release_label(port, m.cycle, new, given), prior=record.pin.commit,
        prior_label=para.release_label,
        # What the oracle measured: a FlashInfer it lacks is not named (the pin block keeps
        # the old value, `flashinfer_kept`, but the paragraph says what was measured).
        versions=(("Torch", probe.torch_version if probe else None),
                  ("FlashInfer", probe.flashinfer_version if probe else None)),
        drift=_golden_drift(port, m.cycle.target), target=m.cycle.target,
        prs=frozenset(e.pr for e in entries if e.pr is not None),
        tallies=(("commits", len(entries)),
                 *(m.result.model.counts().items() if m.result is not None else ())))
    return paragraph.rewrite(text, para, measured)


def _paragraph_unmet(port: Port, rw: paragraph.Rewrite) -> list[str]:
    """The paragraph names what this advance cannot check: it must be reworded first."""
    if not rw.unchecked:
        return []
    return [f"the PARITY PIN paragraph in {port.rel(port.protocol)} states what this advance "
            f"cannot check — reword or remove: {'; '.join(rw.unchecked)}"]


def _surfaces(port: Port, rw: paragraph.Rewrite, new: pins.Pin
              ) -> tuple[dict[Path, bytes], dict[str, str]]:
    """The protocol file (pin block and paragraph) and the core oracle file moved to `new`,
    and what the paragraph and the oracle file said before (for a rollback)."""
    today = clock.now().strftime("%Y-%m-%d")
    para = paragraph.find(port.protocol.read_text(encoding="utf-8"), path=port.rel(port.protocol))
    core = oraclefile.core(port.oracle_records(), CORE)
    if core is None:
        raise UsageError(f"no core oracle file ({CORE}.md) among {port.config.oracles}",
                         "add .agents/oracles/vllm.md")
    writes = {port.protocol: rw.text.encode(),
              core.path: oraclefile.render(core, pin=new.commit, pin_label=new.public_version,
                                           pinned_on=today).encode()}
    before = {"paragraph_date": para.date, "paragraph_sha": para.sha,
              "paragraph_label": para.release_label or "", "paragraph": rw.old,
              "oracle_pin": core.pin, "oracle_pin_label": core.pin_label,
              "oracle_pinned_on": core.pinned_on}
    return writes, before


def carry_writes(port: Port, result: syncrun.Result, by: str) -> dict[Path, bytes]:
    """The carry-over record after this advance or stall (nothing when it is unchanged)."""
    items = carry.carried_on(port, carry.Closing(
        port.rel(result.path), result.model.target, result.model.entries, result.carried,
        "advance" if by == "advance" else "stall", result.dormant))
    path = port.carry_over_path
    data = carry.record_bytes(items)
    if (path.read_bytes() if path.exists() else b"") == data or (not items and not path.exists()):
        return {}
    return {path: data}


def span_writes(port: Port, writes: dict[Path, bytes], pin: pins.Pin) -> dict[Path, bytes]:
    """Every pin span rewritten to `pin` (over `writes` already planned for the same file)."""
    out: dict[Path, bytes] = {}
    for path in spans.files(port.root, port.config.span_globs,
                             (port.config.sync_dir,)):
        current = spans.decode(writes.get(path, path.read_bytes()))
        found = spans.scan_text(current, path=path)
        if found:
            out[path] = spans.encode(spans.rewrite(current, found, commit=pin.commit,
                                                   label=pin.public_version))
    return out


def report_bytes(port: Port, result: syncrun.Result, state: report.State) -> dict[Path, bytes]:
    model = replace(result.model, state=state,
                    carry_over=tuple(x for x in result.model.carry_over
                                     if not x.startswith("- unmet: ")))
    doc = report.to_json(model, port.rel(result.path))
    return {result.path: report.render(model).encode(),
            result.json_path: report.dump_json(doc).encode()}


def diff(p: Plan, port: Port) -> str:
    return unified(port, p.writes, p.olds)


def unified(port: Port, writes: Mapping[Path, bytes | None], olds: dict[Path, bytes]) -> str:
    """The unified diff from `olds` to `writes` (`None`: removed), file by file
    (port-relative names)."""
    out: list[str] = []
    for path, data in writes.items():
        old = olds[path].decode("utf-8", "replace").splitlines(keepends=True)
        new = (data or b"").decode("utf-8", "replace").splitlines(keepends=True)
        after = f"b/{port.rel(path)}" if data is not None else "/dev/null"
        out += difflib.unified_diff(old, new, f"a/{port.rel(path)}", after)
    return "".join(out)


def fast_forward(port: Port, commit: str) -> str:
    """Move the reference checkout to the advanced pin, never with a reset (`target.move`)."""
    return target_mod.move(port.reference(), commit, port.upstream_ref)


def finish_fast_forward(port: Port, target: str, ctx: Notes | None) -> None:
    """Finish an advance that died after its records were written but before the reference
    checkout moved: the pin is the target and the checkout is clean and behind it."""
    if port.pin_record().pin.commit != target:
        return
    ref = port.reference()
    head = gitio.head_sha(ref)
    if (head in (None, target) or ref.bare or gitio.is_dirty(ref)
            or health.move_problem(ref, target, port.upstream_ref)):
        return
    how = fast_forward(port, target)
    if ctx is not None:
        ctx.note(f"finished the interrupted advance: {how} {ref.path} to {short(target)}")


@dataclass(frozen=True)
class Stalled:
    report: Path
    event: Path | None  # None: this report's stall was recorded already
    carried: int  # items in the carry-over record now
    writes: tuple[Path, ...]  # what the stall wrote (for its commit)


def stall(port: Port, ctx: Notes | None, unmet: list[str]) -> Stalled | None:
    """Mark the report STALLED, carry every open item into the record and append one stall
    event (once per report); None when there is nothing to stall (no report, or advanced)."""
    c = port.last_cycle()
    path = syncrun.report_path(port, c)
    if not path.exists() or _advanced(port.text(path) or ""):
        return None
    rel = port.rel(path)
    # One transaction for the report, the carry-over and the event (walk-s11 D7: a kill
    # after the report left it STALLED with neither, which `check` took for a hand edit).
    with port.lock():
        result = syncrun.run_cycle(port, ctx, syncrun.CycleRequest(
            state="STALLED", unmet=tuple(unmet), stage=True))
        more = carry_writes(port, result, "stall")
        event = None
        if not any(e.kind == "stall" and e.report == rel
                   for e in _since_advance(events.load_all(port))):
            pin = port.pin_record().pin
            event, data = events.staged(port, "stall", pin_before=pin.commit,
                                        pin_after=pin.commit, report=rel,
                                        detail=stall_detail(unmet))
            more[event] = data
        syncrun.commit_writes(port, result.writes, more, result.decided)
        port.forget("carried")
    written = [path, path.with_suffix(".json"), *more]
    return Stalled(path, event, len(port.carried()), tuple(dict.fromkeys(written)))


DETAIL_MAX = 2000  # characters of a stall event's detail


def stall_detail(unmet: list[str]) -> str:
    """What a stall event keeps of the unmet preconditions: whole items while they fit in
    `DETAIL_MAX`, then how many it left out (the report's Carry-over lists every one). The
    event is immutable: an item cut off mid-word there could never be completed."""
    kept: list[str] = []
    for u in unmet:
        if len(_detail([*kept, u], len(unmet) - len(kept) - 1)) > DETAIL_MAX:
            break
        kept.append(u)
    return _detail(kept, len(unmet) - len(kept))


def _detail(kept: list[str], more: int) -> str:
    tail = [f"… and {more} more (the report's Carry-over lists every one)"] if more else []
    return "; ".join(kept + tail)


def _since_advance(evs: list[events.Event]) -> list[events.Event]:
    """The events after the last advance or rollback (a rolled-back cycle may stall again)."""
    last = max((i for i, e in enumerate(evs) if e.kind in ("advance", "rollback")), default=-1)
    return evs[last + 1:]


def _advanced(report_text: str) -> bool:
    return ADVANCED.search(report_text) is not None
