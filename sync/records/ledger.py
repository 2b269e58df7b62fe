"""The parity ledger: one markdown table, rows appended, never edited.

Columns: `Date / commit | What it does | Upstream equivalent | Parity status`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sync.infra.atomic import read_record, write_text
from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records.mdtext import cell

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
    h = _header(lines, path)
    rows = _rows(lines, h + 2, path)
    i = h + 2 + len(rows)  # the first line after the table
    last = lines[i - 1]
    body = last.rstrip("\r\n")
    newline = last[len(body):] or ("\r\n" if "\r\n" in text else "\n")
    insert_at = sum(len(raw) for raw in lines[:i])
    return Table(tuple(rows), insert_at, newline, not last.endswith(("\n", "\r")))


def _header(lines: list[str], path: str) -> int:
    """The index of the one header line with the ledger's columns (its separator checked)."""
    found = [i for i, raw in enumerate(lines)
             if raw.lstrip().startswith("|") and tuple(split_row(raw)) == COLUMNS]
    if len(found) != 1:
        raise MalformedRecord(
            f"expected exactly one ledger table with columns {' | '.join(COLUMNS)}, "
            f"found {len(found)}", "restore the table header", path=path)
    h = found[0]
    if h + 1 >= len(lines) or not _SEP.match(lines[h + 1].strip()):
        raise MalformedRecord("the ledger table has no separator row under its header",
                              "add '|---|---|---|---|'", path=path, line=h + 2)
    return h


def _rows(lines: list[str], first: int, path: str) -> list[Row]:
    """The table's rows: the `|` lines from index `first` on."""
    rows: list[Row] = []
    for i in range(first, len(lines)):
        if not lines[i].lstrip().startswith("|"):
            break
        cells = split_row(lines[i])
        if len(cells) != len(COLUMNS):
            raise MalformedRecord(f"ledger row has {len(cells)} cells, expected {len(COLUMNS)}",
                                  "fix the row (escape '|' inside cells as '\\|')",
                                  path=path, line=i + 1)
        rows.append(Row(tuple(cells), i + 1))
    return rows


def escape_cell(text: str) -> str:
    """A person's cell text: each of its lines escaped (`mdtext.cell`: no bare `|`, `<`,
    `[`...), joined by the one tag the tool itself writes, `<br>`."""
    return " <br> ".join(cell(part) for part in text.splitlines() if part.strip())


def load(path: Path, *, rel: str) -> Table:
    if not path.exists():
        raise MalformedRecord("the parity ledger does not exist", "create it with the table "
                              "header " + " | ".join(COLUMNS), path=rel)
    return find_table(_read(path, rel), path=rel)


def _read(path: Path, rel: str) -> str:
    return read_record(path, rel=rel)


def render_row(cells: tuple[str, str, str, str]) -> str:
    if any(not escape_cell(c) for c in cells):
        raise UsageError("every ledger column needs a value", "fill all four")
    return "| " + " | ".join(escape_cell(c) for c in cells) + " |"


def appended(text: str, cells: tuple[str, str, str, str], *, rel: str) -> tuple[str, str]:
    """(new text, row): `text` with one row added after the table's last row.

    Fails closed: the new text must read back as the same table plus exactly this row,
    and every byte before and after the insertion must be the old file's.
    """
    table = find_table(text, path=rel)
    row = render_row(cells)
    lead = table.newline if table.needs_newline else ""
    new = text[: table.insert_at] + lead + row + table.newline + text[table.insert_at:]
    again = find_table(new, path=rel)
    want = tuple(escape_cell(c) for c in cells)
    if again.rows[:-1] != table.rows or again.rows[-1].cells != want:
        raise MalformedRecord("the new row would not read back as one row of the table",
                              "check the table's surroundings (a '|' line right after it?)",
                              path=rel)
    return new, row


def append(path: Path, cells: tuple[str, str, str, str], *, rel: str) -> str:
    """Append one row; returns the row as written. Existing bytes are never changed."""
    if not path.exists():
        load(path, rel=rel)  # raises the "does not exist" refusal
    new, row = appended(_read(path, rel), cells, rel=rel)
    write_text(path, new)
    return row


def mentions(table: Table, needle: str) -> bool:
    return any(needle in r.text for r in table.rows)


def rows_text(path: Path, *, rel: str) -> str:
    """Every row's cells joined, for "does a row name X" questions; "" when unreadable."""
    try:
        return "\n".join(r.text for r in load(path, rel=rel).rows)
    except SyncError:
        return ""
