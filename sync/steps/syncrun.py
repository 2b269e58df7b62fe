"""Steps 2-4: enumerate the range, classify every commit, write the report and its JSON.

Git work is a constant number of processes whatever the range size: one
`git log -z` for the range, one `git diff --shortstat`, a bounded handful for
ancestry, per-file pin status and patch identity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sync.infra.atomic import read_text, write_text
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle, decisions, deviations, gates, pins
from sync.steps import audit, carry, classify, report, surface
from sync.steps.target import freeze
from sync.upstream import gitio, history


@dataclass(frozen=True)
class Result:
    model: report.Model
    path: Path
    json_path: Path
    nothing: bool = False
    warnings: tuple[str, ...] = ()
    new_decisions: int = 0


def report_path(port: Port, c: cycle.Cycle) -> Path:
    return port.sync_dir / cycle.report_name(c)


def moves(commits: list[history.Commit], surf: surface.Surface) -> tuple[report.Move, ...]:
    out = []
    for c in commits:
        for ch in c.changes:
            if ch.status == "D" and ch.path in surf.by_upstream:
                out.append(report.Move(ch.path, "deleted", None, c.sha, c.pr,
                                       surf.by_upstream[ch.path]))
            elif ch.status == "R" and ch.old_path in surf.by_upstream and ch.old_path:
                out.append(report.Move(ch.old_path, "renamed", ch.path, c.sha, c.pr,
                                       surf.by_upstream[ch.old_path]))
    return tuple(out)


def run_cycle(port: Port, ctx: Notes | None = None, *, target: str | None = None,
              retarget: bool = False, allow_divergent: bool = False,
              write_report: bool = True, state: report.State | None = None,
              unmet: tuple[str, ...] | None = None,
              decided_now: str | None = None) -> Result:
    """Enumerate, classify and (unless `write_report` is False) write the report.

    `state` and `unmet` come from `advance`: a refused advance marks the report STALLED
    and lists the unmet preconditions in its carry-over until a later advance clears them.
    `decided_now` (from `decide`) is never read back from the old report line.
    """
    prefs = port.preferences()
    ref = port.reference()
    pin = port.pin_record().pin
    if not gitio.has_commit(ref, pin.commit):
        # The checkout, not the command line, is what is wrong: the same code `status` uses.
        raise EnvironmentUnresolved(
            f"the pin {pin.commit[:10]} is not in the reference checkout {ref.path}",
            "run 'upstream-sync fetch' (or fetch the pin's branch) first")
    frozen = freeze(port, ref, prefs, pin.commit, target, retarget)
    c = frozen.cycle
    if frozen.moved and ctx is not None:
        ctx.note(f"the remote moved to {frozen.moved[:10]}; this cycle keeps its target "
                 f"{c.target[:10]} (pass --retarget to move it)")
    if c.target == pin.commit:
        return Result(_empty_model(port, pin, c, ref), report_path(port, c),
                      report_path(port, c).with_suffix(".json"), nothing=True)
    divergent = not gitio.is_ancestor(ref, pin.commit, c.target)
    if divergent and not allow_divergent:
        raise UsageError(f"target {c.target[:10]} does not descend from the pin {pin.commit[:10]}",
                         "pick a target on the pin's line, or pass --allow-divergent")
    if ctx is not None:
        ctx.progress(f"enumerating {pin.commit[:10]}..{c.target[:10]} in {ref.path}")
    # git enumerates while Python reads the port's headers: the two overlap on 2 cores.
    log_job = history.begin_log(ref, pin.commit, c.target)
    stats_job = history.begin_stats(ref, pin.commit, c.target)
    surf = surface.build(port)
    commits = history.finish_log(log_job)
    stats = history.finish_stats(stats_job, len(commits))
    if ctx is not None:
        ctx.progress(f"classifying {len(commits)} commits against the ported surface")
    dec_path = port.sync_dir / decisions.FILE
    decided = decisions.load(dec_path, rel=port.rel(dec_path))
    rules = port.config.rules
    entries = classify.classify(commits, surf, rules, decided)
    path = report_path(port, c)
    back = None
    if path.exists():
        prefixes = {e.sha[: report.SHA_LEN]: report.entry_prefix(e) for e in entries}
        back = report.read_back(read_text(path), prefixes)
    new = _hand_edits(back, path, entries, decided, decided_now) if back is not None else 0
    if new:
        entries = classify.classify(commits, surf, rules, decided)
    warnings = tuple(f"{port.rel(path)}: kept an unparseable line verbatim: {line[:80]}"
                     for line in (back.unparsed if back is not None else ()))
    pins_summary = audit.summary_lines(
        audit.run_audit(port, ref, pin.commit, f"{prefs.remote}/{prefs.branch}", surf))
    model = report.Model(
        date=c.frozen_at[:10], pin=pin.commit, pin_runtime=pin.runtime_version, target=c.target,
        target_ref=c.target_ref,
        reference_head=gitio.head_sha(ref) or "", reference_dirty=gitio.is_dirty(ref),
        stats=stats, state=state or (back.state if back and back.state else "ACTIVE"),
        entries=tuple(entries),
        reverts=tuple(sorted(history.find_reverts(commits).items())),
        duplicates=tuple(history.find_duplicates(ref, commits)),
        moves=moves(commits, surf),
        deviations=tuple(deviations.deviations_touched(port, commits, surf)),
        file_pins=pins_summary.lines, file_pin_counts=pins_summary.counts,
        gates=tuple(gates.render_section(gates.load(port, c.target)).splitlines()),
        gate_docs=tuple(g.as_doc() for g in gates.load(port, c.target)),
        carry_over=tuple(
            [f"- unmet: {u}" for u in (unmet if unmet is not None else
                                       back.unmet if back and back.state == "STALLED" else ())]
            + carry.lines(port, c, entries)),
        unparsed=back.unparsed if back else (), notes=back.notes if back else "",
        enumerated=len(commits), divergent=divergent,
    )
    if not write_report:
        return Result(model, path, path.with_suffix(".json"), warnings=warnings)
    with port.lock():
        if new:
            decisions.save(dec_path, decided)
        write(port, path, model)
    return Result(model, path, path.with_suffix(".json"), warnings=warnings,
                  new_decisions=new)


def _hand_edits(back: report.ReadBack, path: Path, entries: list[classify.Entry],
                decided: dict[str, decisions.Decision], decided_now: str | None) -> int:
    """Record, in `decided`, every entry line edited by hand since the last run; count them.

    A hand edit is a line that differs from what the last run wrote (its JSON companion),
    not from what this run would write: a `decide` since then changes the rendering
    without anyone editing the report.
    """
    by_prefix = {e.sha[: report.SHA_LEN]: e for e in entries}
    written = _previous_lines(path.with_suffix(".json"))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    new = 0
    for pe in back.entries:
        e = by_prefix[pe.sha_prefix[: report.SHA_LEN]]
        if e.sha == decided_now or pe.line == written.get(e.sha, report.entry_line(e)):
            continue
        if pe.auto_rule is not None and (pe.disposition, pe.reason) == (e.disposition, e.reason):
            continue  # only the escaping or the auto tag's text differs: nothing was decided
        decided[e.sha] = decisions.Decision(e.sha, pe.disposition, pe.reason,
                                            f"hand edit of {path.name}", today, e.subject)
        new += 1
    return new


def _previous_lines(json_path: Path) -> dict[str, str]:
    """Entry lines as the last run wrote them, rebuilt from its JSON companion."""
    try:
        doc = json.loads(read_text(json_path))
        return {d["sha"]: report.entry_line(classify.Entry(
            d["sha"], d["pr"], d["subject"], d["disposition"], d["reason"], d["rule"], d["auto"],
            tuple(d["upstream_paths"]), tuple(d["port_files"]))) for d in doc["entries"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def write(port: Port, path: Path, model: report.Model) -> None:
    text = report.render(model)
    doc = report.to_json(model, port.rel(path))
    if not path.exists() or read_text(path) != text:
        write_text(path, text)
    body = report.dump_json(doc)
    jpath = path.with_suffix(".json")
    if not jpath.exists() or read_text(jpath) != body:
        write_text(jpath, body)


def _empty_model(port: Port, pin: pins.Pin, c: cycle.Cycle, ref: gitio.Reference) -> report.Model:
    return report.Model(c.frozen_at[:10], pin.commit, pin.runtime_version, c.target,
                        c.target_ref, gitio.head_sha(ref) or "",
                        gitio.is_dirty(ref), history.RangeStats(0, 0, 0, 0), "ACTIVE", ())
