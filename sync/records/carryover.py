"""The carry-over record: upstream commits a cycle left open for the cycles after it.

`.agents/sync/carry-over.toml`, keyed by full upstream SHA. An advance records every
item it carries (a PORT-NOW decided `carry-over: ...`, an INVENTORY item not yet in
the inventory); a stall records every item it leaves open. Every later cycle imports
the record, whatever its range, until the item is ported (a ledger row names it) or
decided otherwise: whether an item is still open is worked out when it is read
(`steps/carry`), and only the next advance or stall rewrites the record, dropping
what was closed. An item is recorded once; it keeps the report that first carried it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, get_args

import tomli_w

from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord
from sync.records import schema
from sync.records.cycle import REPORT_NAME
from sync.records.schema import DERIVED
from sync.upstream import gitio
from sync.upstream.gitio import short

SCHEMA = 1
FILE = "carry-over.toml"
Kind = Literal["PORT-NOW", "INVENTORY", "UNCLASSIFIED"]
KINDS: tuple[Kind, ...] = get_args(Kind)
By = Literal["advance", "stall"]
_SHA = re.compile(r"[0-9a-f]{40}")
_FIX = "restore it from git (it is rewritten by advance and advance --stall only)"


@dataclass(frozen=True)
class Carried:
    """One `[carried.<sha>]` table; its fields are the table's keys, in file order."""

    sha: str = field(metadata=DERIVED)  # the table's name
    disposition: Kind
    subject: str
    reason: str  # why it is carried: the carry-over decision, or the stall that left it
    since: str  # the report (port-relative) of the cycle that first carried it
    since_target: str  # that cycle's target (full SHA)
    by: By
    pr: int = 0  # 0: the subject names no PR (TOML has no null)

    @property
    def pr_or_none(self) -> int | None:
        return self.pr or None


def _bad(rel: str, message: str) -> MalformedRecord:
    return MalformedRecord(message, _FIX, path=rel)


def _item(sha: str, raw: object, rel: str) -> Carried:
    if not _SHA.fullmatch(sha):
        raise _bad(rel, f"carried key {sha[:50]!r} is not a full lowercase SHA")
    if not isinstance(raw, dict):
        raise _bad(rel, f"carried {short(sha)} is not a table")
    problem = (schema.unknown(raw, Carried) or schema.missing(raw, Carried))
    if problem is not None:
        raise _bad(rel, f"carried {short(sha)}: unknown or missing key {problem!r}")
    wrong = schema.mistyped(raw, Carried)
    if wrong is not None:
        raise _bad(rel, f"carried {short(sha)}: {wrong.text}")
    if not _SHA.fullmatch(raw["since_target"]):
        raise _bad(rel, f"carried {short(sha)}: since_target is not a full lowercase SHA")
    since = PurePosixPath(raw["since"])
    # Reports name it (`since <report>`): a port-relative report path, never anything else.
    if since.is_absolute() or ".." in since.parts or not REPORT_NAME.fullmatch(since.name):
        raise _bad(rel, f"carried {short(sha)}: since {raw['since'][:60]!r} is not a sync "
                        "report's port-relative path")
    return Carried(sha=sha, **schema.values(raw, Carried))


def parse(text: str, *, rel: str) -> dict[str, Carried]:
    schema.refuse_conflict(text, rel)
    doc = schema.parse_toml(text, rel, _FIX)
    if set(doc) - {"schema", "carried"} or doc.get("schema") != SCHEMA:
        raise _bad(rel, f"expected schema = {SCHEMA} and [carried.<sha>] tables only")
    table = doc.get("carried", {})
    if not isinstance(table, dict):
        raise _bad(rel, "'carried' must be a table")
    return {sha: _item(sha, raw, rel) for sha, raw in table.items()}


def path(sync_dir: Path) -> Path:
    return sync_dir / FILE


def load(file: Path, *, rel: str) -> dict[str, Carried]:
    """The record; {} when no cycle carried anything yet."""
    if not file.exists():
        return {}
    return parse(read_record(file, rel=rel), rel=rel)


def render(items: dict[str, Carried]) -> str:
    table: dict[str, Any] = {sha: schema.as_doc(c) for sha, c in sorted(items.items())}
    head = ("# Carried-over upstream commits (written by upstream-sync advance and advance "
            "--stall;\n# every later cycle imports them until a ledger row or a decision "
            "closes them).\n")
    return head + tomli_w.dumps({"schema": SCHEMA, "carried": table})


def mistyped(path: Path, rel: str, record: dict[str, Carried], ref: gitio.Reference,
             shas: list[str] | None = None) -> list[MalformedRecord]:
    """Carried SHAs (of `shas`, default every one) that are no commit of the reference
    checkout although it has the target of the cycle that carried them: that target
    reaches every commit its cycle carried, so such a SHA was never one (a hand edit).
    One `git cat-file --batch-check`; each refusal names its table's line in `path`."""
    shas = list(record) if shas is None else [s for s in shas if s in record]
    if not shas:
        return []
    rows = gitio.batch_check(ref, [*shas, *(record[s].since_target for s in shas)])
    have, targets = rows[:len(shas)], rows[len(shas):]
    text = read_record(path, rel=rel) if path.exists() else ""
    return [MalformedRecord(
        f"carried {short(sha)} is no commit of the reference checkout, which has the target "
        f"{short(record[sha].since_target)} of the cycle that carried it (a mistyped SHA?)",
        "correct the table's SHA ('git log' in the reference checkout finds the commit) or "
        "remove the table", path=rel, line=schema.table_line(text, "carried", sha))
        for sha, row, target in zip(shas, have, targets, strict=True)
        if (row is None or row[1] != "commit") and target is not None and target[1] == "commit"]
