"""Step 7, undone: roll back the last advance (pin surfaces only), as a superseding event.

The plan restores every pin surface the advance rewrote (block, PARITY PIN
paragraph, core oracle file, pin spans) from the `before` the advance recorded,
re-opens the advance's report and its frozen cycle (retiring the report of any cycle
opened since from the pin it takes back), drops from the carry-over record
what that advance carried (its cycle is open again and owes those items itself; the
record goes when the advance made it and nothing else is in it) and stages a rollback
event that supersedes it; the command commits it in one transaction (or, with
`--dry-run`, shows it). The reference checkout is never moved back (it is never reset).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.infra.atomic import read_record, read_text
from sync.infra.errors import BlockedCycle, MalformedRecord, SyncError, UsageError
from sync.port import Port
from sync.records import carryover, cycle, events, oraclefile, paragraph, pins
from sync.steps import report
from sync.steps.advance import advance
from sync.steps.verify import oracle
from sync.upstream.gitio import short


@dataclass(frozen=True)
class Rollback:
    undone: events.Event  # the advance rolled back
    pin: pins.Pin  # the pin restored
    oracle_env: str  # the restored pin's oracle environment, or why it is unknown
    event: Path  # the rollback event the writes add
    writes: dict[Path, bytes | None]  # None: the file goes


def plan_rollback(port: Port) -> Rollback:
    last = last_advance(port)
    record = port.pin_record()
    if record.pin.commit != last.pin_after:
        raise BlockedCycle(f"the pin is {short(record.pin.commit)}, not the last advance's "
                           f"{short(last.pin_after)}", "roll back only the latest advance")
    before = _before(port, last)
    old = pins.from_values(before["vllm_commit"], before["vllm_runtime_version"],
                           before["vllm_distribution_version"], before["flashinfer_version"],
                           path=port.rel(port.protocol), commit_id=before.get(pins.COMMIT_ID))
    surfaces = _surfaces(port, record, old, before)
    surfaces.update(advance.span_writes(port, surfaces, old))
    writes: dict[Path, bytes | None] = {**surfaces, **reopened(port, last.report),
                                        **retired(port, last.pin_after)}
    writes.update(_uncarried(port, last.report, made=before.get("carry_over") is False))
    writes.update(_cycle(port, last, before))
    env_note, label = oracle_env(port, old.commit)
    ev_path, ev_bytes = events.staged(port, "rollback", pin_before=last.pin_after,
                                      pin_after=old.commit, report=last.report,
                                      supersedes=last.index,
                                      detail=json.dumps({"oracle_env": label}))
    writes[ev_path] = ev_bytes
    return Rollback(last, old, env_note, ev_path, writes)


_BEFORE = ("vllm_commit", "vllm_runtime_version", "vllm_distribution_version",
           "flashinfer_version", "paragraph_date", "paragraph_sha", "paragraph_label",
           "oracle_pin", "oracle_pin_label", "oracle_pinned_on")


_FIX = "restore the event from git (events are immutable); roll back by hand otherwise"


def _before(port: Port, last: events.Event) -> dict[str, Any]:
    """What the advance recorded it replaced (its event's `detail`), refused when it is not
    the JSON an advance writes."""
    rel = port.rel(last.path)
    try:
        doc = json.loads(last.detail)
    except (ValueError, RecursionError):
        raise MalformedRecord("the advance's detail is not JSON", _FIX, path=rel) from None
    before = doc.get("before") if isinstance(doc, dict) else None
    if not isinstance(before, dict) or not all(isinstance(before.get(k), str) for k in _BEFORE):
        raise MalformedRecord("the advance's detail has no 'before' pin (the strings "
                              + ", ".join(_BEFORE) + ")", _FIX, path=rel)
    return before


def last_advance(port: Port) -> events.Event:
    """The latest advance, unless a rollback already superseded it."""
    evs = events.load_all(port)
    superseded = {e.supersedes for e in evs if e.kind == "rollback"}
    last = next((e for e in reversed(evs) if e.kind == "advance"), None)
    if last is None or last.index in superseded:
        latest = evs[-1] if evs else None
        said = "" if latest is None else (
            f" (the latest state event, {latest.path.name}, is a {latest.kind}"
            + (", which moved no pin)" if latest.kind == "stall" else ")"))
        raise UsageError(f"there is no advance to roll back{said}",
                         "nothing to undo; 'upstream-sync status' shows where the pin is")
    return last


def _surfaces(port: Port, record: pins.PinRecord, old: pins.Pin,
              before: dict[str, str]) -> dict[Path, bytes]:
    """The pin block with its PARITY PIN paragraph, and the core oracle file, as `before`."""
    text = pins.render(record, old, restore=True)
    para = paragraph.find(text, path=port.rel(port.protocol))
    if "paragraph" in before:  # the whole paragraph the advance rewrote
        text = paragraph.restore(text, para, before["paragraph"])
    else:  # an advance that rewrote its head only
        text = paragraph.render(text, para, date=before["paragraph_date"],
                                sha=before["paragraph_sha"],
                                release_label=before["paragraph_label"] or para.release_label)
    writes = {port.protocol: text.encode()}
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), advance.CORE)
    if core is not None:
        writes[core.path] = oraclefile.render(core, pin=before["oracle_pin"],
                                              pin_label=before["oracle_pin_label"],
                                              pinned_on=before["oracle_pinned_on"]).encode()
    return writes


def _uncarried(port: Port, report_rel: str, *, made: bool) -> dict[Path, bytes | None]:
    """The carry-over record without what the rolled-back advance carried; no record when
    the advance `made` it and nothing is left."""
    items = port.carried()
    kept = {sha: c for sha, c in items.items()
            if not (c.by == "advance" and c.since == report_rel)}
    if kept == items:
        return {}
    return {port.carry_over_path: carryover.render(kept).encode() if kept or not made else None}


def _cycle(port: Port, last: events.Event, before: dict[str, Any]) -> dict[Path, bytes]:
    """The cycle the advance closed, frozen again as it was: a `sync` after the advance
    froze the next cycle, from the pin the rollback takes back."""
    if "cycle" not in before:
        return {}  # an advance recorded before advances kept their cycle
    rel = port.rel(last.path)
    closed = cycle.from_doc(before["cycle"], rel, _FIX)
    if (closed.pin, closed.target) != (last.pin_before, last.pin_after):
        raise MalformedRecord(f"the advance's recorded cycle is {short(closed.pin)}.."
                              f"{short(closed.target)}, not the pins it moved, "
                              f"{short(last.pin_before)}..{short(last.pin_after)}", _FIX,
                              path=rel)
    try:
        if port.cycle() == closed:
            return {}
    except MalformedRecord:
        pass  # a broken cycle record is replaced by the one the rollback reopens
    return {cycle.path(port): cycle.render(closed).encode()}


def oracle_env(port: Port, commit: str) -> tuple[str, str]:
    """Where the core oracle at `commit` lives, noting when it is gone or unknowable: as
    this machine has it (said to the user), and as the event records it (no absolute path)."""
    prefs = port.preferences()
    try:
        home = oracle.oracle_home(port, prefs)
    except SyncError as exc:
        return f"unknown ({exc})", "unknown (no oracle home)"
    env = oracle.env_path(home, advance.CORE, commit)
    missing = "" if env.exists() else " (missing: rebuild it)"
    return str(env) + missing, oracle.env_label(env, home) + missing


def retired(port: Port, pin: str) -> dict[Path, bytes]:
    """The ACTIVE reports of cycles from `pin` (the pin taken back), marked RETARGETED: a
    `sync` after the advance opened the next cycle, which the rollback replaces with the
    one it reopens. A report whose JSON does not say its pin is left as it is."""
    out: dict[Path, bytes] = {}
    for path in sorted(port.sync_dir.glob("*.md")):
        jpath = path.with_suffix(".json")
        if not cycle.REPORT_NAME.fullmatch(path.name) or not jpath.is_file():
            continue
        jtext = read_text(jpath)
        try:
            doc = json.loads(jtext)
        except (ValueError, RecursionError):
            continue
        new_md = report.restate(read_record(path, rel=port.rel(path)), ("ACTIVE",),
                                "RETARGETED")
        new_json = report.restate_json(jtext, ("ACTIVE",), "RETARGETED")
        if isinstance(doc, dict) and doc.get("pin") == pin and new_md and new_json:
            out |= {path: new_md.encode(), jpath: new_json.encode()}
    return out


def reopened(port: Port, rel: str) -> dict[Path, bytes]:
    """The rolled-back cycle's report and JSON marked ACTIVE again: its target is open anew.

    Left ADVANCED, the report would refuse every later advance to the same target.
    """
    path = port.path(rel)  # validated as a report's name when the event was read
    if path.parent != port.sync_dir or not path.is_file():
        return {}
    text = read_record(path, rel=rel)
    out = {path: advance.ADVANCED.sub("- Cycle state: ACTIVE", text, count=1).encode()}
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
