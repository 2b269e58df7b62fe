from __future__ import annotations

import json
import re
from pathlib import Path

import endings
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stepfixture import LEDGER, World, make_world, run, with_port_cmd, write

from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import ledger

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]

HEAD = "| Date / commit | What it does | Upstream equivalent | Parity status |"
SEP = "|---|---|---|---|"
ROW = "| 2025-12-02 / `4f1c2a9` | Port a | vllm#10 (`vllm/a.py`) | ✅ goldens |"
CELLS = ("2026-01-05 / `abc1234`", "Fix a | b\nand c", "vllm#12 (`vllm/a.py`)", "✅ parity")
NEW_ROW = ("| 2026-01-05 / `abc1234` | Fix a \\| b <br> and c | vllm#12 (`vllm/a.py`) | "
           "✅ parity |")


def ledger_file(tmp_path: Path, text: str | bytes) -> Path:
    return write(tmp_path, "ledger.md", text)


def test_append_keeps_every_existing_byte(tmp_path: Path) -> None:
    path = ledger_file(tmp_path, LEDGER)
    row = ledger.append(path, CELLS, rel="ledger.md")
    assert row == NEW_ROW
    after = path.read_text()
    at = LEDGER.index(ROW) + len(ROW) + 1
    assert after == LEDGER[:at] + NEW_ROW + "\n" + LEDGER[at:]
    table = ledger.load(path, rel="ledger.md")
    assert [r.cells for r in table.rows][-1] == (
        "2026-01-05 / `abc1234`", "Fix a \\| b <br> and c", "vllm#12 (`vllm/a.py`)", "✅ parity")
    assert table.rows[-1].line == 8
    assert ledger.latest_mention(table, "vllm/a.py") == ledger.Mention(len(table.rows) - 1,
                                                                         "2026-01-05")
    assert ledger.latest_mention(table, "vllm/b.py") is None
    assert 12 in ledger.Refs.of(table.rows).prs and 99 not in ledger.Refs.of(table.rows).prs


def test_append_keeps_crlf(tmp_path: Path) -> None:
    text = LEDGER.replace("\n", "\r\n")
    path = ledger_file(tmp_path, text.encode())
    ledger.append(path, CELLS, rel="ledger.md")
    data = path.read_bytes()
    assert data.count(b"\r\n") == text.count("\r\n") + 1
    assert b"\n" not in data.replace(b"\r\n", b"")
    at = text.index(ROW) + len(ROW) + 2
    assert data == (text[:at] + NEW_ROW + "\r\n" + text[at:]).encode()


def test_append_to_a_table_at_end_of_file_without_newline(tmp_path: Path) -> None:
    text = f"# Ledger\n\n{HEAD}\n{SEP}\n{ROW}"
    path = ledger_file(tmp_path, text)
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_text() == text + "\n" + NEW_ROW + "\n"


def test_append_after_a_row_ending_in_a_lone_cr_doubles_no_cr(tmp_path: Path) -> None:
    """A CRLF ledger whose last row ends in a lone CR (an old-Mac line end) at the end of the
    file got the file's CRLF after that CR, CR CR LF: an empty line to an editor, which cut
    the new row off the table. Only the LF that makes it CRLF goes there; every old byte
    is kept and the new row ends with the file's CRLF."""
    text = f"# Ledger\r\n\r\n{HEAD}\r\n{SEP}\r\n{ROW}\r"
    path = ledger_file(tmp_path, text.encode())
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_bytes() == (text + "\n" + NEW_ROW + "\r\n").encode()


def test_append_after_a_row_ending_in_two_lone_crs_is_refused(tmp_path: Path) -> None:
    """A last row ending in two lone CRs (a row and an empty line, to an editor that reads a
    lone CR as a line end) has no place for a row next to it: adding LF there left CR CR LF,
    the new row cut off the table. Refused, nothing written, with the fix."""
    text = f"{HEAD}\r\n{SEP}\r\n{ROW}\r\r"
    path = ledger_file(tmp_path, text.encode())
    with pytest.raises(MalformedRecord, match="two carriage returns") as raised:
        ledger.append(path, CELLS, rel="ledger.md")
    assert raised.value.fix == "save the file with LF or CRLF line endings"
    assert path.read_bytes() == text.encode()


def test_a_new_row_ends_with_the_dominant_line_ending(tmp_path: Path) -> None:
    """The new row's ending is the file's (the most lines'), not the first line's."""
    text = f"# Ledger\n\r\n{HEAD}\r\n{SEP}\r\n{ROW}"
    path = ledger_file(tmp_path, text.encode())
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_bytes() == (text + "\r\n" + NEW_ROW + "\r\n").encode()


def test_append_to_an_empty_table(tmp_path: Path) -> None:
    text = f"{HEAD}\n{SEP}\n\nprose\n"
    path = ledger_file(tmp_path, text)
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_text() == f"{HEAD}\n{SEP}\n{NEW_ROW}\n\nprose\n"


@pytest.mark.parametrize(("text", "why"), [
    ("# Ledger\n\nno table here\n", "no ledger table"),
    (f"{HEAD}\n{ROW}\n", "no separator row"),
    (f"{HEAD}\n{SEP}\n{ROW}\n\n{HEAD}\n{ROW}\n", "no separator row"),
    (f"| Date | What | Upstream | Status |\n{SEP}\n", "no ledger table"),
])
def test_a_ledger_without_its_header_is_refused_and_untouched(tmp_path: Path, text: str,
                                                              why: str) -> None:
    path = ledger_file(tmp_path, text)
    with pytest.raises(MalformedRecord) as info:
        ledger.append(path, CELLS, rel="ledger.md")
    assert why in str(info.value) and str(info.value).startswith("ledger.md")
    assert path.read_text() == text
    read = ledger.read(path, rel="ledger.md")
    assert read.table is None and read.problem is not None and why in read.problem
    line = read.unreadable("the queue cannot tell ported from open")
    assert line is not None and line.startswith("the parity ledger ledger.md cannot be read (")
    assert "the queue cannot tell ported from open" in line


@pytest.mark.parametrize("bad", ["| a | b | c |", "| a | b \\| c | d |"])
def test_append_after_a_malformed_row_keeps_it(tmp_path: Path, bad: str) -> None:
    text = f"{HEAD}\n{SEP}\n{bad}\n"
    path = ledger_file(tmp_path, text)
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_text() == text + NEW_ROW + "\n"
    table = ledger.load(path, rel="ledger.md")
    assert [r.line for r in table.malformed] == [3]
    assert ledger.malformed_findings(table, rel="ledger.md")[0].startswith(
        "ledger.md:3: ledger row has 3 cells, expected 4: a column is missing (or a line "
        "break inside a cell) — escape")


def test_missing_ledger_and_empty_cells(tmp_path: Path) -> None:
    with pytest.raises(MalformedRecord, match="does not exist"):
        ledger.append(tmp_path / "nope.md", CELLS, rel="nope.md")
    path = ledger_file(tmp_path, LEDGER)
    with pytest.raises(UsageError, match="needs a value"):
        ledger.append(path, ("d", " \n ", "u", "s"), rel="ledger.md")
    assert path.read_text() == LEDGER


def test_split_and_escape_round_trip() -> None:
    assert ledger.split_row("| a \\| b | c |") == ["a \\| b", "c"]
    assert ledger.escape_cell(" x |\r\n y \n\n z ") == "x \\| <br> y <br> z"


# -- the command ------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


def test_ledger_add_command(world: World) -> None:
    path = world.root / ".agents/parity-ledger.md"
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "Port a | again",
            "--pr", "12", "--pr", "10", "--path", "vllm/a.py", "--upstream", "@ `5a28fbeb41`",
            "--status", "✅ goldens\nbit-identical", "--date", "2026-01-05", "--json",
            "--outside-range")
    assert r.rc == 0, r.err
    row = ("| 2026-01-05 / `abc1234` | Port a \\| again | vllm#12, vllm#10 (`vllm/a.py`) "
           "@ `5a28fbeb41` | ✅ goldens <br> bit-identical |")
    assert json.loads(r.out)["row"] == row
    at = LEDGER.index(ROW) + len(ROW) + 1
    assert path.read_text() == LEDGER[:at] + row + "\n" + LEDGER[at:]
    assert "earlier ledger rows already name these PRs (lines 7)" in r.err


def test_ledger_add_defaults_and_paths_only(world: World) -> None:
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "w",
            "--path", "vllm/b.py", "--status", "ok")
    assert r.rc == 0, r.err
    last = ledger.load(world.root / ".agents/parity-ledger.md", rel="l").rows[-1]
    assert last.cells[0].endswith(" / `abc1234`") and last.cells[2] == "`vllm/b.py`"


@pytest.mark.parametrize(("argv", "why"), [
    (["--commit", "HEAD", "--pr", "1"], "is not a commit SHA"),
    (["--commit", "abc1234", "--pr", "1", "--date", "2026-13-01"], "not a calendar date"),
    (["--commit", "abc1234", "--pr", "1", "--date", "yesterday"], "is not YYYY-MM-DD"),
    (["--commit", "abc1234"], "upstream equivalent is empty"),
    (["--commit", "abc1234", "--pr", "0"], "positive PR number"),
])
def test_ledger_add_bad_input(world: World, argv: list[str], why: str) -> None:
    path = world.root / ".agents/parity-ledger.md"
    r = run(world.root, "ledger", "add", "--what", "w", "--status", "s", *argv)
    assert r.rc == 2 and why in r.err
    assert path.read_text() == LEDGER


def test_ledger_add_refuses_a_malformed_table(world: World) -> None:
    path = world.root / ".agents/parity-ledger.md"
    bad = LEDGER.replace("|---|---|---|---|\n", "")
    path.write_text(bad)
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "w", "--pr", "1",
            "--status", "s", "--outside-range")
    assert r.rc == 4 and "no separator row" in r.err
    assert path.read_text() == bad
    path.unlink()
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "w", "--pr", "1",
            "--status", "s", "--outside-range")
    assert r.rc == 4 and "does not exist" in r.err


def test_ledger_add_refuses_a_pr_outside_the_cycle_range(world: World) -> None:
    path = world.root / ".agents/parity-ledger.md"
    add = ("ledger", "add", "--commit", "abc1234", "--what", "w", "--status", "s")
    r = run(world.root, *add, "--pr", "12")
    assert r.rc == 2 and "no sync cycle is open, so vllm#12 is in no cycle's range" in r.err
    world.freeze()
    for pr in ("16", "99"):  # beyond the target; in no range at all
        r = run(world.root, *add, "--pr", "12", "--pr", pr)
        assert r.rc == 2 and path.read_text() == LEDGER
        assert r.err.strip() == (
            f"upstream-sync: error: vllm#{pr} is not in the cycle's range "
            f"{world.up.pin[:10]}..{world.up.target[:10]} (nor carried into it) — check the PR "
            "number or SHA against the report, or pass --outside-range for a deliberate row")
    assert run(world.root, *add, "--pr", "12", "--pr", "15").rc == 0
    r = run(world.root, *add, "--pr", "16", "--outside-range")
    assert r.rc == 0 and "vllm#16" in path.read_text().splitlines()[-3]


def test_ledger_add_refuses_a_sha_in_the_text_that_names_no_commit_of_the_range(
        world: World) -> None:
    """walk-s9 U2: a SHA in --upstream counts as porting that commit, so it is checked as a
    --pr is: a commit of the range, one carried into it, the pin or the target."""
    world.freeze()
    path = world.root / ".agents/parity-ledger.md"
    add = ("ledger", "add", "--commit", "abc1234", "--what", "w", "--status", "s", "--path",
           "vllm/a.py")
    before = path.read_text()
    for bad in ("f49967e5ff", world.up.older[:10]):  # no commit; one before the pin
        r = run(world.root, *add, "--upstream", f"ports `{bad}` and `{world.up.a_again[:10]}`")
        assert r.rc == 2 and path.read_text() == before
        assert f"`{bad}` is not in the cycle's range" in r.err
    for good in (world.up.a_again[:10], world.up.pin[:8], world.up.target):
        assert run(world.root, *add, "--upstream", f"@ `{good}`").rc == 0
    assert run(world.root, *add, "--upstream", "ports `f49967e5ff`", "--outside-range").rc == 0
    # walk-s10 D3: a PR in the text is checked as --pr is; a number or a digest is no SHA.
    r = run(world.root, *add, "--upstream", "ports vllm#99999")
    assert r.rc == 2 and "vllm#99999 is not in the cycle's range" in r.err
    for text in ("vocab 1048576 rows", "md5 `fbc42adca54090f7be1d685e1ee624cf` on the wheel"):
        assert run(world.root, *add, "--upstream", text).rc == 0, text
    r = run(world.root, *add, "--pr", "12", "--upstream", "vllm#12 (the rest)")
    assert r.rc == 0 and path.read_text().count("vllm#12") == 1 + before.count("vllm#12")


def test_ledger_needs_an_action(world: World) -> None:
    r = run(world.root, "ledger")
    assert r.rc == 2



def test_check_names_a_ledger_that_does_not_exist(world: World) -> None:
    """The report and advance say the missing ledger 'cannot be read ... (upstream-sync
    check names the problem)'; check once passed it over (walk-s11 D5)."""
    (world.root / ".agents/parity-ledger.md").unlink()
    r = run(world.root, "check", "--no-audit")
    assert r.rc == 7, r.out + r.err
    assert (".agents/parity-ledger.md: the parity ledger does not exist — create it with the "
            "table header Date / commit | What it does | Upstream equivalent | Parity status"
            in r.out.splitlines()), r.out
    assert "no ledger table" not in r.out


# -- properties -------------------------------------------------------------------------------

_PIECES = st.sampled_from([HEAD, SEP, ROW, "| a | b |", "text", "", "|", "\\|", "| x | y | z | w |",
                           "|---|", "\r"])


def _appended(text: str, cells: tuple[str, str, str, str]) -> tuple[str, str, int] | None:
    """(new text, row, where it went) of appending `cells` to `text`; None when refused."""
    try:
        table = ledger.find_table(text, path="l.md")
        new, row = ledger.appended(text, cells, rel="l.md")
    except SyncError:
        return None
    return new, row, table.insert_at


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.sampled_from(["\n", "\r\n"]),
       st.tuples(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20),
                 st.text(max_size=20)))
def test_append_on_any_text_refuses_or_keeps_bytes(pieces: list[str], nl: str,
                                                   cells: tuple[str, str, str, str]) -> None:
    text = nl.join(pieces)
    got = _appended(text, cells)
    if got is None:
        return
    new, row, at = got
    assert new.startswith(text[:at]) and new.endswith(text[at:])
    assert row in new and len(new) > len(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PIECES, st.sampled_from(["\n", "\r\n", "\r", ""])), max_size=12))
def test_append_on_mixed_line_endings_keeps_bytes_and_doubles_no_cr(
        pieces: list[tuple[str, str]]) -> None:
    """Any mix of LF, CRLF and lone CR: an append inserts in one place, every old byte kept,
    adds no CR CR LF, and ends the new row with the file's dominant line ending."""
    text = "".join(p + end for p, end in pieces)
    got = _appended(text, ("2026-01-02 / `def5678`", "y", "vllm#2", "ok"))
    if got is None:
        return
    new, row, at = got
    added = new[at: len(new) - (len(text) - at)]
    assert new == text[:at] + added + text[at:]
    assert added.endswith(row + endings.dominant(text))
    assert new.count("\r\r\n") == text.count("\r\r\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_a_bom_before_the_table_header_is_no_part_of_it(pieces: list[str], nl: str) -> None:
    """A ledger whose table header is its first line, saved with a BOM, was refused as 'no
    ledger table' (the header read as '\ufeff| Date / commit ...'); it reads as without the
    BOM, and an append keeps the BOM."""
    text = nl.join(pieces)
    try:
        plain = ledger.find_table(text, path="l.md")
    except MalformedRecord as exc:
        with pytest.raises(MalformedRecord) as again:
            ledger.find_table("\ufeff" + text, path="l.md")
        assert str(again.value) == str(exc)
        return
    bom = ledger.find_table("\ufeff" + text, path="l.md")
    assert [(r.cells, r.line, r.problem) for r in bom.rows] == [
        (r.cells, r.line, r.problem) for r in plain.rows]
    assert bom.insert_at == plain.insert_at + 1
    cells = ("2026-01-02 / `def5678`", "y", "vllm#2", "ok")
    try:
        appended = ledger.appended(text, cells, rel="l.md")[0]
    except MalformedRecord as exc:  # a table an append refuses (it would not read back)
        with pytest.raises(MalformedRecord) as again:
            ledger.appended("\ufeff" + text, cells, rel="l.md")
        assert str(again.value) == str(exc)
        return
    assert ledger.appended("\ufeff" + text, cells, rel="l.md")[0] == "\ufeff" + appended


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_find_table_on_random_text(text: str) -> None:
    try:
        table = ledger.find_table(text, path="l.md")
    except MalformedRecord:
        return
    assert all(len(r.cells) == len(ledger.COLUMNS) for r in table.rows)


_NEEDLE = st.text(alphabet="ab/._-+|` \n7é", max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NEEDLE, _NEEDLE, _NEEDLE, _NEEDLE), max_size=6),
       st.text(alphabet="ab/._-+7", min_size=1, max_size=8))
def test_latest_mention_is_a_substring_search_of_the_rows(rows: list[tuple[str, ...]],
                                                          needle: str) -> None:
    # The path-word index must answer exactly what one search over the rows would (for a
    # needle of path characters: a path, as every caller passes).
    table = ledger.Table(tuple(ledger.Row(r, i) for i, r in enumerate(rows)), 0, "\n", False)
    assert (ledger.latest_mention(table, needle) is not None) == (needle in table.joined)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NEEDLE, _NEEDLE, _NEEDLE, _NEEDLE), max_size=6),
       st.text(alphabet="ab/._-+7", min_size=1, max_size=8), st.booleans())
def test_latest_mention_is_the_last_row_holding_it_in_a_run(rows: list[tuple[str, ...]],
                                                            needle: str, starts: bool) -> None:
    # Slashed needles are looked up by their longest segment after a slash, the rest by one
    # search: both must name the row a search of each row's runs would.
    table = ledger.Table(tuple(ledger.Row(r, i) for i, r in enumerate(rows)), 0, "\n", False)
    runs = [re.findall(r"[A-Za-z0-9_./+-]+", r.text) for r in table.rows]
    hits = [i for i, words in enumerate(runs)
            if any(w.startswith(needle) if starts else needle in w for w in words)]
    got = ledger.latest_mention(table, needle, starts_word=starts)
    assert (got.row if got else None) == (hits[-1] if hits else None)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdefgA_ -/", max_size=120))
def test_sha_words_are_the_hex_words_with_a_digit(text: str) -> None:
    words = re.findall(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])", text)
    assert ledger.sha_words(text) == [w for w in words if any(c.isdigit() for c in w)]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.text(alphabet="ab/._-+7 |é\n\t\x00\ud800", max_size=80))
def test_path_runs_are_the_maximal_runs_of_path_characters(text: str) -> None:
    assert ledger.path_runs(text) == re.findall(r"[A-Za-z0-9_./+-]+", text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a|\\ `", max_size=30))
def test_split_row_splits_at_every_unescaped_bar(line: str) -> None:
    body = line.strip().removeprefix("|")
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    assert ledger.split_row(line) == [c.strip() for c in re.split(r"(?<!\\)\|", body)]


_CELL = st.text(alphabet="ab7f0#/ vlm|\n", max_size=12) | st.sampled_from(
    ["vllm#12", "a1b2c3d", "deadbeef", "x vllm#7 y", "github.com/vllm-project/vllm/pull/9"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_CELL, _CELL, _CELL, _CELL), max_size=5))
def test_a_reads_refs_are_what_its_rows_name(rows: list[tuple[str, ...]]) -> None:
    table = ledger.Table(tuple(ledger.Row(r, i) for i, r in enumerate(rows)), 0, "\n", False)
    assert ledger.Read("l.md", table, None).refs == ledger.Refs.of(table.rows)


# -- the real ledger's shape (`late-july`: 94 blocks, 48 malformed rows of kinds A-F) ---------

REAL = (
    "# Parity ledger (append-only)\n"
    "\n"
    "Columns:\n"
    "- **Date / our commit** — when and what landed here.\n"
    "\n"
    f"{HEAD}\n"
    f"{SEP}\n"
    "| 2026-07-24 (`Glm4ForCausalLM`) | prepended, newest first | vLLM `e24d1b24`: "
    "`vllm/model_executor/models/glm4.py` | token-exact |\n"  # 8
    "| 2026-07-02 `462d673` | A: prose math | `vllm/a.py` | **BIT-IDENTICAL (max|diff|=0)** |\n"
    "\n"
    "| 2026-07-03 `1111111` | single-row block | vllm#501 `vllm/b.py` | ok |\n"  # 11
    "\n"
    "## A heading between blocks\n"
    "\n"
    "Some prose.\n"
    "\n"
    "| 2026-07-04 `2222222` | B: `default|on|off` | `vllm/c.py` | ok |\n"  # 17
    "| 2026-07-05 `3333333` | D | vllm#777 `vllm/d.py` | ok | **MEASURED** narrative |\n"
    "| 2026-07-06 (only two) | vllm#778 `vllm/e.py` everything else |\n"  # 19
    "| 2026-07-07 `4444444` | E one | `vllm/f.py` | ok || 2026-07-07 (two) | E two | "
    "vllm#779 | ok |\n"
    "| 2026-07-08 `5555555` | escaped \\|diff\\|=0 | `vllm/g.py` @ 702f481 | ok |   \n"
    "```\n"
    "| not | a | row | here |\n"
    "```\n"
    "| 2026-07-09 `6666666` | C: GDN 34.7 | MoE 33.4 | DENSE 12.8 | glue 3.9. | `vllm/h.py` "
    "| ok |\n"  # 25
    "\n"
    "| Other | table |\n"
    "|---|---|\n"
    "| not | ledger |\n"
    "\n"
    "| 2026-07-10 `7777777` | last row | `vllm/i.py` | ok |\n"  # 31
    "\n"
    "Trailing prose stays.\n"
)


def test_every_block_and_every_malformed_row_is_read(tmp_path: Path) -> None:
    path = ledger_file(tmp_path, REAL)
    table = ledger.load(path, rel="l.md")
    assert [r.line for r in table.rows] == [8, 9, 11, 17, 18, 19, 20, 20, 21, 25, 31]
    assert [r.line for r in table.malformed] == [9, 17, 18, 19, 20, 20, 25]
    found = ledger.malformed_findings(table, rel="l.md")
    assert [f.split(":")[1] for f in found] == ["9", "17", "18", "19", "20", "25"]
    assert "a '|' inside a code span" in found[1]
    assert "two rows on one line" in found[4]
    assert "a column is missing" in found[3]
    assert all(f.endswith("repair a malformed one in a commit that does only that") for f in found)
    two = [r for r in table.rows if r.line == 20]
    assert [r.cells[1] for r in two] == ["E one", "E two"]
    refs = ledger.Refs.of(table.rows)
    assert refs.prs == {501, 777, 778, 779}  # vllm#N in malformed rows still count
    assert refs.names("702f4814fe54" + "0" * 28, None)  # a SHA prefix the row writes
    assert refs.names("e24d1b24" + "f" * 32, None) and not refs.names("e24d1b25" + "0" * 32, None)
    assert ledger.latest_mention(table, "vllm/h.py") is not None


def test_append_goes_after_the_last_row_of_the_file(tmp_path: Path) -> None:
    path = ledger_file(tmp_path, REAL)
    row = ledger.append(path, CELLS, rel="l.md")
    at = REAL.index("| 2026-07-10")
    at = REAL.index("\n", at) + 1
    assert path.read_text() == REAL[:at] + row + "\n" + REAL[at:]
    assert ledger.load(path, rel="l.md").rows[-1].line == 32


def test_consumers_say_when_the_ledger_is_unreadable(world: World) -> None:
    path = world.root / ".agents/parity-ledger.md"
    path.write_text("# Ledger\n\nno table\n")
    r = run(world.root, "check")
    assert ".agents/parity-ledger.md: no ledger table with columns" in r.out + r.err
    read = world.port.ledger_read()
    assert read.table is None and "no ledger table" in (read.problem or "")


# -- properties -------------------------------------------------------------------------------

_CELL = st.lists(st.sampled_from([*"ab |`\\#-:", "vllm#12", "max|d|", "é", "2026-07-01"]),
                 max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.lists(_CELL, min_size=1, max_size=7),
                          st.sampled_from(["", "## h", "prose", "```", "|---|---|"])),
                max_size=14))
def test_hostile_rows_are_read_or_reported_never_dropped(lines: list[list[str] | str]) -> None:
    body = ["| " + " | ".join(x) + " |" if isinstance(x, list) else x for x in lines]
    text = "\n".join([HEAD, SEP, *body]) + "\n"
    try:
        table = ledger.find_table(text, path="l.md")
    except MalformedRecord:
        return
    assert all(len(r.cells) == len(ledger.COLUMNS) for r in table.rows)
    ok = {r.line for r in table.rows if r.problem is None}
    bad = {r.line for r in table.malformed}
    assert not ok & bad
    for r in table.malformed:
        assert r.raw and r.raw in text
        assert ledger.PR_REF.findall(r.raw) == ledger.PR_REF.findall(r.text)
    try:
        new, _ = ledger.appended(text, CELLS, rel="l.md")
    except MalformedRecord as exc:  # fail closed: a row that would not read back as one
        assert "would not read back" in str(exc)
        return
    again = ledger.find_table(new, path="l.md")
    assert again.rows[:-1] == table.rows and len(again.rows) == len(table.rows) + 1


def test_ledger_add_warns_of_a_commit_the_port_repository_lacks(tmp_path: Path) -> None:
    """walk-s3 D11: the row names the port commit that ports the change; a SHA the port's
    repository does not have (a typo) is said, since a row is never edited afterwards."""
    from portfixture import build, port_git

    fx = build(tmp_path)
    head = port_git(fx.port, "rev-parse", "HEAD").strip()
    argv = ("ledger", "add", "--what", "w", "--pr", "1", "--status", "✅", "--outside-range")
    bogus = run(fx.port, *argv, "--commit", "abc1234")
    assert bogus.rc == 0, bogus.err
    assert ("warning: abc1234 is not a commit of the port repository: the row names the port "
            "commit that ports the change (a typo, or not committed yet?)") in bogus.err
    real = run(fx.port, *argv, "--commit", head[:10])
    assert real.rc == 0 and "is not a commit of the port repository" not in real.err


def test_ledger_add_warns_of_a_commit_a_monorepo_lacks(tmp_path: Path) -> None:
    """the check asked only a port whose root holds `.git`; a port in a subfolder of its
    repository (a monorepo) took every SHA for a commit of its own, a typo included."""
    import shutil

    from portfixture import build, port_git

    fx = build(tmp_path)
    mono = tmp_path / "mono"
    at = mono / "services" / "port"
    shutil.copytree(fx.port, at, ignore=shutil.ignore_patterns(".git"))
    port_git(mono, "init", "-q", "-b", "main")
    port_git(mono, "add", "-A")
    port_git(mono, "commit", "-q", "--no-verify", "-m", "Import the monorepo")
    argv = ("ledger", "add", "--what", "w", "--pr", "1", "--status", "✅", "--outside-range")
    bogus = run(at, *argv, "--commit", "abc1234")
    assert bogus.rc == 0, bogus.err
    assert "warning: abc1234 is not a commit of the port repository" in bogus.err
    head = port_git(mono, "rev-parse", "HEAD").strip()
    real = run(at, *argv, "--commit", head[:10])
    assert real.rc == 0 and "is not a commit of the port repository" not in real.err


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6000), st.sampled_from(["vllm#", "github.com/vllm-project/vllm/pull/"]))
def test_a_pr_number_of_any_length_is_read_or_is_no_pr(digits: int, prefix: str) -> None:
    """`vllm#` and 5000 digits in a row raised ValueError (int() over 4300 digits): check,
    audit, queue, sync and advance said 'internal error'. A PR is at most 12 digits."""
    number = "9" * digits
    refs = ledger.pr_refs(f"ports {prefix}{number} and vllm#7")
    assert refs == ({7, int(number)} if digits <= 12 else {7})
