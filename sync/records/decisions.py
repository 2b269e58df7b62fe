"""Decisions: a human's or agent's disposition for one upstream commit.

`.agents/sync/decisions.toml`, keyed by full upstream SHA. Decisions outrank every
rule, survive re-runs, and carry into the next cycle (a commit re-enumerated after
a divergent retarget keeps its decision).

`Disposition` is the one vocabulary of what a commit is: decisions may leave a commit
UNCLASSIFIED, rules (`config.Rule`) conclude one of `RULED`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import tomli_w

from sync.infra.atomic import read_record, write_text
from sync.infra.errors import MalformedRecord
from sync.records import schema
from sync.records.schema import DERIVED
from sync.upstream.gitio import short

Disposition = Literal["PORT-NOW", "INVENTORY", "IGNORE", "UNCLASSIFIED"]
ALL: tuple[Disposition, ...] = get_args(Disposition)
# What a classification rule may conclude: UNCLASSIFIED is what nothing concluded.
RULED: tuple[Disposition, ...] = ("PORT-NOW", "INVENTORY", "IGNORE")
SCHEMA = 1
FILE = "decisions.toml"
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Decision:
    """One `[decisions.<sha>]` table; its fields are the table's keys, in file order."""

    sha: str = field(metadata=DERIVED)  # the table's name
    disposition: Disposition
    reason: str
    by: str = ""
    at: str = ""
    subject: str = ""


def _toml(text: str, path: str) -> dict[str, Any]:
    return schema.parse_toml(text, path, "fix the syntax (each decision is a [decisions.<sha>] "
                             "table)")


def _table(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """The `[decisions]` table of a file whose schema and keys are known."""
    unknown = set(doc) - {"schema", "decisions"}
    if unknown:
        raise MalformedRecord(f"unknown key {sorted(unknown)[0]!r}", "remove it", path=path)
    if doc.get("schema", SCHEMA) != SCHEMA:
        raise MalformedRecord(f"schema {doc.get('schema')!r}, expected {SCHEMA}",
                              "upgrade upstream-sync", path=path)
    table = doc.get("decisions", {})
    if not isinstance(table, dict):
        raise MalformedRecord("'decisions' must be a table", "fix the file", path=path)
    return table


def _decision(sha: str, d: object, path: str, text: str) -> Decision:
    def bad(message: str, fix: str, key: str | None = None) -> MalformedRecord:
        # Said where it is: the key's line in the decision's table, else the table's line.
        return MalformedRecord(message, fix, path=path,
                               line=schema.key_line(text, "decisions", sha, key))

    if not _SHA.fullmatch(sha):
        raise bad(f"decision key {sha[:50]!r} is not a full lowercase SHA",
                  "key decisions by the 40-hex upstream commit")
    if not isinstance(d, dict):
        raise bad(f"decision {short(sha)} is not a table", "fix the file")
    extra = schema.unknown(d, Decision)
    if extra is not None:
        raise bad(f"decision {short(sha)} has unknown key {extra!r}", "remove it", extra)
    disp, reason = d.get("disposition"), d.get("reason")
    if disp not in ALL:
        raise bad(f"decision {short(sha)}: disposition {disp!r} is not one of {', '.join(ALL)}",
                  "fix the file", "disposition")
    if not isinstance(reason, str) or not reason.strip():
        raise bad(f"decision {short(sha)} has no reason", "add a reason",
                  "reason" if "reason" in d else None)
    values = schema.values(d, Decision)
    wrong = schema.mistyped(values, Decision)
    if wrong is not None:
        raise bad(f"decision {short(sha)}: by/at/subject must be strings", "fix the file",
                  wrong.key)
    return Decision(sha=sha, **values)


def parse(text: str, *, path: str) -> dict[str, Decision]:
    schema.refuse_conflict(text, path)
    table = _table(_toml(text, path), path)
    return {sha: _decision(sha, d, path, text) for sha, d in table.items()}


def load(path: Path, *, rel: str) -> dict[str, Decision]:
    if not path.exists():
        return {}
    return parse(read_record(path, rel=rel), path=rel)


def render(decisions: dict[str, Decision]) -> str:
    table = {sha: schema.as_doc(d) for sha, d in sorted(decisions.items())}
    head = "# Decisions for upstream commits (written by upstream-sync; edit via 'decide').\n"
    return head + tomli_w.dumps({"schema": SCHEMA, "decisions": table})


def save(path: Path, decisions: dict[str, Decision]) -> None:
    write_text(path, render(decisions))
