"""The cycle's frozen target: `.agents/sync/cycle.toml`.

`fetch` (or the first `sync`) resolves the target ref to a SHA and freezes it here;
every later step of the cycle reads the same SHA even when the remote moves, until
`--target`/`--retarget` says otherwise or the pin advances to it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

import tomli_w

from sync.infra.atomic import write_text
from sync.infra.errors import MalformedRecord, UsageError
from sync.port import Port

SCHEMA = 1
FILE = "cycle.toml"
_SHA = re.compile(r"[0-9a-f]{40}")


class CycleDoc(TypedDict):
    schema: int
    pin: str
    target: str
    target_ref: str
    frozen_at: str
    previous_report: str


@dataclass(frozen=True)
class Cycle:
    pin: str
    target: str
    target_ref: str
    frozen_at: str
    # The report of the cycle this one replaced (a retarget), whose carry-over it imports.
    previous_report: str = ""

    @property
    def target7(self) -> str:
        return self.target[:7]


def path(port: Port) -> Path:
    return port.sync_dir / FILE


def load(port: Port) -> Cycle | None:
    p = path(port)
    if not p.exists():
        return None
    rel = port.rel(p)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MalformedRecord(f"not valid TOML ({exc})", "fix it or delete it and run fetch again",
                              path=rel) from None
    except OSError as exc:
        raise MalformedRecord(f"cannot read it: {exc.strerror}", "make it a readable file",
                              path=rel) from None
    except RecursionError:
        raise MalformedRecord("not valid TOML (nested too deeply)",
                              "fix it or delete it and run fetch again", path=rel) from None
    try:
        if doc["schema"] != SCHEMA:
            raise MalformedRecord(f"schema {doc['schema']!r}, expected {SCHEMA}",
                                  "delete it and run fetch again", path=rel)
        values = [doc["pin"], doc["target"], doc["target_ref"], doc["frozen_at"],
                  doc.get("previous_report", "")]
    except KeyError as exc:
        raise MalformedRecord(f"missing key {exc.args[0]!r}", "delete it and run fetch again",
                              path=rel) from None
    if not all(isinstance(v, str) for v in values):
        raise MalformedRecord("values must be strings", "delete it and run fetch again", path=rel)
    for key, value in (("pin", values[0]), ("target", values[1])):
        # A hand-edited target that is not a full SHA would no longer be frozen.
        if not _SHA.fullmatch(value):
            raise MalformedRecord(f"{key} {value[:50]!r} is not a full lowercase SHA",
                                  "delete it and run fetch again", path=rel)
    return Cycle(*values)


def report_name(c: Cycle) -> str:
    return f"{c.frozen_at[:10]}-{c.target7}.md"


def save(port: Port, pin: str, target: str, target_ref: str, previous_report: str = "") -> Cycle:
    doc: CycleDoc = {"schema": SCHEMA, "pin": pin, "target": target, "target_ref": target_ref,
                     "frozen_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "previous_report": previous_report}
    write_text(path(port), "# Frozen target of the current sync cycle (written by upstream-sync).\n"
               + tomli_w.dumps(dict(doc)))
    return Cycle(doc["pin"], doc["target"], doc["target_ref"], doc["frozen_at"],
                 previous_report)


def require(port: Port) -> Cycle:
    c = load(port)
    if c is None:
        raise UsageError("no sync cycle is open (no frozen target)",
                         "run 'upstream-sync fetch' or 'upstream-sync sync' first")
    return c
