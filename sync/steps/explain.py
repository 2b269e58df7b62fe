"""`explain`: how one commit of the open cycle (or carried into it) was classified.

The derivation is recomputed, not read from the report: the decision (if any), each
rule in order with why it does not match, the paths the commit changes (cited, only
mentioned, or not), and per cited path the hunks with their line ranges, the definitions they
change, and each citation (port file:line) they were compared with and its verdict.
Git: one `git log -z` for the cycle's range (and one for the commits carried into it),
one patch listing and one blob read for the commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sync.infra.errors import SyncError, UsageError
from sync.infra.notes import Notes
from sync.port import Port
from sync.records import cycle
from sync.records.config import Rule
from sync.records.decisions import Decision
from sync.records.mdtext import flat
from sync.steps import classify, coarse, evidence, pick, queue, report, surface, symbols
from sync.steps.classify import Entry, Verdict
from sync.upstream import gitio, history, patch
from sync.upstream.gitio import short


@dataclass(frozen=True)
class Derivation:
    commit: history.Commit
    index: int  # 1-based position in the range
    total: int
    pin: str
    target: str
    decision: Decision | None
    # (rule id, why it does not match (None: it matches), what made it match)
    rules: tuple[tuple[str, str | None, str], ...]
    cited: tuple[str, ...]  # changed paths some port file cites
    entry: Entry
    git_processes: int
    carried_since: str | None = None  # outside the range: the report that carried it in
    mentioned: tuple[str, ...] = ()  # of `cited`, those port files only mention (`See x.py`)


def derive(port: Port, which: str, notes: Notes | None = None) -> Derivation:
    """How a commit of the range was classified; or one an earlier cycle carried into it,
    classified as `sync` classifies those (its decision, else what the record says)."""
    before = gitio.PROCESS_COUNT
    c = port.open_cycle()
    pin = port.pin_record().pin.commit
    ref = port.reference()
    named = pick.nameable(port)
    try:
        i = pick.index(named.all, which, carried=bool(named.carried))
    except UsageError as exc:
        raise _earlier(port, which, c) or exc from None
    commit, commits = named.all[i], named.range
    # Aliased over the whole range, as `sync` files them, so both read a commit alike.
    surf = surface.in_range(surface.build(port), commits)
    found = evidence.gather(ref, [commit], surf, pin, notes)
    decided = port.decisions()
    record = port.carried().get(commit.sha) if i >= len(commits) else None
    rules = port.config.rules if record is None else ()
    if record is not None and commit.sha not in decided:
        decided = {**decided, commit.sha: Decision(commit.sha, record.disposition,
                                                   record.reason, by="the carry-over record")}
    entry = classify.classify_one(commit, classify.Inputs(surf, rules, decided, found))
    cited = surf.ported(commit.paths)
    return Derivation(commit, i + 1, len(commits), pin, c.target, decided.get(commit.sha),
                      tuple(_rule(r, commit) for r in rules), cited, entry,
                      gitio.PROCESS_COUNT - before,
                      record.since if record is not None else None, _mentioned(entry, cited))


def _mentioned(entry: Entry, cited: tuple[str, ...]) -> tuple[str, ...]:
    """The cited paths port files only mention (queue's "mentioned only")."""
    verdicts = entry.evidence.verdicts if entry.evidence is not None else ()
    only = classify.mentioned_only((v.path, v.outcome) for v in verdicts)
    return tuple(p for p in cited if p in only)


def _earlier(port: Port, which: str, c: cycle.Cycle) -> UsageError | None:
    """The refusal for a commit of an earlier cycle's report, saying which report and how
    it was classified there (explain recomputes only the open cycle's commits)."""
    reports = [p for p in sorted(port.sync_dir.glob("*.json"), reverse=True)
               if cycle.REPORT_NAME.fullmatch(p.with_suffix(".md").name)
               and p.with_suffix(".md").name != cycle.report_name(c)]
    for path in reports:
        try:
            entries = queue.entries_from_json(port.text(path) or "", path=port.rel(path))[2]
        except SyncError:
            continue
        try:
            hit = entries[pick.index(entries, which)]  # the key read as for the range
        except UsageError:
            continue
        rel = port.rel(path.with_suffix(".md"))
        return UsageError(f"commit {short(hit.sha)} is not in the open cycle: it is an entry "
                          f"of the earlier report {rel}, as {hit.disposition}",
                          "read that report for how it was classified; explain recomputes "
                          "the open cycle's commits only")
    return None


# -- rendering ------------------------------------------------------------------------------------


def _hunk_units(h: patch.Hunk, fc: evidence.FileChange) -> list[str]:
    names = [u.name for u in fc.units
             if set(u.old_lines) & set(h.deleted) or set(u.new_lines) & set(h.added)]
    return names or (["blank lines only"] if fc.fallback is None else [])


def _lines(lines: tuple[int, ...]) -> str:
    return ",".join(report.line_runs(lines))


def _unit_line(u: symbols.UnitChange) -> str:
    spans = []
    for side, span in (("old", u.old_span), ("new", u.new_span)):
        if span is not None:
            spans.append(f"{side} {span[0]}-{span[1]}")
    detail = f": {u.detail}" if u.detail else ""
    return f"{u.name} [{u.kind}] {u.change}{detail} ({', '.join(spans)})"


def _verdict_lines(v: Verdict) -> list[str]:
    c = v.cited
    read = f", read at {c.at}" if c.at else ""
    names = f"; names {', '.join(c.names)}" if c.names else ""
    out = [f"      {c.cite.where()} ({c.cite.source}): {c.cite.anchor()}{read}{names}"]
    if c.note:
        out.append(f"        note: {c.note}")
    if c.statements:
        out.append("        cited statements in the parent: "
                   + ", ".join(f"{a}-{b}" for a, b in c.statements))
    out.append(f"        → {v.outcome}: {v.why}")
    return out


def _file_lines(fc: evidence.FileChange, verdicts: list[Verdict]) -> list[str]:
    moved = f" → {fc.new_path}" if fc.new_path and fc.new_path != fc.path else ""
    out = [f"  {fc.path}{moved} ({fc.status})"]
    if fc.fallback:
        out.append(f"    path level: {fc.fallback}")
    out += [_hunk_line(h, fc) for h in fc.hunks]
    if fc.units:
        out.append("    definitions changed:")
        out += [f"      {_unit_line(u)}" for u in fc.units]
    out.append("    citations compared:")
    for v in verdicts:
        out += _verdict_lines(v) + _coarse_line(fc, v)
    return out


def _hunk_line(h: patch.Hunk, fc: evidence.FileChange) -> str:
    units = _hunk_units(h, fc)
    changed = [f"{side} {_lines(lines)}" for side, lines in (("old", h.deleted),
                                                             ("new", h.added)) if lines]
    return (f"    hunk @@ -{h.old_start},{h.old_count} +{h.new_start},{h.new_count} @@ "
            f"changes {', '.join(changed) or 'nothing'}"
            + (f" → {', '.join(units)}" if units else ""))


def _coarse_line(fc: evidence.FileChange, v: Verdict) -> list[str]:
    size = fc.lines
    if v.outcome != "whole-file" or size < coarse.COARSE_LINES:
        return []
    return [f"        coarse: a {size}-line file cited whole; cite what the port file mirrors "
            "(the report's Coarse citations name the candidates)"]


def _rule(r: Rule, commit: history.Commit) -> tuple[str, str | None, str]:
    miss = classify.rule_miss(r, commit)
    return r.id, miss, classify.rule_hit(r, commit) if miss is None else ""


def _rule_lines(rules: tuple[tuple[str, str | None, str], ...]) -> list[str]:
    out = []
    matched = False
    for rid, why, hit in rules:
        if matched:
            out.append(f"  {rid}: not reached (an earlier rule matched)")
            continue
        matched = why is None
        out.append(f"  {rid}: {'MATCHES: ' + hit if why is None else 'no: ' + why}")
    return out


def _where(d: Derivation) -> str:
    if d.carried_since is None:
        return (f"commit {d.index} of {d.total} in {short(d.pin)}..{short(d.target)} "
                "(the open cycle)")
    return (f"carried into the open cycle {short(d.pin)}..{short(d.target)} since "
            f"{d.carried_since} (outside its range)")


def _rules_head(d: Derivation) -> str:
    if d.carried_since is not None:
        return ("rules: not consulted (a carried commit keeps its decision or the disposition "
                "it was carried as)")
    return "rules (the first that matches decides):" if d.rules else "rules: none configured"


def render(d: Derivation) -> list[str]:
    c, e = d.commit, d.entry
    pr = f"vllm#{c.pr}" if c.pr is not None else "(no PR)"
    lines = [f"{short(c.sha)} {pr} {flat(c.subject)}", f"{_where(d)}, {c.date}"]
    if d.decision is not None:
        by = " ".join(x for x in (d.decision.by or "recorded", d.decision.at) if x)
        lines.append(f"decision: {d.decision.disposition}: {d.decision.reason} "
                     f"({by}) — decides it; rules and the symbol pass are not consulted (shown "
                     "below for reference)")
    else:
        lines.append("decision: none recorded")
    lines.append(_rules_head(d))
    lines += _rule_lines(d.rules)
    cited = set(d.cited)
    lines.append(f"paths changed ({len(c.paths)}):")
    lines += [f"  {p}{_mark(p, cited, d.mentioned)}" for p in c.paths]
    found = e.evidence
    if found is not None:
        lines.append("symbol pass:")
        for fc in found.files:
            lines += _file_lines(fc, [v for v in found.verdicts if v.path == fc.path])
        if found.models:
            lines.append(f"  models changed that no port file cites: {', '.join(found.models)}")
    elif cited:
        lines.append("symbol pass: no patch for the cited paths")
    tail = f" (auto: {e.rule})" if e.auto and e.rule else ""
    lines.append(f"result: {e.disposition}: {e.reason}{tail}")
    lines.append(f"git processes: {d.git_processes}")
    return lines


def _mark(path: str, cited: set[str], mentioned: tuple[str, ...]) -> str:
    if path in mentioned:
        return "  [mentioned only]"
    return "  [cited]" if path in cited else ""


def to_json(d: Derivation) -> dict[str, Any]:
    c = d.commit
    return {
        "sha": c.sha, "pr": c.pr, "subject": c.subject, "index": d.index, "total": d.total,
        "pin": d.pin, "target": d.target,
        "decision": None if d.decision is None else {
            "disposition": d.decision.disposition, "reason": d.decision.reason,
            "by": d.decision.by, "at": d.decision.at},
        "rules": [{"id": rid, "matches": why is None, "why_not": why, "why": hit or None}
                  for rid, why, hit in d.rules],
        "carried_since": d.carried_since,
        "paths": list(c.paths),
        "cited_paths": [p for p in d.cited if p not in d.mentioned],
        "mentioned_paths": list(d.mentioned),
        "entry": report.entry_doc(d.entry), "git_processes": d.git_processes,
    }
