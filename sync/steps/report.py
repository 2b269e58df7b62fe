"""The sync report: one stable markdown format plus a JSON companion with the same content.

Rendering is a pure function of the model, so a re-run with nothing changed is
byte-identical. `read_back` parses a previous report: entry lines (hand edits
become decisions), lines it cannot parse (kept verbatim, never lost) and the
free-text Notes section (kept as is).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sync.records.decisions import ALL, Disposition
from sync.records.mdtext import SHA_LEN as SHA_LEN
from sync.records.mdtext import SUBJECT_MAX as SUBJECT_MAX
from sync.records.mdtext import escape as escape
from sync.records.mdtext import short_subject as short_subject
from sync.records.mdtext import unescape as unescape
from sync.steps.classify import Entry
from sync.upstream.history import RangeStats

State = Literal["ACTIVE", "STALLED", "ADVANCED"]
SCHEMA = 1
SECTIONS: tuple[Disposition, ...] = ("PORT-NOW", "INVENTORY", "IGNORE", "UNCLASSIFIED")
UNPARSED = "Unparsed lines (kept verbatim)"
NOTES = "Notes"
NONE = "_None._"

def entry_prefix(e: Entry) -> str:
    pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
    return f"- `{e.sha[:SHA_LEN]}` {pr} {escape(short_subject(e.subject))} — "


def entry_line(e: Entry) -> str:
    tail = f" _(auto: {e.rule})_" if e.auto and e.rule else ""
    return f"{entry_prefix(e)}{e.disposition}: {escape(e.reason, reason=True)}{tail}"


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
    deviations: tuple[str, ...] = ()
    file_pins: tuple[str, ...] = ()
    file_pin_counts: tuple[tuple[str, int], ...] = ()
    gates: tuple[str, ...] = ()
    gate_docs: tuple[dict[str, Any], ...] = ()
    carry_over: tuple[str, ...] = ()
    unparsed: tuple[str, ...] = ()
    notes: str = ""
    enumerated: int = 0
    divergent: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {d: 0 for d in SECTIONS}
        for e in self.entries:
            out[e.disposition] += 1
        return out


def _section(title: str, lines: list[str] | tuple[str, ...]) -> list[str]:
    return [f"## {title}", "", *(lines or [NONE]), ""]


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
         + "".join(f"\n  - `{e.sha[:SHA_LEN]}` {escape(short_subject(e.subject))}"
                   for e in no_pr)),
    ]


def render(m: Model) -> str:
    counts = m.counts()
    s = m.stats
    lines = [
        f"# Upstream sync report {m.date} — target {m.target[:7]}",
        "",
        f"- Pin: `{m.pin}` ({escape(m.pin_runtime)})",
        f"- Target: `{m.target}` from `{escape(m.target_ref)}`"
        + (" (divergent: does not descend from the pin)" if m.divergent else ""),
        # No machine path: the same report must come out of every developer's checkout and CI.
        f"- Reference checkout: at `{m.reference_head[:SHA_LEN]}`, "
        f"{'dirty' if m.reference_dirty else 'clean'}, full clone",
        f"- Range: {s.commits} non-merge commits, {s.files_changed} files changed, "
        f"{s.insertions} insertions(+), {s.deletions} deletions(-)",
        f"- Cycle state: {m.state}",
        "",
        "## Summary",
        "",
        "| disposition | commits |",
        "|---|---|",
        *(f"| {d} | {counts[d]} |" for d in SECTIONS),
        f"| total | {len(m.entries)} |",
        "",
    ]
    for d in SECTIONS:
        lines += _section(d, [entry_line(e) for e in m.entries if e.disposition == d])
    related = [f"- `{new[:SHA_LEN]}` reverts `{old[:SHA_LEN]}`" for new, old in m.reverts]
    related += ["- patch-identical: " + ", ".join(f"`{x[:SHA_LEN]}`" for x in group)
                for group in m.duplicates]
    lines += _section("Reverts and cherry-picks", related)
    moves = []
    for mv in m.moves:
        what = f"renamed → `{mv.new_path}`" if mv.kind == "renamed" else "deleted"
        pr = f" vllm#{mv.pr}" if mv.pr is not None else ""
        moves.append(f"- `{mv.path}` {what} in `{mv.sha[:SHA_LEN]}`{pr}; cited by "
                     + ", ".join(mv.port_files))
    lines += _section("Upstream moves and deletions of cited paths", moves)
    lines += _section("Deviations touched", list(m.deviations))
    lines += _section("Per-file pin status", list(m.file_pins))
    lines += _section("Gates", list(m.gates))
    lines += _section("Carry-over", list(m.carry_over))
    lines += ["## Mechanical checks", ""]
    for ok, text in checks(m):
        lines.append(f"- [{'x' if ok else ' '}] {text}")
    lines.append("")
    if m.unparsed:
        lines += _section(UNPARSED, list(m.unparsed))
    lines += [f"## {NOTES}", ""]
    lines += [m.notes.rstrip("\n")] if m.notes.strip() else [""]
    return "\n".join(lines).rstrip("\n") + "\n"


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


def entry_doc(e: Entry) -> dict[str, Any]:
    return {"sha": e.sha, "pr": e.pr, "subject": e.subject, "disposition": e.disposition,
            "reason": e.reason, "rule": e.rule, "auto": e.auto,
            "upstream_paths": list(e.upstream_paths), "port_files": list(e.port_files)}


def to_json(m: Model, report_path: str) -> dict[str, Any]:
    s = m.stats
    return {
        "schema": SCHEMA,
        "report": report_path,
        "date": m.date,
        "pin": m.pin,
        "pin_runtime": m.pin_runtime,
        "target": m.target,
        "target_ref": m.target_ref,
        "divergent": m.divergent,
        "reference": {"head": m.reference_head,
                      "dirty": m.reference_dirty},
        "range": {"commits": s.commits, "files_changed": s.files_changed,
                  "insertions": s.insertions, "deletions": s.deletions},
        "state": m.state,
        "counts": m.counts(),
        "entries": [entry_doc(e) for e in m.entries],
        "reverts": [{"sha": a, "reverts": b} for a, b in m.reverts],
        "duplicates": [list(g) for g in m.duplicates],
        "moves": [{"path": mv.path, "kind": mv.kind, "new_path": mv.new_path, "sha": mv.sha,
                   "pr": mv.pr, "port_files": list(mv.port_files)} for mv in m.moves],
        "deviations": list(m.deviations),
        "file_pins": {"counts": dict(m.file_pin_counts), "lines": list(m.file_pins)},
        "gates": list(m.gate_docs),
        "carry_over": list(m.carry_over),
        "checks": [{"ok": ok, "text": t} for ok, t in checks(m)],
        "unparsed": list(m.unparsed),
        **m.extra,
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


_ENTRY_HEAD = re.compile(r"^- `([0-9a-f]{7,40})` ")
_DISP = re.compile(r"^(" + "|".join(re.escape(d) for d in ALL) + r"): (.*)$")
_AUTO = re.compile(r" _\(auto: ([^)]*)\)_$")


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


def read_back(text: str, prefixes: dict[str, str]) -> ReadBack:
    """`prefixes` maps a sha's first SHA_LEN chars to its rendered entry prefix."""
    entries: list[ParsedEntry] = []
    unparsed: list[str] = []
    notes: list[str] = []
    unmet: list[str] = []
    state: State | None = None
    section = ""
    for raw in text.splitlines():
        if section == "" and raw.startswith("- Cycle state: "):
            value = raw.removeprefix("- Cycle state: ").strip()
            if value in ("ACTIVE", "STALLED", "ADVANCED"):
                state = value  # type: ignore[assignment]
        # Notes is the last section and free text: a heading a human writes there is part of
        # the notes, not the end of them (or everything after it would be lost on re-render).
        if raw.startswith("## ") and section != NOTES:
            section = raw[3:].strip()
            continue
        if section == NOTES:
            notes.append(raw)
        elif section == "Carry-over" and raw.startswith("- unmet: "):
            unmet.append(raw.removeprefix("- unmet: "))
        elif section == UNPARSED:
            if raw.strip() and raw.strip() != NONE:
                unparsed.append(raw)
        elif section in SECTIONS and raw.strip() and raw.strip() != NONE:
            head = _ENTRY_HEAD.match(raw)
            parsed = None
            if head is not None:
                parsed = parse_entry(raw, prefixes.get(head.group(1)[:SHA_LEN]))
            if parsed is None or parsed.sha_prefix[:SHA_LEN] not in prefixes:
                unparsed.append(raw)
            else:
                entries.append(parsed)
    return ReadBack(tuple(entries), tuple(unparsed), "\n".join(notes).strip("\n"), state,
                    tuple(unmet))
