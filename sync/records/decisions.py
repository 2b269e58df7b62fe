"""Decisions: a human's or agent's disposition for one upstream commit.

`.agents/sync/decisions.toml`, keyed by full upstream SHA. Decisions outrank every
rule, survive re-runs, and carry into the next cycle (a commit re-enumerated after
a divergent retarget keeps its decision).

`Disposition` is the one vocabulary of what a commit is: decisions may leave a commit
UNCLASSIFIED, rules (`config.Rule`) conclude one of `RULED`.
"""

from __future__ import annotations

import re
import tomllib
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
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedRecord(f"not valid TOML: {exc}", "fix the syntax (each decision is a "
                              "[decisions.<sha>] table)", path=path) from None
    except RecursionError:
        # tomllib recurses per nested array/inline table; no decision file nests deeply.
        raise MalformedRecord("not valid TOML: nested too deeply", "fix the syntax",
                              path=path) from None
    except ValueError:
        # tomllib turns an integer of more than 4300 digits into int(): a ValueError.
        raise MalformedRecord("not valid TOML: a value is out of bounds", "fix the syntax",
                              path=path) from None


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


def _decision(sha: str, d: object, path: str) -> Decision:
    if not _SHA.fullmatch(sha):
        raise MalformedRecord(f"decision key {sha[:50]!r} is not a full lowercase SHA",
                              "key decisions by the 40-hex upstream commit", path=path)
    if not isinstance(d, dict):
        raise MalformedRecord(f"decision {short(sha)} is not a table", "fix the file", path=path)
    extra = schema.unknown(d, Decision)
    if extra is not None:
        raise MalformedRecord(f"decision {short(sha)} has unknown key {extra!r}", "remove it",
                              path=path)
    disp, reason = d.get("disposition"), d.get("reason")
    if disp not in ALL:
        raise MalformedRecord(f"decision {short(sha)}: disposition {disp!r} is not one of "
                              f"{', '.join(ALL)}", "fix the file", path=path)
    if not isinstance(reason, str) or not reason.strip():
        raise MalformedRecord(f"decision {short(sha)} has no reason", "add a reason", path=path)
    values = schema.values(d, Decision)
    if schema.mistyped(values, Decision) is not None:
        raise MalformedRecord(f"decision {short(sha)}: by/at/subject must be strings",
                              "fix the file", path=path)
    return Decision(sha=sha, **values)


def parse(text: str, *, path: str) -> dict[str, Decision]:
    table = _table(_toml(text, path), path)
    out = {}
    for sha, d in table.items():
        try:
            out[sha] = _decision(sha, d, path)
        except MalformedRecord as exc:
            line = schema.table_line(text, "decisions", sha)
            if line is None:
                raise
            # Said where the table is: the message keeps its words, the path gets the line.
            raise MalformedRecord(exc.message.removeprefix(f"{path}: "), exc.fix, path=path,
                                  line=line) from None
    return out


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
