"""The parity ledger: a markdown table, rows appended, never edited.

Columns: `Date / commit | What it does | Upstream equivalent | Parity status`.

A real ledger is not one tidy table: blank lines (and headings, prose) split it into
many blocks under the one header, and rows hold unescaped `|` (`max|diff|=0`), pipes
inside code spans (GFM splits cells there too), a fifth column, a missing one, or two
rows on one line. Every `|` line under the header is read: a well-formed row as its
four cells, a malformed one as well as it can be (its text, references included, still
counts) together with what is wrong with it, so `check` lists every malformed row at
once. Only a ledger without its header (or one that cannot be read at all) is
unreadable, and then no command treats it as empty (`Read.problem` says why).
"""

from __future__ import annotations

import functools
import itertools
import re
import string
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sync.infra.atomic import decode_record, read_record, read_record_bytes, write_text
from sync.infra.cache import Store, digest
from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import mdscan
from sync.records.mdtext import cell

COLUMNS = ("Date / commit", "What it does", "Upstream equivalent", "Parity status")
_SEP = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_DATE_CELL = re.compile(r"\d{4}-\d{2}-\d{2}\b")
# A row's date opens its first cell (`2026-07-24 (...)`, `2026-07-02 `462d673``).
_ROW_DATE = re.compile(r"[\s|]*(\d{4}-\d{2}-\d{2})\b")
# ASCII digits, at most 12 (as `mdscan.PR_REF`): a 5000-digit "PR" is none, and int() of it
# raised ValueError (over 4300 digits) in check, audit, queue, sync and advance.
PR_REF = re.compile(r"vllm#([0-9]{1,12})\b|github\.com/vllm-project/vllm/pull/([0-9]{1,12})\b")
# A whole word of 7-40 lowercase hex characters, one of them a digit (the lookahead stays
# inside the word: it crosses only hex characters).
_HEX = re.compile(r"(?<![0-9A-Za-z_])(?=[a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
# The characters of a path as ports write them; `word_rows` holds each maximal run of them.
_PATH_CHARS = string.ascii_letters + string.digits + "_./+-"
_PATH_RUN = re.compile(f"[{re.escape(_PATH_CHARS)}]+")
# Every other byte of a row's UTF-8 (each byte of a non-ASCII character included) as a
# space: `path_runs` splits a megabyte of rows at C speed, twice as fast as `findall`.
_BLANK_OTHERS = bytes(b if chr(b) in _PATH_CHARS else 32 for b in range(256))


def path_runs(text: str) -> list[str]:
    """The maximal runs of path characters in `text`, in order (`_PATH_RUN.findall`)."""
    return (text.encode("utf-8", "surrogatepass").translate(_BLANK_OTHERS).decode("ascii")
            .split())


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]  # four cells; a malformed row's as read (see `problem`)
    line: int
    problem: str | None = None  # what is wrong with a malformed row
    raw: str = ""  # the row's text on its line (for a malformed row: everything it says)

    @property
    def text(self) -> str:
        """Everything the row says: its cells, or for a malformed row its whole line."""
        return self.raw if self.problem is not None and self.raw else " | ".join(self.cells)


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    insert_at: int  # offset where a new row goes (just after the ledger's last row)
    newline: str
    needs_newline: bool  # the last row has no line terminator (end of file)

    @property
    def malformed(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.problem is not None)

    @functools.cached_property
    def joined(self) -> str:
        """Every row's text, one row per line (a needle never spans two rows)."""
        return "\n".join(r.text for r in self.rows)

    @functools.cached_property
    def row_runs(self) -> tuple[list[str], ...]:
        """Each row's runs of path characters."""
        return tuple(path_runs(r.text) for r in self.rows)

    @functools.cached_property
    def word_rows(self) -> tuple[str, list[int], list[int]]:
        """Each distinct run of path characters in the rows, one per line (a needle made of
        those characters occurs in the rows exactly when it occurs in one run, and the runs
        of a real ledger, a megabyte of rows naming the same paths, are a fraction of it);
        the offset each starts at; the last row holding it (rows are appended)."""
        last: dict[str, int] = {}
        for i, runs in enumerate(self.row_runs):
            last.update(dict.fromkeys(runs, i))
        ordered = sorted(last)
        starts = list(itertools.accumulate((len(w) + 1 for w in ordered), initial=0))[:-1]
        return "\n".join(ordered), starts, [last[w] for w in ordered]

    @functools.cached_property
    def after_slash(self) -> tuple[list[str], list[str], list[int]]:
        """The runs of `word_rows`, and every part of a run that follows a `/` in it, sorted,
        with the run it is in: a needle `a/b...` lies only in a run with a part after a slash
        that starts with `b`, a range of this list (a real ledger's 30,000 runs, of which
        the needles' 2,000 searches each read a handful, not all 350 KB)."""
        runs = self.word_rows[0].split("\n")
        found = sorted((part, i) for i, run in enumerate(runs) if "/" in run
                       for part in run.split("/")[1:])
        return runs, [part for part, _ in found], [i for _, i in found]

    def day(self, row: int) -> str:
        """A row's date (YYYY-MM-DD), "" when it says none."""
        m = _ROW_DATE.match(self.rows[row].text)
        return m.group(1) if m else ""

    @functools.cached_property
    def row_refs(self) -> RowRefs:
        """Which rows name each PR and SHA word, and each row's path words."""
        prs: dict[int, set[int]] = {}
        shas: list[tuple[str, int]] = []
        words: list[str] = []
        for i, r in enumerate(self.rows):
            for n in pr_refs(r.text):
                prs.setdefault(n, set()).add(i)
            shas += [(w, i) for w in set(sha_words(r.text))]
            words.append("\n".join(set(self.row_runs[i])))
        shas.sort()
        return RowRefs(prs, [w for w, _ in shas], [i for _, i in shas], words)


def split_row(line: str) -> list[str]:
    """Cells as GFM splits them: at every unescaped `|`, code spans included."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    # Most rows escape no `|`: a plain split gives the same cells, and a megabyte of rows
    # splits several times faster than with the look-behind.
    cells = re.split(r"(?<!\\)\|", body) if "\\|" in body else body.split("|")
    return [c.strip() for c in cells]


def _split_outside_code(line: str) -> list[str]:
    """Cells as the author meant them when a `|` sits inside a code span."""
    masked = _CODE_SPAN.sub(lambda m: m.group().replace("|", "\0"), line)
    return [c.replace("\0", "|") for c in split_row(masked)]


def _tolerant(cells: list[str], line: str) -> tuple[list[tuple[str, ...]], str]:
    """(the row(s) a malformed line holds, what is wrong with it)."""
    n, want = len(cells), len(COLUMNS)
    code = _split_outside_code(line)
    if len(code) == want:
        return [tuple(code)], (f"{n} cells, expected {want}: a '|' inside a code span splits "
                               "the row (GFM splits cells there too)")
    two = _two_rows(cells)
    if two is not None:
        return two, (f"{n} cells: two rows on one line (joined by '||'); put the second on "
                     "its own line")
    if n < want:
        return [tuple(cells + [""] * (want - n))], (
            f"{n} cell{'s' if n != 1 else ''}, expected {want}: a column is missing (or a "
            "line break inside a cell)")
    head = cells[: want - 1]
    return [(*head, " | ".join(cells[want - 1:]))], (
        f"{n} cells, expected {want}: an unescaped '|' inside a cell, or an extra column")


def _two_rows(cells: list[str]) -> list[tuple[str, ...]] | None:
    want = len(COLUMNS)
    if (len(cells) == 2 * want + 1 and cells[want] == ""
            and _DATE_CELL.match(cells[want + 1]) is not None):
        return [tuple(cells[:want]), tuple(cells[want + 1:])]
    return None


_FIX = ("escape each '|' inside a cell as '\\|' and keep exactly four columns; rows are "
        "otherwise append-only, so repair a malformed one in a commit that does only that")


def _header_lines(lines: list[mdscan.Line], code: list[bool]) -> list[int]:
    return [ln.no for ln in lines
            if not code[ln.no] and ln.body.lstrip().startswith("|")
            and tuple(split_row(ln.body)) == COLUMNS]


def _header(lines: list[mdscan.Line], code: list[bool], path: str) -> int:
    """The 1-based line of the ledger's header (the first; a repeat heads a later block)."""
    found = _header_lines(lines, code)
    if not found:
        raise MalformedRecord(
            f"no ledger table with columns {' | '.join(COLUMNS)}",
            "restore the table header and its separator row", path=path)
    for h in found:
        if h >= len(lines) or not _SEP.match(lines[h].body.strip()):
            raise MalformedRecord("the ledger table has no separator row under its header",
                                  "add '|---|---|---|---|' under it", path=path, line=h + 1)
    return found[0]


def _blocks(lines: list[mdscan.Line], code: list[bool], first: int) -> list[list[mdscan.Line]]:
    """Runs of `|` lines from line `first` on, outside fenced code."""
    runs: list[list[mdscan.Line]] = []
    cur: list[mdscan.Line] = []
    for ln in lines[first - 1:]:
        if not code[ln.no] and ln.body.lstrip().startswith("|"):
            cur.append(ln)
            continue
        if cur:
            runs.append(cur)
        cur = []
    if cur:
        runs.append(cur)
    return runs


def _block_rows(block: list[mdscan.Line]) -> tuple[list[Row], bool]:
    """(the ledger rows of one block, whether it is the ledger's): a block headed by another
    table's header and separator is not the ledger's; one headed by the ledger's header
    (repeated to make the block render) is."""
    start = 0
    if len(block) > 1 and _SEP.match(block[1].body.strip()):
        if tuple(split_row(block[0].body)) != COLUMNS:
            return [], False
        start = 2
    rows: list[Row] = []
    for ln in block[start:]:
        rows += _row(ln)
    return rows, True


def _row(ln: mdscan.Line) -> list[Row]:
    cells = split_row(ln.body)
    if len(cells) == len(COLUMNS):
        return [Row(tuple(cells), ln.no)]
    read, problem = _tolerant(cells, ln.body)
    return [Row(c, ln.no, problem, ln.body.strip()) for c in read]


def find_table(text: str, *, path: str) -> Table:
    lines = mdscan.split_lines(text)
    code, _ = mdscan.scan(lines)
    h = _header(lines, code, path)
    rows: list[Row] = []
    last = lines[h]  # the separator: a new row goes after it when there is none yet
    for block in _blocks(lines, code, h + 2):
        got, ours = _block_rows(block)
        rows += got
        if ours:
            last = block[-1]
    return Table(tuple(rows), last.start + len(last.body) + len(last.nl), mdscan.newline(lines),
                 not last.nl)


def escape_cell(text: str) -> str:
    """A person's cell text: each of its lines escaped (`mdtext.cell`: no bare `|`, `<`,
    `[`...), joined by the one tag the tool itself writes, `<br>`."""
    return " <br> ".join(cell(part) for part in text.splitlines() if part.strip())


@dataclass(frozen=True)
class Read:
    """The ledger as a command sees it: its table, or why it could not be read."""

    rel: str
    table: Table | None
    problem: str | None  # None when the table was read (malformed rows included)

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.table.rows if self.table is not None else ()

    @functools.cached_property
    def refs(self) -> Refs:
        """What the rows name (several steps of one command ask; a real ledger is a MB),
        from the per-row index the audit reads too: neither a PR nor a SHA word crosses a
        line, so the rows name what their joined text does."""
        if self.table is None:
            return Refs.of(())
        by_row = self.table.row_refs
        return Refs(frozenset(by_row.prs), tuple(sorted(set(by_row.shas))), self.table.joined)

    def indexed(self) -> Read:
        """This read with every index of its rows built (what is kept is what the next
        command with the same ledger finds built)."""
        if self.table is not None:
            _ = self.refs, self.table.after_slash
        return self

    def unreadable(self, affects: str) -> str | None:
        """One line: what could not be read and what that means for `affects`; None when
        the ledger was read."""
        if self.problem is None:
            return None
        return (f"the parity ledger {self.rel} cannot be read ({self.problem}): {affects} — "
                "fix the ledger (upstream-sync check names the problem)")


def read(path: Path, *, rel: str, kept: Store | None = None,
         data: bytes | None = None) -> Read:
    """The ledger, never raising: an unreadable one says why in `problem`. With `kept`: a
    ledger of the same bytes as one read before comes back as it was read, what its rows
    name indexed; one not seen before is indexed and kept (a real ledger is a megabyte:
    its indexes cost a command 0.2 s, loading them 0.05 s). `data`: the bytes the file is
    about to hold (a command's staged write), read instead of the file."""
    try:
        data = _bytes(path, rel) if data is None else data
        key = (rel, digest(data))
        known = kept.load().get(key) if kept is not None else None
        if isinstance(known, Read):
            return known
        got = Read(rel, _table(data, rel), None)
    except MalformedRecord as exc:
        # The message starts with "path:line: "; the line says where, the path is `rel`.
        where = f"{exc.path}:{exc.line}: " if exc.line is not None else f"{exc.path}: "
        bare = exc.message.removeprefix(where) if exc.path is not None else exc.message
        return Read(rel, None, (f"line {exc.line}: " if exc.line is not None else "") + bare)
    except SyncError as exc:
        return Read(rel, None, exc.message)
    if kept is not None:
        kept.save({key: got.indexed()})
    return got


def load(path: Path, *, rel: str) -> Table:
    return _table(_bytes(path, rel), rel)


def _table(data: bytes, rel: str) -> Table:
    return find_table(decode_record(data, rel=rel), path=rel)


def _bytes(path: Path, rel: str) -> bytes:
    if not path.exists():
        raise MalformedRecord("the parity ledger does not exist", "create it with the table "
                              "header " + " | ".join(COLUMNS), path=rel)
    return read_record_bytes(path, rel=rel)


def _read(path: Path, rel: str) -> str:
    return read_record(path, rel=rel)


def malformed_findings(table: Table, *, rel: str) -> list[str]:
    """One `file:line: ...` line per malformed row (a line holding two rows counts once)."""
    seen: dict[int, str] = {}
    for r in table.malformed:
        seen.setdefault(r.line, r.problem or "")
    return [f"{rel}:{line}: ledger row has {problem} — {_FIX}" for line, problem in seen.items()]


def render_row(cells: tuple[str, str, str, str]) -> str:
    if any(not escape_cell(c) for c in cells):
        raise UsageError("every ledger column needs a value", "fill all four")
    return "| " + " | ".join(escape_cell(c) for c in cells) + " |"


def appended(text: str, cells: tuple[str, str, str, str], *, rel: str) -> tuple[str, str]:
    """(new text, row): `text` with one row added after the ledger's last row.

    Fails closed: the new text must read back as the same rows plus exactly this one,
    and every byte before and after the insertion must be the old file's.
    """
    table = find_table(text, path=rel)
    row = render_row(cells)
    at = table.insert_at
    brk = mdscan.line_break(text[:at], table.newline, rel=rel)
    new = text[:at] + brk + row + table.newline + text[at:]
    again = find_table(new, path=rel)
    want = tuple(escape_cell(c) for c in cells)
    if (again.rows[:-1] != table.rows or len(again.rows) != len(table.rows) + 1
            or again.rows[-1].cells != want or again.rows[-1].problem is not None):
        raise MalformedRecord("the new row would not read back as one row of the table",
                              "check the table's surroundings (a '|' line right after it?)",
                              path=rel)
    return new, row


def append(path: Path, cells: tuple[str, str, str, str], *, rel: str) -> str:
    """Append one row; returns the row as written. Existing bytes are never changed."""
    new, row = appending(path, cells, rel=rel)
    write_text(path, new)
    return row


def appending(path: Path, cells: tuple[str, str, str, str], *, rel: str) -> tuple[str, str]:
    """(new text, row) of `append`, nothing written: the file's text with the row added."""
    if not path.exists():
        load(path, rel=rel)  # raises the "does not exist" refusal
    return appended(_read(path, rel), cells, rel=rel)


@dataclass(frozen=True)
class RowRefs:
    prs: dict[int, set[int]]  # PR -> the rows naming it
    shas: list[str]  # every SHA word of a row, sorted (once per row naming it)
    sha_rows: list[int]  # the row of each
    words: list[str]  # each row's path words, one per line

    def rows_naming(self, sha: str, pr: int | None) -> set[int]:
        """The rows that name the commit: its PR, or a prefix of its SHA (7+ characters)."""
        out = set(self.prs.get(pr, ())) if pr is not None else set()
        return out | {self.sha_rows[i] for i in _prefixes(self.shas, sha)}


def names_change(table: Table, paths: Sequence[str], sha: str, pr: int | None) -> bool:
    """Whether a row names one of `paths` and the commit (its SHA or PR): a note of that
    change, whenever it was written."""
    refs = table.row_refs
    return any(p in refs.words[i] for i in refs.rows_naming(sha, pr) for p in paths)


@dataclass(frozen=True)
class Mention:
    """The last row that names a path: its index (rows are appended: the highest is the
    newest) and its date ("" when it says none)."""

    row: int
    day: str


def latest_mention(table: Table, needle: str, *, starts_word: bool = False) -> Mention | None:
    """The last row that names `needle`, a path; None when no row names it. `starts_word`:
    only where a run of path characters begins with it (`model_executor/x.py` written for
    `vllm/model_executor/x.py`, not inside `vllm_omni/model_executor/x.py`)."""
    # Each segment after a slash starts a part after a slash in any run holding the needle:
    # the longest (most often the file's name, not `model_executor`) reads the fewest.
    after = max(needle.split("/")[1:], key=len, default="")
    if after and _PATH_RUN.fullmatch(needle):
        found = _in_runs(table, needle, after, starts_word)
    else:
        found = _in_words(table, needle, starts_word)
    return Mention(found, table.day(found)) if found >= 0 else None


def _in_runs(table: Table, needle: str, after: str, starts_word: bool) -> int:
    """The last row holding `needle` (path characters, `after` one of its segments after a
    slash) in a run: only the runs with a part after a slash that starts with `after`."""
    runs, parts, holders = table.after_slash
    rows = table.word_rows[2]
    found = -1
    # Parts are path characters: every one that starts with `after` sorts before this.
    end = after[:-1] + chr(ord(after[-1]) + 1)
    for k in range(bisect_left(parts, after), bisect_left(parts, end)):
        run = runs[holders[k]]
        if rows[holders[k]] > found and (run.startswith(needle) if starts_word
                                         else needle in run):
            found = rows[holders[k]]
    return found


def _in_words(table: Table, needle: str, starts_word: bool) -> int:
    """The last row holding `needle`: one search of every run (a needle with no slash, or
    with characters no run holds)."""
    words, starts, rows = table.word_rows
    found = -1
    at = words.find(needle)
    while at != -1:
        if not starts_word or at == 0 or words[at - 1] == "\n":
            found = max(found, rows[bisect_right(starts, at) - 1])
        at = words.find(needle, at + 1)
    return found


def pr_refs(text: str) -> set[int]:
    """The PRs `text` names (`vllm#N`, or a link to the PR), as a row names them."""
    return {int(a or b) for a, b in PR_REF.findall(text)}


def sha_words(text: str) -> list[str]:
    """The words of `text` a row names a commit by: 7-40 lowercase hex with a digit."""
    return _HEX.findall(text)


@dataclass(frozen=True)
class Refs:
    """What the ledger's rows name: upstream PRs and commit SHAs (prefixes as written)."""

    prs: frozenset[int]
    shas: tuple[str, ...]  # every 7-40 hex word, sorted
    text: str

    @classmethod
    def of(cls, rows: tuple[Row, ...]) -> Refs:
        text = "\n".join(r.text for r in rows)
        return cls(frozenset(pr_refs(text)), tuple(sorted(set(sha_words(text)))), text)

    def names(self, sha: str, pr: int | None) -> bool:
        """A row names the PR, or the commit by a prefix of its SHA (7+ characters)."""
        if pr is not None and pr in self.prs:
            return True
        return next(_prefixes(self.shas, sha), None) is not None


def _prefixes(words: Sequence[str], sha: str) -> Iterator[int]:
    """The indexes in `words` (sorted) of the words that are prefixes of `sha`: they sort in
    one run after its first 7 characters."""
    i = bisect_left(words, sha[:7])
    while i < len(words) and words[i].startswith(sha[:7]):
        if sha.startswith(words[i]):
            yield i
        i += 1
