"""The sync report: one stable markdown format plus a JSON companion with the same content.

`LAYOUT` lists the sections in report order, each with its markdown, its JSON
keys and how it reads back: a new section is one entry there. Rendering is a
pure function of the model, so a re-run with nothing changed is byte-identical.
`read_back` parses a previous report: entry lines (hand edits become
decisions), lines it cannot parse (kept verbatim, never lost) and the free-text
Notes section (kept as is).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from sync.records.decisions import ALL, Disposition
from sync.records.mdtext import SUBJECT_MAX as SUBJECT_MAX
from sync.records.mdtext import code, flat, one_line
from sync.records.mdtext import escape as escape
from sync.records.mdtext import short_subject as short_subject
from sync.records.mdtext import unescape as unescape
from sync.records.reportdoc import NOTES, STATE_LINE, carry_counts
from sync.records.reportdoc import State as State
from sync.records.reportdoc import state_of as state_of
from sync.steps.classify import Entry, Evidence
from sync.steps.coarse import Coarse
from sync.steps.evidence import FileChange
from sync.upstream.gitio import SHA_LEN as SHA_LEN  # entry lines are keyed by it
from sync.upstream.gitio import short
from sync.upstream.history import RangeStats

SCHEMA = 1
SECTIONS: tuple[Disposition, ...] = ("PORT-NOW", "INVENTORY", "IGNORE", "UNCLASSIFIED")
# Entries the symbol pass found in cited files but outside the code the port mirrors: listed
# once, here, between PORT-NOW and INVENTORY, whatever their disposition.
NOT_PORTED = "Touches ported files, not ported code"
RULED = "Classified by a rule, changes cited code"
UNPARSED = "Unparsed lines (kept verbatim)"
NONE = "_None._"

def entry_prefix(e: Entry) -> str:
    return _prefix(e.sha, e.pr, e.subject)


def entry_line(e: Entry) -> str:
    return _line(entry_prefix(e), e.disposition, e.reason, e.rule, e.auto)


# A run renders each entry's line up to three times (reading the report back, rebuilding
# what the last run wrote from its JSON, writing the report), escaping its subject and
# reason each time: the line is kept by what it is made of.
@functools.cache
def _prefix(sha: str, pr: int | None, subject: str) -> str:
    shown = f"vllm#{pr}" if pr is not None else "(no PR)"
    return f"- `{short(sha)}` {shown} {escape(short_subject(subject))} — "


@functools.cache
def _line(prefix: str, disposition: str, reason: str, rule: str | None, auto: bool) -> str:
    tail = f" _(auto: {escape(rule, reason=True)})_" if auto and rule else ""
    return f"{prefix}{disposition}: {escape(reason, reason=True)}{tail}"


@dataclass(frozen=True)
class Move:
    path: str
    kind: Literal["renamed", "deleted"]
    new_path: str | None
    sha: str
    pr: int | None
    port_files: tuple[str, ...]


@dataclass(frozen=True)
class Model:
    date: str
    pin: str
    pin_runtime: str
    target: str
    target_ref: str
    reference_head: str
    reference_dirty: bool
    stats: RangeStats
    state: State
    entries: tuple[Entry, ...]
    reverts: tuple[tuple[str, str], ...] = ()
    duplicates: tuple[tuple[str, ...], ...] = ()
    moves: tuple[Move, ...] = ()
    coarse: tuple[Coarse, ...] = ()
    deviations: tuple[str, ...] = ()
    inventory_missing: str | None = None  # the inventory's path, when it does not exist
    file_pins: tuple[str, ...] = ()
    file_pin_counts: tuple[tuple[str, int], ...] = ()
    gates: tuple[str, ...] = ()
    gate_docs: tuple[dict[str, Any], ...] = ()
    carry_over: tuple[str, ...] = ()
    carried: tuple[dict[str, Any], ...] = ()  # the carry-over record's open items (carry.Imported)
    unparsed: tuple[str, ...] = ()
    notes: str = ""
    enumerated: int = 0
    divergent: bool = False
    target_from: str = ""  # where the target came from (steps/target.Provenance.describe)
    others: tuple[tuple[str, bool], ...] = ()  # other reports naming the target: (name, by hand)
    reference_state: str = ""  # "clean", or what is wrong with the checkout (health.summary)
    extra: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {d: 0 for d in SECTIONS}
        for e in self.entries:
            out[e.disposition] += 1
        return out


def checks(model: Model) -> list[tuple[bool, str]]:
    shas = [e.sha for e in model.entries]
    dupes = len(shas) - len(set(shas))
    no_pr = [e for e in model.entries if e.pr is None]
    return [
        (len(shas) == model.enumerated and dupes == 0,
         f"every enumerated commit classified exactly once: {model.enumerated} enumerated, "
         f"{len(set(shas))} classified, {dupes} classified twice"),
        (len(shas) <= model.enumerated,
         f"none classified that was not enumerated: {max(0, len(shas) - model.enumerated)} extra"),
        (model.stats.commits == model.enumerated,
         f"range count matches enumeration: {model.stats.commits} in range, "
         f"{model.enumerated} enumerated"),
        (True, f"subjects without (#N): {len(no_pr)}"
         + "".join(f"\n  - `{short(e.sha)}` {escape(short_subject(e.subject))}"
                   for e in no_pr)),
    ]


def entry_doc(e: Entry) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "sha": e.sha, "pr": e.pr, "subject": e.subject, "disposition": e.disposition,
        "reason": e.reason, "rule": e.rule, "auto": e.auto,
        "upstream_paths": list(e.upstream_paths), "port_files": list(e.port_files)}
    if e.evidence is not None:
        doc["not_ported_code"] = e.not_ported_code
        doc["ruled_over_code"] = e.ruled_over_code
        doc["evidence"] = evidence_doc(e.evidence)
    return doc


def line_runs(lines: tuple[int, ...]) -> list[str]:
    """[3, 4, 5, 9] as ["3-5", "9"]."""
    runs: list[list[int]] = []
    for n in lines:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [str(a) if a == b else f"{a}-{b}" for a, b in runs]


def file_doc(fc: FileChange) -> dict[str, Any]:
    return {
        "path": fc.path, "status": fc.status, "old_path": fc.old_path, "new_path": fc.new_path,
        "path_level": fc.fallback,
        "hunks": [{"old": h.old_range(), "new": h.new_range()} for h in fc.hunks],
        "changed": [{"name": u.name, "kind": u.kind, "change": u.change, "detail": u.detail,
                     "old_lines": line_runs(u.old_lines), "new_lines": line_runs(u.new_lines)}
                    for u in fc.units],
    }


def evidence_doc(found: Evidence) -> dict[str, Any]:
    """Per path the changed definitions; per citation what it named and how it was judged."""
    return {
        "outcome": found.outcome(), "models_without_port_files": list(found.models),
        "paths": [file_doc(fc) for fc in found.files],
        "citations": [{
            "path": v.path, "port_file": v.cited.cite.port_file, "line": v.cited.cite.line,
            "anchor": v.cited.cite.anchor(), "source": v.cited.cite.source, "how": v.cited.how,
            "read_at": v.cited.at, "names": list(v.cited.names), "note": v.cited.note,
            "outcome": v.outcome, "definitions": list(v.units), "why": v.why,
        } for v in found.verdicts],
    }


@dataclass(frozen=True)
class ParsedEntry:
    sha_prefix: str
    disposition: Disposition
    reason: str
    auto_rule: str | None
    line: str


@dataclass(frozen=True)
class ReadBack:
    entries: tuple[ParsedEntry, ...]
    unparsed: tuple[str, ...]
    notes: str
    state: State | None
    unmet: tuple[str, ...] = ()
    why: dict[str, str] = field(default_factory=dict)  # an unparsed entry line -> why

    def reason(self, line: str) -> str:
        """" (why)" for an unparsed line that looks like an entry, else ""."""
        return f" ({self.why[line]})" if line in self.why else ""


@dataclass
class _Reading:
    """What `read_back` has gathered from an earlier report so far."""

    prefixes: dict[str, str]
    entries: list[ParsedEntry] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)
    state: State | None = None


# -- the sections, in report order --------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One part of the report: its headings, its markdown, its JSON keys, and its read-back.

    `headings` are the `## ` titles it writes ("" is the part above the first heading);
    `read` takes each line under one of them when an earlier report is read back; a
    `free_text` section is never ended by a heading someone writes inside it.
    """

    headings: tuple[str, ...]
    render: Callable[[Model], list[str]]
    to_json: Callable[[Model], dict[str, Any]] = lambda _m: {}
    read: Callable[[_Reading, str], None] | None = None
    free_text: bool = False
    keeps: bool = False  # its `read` keeps every line (else prose of a person's is unparsed)


def _section(title: str, lines: list[str] | tuple[str, ...]) -> list[str]:
    return [f"## {title}", "", *(one_line(x) for x in lines or [NONE]), ""]


def _titled(title: str, lines: Callable[[Model], tuple[str, ...]],
            to_json: Callable[[Model], dict[str, Any]],
            read: Callable[[_Reading, str], None] | None = None) -> Section:
    """A `## title` section of the lines `lines` gives (`_None._` when it gives none)."""
    return Section((title,), lambda m: _section(title, lines(m)), to_json, read)


def _head(m: Model) -> list[str]:
    s = m.stats
    return [
        f"# Upstream sync report {m.date} — target {m.target[:7]}",
        "",
        f"- Pin: `{m.pin}` ({escape(m.pin_runtime)})",
        f"- Target: `{m.target}` from {m.target_from or code(m.target_ref)}"
        + (" (divergent: does not descend from the pin)" if m.divergent else ""),
        *(["- Other reports for this target: " + ", ".join(
            f"{code(name)} ({'written by hand' if hand else 'an earlier cycle'})"
            for name, hand in m.others)] if m.others else []),
        # No machine path: the same report must come out of every developer's checkout and CI.
        f"- Reference checkout: at `{short(m.reference_head)}`, {_state(m)}, full clone",
        f"- Range: {s.commits} non-merge commits, {s.files_changed} files changed, "
        f"{s.insertions} insertions(+), {s.deletions} deletions(-)",
        f"- Cycle state: {m.state}",
        "",
    ]


def _state(m: Model) -> str:
    if m.reference_state:
        return m.reference_state  # the tool's own words and a validated ref name
    return "dirty" if m.reference_dirty else "clean"


def _head_doc(m: Model) -> dict[str, Any]:
    s = m.stats
    return {
        "date": m.date, "pin": m.pin, "pin_runtime": m.pin_runtime, "target": m.target,
        "target_ref": m.target_ref, "target_from": m.target_from, "divergent": m.divergent,
        "other_reports": [{"report": name, "by_hand": hand} for name, hand in m.others],
        "reference": {"head": m.reference_head, "dirty": m.reference_dirty,
                      "state": m.reference_state or ("dirty" if m.reference_dirty else "clean")},
        "range": {"commits": s.commits, "files_changed": s.files_changed,
                  "insertions": s.insertions, "deletions": s.deletions},
        "state": m.state,
    }


def _read_state(r: _Reading, raw: str) -> None:
    if raw.startswith("- Cycle state: "):
        value = raw.removeprefix("- Cycle state: ").strip()
        if value in get_args(State):
            r.state = cast(State, value)


def _summary(m: Model) -> list[str]:
    counts = m.counts()
    return ["## Summary", "", "| disposition | commits |", "|---|---|",
            *(f"| {d} | {counts[d]} |" for d in SECTIONS), f"| total | {len(m.entries)} |", "",
            *_apart(m)]


def _apart(m: Model) -> list[str]:
    """Where the entries the disposition sections do not hold are: the section sizes then
    add up to the table."""
    out = []
    for title, kept in ((NOT_PORTED, [e.disposition for e in m.entries if e.not_ported_code]),
                        (RULED, [e.disposition for e in m.entries if e.ruled_over_code])):
        if kept:
            by = ", ".join(f"{d} {kept.count(d)}" for d in SECTIONS if d in kept)
            verb = "is" if len(kept) == 1 else "are"
            out.append(f"{len(kept)} of them ({by}) {verb} listed under \"{title}\".")
    return [*out, ""] if out else []


def _entries(m: Model) -> list[str]:
    lines: list[str] = []
    for d in SECTIONS:
        lines += _section(d, [entry_line(e) for e in m.entries if e.disposition == d
                              and not e.not_ported_code and not e.ruled_over_code])
        if d == "PORT-NOW":
            lines += _section(NOT_PORTED, [entry_line(e) for e in m.entries
                                           if e.not_ported_code])
            ruled = [entry_line(e) for e in m.entries if e.ruled_over_code]
            if ruled:  # for review: a rule's tag matched, the symbol pass found a hit
                lines += _section(RULED, ruled)
    return lines


def _read_entry(r: _Reading, raw: str) -> None:
    if not raw.strip() or raw.strip() == NONE:
        return
    head = _ENTRY_HEAD.match(raw)
    # Only a line the renderer could have written is an entry: it starts with the prefix
    # this run renders for a commit of the range (sha, PR, escaped subject, " — "), as
    # this version escapes it or as any escaping that reads back the same (an earlier one).
    prefix = r.prefixes.get(short(head.group(1))) if head is not None else None
    written = _written_prefix(raw, prefix) if prefix is not None else None
    parsed = parse_entry(raw, written) if written is not None else None
    if parsed is None:
        r.unparsed.append(raw)
        if head is not None:
            r.why[raw] = _why(raw, written, prefix is not None)
    else:
        r.entries.append(parsed)


def _why(raw: str, written: str | None, in_range: bool) -> str:
    """Why a line that starts like an entry is not read as one."""
    if not in_range:
        return "its commit is not in this cycle's range"
    if written is None:
        return "its subject is not the commit's as the report writes it"
    word = re.match(r"([A-Za-z-]+):", raw[len(written):])
    if word is not None and word[1] not in ALL:
        return f"unknown disposition {word[1]}: one of {', '.join(ALL)}"
    return "no disposition and reason after ' — '"


def _written_prefix(raw: str, prefix: str) -> str | None:
    """The start of `raw` that is `prefix` as some escaping wrote it (None when none is)."""
    if raw.startswith(prefix):
        return prefix
    # Flattened: an earlier escaping wrote the characters that do not show as they were.
    want = flat(unescape(prefix))
    for m in _PREFIX_END.finditer(raw):
        if flat(unescape(raw[:m.end()])) == want:
            return raw[:m.end()]
    return None


def _related(m: Model) -> tuple[str, ...]:
    reverts = [f"- `{short(new)}` reverts `{short(old)}`" for new, old in m.reverts]
    picks = ["- patch-identical: " + ", ".join(f"`{short(x)}`" for x in group)
             for group in m.duplicates]
    return (*reverts, *picks)


def _moves(m: Model) -> tuple[str, ...]:
    out = []
    for mv in m.moves:
        what = f"renamed → {code(mv.new_path or '')}" if mv.kind == "renamed" else "deleted"
        pr = f" vllm#{mv.pr}" if mv.pr is not None else ""
        # Paths are upstream's (a rename's new path) and the port's: never raw.
        out.append(f"- {code(mv.path)} {what} in `{short(mv.sha)}`{pr}; cited by "
                   + ", ".join(escape(f, reason=True) for f in mv.port_files))
    return tuple(out)


def _moves_doc(m: Model) -> dict[str, Any]:
    return {"moves": [{"path": mv.path, "kind": mv.kind, "new_path": mv.new_path,
                       "sha": mv.sha, "pr": mv.pr, "port_files": list(mv.port_files)}
                      for mv in m.moves]}


NO_INVENTORY = ("_the porting inventory ", " does not exist: deviations not read_")


def _deviations(m: Model) -> tuple[str, ...]:
    if m.inventory_missing is not None:
        # Not `_None._`: no deviation was looked for, so none can be said to be untouched.
        return (code(m.inventory_missing).join(NO_INVENTORY),)
    return m.deviations


COARSE = "Coarse citations (large files cited whole)"
COARSE_LEAD = ("A file cited whole makes a change to any of its definitions PORT-NOW; these "
               "large ones did this cycle (a commit since decided says what was decided). Cite "
               "what the port file mirrors (`path::Symbol`, `path (A, B)`), and only changes "
               "to that will be.")
NAMED_SHOWN = 6  # definitions a coarse citation's line names before "+N more"


def _coarse(m: Model) -> tuple[str, ...]:
    if not m.coarse:
        return ()
    return (COARSE_LEAD, "", *(_coarse_line(c) for c in m.coarse))


def _coarse_line(c: Coarse) -> str:
    decided = dict(c.decided)
    commits = ", ".join(f"`{short(s)}`" + (f" (decided {decided[s]})" if s in decided else "")
                        for s in c.commits[:3]) + (
        f" +{len(c.commits) - 3}" if len(c.commits) > 3 else "")
    head = (f"- {code(c.path)} ({c.lines} lines, {c.definitions} definitions) cited whole by "
            f"{escape(c.port_file, reason=True)}: PORT-NOW {commits}")
    if not c.named:
        return head + "; the port file names none of its definitions"
    shown = ", ".join(escape(n, reason=True) for n in c.named[:NAMED_SHOWN])
    if len(c.named) > NAMED_SHOWN:
        return head + f"; the port file names {shown} +{len(c.named) - NAMED_SHOWN} more"
    anchor = (f"{c.path}::{c.named[0]}" if len(c.named) == 1
              else f"{c.path} ({', '.join(c.named)})")
    return head + f"; the port file names {shown}: cite {code(anchor)} if that is what it mirrors"


def _read_unmet(r: _Reading, raw: str) -> None:
    if raw.startswith("- unmet: "):
        r.unmet.append(unescape(raw.removeprefix("- unmet: ")))


def _checks(m: Model) -> list[str]:
    return ["## Mechanical checks", "",
            *(f"- [{'x' if ok else ' '}] {text}" for ok, text in checks(m)), ""]


def _read_unparsed(r: _Reading, raw: str) -> None:
    if raw.strip() and raw.strip() != NONE:
        r.unparsed.append(raw)


def _notes(m: Model) -> list[str]:
    return [f"## {NOTES}", "", m.notes.rstrip("\n") if m.notes.strip() else ""]


def _read_notes(r: _Reading, raw: str) -> None:
    r.notes.append(raw)


LAYOUT: tuple[Section, ...] = (
    Section(("",), _head, _head_doc, _read_state),
    Section(("Summary",), _summary, lambda m: {"counts": m.counts()}),
    Section((SECTIONS[0], NOT_PORTED, RULED, *SECTIONS[1:]), _entries,
            lambda m: {"entries": [entry_doc(e) for e in m.entries]}, _read_entry, keeps=True),
    _titled("Reverts and cherry-picks", _related,
            lambda m: {"reverts": [{"sha": a, "reverts": b} for a, b in m.reverts],
                       "duplicates": [list(g) for g in m.duplicates]}),
    _titled("Upstream moves and deletions of cited paths", _moves, _moves_doc),
    _titled(COARSE, _coarse, lambda m: {"coarse_citations": [c.doc() for c in m.coarse]}),
    _titled("Deviations touched", _deviations,
            lambda m: {"deviations": list(m.deviations),
                       "inventory_missing": m.inventory_missing}),
    _titled("Per-file pin status", lambda m: m.file_pins,
            lambda m: {"file_pins": {"counts": dict(m.file_pin_counts),
                                     "lines": list(m.file_pins)}}),
    _titled("Gates", lambda m: m.gates, lambda m: {"gates": list(m.gate_docs)}),
    _titled("Carry-over", lambda m: m.carry_over,
            lambda m: {"carry_over": list(m.carry_over),
                       "carry_over_counts": carry_counts(m.carry_over),
                       "carried": list(m.carried)},
            _read_unmet),
    Section(("Mechanical checks",), _checks,
            lambda m: {"checks": [{"ok": ok, "text": t} for ok, t in checks(m)]}),
    # Only when an earlier report had lines it could not place.
    Section((UNPARSED,), lambda m: _section(UNPARSED, m.unparsed) if m.unparsed else [],
            lambda m: {"unparsed": list(m.unparsed)}, _read_unparsed, keeps=True),
    # Notes is the last section and free text: a heading a human writes there is part of
    # the notes, not the end of them (or everything after it would be lost on re-render).
    Section((NOTES,), _notes, read=_read_notes, free_text=True, keeps=True),
)
_BY_HEADING = {h: s for s in LAYOUT for h in s.headings}


def restate(text: str, frm: tuple[State, ...], to: State) -> str | None:
    """A report's markdown with its cycle state moved from one of `frm` to `to`; None when
    it is in none of them (every other byte kept)."""
    m = STATE_LINE.search(text)
    if m is None or m["state"] not in frm:
        return None
    return text[:m.start("state")] + to + text[m.end("state"):]


def restate_json(text: str, frm: tuple[State, ...], to: State) -> str | None:
    """The same for the report's JSON companion (None when it does not parse)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("state") not in frm:
        return None
    return dump_json({**doc, "state": to})


def render(m: Model) -> str:
    lines = [line for s in LAYOUT for line in s.render(m)]
    return "\n".join(lines).rstrip("\n") + "\n"


def to_json(m: Model, report_path: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": SCHEMA, "report": report_path}
    for s in LAYOUT:
        doc.update(s.to_json(m))
    return {**doc, **m.extra}


def dump_json(doc: Any) -> str:
    """JSON one top-level key (and one list item) per line.

    `json.dumps(indent=...)` falls back to the pure-Python encoder, 25x slower on a
    10,000-entry report; this keeps the C encoder and a diffable layout.
    """
    if not isinstance(doc, dict):
        return json.dumps(doc, ensure_ascii=False) + "\n"
    lines = []
    for key, value in doc.items():
        head = f"  {json.dumps(key)}: "
        if isinstance(value, list) and value:
            items = ",\n".join("    " + json.dumps(v, ensure_ascii=False) for v in value)
            lines.append(f"{head}[\n{items}\n  ]")
        else:
            lines.append(head + json.dumps(value, ensure_ascii=False))
    return "{\n" + ",\n".join(lines) + "\n}\n"


_ENTRY_HEAD = re.compile(r"^- `([0-9a-f]{7,40})` ")
_DISP = re.compile(r"^(" + "|".join(re.escape(d) for d in ALL) + r"): (.*)$")
_AUTO = re.compile(r" _\(auto: ([^)]*)\)_$")
_PREFIX_END = re.compile(r" — (?=(?:" + "|".join(re.escape(d) for d in ALL) + r"): )")


def parse_entry(line: str, known_prefix: str | None) -> ParsedEntry | None:
    """Parse one entry line; `known_prefix` is the rendered `- sha pr subject — ` if known."""
    head = _ENTRY_HEAD.match(line)
    if head is None:
        return None
    if known_prefix is not None and line.startswith(known_prefix):
        rest = line[len(known_prefix):]
    elif " — " in line:
        rest = line.rsplit(" — ", 1)[1]
    else:
        return None
    d = _DISP.match(rest)
    if d is None:
        return None
    reason = d.group(2)
    auto = _AUTO.search(reason)
    if auto:
        reason = reason[: auto.start()]
    reason = unescape(reason).strip()
    if not reason:
        return None
    return ParsedEntry(head.group(1), d.group(1), reason,  # type: ignore[arg-type]
                       auto.group(1) if auto else None, line)


# What the renderer writes outside the entry sections: list items and their continuation
# lines, table rows, headings, `_None._`, blank lines, and these lead lines. Any other line
# there is a person's, and is kept under "Unparsed lines" rather than lost on the re-render.
# (A list item a person adds to a regenerated section cannot be told from one this run no
# longer writes: notes belong under Notes, or under a heading of one's own, kept whole.)
_RENDERED = re.compile(r"(?:- |  |\||#|_None\._\Z|\Z|\s*\Z)")
_LEADS = re.compile(r"(?:\d+ of them \(.*\) (?:is|are) listed under \"(?:" + re.escape(NOT_PORTED)
                    + "|" + re.escape(RULED) + r")\"\.|" + re.escape(COARSE_LEAD) + "|"
                    + ".*".join(map(re.escape, NO_INVENTORY)) + r")\Z")


def _rendered(raw: str) -> bool:
    return _RENDERED.match(raw) is not None or _LEADS.match(raw) is not None


def _read_line(r: _Reading, section: Section | None, raw: str) -> None:
    """One line under `section` (None: a heading of a person's own, whose lines are all kept)."""
    if section is None:
        if raw.strip():
            r.unparsed.append(raw)
        return
    if section.read is not None:
        section.read(r, raw)
    if not section.keeps and not _rendered(raw):
        r.unparsed.append(raw)


def _unwrapped(lines: list[str], i: int) -> tuple[str, int]:
    """Entry line `i` with the lines an editor wrapped it onto joined back, and the index
    after them. An indented line under a list item continues it (Markdown reads the break
    as a space); an unindented one only when the join restores the `_(auto: ...)_` tag the
    wrap took away (else it is a person's line, kept apart as before)."""
    raw, j = lines[i], i + 1
    if _ENTRY_HEAD.match(raw) is None:
        return raw, j
    while j < len(lines) and lines[j].strip() and not lines[j].lstrip().startswith(
            ("- ", "#", "|")):
        joined = raw + " " + lines[j].strip()
        if not lines[j][:1].isspace() and (_AUTO.search(raw) or not _AUTO.search(joined)):
            break
        raw, j = joined, j + 1
    return raw, j


def read_back(text: str, prefixes: dict[str, str]) -> ReadBack:
    """`prefixes` maps a sha's short form (`gitio.short`) to its rendered entry prefix."""
    r = _Reading(prefixes)
    heading = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        section = _BY_HEADING.get(heading)
        raw, i = _unwrapped(lines, i) if section is not None and section.read is _read_entry \
            else (lines[i], i + 1)
        if raw.startswith("## ") and not (section is not None and section.free_text):
            heading = _heading(r, raw)
        else:
            _read_line(r, section, raw)
    return _once_each(r)


def _heading(r: _Reading, raw: str) -> str:
    heading = raw[3:].strip()
    if heading not in _BY_HEADING:
        r.unparsed.append(raw)  # a section of a person's own: kept, heading and all
    return heading


def _once_each(r: _Reading) -> ReadBack:
    # Two lines for one commit cannot both be what the renderer wrote: neither is read.
    seen = Counter(short(p.sha_prefix) for p in r.entries)
    entries = [p for p in r.entries if seen[short(p.sha_prefix)] == 1]
    twice = [p.line for p in r.entries if seen[short(p.sha_prefix)] > 1]
    r.why.update((line, "two lines for one commit") for line in twice)
    return ReadBack(tuple(entries), tuple(r.unparsed + twice), "\n".join(r.notes).strip("\n"),
                    r.state, tuple(r.unmet), r.why)
