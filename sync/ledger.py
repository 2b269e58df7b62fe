"""The parity ledger: one markdown table, rows appended, never edited.

Columns: `Date / commit | What it does | Upstream equivalent | Parity status`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .atomic import read_text, write_text
from .errors import MalformedRecord

COLUMNS = ("Date / commit", "What it does", "Upstream equivalent", "Parity status")
_SEP = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    line: int

    @property
    def text(self) -> str:
        return " | ".join(self.cells)


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    insert_at: int  # offset where a new row goes (just after the last row)
    newline: str
    needs_newline: bool  # the last row has no line terminator (end of file)


def split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip() for c in cells]


def find_table(text: str, *, path: str) -> Table:
    lines = text.splitlines(keepends=True)
    offsets = []
    pos = 0
    for raw in lines:
        offsets.append(pos)
        pos += len(raw)
    header_idx = [i for i, raw in enumerate(lines)
                  if raw.lstrip().startswith("|") and tuple(split_row(raw)) == COLUMNS]
    if len(header_idx) != 1:
        raise MalformedRecord(
            f"expected exactly one ledger table with columns {' | '.join(COLUMNS)}, "
            f"found {len(header_idx)}", "restore the table header", path=path)
    h = header_idx[0]
    if h + 1 >= len(lines) or not _SEP.match(lines[h + 1].strip()):
        raise MalformedRecord("the ledger table has no separator row under its header",
                              "add '|---|---|---|---|'", path=path, line=h + 2)
    rows: list[Row] = []
    i = h + 2
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        cells = split_row(lines[i])
        if len(cells) != len(COLUMNS):
            raise MalformedRecord(f"ledger row has {len(cells)} cells, expected {len(COLUMNS)}",
                                  "fix the row (escape '|' inside cells as '\\|')",
                                  path=path, line=i + 1)
        rows.append(Row(tuple(cells), i + 1))
        i += 1
    last = lines[i - 1]
    body = last.rstrip("\r\n")
    newline = last[len(body):] or ("\r\n" if "\r\n" in text else "\n")
    return Table(tuple(rows), offsets[i - 1] + len(last), newline, not last.endswith(("\n", "\r")))


def escape_cell(text: str) -> str:
    flat = " <br> ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat.replace("|", "\\|")


def load(path: Path, *, rel: str) -> Table:
    if not path.exists():
        raise MalformedRecord("the parity ledger does not exist", "create it with the table "
                              "header " + " | ".join(COLUMNS), path=rel)
    return find_table(read_text(path), path=rel)


def append(path: Path, cells: tuple[str, str, str, str], *, rel: str) -> str:
    """Append one row; returns the row as written. Existing bytes are never changed."""
    text = read_text(path) if path.exists() else ""
    table = find_table(text, path=rel)
    if any(not c.strip() for c in cells):
        raise MalformedRecord("every ledger column needs a value", "fill all four", path=rel)
    row = "| " + " | ".join(escape_cell(c) for c in cells) + " |"
    lead = table.newline if table.needs_newline else ""
    new = text[: table.insert_at] + lead + row + table.newline + text[table.insert_at:]
    write_text(path, new)
    return row


def mentions(table: Table, needle: str) -> bool:
    return any(needle in r.text for r in table.rows)
