"""Steps 2-4: enumerate the range, classify every commit, write the report and its JSON.

One run, in named steps: `_frame` (the pin, the reference checkout, the frozen
target), `_enumerate` (the range and the ported surface), `_classify`,
`_read_back` (hand edits of the earlier report become decisions), `_assemble`
(the report's model) and `_write`. Git work is a constant number of processes
whatever the range size: one `git log -z` for the range, one `git diff
--shortstat`, a bounded handful for ancestry, per-file pin status and patch
identity. Every record comes from the port's read model, so each is read once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sync.infra import clock, txn
from sync.infra.atomic import write_bytes
from sync.infra.errors import EnvironmentUnresolved, SyncError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle, decisions, deviations, events, gates, pins, reportdoc, schema
from sync.records.mdtext import cell
from sync.steps import audit, carry, classify, coarse, evidence, report, surface, symbols
from sync.steps import target as target_step
from sync.steps.target import Wanted, freeze
from sync.upstream import gitio, health, history
from sync.upstream.gitio import short


@dataclass(frozen=True)
class CycleRequest:
    """What a caller asks of one run; the defaults are a plain `sync`.

    `state` and `unmet` come from `advance`: a refused advance marks the report STALLED
    and lists the unmet preconditions in its carry-over until a later advance clears them.
    `decided_now` (from `decide`) is never read back from the old report line.
    """

    target: str | None = None
    retarget: bool = False
    allow_divergent: bool = False
    write_report: bool = True  # False: build the model only (advance's preconditions)
    state: report.State | None = None
    unmet: tuple[str, ...] | None = None
    decided_now: str | None = None
    # The decisions the port holds (`decide` kept its new one) are written with the report,
    # in its transaction: a kill between them would leave a decision the report lacks.
    save_decisions: bool = False
    # Plan the writes (`Result.writes`) but leave them to the caller, which holds the lock
    # and commits them with its own records in one transaction (`commit_writes`).
    stage: bool = False


@dataclass(frozen=True)
class Result:
    model: report.Model
    path: Path
    json_path: Path
    nothing: bool = False
    warnings: tuple[str, ...] = ()  # the unusable checkouts' lines among them
    new_decisions: int = 0
    carried: tuple[carry.Imported, ...] = ()  # the carry-over record's still-open items
    dormant: tuple[str, ...] = ()  # carried commits after the target: owed by a later cycle
    writes: dict[Path, str] = field(default_factory=dict)  # staged: the records to write
    decided: dict[str, decisions.Decision] | None = None  # staged: the decisions written
    # Configured checkouts of other oracles the audit could not use (`audit.Audit`): in
    # `sync --json`'s document, not in the report, which does not depend on the machine.
    unusable_checkouts: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Frame:
    """Where the run stands: the reference checkout, the pin and the frozen cycle."""

    ref: gitio.Reference
    pin: pins.Pin
    cycle: cycle.Cycle
    path: Path  # the cycle's report


@dataclass(frozen=True)
class _Range:
    commits: list[history.Commit]
    stats: gitio.Started  # the range's `git diff --shortstat`, read when the report is made
    surf: surface.Surface
    divergent: bool
    symbols: evidence.Pass
    tree: gitio.Started  # the checkout's `git status`, begun with the range's log


@dataclass(frozen=True)
class _Earlier:
    """What the report's earlier version leaves this run (nothing when there is none)."""

    back: report.ReadBack | None
    entries: list[classify.Entry]  # classified with the hand edits as decisions
    decided: dict[str, decisions.Decision] = field(default_factory=dict)
    new: int = 0  # hand edits read back into `decided`
    state: report.State = "ACTIVE"  # the state it leaves the report in (`_kept_state`)
    state_warning: str | None = None


def report_path(port: Port, c: cycle.Cycle) -> Path:
    return port.sync_dir / cycle.report_name(c)


def moves(commits: list[history.Commit], surf: surface.Surface,
          entries: list[classify.Entry] | None = None) -> tuple[report.Move, ...]:
    """Renames and deletions of cited paths, then of cited definitions (from the symbol pass).
    A path a later commit of the range brings back (renamed back, re-added) is no move at
    the target (walk-s11 D9: "re-point the citation" of a path the target has)."""
    back = {ch.path: i for i, c in enumerate(commits) for ch in c.changes
            if ch.status in ("A", "R", "C")}
    out = [m for i, c in enumerate(commits) for ch in c.changes
           if back.get(ch.old_path or ch.path, -1) <= i and (m := _move(c, ch, surf))]
    return tuple(out) + _deleted_definitions(entries or [])


def _move(c: history.Commit, ch: history.Change, surf: surface.Surface) -> report.Move | None:
    """The move of a cited path one change makes (a deletion or a rename), if any."""
    if ch.status == "D" and surf.citing(ch.path):
        return report.Move(ch.path, "deleted", None, c.sha, c.pr, surf.citing(ch.path))
    back = surf.named(ch.path) and not surf.named(ch.old_path)  # to where a citation points
    if ch.status == "R" and ch.old_path and surf.citing(ch.old_path) and not back:
        return report.Move(ch.old_path, "renamed", ch.path, c.sha, c.pr,
                           surf.citing(ch.old_path))
    return None


def _deleted_definitions(entries: list[classify.Entry]) -> tuple[report.Move, ...]:
    """`path::Sym` of each definition a citation names by `::Sym` and a commit deletes (a whole
    deleted file is above). A definition removed from a file cited whole, or around the
    lines a line range cites, was never named by the port: not listed."""
    out: dict[tuple[str, str], set[str]] = {}
    prs: dict[str, int | None] = {}
    for e in entries:
        for v in e.evidence.verdicts if e.evidence is not None else ():
            if (v.outcome == "deleted" and v.cited.how == "symbols"
                    and v.cited.cite.path == v.path):
                for unit in (u for u in v.units if not symbols.internal(u)):
                    out.setdefault((e.sha, f"{v.path}::{unit}"), set()).add(v.cited.cite.port_file)
                    prs[e.sha] = e.pr
    deleted_files = {(e.sha, p) for e in entries if e.evidence is not None
                     for fc in e.evidence.files if fc.status == "D" for p in [fc.path]}
    return tuple(report.Move(path, "deleted", None, sha, prs[sha], tuple(sorted(files)))
                 for (sha, path), files in out.items()
                 if (sha, path.split("::", 1)[0]) not in deleted_files)


def staged_refresh(port: Port, notes: Notes | None = None) -> Result | None:
    """The open cycle's report rewritten after a record it reads changed (a ledger row, an
    inventory annotation, a gate), planned only (`CycleRequest.stage`): a caller that holds
    the lock and changed that record (held by the port as it will be written) commits the
    run's writes with it, in one transaction (`commit_writes`). None when no cycle is open
    or its report was never written (the next `sync` writes it)."""
    return _rerun(port, notes, CycleRequest(stage=True))


def _rerun(port: Port, notes: Notes | None, request: CycleRequest) -> Result | None:
    c = port.live_cycle()
    if c is None or not report_path(port, c).exists():
        return None
    return run_cycle(port, notes, request)


def run_cycle(port: Port, notes: Notes | None = None,
              request: CycleRequest | None = None) -> Result:
    """Enumerate, classify and (unless `request.write_report` is False) write the report.

    A run that writes holds the port lock throughout: the decisions it classifies with,
    and saves hand edits into, are read under the lock they are saved under, so a
    concurrent `decide` is refused (exit 6, nothing written) rather than lost.
    """
    req = request or CycleRequest()
    if not req.write_report or req.stage:  # a stage's caller holds the lock
        return _run(port, notes, req)
    with port.lock():
        return _run(port, notes, req)


def _run(port: Port, notes: Notes | None, req: CycleRequest) -> Result:
    frame = _frame(port, notes, req)
    if frame.cycle.target == frame.pin.commit:
        # No range, but this machine's checkouts are what they are: warned of, and in
        # `sync --json`'s document, as on a run with commits.
        unusable = audit.unusable_checkouts(port, surface.build(port))
        return Result(_empty_model(frame), frame.path, frame.path.with_suffix(".json"),
                      nothing=True, warnings=unusable, unusable_checkouts=unusable)
    rng = _enumerate(port, frame, notes)
    if notes is not None:
        notes.progress(f"classifying {len(rng.commits)} commits against the ported surface")
    earlier = _read_back(port, frame, rng, req.decided_now)
    got = carry.imported(port, frame.ref, rng.surf, earlier.entries, frame.cycle.target,
                         port.rel(frame.path))
    warnings = _warnings(port, port.rel(frame.path), earlier, req, got.dormant,
                         frame.cycle.target)
    model, unusable = _assemble(port, frame, rng, earlier, req, got.owed)
    warnings += unusable  # their citations show as "not verified here"
    writes: dict[Path, str] = {}
    decided = earlier.decided if earlier.new or req.save_decisions else None
    if req.write_report:
        writes = _planned(port, frame.path, model, decided)
        if not req.stage:
            commit_writes(port, writes, {}, decided)
    return Result(model, frame.path, frame.path.with_suffix(".json"), warnings=warnings,
                  new_decisions=earlier.new if req.write_report else 0,
                  carried=tuple(got.owed), dormant=got.dormant, writes=writes, decided=decided,
                  unusable_checkouts=unusable)


def _warnings(port: Port, rel: str, earlier: _Earlier, req: CycleRequest,
              dormant: tuple[str, ...], target: str) -> tuple[str, ...]:
    warnings = _unparsed_warnings(rel, earlier.back)
    # The report's carry-over says it too; a run that exits 0 must say it where one looks.
    ledger = port.ledger_read().unreadable(LEDGER_UNREAD)
    if ledger is not None:
        warnings += (ledger,)
    if earlier.state_warning is not None and req.state is None:
        warnings += (earlier.state_warning,)
    if dormant:
        warnings += (f"{len(dormant)} carried commit(s) come after the target {short(target)} "
                     f"({', '.join(short(s) for s in dormant[:3])}"
                     f"{' …' if len(dormant) > 3 else ''}): not owed by this cycle, they "
                     "stay in the carry-over record until a target includes them",)
    return warnings


LEDGER_UNREAD = "every PORT-NOW commit shows as open in the report, as no row can be checked"


def _unparsed_warnings(rel: str, back: report.ReadBack | None) -> tuple[str, ...]:
    if back is None:
        return ()
    return tuple(f"{rel}: kept an unparseable line verbatim{back.reason(line)}: {line[:80]}"
                 for line in back.unparsed)


def _frame(port: Port, notes: Notes | None, req: CycleRequest) -> _Frame:
    """The pin (which must be in the reference checkout) and the cycle's frozen target."""
    ref = port.reference()
    pin = port.pin_record().pin
    if not gitio.has_commit(ref, pin.commit):
        # The checkout, not the command line, is what is wrong: the same code `status` uses.
        raise EnvironmentUnresolved(
            f"the pin {short(pin.commit)} is not in the reference checkout {ref.path}",
            "run 'upstream-sync fetch' (or fetch the pin's branch) first")
    wanted = Wanted(pin.commit, req.target, req.retarget, req.allow_divergent)
    sha, accepted = target_step.peek(port, ref, wanted)
    if not accepted:
        target_step.refuse_off_line(ref, pin.commit, sha, allow_divergent=req.allow_divergent)
    _readable(ref, pin.commit, sha)
    frozen = freeze(port, ref, wanted)
    c = frozen.cycle
    if frozen.moved and notes is not None:
        notes.note(target_step.moved_note(ref, "the remote", frozen.moved, c.target,
                                          pin.commit))
    return _Frame(ref, pin, c, report_path(port, c))


def _readable(ref: gitio.Reference, pin: str, target: str) -> None:
    """Refuse, before a target is frozen (and cycle.toml written), a checkout that cannot
    read the objects of pin..target, with the fix."""
    if target == pin:
        return
    error = health.objects_error(health.objects(ref, pin, target), ref.path, pin, target)
    if error is not None:
        raise error


def _enumerate(port: Port, frame: _Frame, notes: Notes | None) -> _Range:
    """The range's commits and stats, and the ported surface they are classified against."""
    ref, base, target = frame.ref, frame.pin.commit, frame.cycle.target
    divergent = not gitio.is_ancestor(ref, base, target)  # accepted by `_frame` already
    if notes is not None:
        notes.progress(f"enumerating {short(base)}..{short(target)} in {ref.path}")
    # git enumerates while Python reads the port's headers: the two overlap on 2 cores.
    # The range's stats and the checkout's status too, read only when the report is
    # assembled: with rename detection over the whole range, the stats take longer than
    # the log and the cached headers together.
    log_job = history.begin_log(ref, base, target)
    stats_job = history.begin_stats(ref, base, target)
    tree_job = health.begin_tree(ref)
    surf = surface.build(port)
    commits = history.finish_log(log_job)
    surf = surface.in_range(surf, commits)
    # The symbol pass: one patch listing and one blob read, whatever the range.
    found = evidence.gather(ref, commits, surf, base, notes)
    return _Range(commits, stats_job, surf, divergent, found, tree_job)


def _classify(port: Port, rng: _Range,
              decided: dict[str, decisions.Decision]) -> list[classify.Entry]:
    return classify.classify(rng.commits, classify.Inputs(rng.surf, port.config.rules, decided,
                                                          rng.symbols))


def _read_back(port: Port, frame: _Frame, rng: _Range, decided_now: str | None) -> _Earlier:
    """Classify; when the report exists, its hand-edited entry lines become decisions first."""
    decided = port.decisions()
    entries = _classify(port, rng, decided)
    text = port.text(frame.path)
    if text is None:
        return _Earlier(None, entries)
    schema.refuse_conflict(text, port.rel(frame.path))
    reportdoc.refuse_cut_short(text, port.rel(frame.path))
    prefixes = {short(e.sha): report.entry_prefix(e) for e in entries}
    back = report.read_back(text, prefixes)
    written = (_previous_lines(port, frame.path.with_suffix(".json"))
               if _edited(back, entries) else {})
    new = _hand_edits(back, _LastRun(frame.path.name, entries, written, decided_now), decided)
    if new:
        entries = _classify(port, rng, decided)
    state, warning = _kept_state(port, frame.path, back)
    return _Earlier(back, entries, decided, new, state, warning)


@dataclass(frozen=True)
class _LastRun:
    """What tells a hand edit from a line the last run wrote."""

    report_name: str
    entries: list[classify.Entry]
    written: dict[str, str]  # sha -> its entry line as the last run wrote it
    decided_now: str | None


def _hand_edits(back: report.ReadBack, seen: _LastRun,
                decided: dict[str, decisions.Decision]) -> int:
    """Record, in `decided`, every entry line edited by hand since the last run; count them.

    A hand edit is a line that differs from what the last run wrote (its JSON companion),
    not from what this run would write: a `decide` since then changes the rendering
    without anyone editing the report.
    """
    by_prefix = {short(e.sha): e for e in seen.entries}
    new = 0
    for pe in back.entries:
        e = by_prefix[short(pe.sha_prefix)]
        last = seen.written.get(e.sha, report.entry_line(e))
        # A line that reads back as the one written (an earlier version's escaping, or its
        # spaces moved by an editor's wrap) is no edit.
        if e.sha == seen.decided_now or _reads_as(pe.line, last):
            continue
        if pe.auto_rule is not None and (pe.disposition, pe.reason) == (e.disposition, e.reason):
            continue  # only the escaping or the auto tag's text differs: nothing was decided
        # The day is read only for an edit: a run that finds none can be replayed (memo).
        today = clock.now().strftime("%Y-%m-%d")
        decided[e.sha] = decisions.Decision(e.sha, pe.disposition, pe.reason,
                                            f"hand edit of {seen.report_name}", today, e.subject)
        new += 1
    return new


def _edited(back: report.ReadBack, entries: list[classify.Entry]) -> bool:
    """Whether a line of the report reads other than this run would write it. When none
    does, none can be a hand edit that decides anything (an auto line as written decides
    nothing; a decided one says its decision): the last run's JSON, all of it, need not be
    read to rebuild the lines it wrote (a tenth of a 3,000-commit re-run)."""
    now = {short(e.sha): e for e in entries}
    return not all(_reads_as(pe.line, report.entry_line(now[short(pe.sha_prefix)]))
                   for pe in back.entries)


def _reads_as(line: str, written: str) -> bool:
    """Whether a report line reads back as `written`: unescaped, its whitespace aside (what
    a hand edit must change to decide anything)."""
    return "".join(report.unescape(line).split()) == "".join(report.unescape(written).split())


def _previous_lines(port: Port, json_path: Path) -> dict[str, str]:
    """Entry lines as the last run wrote them, rebuilt from its JSON companion."""
    try:
        doc = json.loads(port.text(json_path) or "")
        return {d["sha"]: report.entry_line(classify.Entry(
            d["sha"], d["pr"], d["subject"], d["disposition"], d["reason"], d["rule"], d["auto"],
            tuple(d["upstream_paths"]), tuple(d["port_files"]))) for d in doc["entries"]}
    except (OSError, ValueError, KeyError, TypeError, RecursionError, SyncError):
        return {}


def _assemble(port: Port, frame: _Frame, rng: _Range, earlier: _Earlier, req: CycleRequest,
              carried: list[carry.Imported]) -> tuple[report.Model, tuple[str, ...]]:
    """The report's model, and the other oracles' checkouts its audit could not use."""
    c, back, entries = frame.cycle, earlier.back, earlier.entries
    pins = audit.run_audit(port, frame.ref, frame.pin.commit, port.upstream_ref, rng.surf)
    pins_summary = audit.summary_lines(pins)
    inv = port.inventory()
    touched = deviations.touched(inv, rng.commits, rng.surf) if inv is not None else []
    recorded = port.gates(c.target)
    return report.Model(
        date=c.frozen_at[:10], pin=frame.pin.commit, pin_runtime=frame.pin.runtime_version,
        target=c.target, target_ref=c.target_ref,
        reference_head=gitio.head_sha(frame.ref) or "",
        reference_dirty=not (state := _reference_state(port, frame, rng.tree)).startswith("clean"),
        reference_state=state,
        stats=history.finish_stats(rng.stats, len(rng.commits)), state=req.state or earlier.state,
        entries=tuple(entries),
        reverts=tuple(sorted(history.find_reverts(rng.commits).items())),
        duplicates=tuple(history.find_duplicates(frame.ref, rng.commits)),
        moves=moves(rng.commits, rng.surf, entries),
        coarse=coarse.find(entries, lambda rel: _port_text(port, rel)),
        deviations=tuple(touched),
        inventory_missing=None if inv is not None else port.config.inventory,
        file_pins=pins_summary.lines + watched_lines(rng.commits, rng.surf),
        file_pin_counts=pins_summary.counts,
        gates=tuple(gates.render_section(recorded).splitlines()),
        gate_docs=tuple(g.as_doc() for g in recorded),
        carry_over=_carry_over(port, c, entries, recorded, carried, _unmet_lines(back, req)),
        carried=tuple(i.doc() for i in carried),
        unparsed=back.unparsed if back else (), notes=back.notes if back else "",
        enumerated=len(rng.commits), divergent=rng.divergent,
        target_from=target_step.provenance(frame.ref, c, port.upstream_ref).describe(),
        others=other_reports(port, frame.path, c.target),
    ), pins.unusable_checkouts


def _port_text(port: Port, rel: str) -> str | None:
    """A port file's text, for the names a coarse citation's port file holds."""
    try:
        return (port.root / rel).read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def watched_lines(commits: list[history.Commit], surf: surface.Surface) -> tuple[str, ...]:
    """Upstream paths that original files say their semantics mirror, changed in the range:
    references to re-read, never PORT-NOW on their own."""
    changed: dict[str, list[str]] = {}
    for c in commits:
        for path in c.paths:
            if path in surf.watched:
                changed.setdefault(path, []).append(short(c.sha))
    return tuple(f"- watched `{path}` changed in {', '.join(f'`{s}`' for s in shas)}; the "
                 f"original file(s) {', '.join(surf.watched[path])} mirror its semantics"
                 for path, shas in sorted(changed.items()))


def _reference_state(port: Port, frame: _Frame, tree: gitio.Started) -> str:
    """The checkout's work tree (`tree`: its status, begun earlier) and its upstream branch
    against the pin (its objects were checked before the target was frozen)."""
    t = health.finish_tree(frame.ref, tree)
    u = health.upstream(frame.ref, frame.pin.commit, port.upstream_ref)
    state = t.describe()
    if u.relation == "behind":
        state += f"; {u.ref} is {u.commits} commit(s) older than the pin"
    elif u.relation == "diverged":
        state += f"; {u.ref} does not descend from the pin"
    return state


def _kept_state(port: Port, path: Path, back: report.ReadBack | None) -> tuple[
        report.State, str | None]:
    """The state an earlier version of the report leaves it in, and a warning when it is
    not kept: STALLED and ADVANCED stay when the state events record them (a hand edit
    alone would wedge the cycle: advance refuses an advanced one); a report that is the
    cycle's again (a retarget back to its target) is ACTIVE."""
    if back is None or back.state not in ("STALLED", "ADVANCED"):
        return "ACTIVE", None
    rel = port.rel(path)
    try:
        evs = events.load_all(port)
    except SyncError:
        return back.state, None  # check says what is wrong with the events
    if events.backs(evs, rel, back.state):
        return back.state, None
    return "ACTIVE", (f"{rel} said '- Cycle state: {back.state}', which no state event "
                      "records (a hand edit?): written as ACTIVE")


_HEX = re.compile(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])")


def other_reports(port: Port, current: Path, target_sha: str) -> tuple[tuple[str, bool], ...]:
    """Other markdown files in the sync directory that name the same target (in their name
    or their text), and whether each was written by hand (no JSON companion of ours)."""
    out = []
    for path in sorted(port.sync_dir.glob("*.md")) if port.sync_dir.is_dir() else []:
        if path == current or not path.is_file():
            continue
        ours = _ours(port, path)
        # Our own reports are named by their target; one written by hand may only say it.
        named = path.stem.endswith("-" + target_sha[:7]) or (not ours and any(
            target_sha.startswith(h) for h in _HEX.findall(port.text(path) or "")))
        if named:
            out.append((path.name, not ours))
    return tuple(out)


def _ours(port: Port, path: Path) -> bool:
    """The report has the JSON companion `sync` writes beside every report."""
    try:
        doc = json.loads(port.text(path.with_suffix(".json")) or "")
    except ValueError:
        return False
    return isinstance(doc, dict) and "schema" in doc and "entries" in doc


def _carry_over(port: Port, c: cycle.Cycle, entries: list[classify.Entry],
                recorded: list[gates.GateResult], carried: list[carry.Imported],
                unmet: list[str]) -> tuple[str, ...]:
    """The section: a stall's unmet lines, then what the cycle owes; a gate or a PORT-NOW
    commit an unmet line names already (`gate golden is FAIL`, "PORT-NOW `x` has no ledger
    row") is not listed a second time."""
    named = {g.name for g in recorded for u in unmet
             if u.startswith(f"- unmet: gate {cell(g.name)} ")}
    owed = [g for g in recorded if g.name not in named]
    said = tuple(f"- PORT-NOW open: `{m[1]}`" for u in unmet if (m := _UNMET_PORT_NOW.match(u)))
    return tuple(unmet + [line for line in carry.lines(port, c, entries, owed, carried)
                          if not line.startswith(said)])


# The advance's line for an unported PORT-NOW commit (`advance._unported`), in a stall's list.
_UNMET_PORT_NOW = re.compile(r"- unmet: PORT-NOW `([0-9a-f]{7,40})` ")


def _unmet_lines(back: report.ReadBack | None, req: CycleRequest) -> list[str]:
    """A refused advance's preconditions: given now, else kept while the cycle is STALLED."""
    if req.unmet is not None:
        unmet = req.unmet
    else:
        unmet = back.unmet if back and back.state == "STALLED" else ()
    # Preconditions quote what they measured (error text, paths): escaped, code spans kept.
    return [f"- unmet: {cell(u)}" for u in unmet]


def _planned(port: Port, path: Path, model: report.Model,
             decided: dict[str, decisions.Decision] | None) -> dict[Path, str]:
    """The report and its JSON, each only when its text changed, and (`decided`: a decision
    was made) the decisions record."""
    jpath = path.with_suffix(".json")
    texts = {path: report.render(model),
             jpath: report.dump_json(report.to_json(model, port.rel(path)))}
    changed = {t: text for t, text in texts.items() if port.text(t) != text}
    if decided is None:
        return changed
    return {port.decisions_path: decisions.render(decided), **changed}


def commit_writes(port: Port, writes: dict[Path, str], more: dict[Path, bytes],
                  decided: dict[str, decisions.Decision] | None) -> None:
    """Write a run's records (and a caller's `more`): more than one file in one transaction
    (walk-s11 D7: a kill between them left a decision the report did not show, a .md its
    .json contradicted, or a STALLED report with no carry-over or event)."""
    data = {**{t: text.encode("utf-8") for t, text in writes.items()}, **more}
    with port.lock():
        if len(data) > 1:
            txn.commit(port.sync_dir, data)
        elif data:
            ((target, raw),) = data.items()
            write_bytes(target, raw)
        for target, text in writes.items():
            port.wrote(target, text)
        if decided is not None:
            port.keep("decisions", decided)


def _empty_model(frame: _Frame) -> report.Model:
    c, pin, ref = frame.cycle, frame.pin, frame.ref
    return report.Model(c.frozen_at[:10], pin.commit, pin.runtime_version, c.target,
                        c.target_ref, gitio.head_sha(ref) or "",
                        gitio.is_dirty(ref), history.RangeStats(0, 0, 0, 0), "ACTIVE", ())
