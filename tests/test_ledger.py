from __future__ import annotations

import json
from pathlib import Path

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
    assert ledger.mentions(table, "vllm#12") and not ledger.mentions(table, "vllm#99")


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


def test_append_to_an_empty_table(tmp_path: Path) -> None:
    text = f"{HEAD}\n{SEP}\n\nprose\n"
    path = ledger_file(tmp_path, text)
    ledger.append(path, CELLS, rel="ledger.md")
    assert path.read_text() == f"{HEAD}\n{SEP}\n{NEW_ROW}\n\nprose\n"


@pytest.mark.parametrize(("text", "why"), [
    ("# Ledger\n\nno table here\n", "found 0"),
    (f"{HEAD}\n{SEP}\n{ROW}\n\n{HEAD}\n{SEP}\n", "found 2"),
    (f"{HEAD}\n{ROW}\n", "no separator row"),
    (f"{HEAD}\n{SEP}\n| a | b | c |\n", "has 3 cells, expected 4"),
    (f"{HEAD}\n{SEP}\n| a | b \\| c | d |\n", "has 3 cells, expected 4"),
    (f"| Date | What | Upstream | Status |\n{SEP}\n", "found 0"),
])
def test_malformed_table_is_refused_and_untouched(tmp_path: Path, text: str, why: str) -> None:
    path = ledger_file(tmp_path, text)
    with pytest.raises(MalformedRecord) as info:
        ledger.append(path, CELLS, rel="ledger.md")
    assert why in str(info.value) and str(info.value).startswith("ledger.md")
    assert path.read_text() == text


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
            "number against the report, or pass --outside-range for a deliberate row")
    assert run(world.root, *add, "--pr", "12", "--pr", "15").rc == 0
    r = run(world.root, *add, "--pr", "16", "--outside-range")
    assert r.rc == 0 and "vllm#16" in path.read_text().splitlines()[-3]


def test_ledger_needs_an_action(world: World) -> None:
    r = run(world.root, "ledger")
    assert r.rc == 2


# -- properties -------------------------------------------------------------------------------

_PIECES = st.sampled_from([HEAD, SEP, ROW, "| a | b |", "text", "", "|", "\\|", "| x | y | z | w |",
                           "|---|", "\r"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.sampled_from(["\n", "\r\n"]),
       st.tuples(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20),
                 st.text(max_size=20)))
def test_append_on_any_text_refuses_or_keeps_bytes(pieces: list[str], nl: str,
                                                   cells: tuple[str, str, str, str]) -> None:
    text = nl.join(pieces)
    try:
        table = ledger.find_table(text, path="l.md")
        new, row = ledger.appended(text, cells, rel="l.md")
    except SyncError:
        return
    at = table.insert_at
    assert new.startswith(text[:at]) and new.endswith(text[at:])
    assert row in new and len(new) > len(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_find_table_on_random_text(text: str) -> None:
    try:
        table = ledger.find_table(text, path="l.md")
    except MalformedRecord:
        return
    assert all(len(r.cells) == len(ledger.COLUMNS) for r in table.rows)
