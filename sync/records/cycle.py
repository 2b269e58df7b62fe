"""The cycle's frozen target: `.agents/sync/cycle.toml`.

`fetch` (or the first `sync`) resolves the target ref to a SHA and freezes it here;
every later step of the cycle reads the same SHA even when the remote moves, until
`--target`/`--retarget` says otherwise or the pin advances to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from sync.infra import clock
from sync.infra.atomic import read_record, write_text
from sync.infra.errors import MalformedRecord, UsageError
from sync.records import blocks, schema
from sync.records.layout import Layout

SCHEMA = 1
FILE = "cycle.toml"
_SHA = re.compile(r"[0-9a-f]{40}")
_FROZEN_AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_REF = re.compile(r"[A-Za-z0-9_./@{}^~:+-]{1,200}")  # what gitio.check_rev lets through
REPORT_NAME = re.compile(r"\d{4}-\d{2}-\d{2}-[0-9a-f]{7}\.md")
_REDO = "delete it and run fetch again"


@dataclass(frozen=True)
class Cycle:
    """The file's keys after `schema`, in file order."""

    pin: str
    target: str
    target_ref: str
    frozen_at: str
    # The report of the cycle this one replaced (a retarget).
    previous_report: str = ""
    # A target that does not descend from the pin was accepted (`--allow-divergent`) for the
    # whole cycle: its later steps (decide, advance) need not say so again.
    divergent_ok: bool = False

    @property
    def target7(self) -> str:
        return self.target[:7]


def path(port: Layout) -> Path:
    return port.sync_dir / FILE


def _read(p: Path, rel: str) -> dict[str, Any]:
    text = read_record(p, rel=rel)
    return schema.parse_toml(text, rel, "fix it or delete it and run fetch again")


def _validate(doc: dict[str, Any], rel: str, fix: str = _REDO) -> None:
    if "schema" not in doc:
        raise MalformedRecord("missing key 'schema'", fix, path=rel)
    if doc["schema"] != SCHEMA:
        raise MalformedRecord(f"schema {doc['schema']!r}, expected {SCHEMA}", fix, path=rel)
    absent = schema.missing(doc, Cycle)
    if absent is not None:
        raise MalformedRecord(f"missing key {absent!r}", fix, path=rel)
    problem = schema.mistyped(doc, Cycle)
    if problem is not None:
        raise MalformedRecord(problem.text, fix, path=rel)
    for key in ("pin", "target"):
        # A hand-edited target that is not a full SHA would no longer be frozen.
        if not _SHA.fullmatch(doc[key]):
            raise MalformedRecord(f"{key} {doc[key][:50]!r} is not a full lowercase SHA", fix,
                                  path=rel)
    # These become the report's file name and a ref the report shows: only their shapes.
    if not _FROZEN_AT.fullmatch(doc["frozen_at"]) or not blocks.is_date(doc["frozen_at"][:10]):
        raise MalformedRecord(f"frozen_at {doc['frozen_at'][:50]!r} is not a UTC time "
                              "YYYY-MM-DDTHH:MM:SSZ", fix, path=rel)
    previous = doc.get("previous_report", "")
    if previous and not REPORT_NAME.fullmatch(previous):
        raise MalformedRecord(f"previous_report {previous[:50]!r} is not a report's name",
                              fix, path=rel)
    if not _REF.fullmatch(doc["target_ref"]):
        raise MalformedRecord(f"target_ref {doc['target_ref'][:50]!r} is not a git ref", fix,
                              path=rel)


def load(port: Layout) -> Cycle | None:
    p = path(port)
    if not p.exists():
        return None
    rel = port.rel(p)
    doc = _read(p, rel)
    _validate(doc, rel)
    # Keys the schema does not declare are ignored, as they always were.
    return Cycle(**schema.values(doc, Cycle))


def report_name(c: Cycle) -> str:
    return f"{c.frozen_at[:10]}-{c.target7}.md"


def now() -> str:
    """The time a cycle frozen now is stamped with."""
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def save(port: Layout, pin: str, target: str, target_ref: str,
         previous_report: str = "", *, divergent_ok: bool = False) -> Cycle:
    """Freeze a new cycle (stamped now)."""
    return store(port, Cycle(pin, target, target_ref, now(), previous_report, divergent_ok))


def store(port: Layout, c: Cycle) -> Cycle:
    """Write `c` as the open cycle (its frozen date kept)."""
    write_text(path(port), render(c))
    return c


def render(c: Cycle) -> str:
    return ("# Frozen target of the current sync cycle (written by upstream-sync).\n"
            + tomli_w.dumps({"schema": SCHEMA, **schema.as_doc(c)}))


def from_doc(doc: object, rel: str, fix: str) -> Cycle:
    """A cycle as `schema.as_doc` gives it (an advance's event records the cycle it closed),
    checked as the file is; `rel` names where it was read, `fix` what to do if it is bad."""
    if not isinstance(doc, dict):
        raise MalformedRecord("the recorded cycle is not a table", fix, path=rel)
    full = {"schema": SCHEMA, **doc}
    _validate(full, rel, fix)
    return Cycle(**schema.values(full, Cycle))


def require(port: Layout) -> Cycle:
    c = load(port)
    if c is None:
        raise UsageError("no sync cycle is open (no frozen target)",
                         "run 'upstream-sync fetch' or 'upstream-sync sync' first")
    return c
