from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stepfixture import World, make_world, run, with_port_cmd, write

from sync.headers import citations as headers
from sync.headers import verify as sha_verify
from sync.records import ledger
from sync.steps import audit, check, surface
from sync.upstream import gitio

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]

COUNTS = {"at-pin": 3, "behind-unchanged": 2, "behind-changed": 1, "path-gone": 0, "ahead": 1,
          "not-upstream": 1, "no-sha": 0, "other-oracle": 0, "original": 1, "no-header": 1}



@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    w = make_world(tmp_path, monkeypatch)
    # vllm/b.py changed in the pin commit itself: a header citing it at `older` is behind a
    # changed file; a.cpp and d.cpp cite files that did not change between `older` and the pin.
    write(w.root, "src/e.cpp", f"// Ported from: vllm/b.py @ {w.up.older[:10]}\nint e;\n")
    return w


def test_audit_counts_with_positive_control(world: World) -> None:
    port = world.port
    ref = gitio.open_repo(world.up.repo)
    a = audit.run_audit(port, ref, world.up.pin, "origin/main", surface.build(port))
    assert a.control_ok
    assert a.counts() == COUNTS
    assert {f.path: f.status for f in a.files} == {
        "src/a.cpp": "behind-unchanged", "src/b.cpp": "at-pin", "src/c.cpp": "at-pin",
        "src/d.cpp": "behind-unchanged", "src/e.cpp": "behind-changed",
        "src/gone.cpp": "at-pin", "src/hot.cpp": "ahead", "src/pr.cpp": "not-upstream",
        "src/orig.cpp": "original", "src/none.cpp": "no-header"}
    # e.cpp's upstream file changed and no ledger row names it.
    assert [f.path for f in a.findings] == ["src/e.cpp"]
    summary = audit.summary_lines(a)
    assert summary.lines[:2] == (
        "- Counts: at-pin 3, behind-unchanged 2, behind-changed 1, path-gone 0, ahead 1, "
        "not-upstream 1, no-sha 0, other-oracle 0, original 1, no-header 1 (of 10 files; positive "
        "control, not counted: at-pin, as it must be)",
        "- behind-unchanged: 2 file(s) cite a blob identical at the pin — safe to bump to the "
        f"pin with `upstream-sync bump-headers --unchanged --to {world.up.pin[:10]}`")
    assert (f"- `src/e.cpp` behind-changed: vllm/b.py changed since {world.up.older[:10]} by "
            f"1 commit: `{world.up.pin[:10]}`; ledger note: MISSING") in summary.lines


def test_audit_command_json(world: World) -> None:
    r = run(world.root, "audit", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["counts"] == COUNTS and doc["control"]["ok"] is True
    assert doc["findings"] == ["src/e.cpp"] and doc["severity"] == "warning"
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path["src/a.cpp"]["citations"] == [
        {"path": "vllm/a.py", "upstream_path": "vllm/a.py", "sha": world.up.older[:10],
         "oracle": "vllm", "status": "behind-unchanged",
         "detail": f"vllm/a.py unchanged since {world.up.older[:10]}", "line": 1,
         "lines": None, "symbol": None, "symbols": [], "since": [], "renamed_to": None,
         "gone_in": None}]
    assert by_path["src/e.cpp"]["citations"][0]["since"] == [world.up.pin]
    assert by_path["src/a.cpp"]["noted"] is True and by_path["src/e.cpp"]["finding"] is True
    assert by_path["src/orig.cpp"]["citations"] == []


def test_audit_command_text_and_severity(world: World) -> None:
    r = run(world.root, "audit")
    assert r.rc == 0, r.err
    assert (f"warning: src/e.cpp:1: per-file pin behind the parity pin, and the upstream file "
            f"changed with no ledger note: vllm/b.py changed since {world.up.older[:10]} by 1 "
            f"commit: `{world.up.pin[:10]}` — port the change and bump the header, or add a "
            "ledger row naming the file") in r.out
    write(world.root, ".agents/upstream-sync.toml", '[check]\nbehind_without_note = "error"\n')
    r = run(world.root, "audit")
    assert r.rc == 7 and "1 file(s) behind a changed upstream file" in r.err
    assert "error: src/e.cpp" in r.out


def test_ledger_note_naming_the_file_clears_the_finding(world: World) -> None:
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "e stays behind",
            "--upstream", "src/e.cpp waits for vllm#15", "--status", "🚧 behind pin (noted)",
            "--outside-range")
    assert r.rc == 0, r.err
    doc = json.loads(run(world.root, "audit", "--json").out)
    assert doc["findings"] == [] and doc["counts"] == COUNTS


def test_a_row_older_than_the_change_is_no_ledger_note(world: World) -> None:
    """walk-s9 D3: any row that ever named the file counted as the note of a change made
    after it. The change of vllm/b.py is dated 2026-01-01 (the fixture's clock)."""
    ledger = world.root / ".agents/parity-ledger.md"
    row = "| 2025-12-20 / `abc1234` | e ported | `src/e.cpp` | ok |\n"
    text = ledger.read_text()
    write(world.root, ".agents/parity-ledger.md", text.replace("\n\nTrailing", "\n" + row
                                                                + "\nTrailing"))
    doc = json.loads(run(world.root, "audit", "--json").out)
    assert doc["findings"] == ["src/e.cpp"]
    lines = run(world.root, "audit").out.splitlines()
    assert any(line.endswith("; ledger note: MISSING (the latest row naming it is of "
                             f"2025-12-20, before `{world.up.pin[:10]}` of 2026-01-01)")
               for line in lines), lines
    # The same row written on the day of the change, or after it, is the note.
    write(world.root, ".agents/parity-ledger.md", text.replace(
        "\n\nTrailing", "\n" + row.replace("2025-12-20", "2026-01-01") + "\nTrailing"))
    assert json.loads(run(world.root, "audit", "--json").out)["findings"] == []
    # So is an older row that names the change's commit: by its PR, or by its SHA.
    for names in ("vllm#11", f"`{world.up.pin[:10]}`"):
        write(world.root, ".agents/parity-ledger.md", text.replace(
            "\n\nTrailing", "\n" + row.replace("e ported", f"e stays behind {names}")
            + "\nTrailing"))
        assert json.loads(run(world.root, "audit", "--json").out)["findings"] == [], names


def _covers(rows: str, *, open_port_now: frozenset[str] = frozenset(),
            entered: dict[str, audit.Entered] | None = None) -> bool:
    """Whether `rows` note src/x.cpp's citation of vllm/x.py, behind two commits: #1 (S1,
    2026-01-10) and #2 (S2, 2026-02-10)."""
    table = ledger.find_table("| Date / commit | What it does | Upstream equivalent | Parity "
                              "status |\n|---|---|---|---|\n" + rows, path="l.md")
    (cite,) = headers.parse_header("// Ported from: vllm/x.py @ abcdef12\n", "x.cpp").pins
    got = sha_verify.Content("changed", "vllm/x.py", (S1, S2), since_prs=(1, 2),
                             since_days=("2026-01-10", "2026-02-10"))
    noted = audit._Noted(table, open_port_now, entered)
    return noted.covers("src/x.cpp", audit.CiteStatus(cite, "behind-changed", "", got))


S1, S2 = "1" * 40, "2" * 40


@pytest.mark.parametrize(("rows", "noted"), [
    ("| 2026-02-10 x | `src/x.cpp` stays | - | - |\n", True),  # after both commits
    ("| 2026-01-20 x | `src/x.cpp` stays | - | - |\n", False),  # after #1 only
    ("| 2026-01-20 x | `src/x.cpp` waits for vllm#2 | - | - |\n", True),  # #1 by date, #2 named
    # walk-s10 D1: one commit named is no note of the other.
    ("| 2025-12-01 x | `vllm/x.py` | vllm#1 | - |\n", False),
    ("| 2025-12-01 x | `vllm/x.py` | vllm#1, `2222222222` | - |\n", True),
    ("| 2026-03-01 x | `src/y.cpp` | vllm#1 vllm#2 | - |\n", False),  # names another file
])
def test_each_commit_of_a_change_needs_its_note(rows: str, noted: bool) -> None:
    assert _covers(rows) is noted


def test_a_row_written_before_the_cycle_that_brought_a_commit_is_no_note_of_it() -> None:
    """walk-s10 D1: a row dated after the commit's own day, but written before the cycle that
    brought the commit was frozen (the port had not seen it), notes nothing of it."""
    row = "| 2026-02-15 x | `src/x.cpp` stays | - | - |\n"
    assert _covers(row) is True
    assert _covers(row, entered={S2: audit.Entered("2026-02-20")}) is False
    on_the_day = {S1: audit.Entered("2026-02-15"), S2: audit.Entered("2026-02-15")}
    assert _covers(row, entered=on_the_day) is True
    # The same day, but a row the advance before already counted: written before the cycle.
    assert _covers(row, entered={S2: audit.Entered("2026-02-15", first_row=1)}) is False
    assert _covers(row + row, entered={S2: audit.Entered("2026-02-15", first_row=1)}) is True


@pytest.mark.parametrize(("cell", "named"), [
    ("`vllm/a/x.py`", True),
    ("`a/x.py`", True),  # below the root, as ledgers write it (walk-s10 N2)
    ("`omni/a/x.py`", False),  # another tree's file of that name
    ("`x.py`", False),  # a bare name
])
def test_a_row_names_an_upstream_path_below_its_root(cell: str, named: bool) -> None:
    table = ledger.find_table("| Date / commit | What it does | Upstream equivalent | Parity "
                              f"status |\n|---|---|---|---|\n| 2026-03-01 x | - | {cell} | - |\n",
                              path="l.md")
    assert (audit._Noted(table)("vllm/a/x.py") is not None) is named


def test_an_open_carried_port_now_is_noted_only_by_a_row_naming_it() -> None:
    """walk-s10 D1: the carry-over record says S2 is not ported; a later row about another
    change of the path does not say why the file lacks it."""
    later = "| 2026-03-01 x | `vllm/x.py` | vllm#7 | - |\n"
    assert _covers(later) is True
    assert _covers(later, open_port_now=frozenset({S2})) is False
    table = ledger.find_table("| Date / commit | What it does | Upstream equivalent | Parity "
                              "status |\n|---|---|---|---|\n" + later, path="l.md")
    (cite,) = headers.parse_header("// Ported from: vllm/x.py @ abcdef12\n", "x.cpp").pins
    got = sha_verify.Content("changed", "vllm/x.py", (S1, S2), since_prs=(1, 2),
                             since_days=("2026-01-10", "2026-02-10"))
    assert audit._Noted(table, frozenset({S2})).gap(
        "src/x.cpp", audit.CiteStatus(cite, "behind-changed", "", got)) == (
        "`2222222222` is a carried PORT-NOW still open, and no row names it")
    assert _covers(later + "| 2026-03-02 x | `src/x.cpp` waits for vllm#2 | - | - |\n",
                   open_port_now=frozenset({S2})) is True


def test_audit_reads_the_open_carried_port_now_from_the_record(world: World) -> None:
    ledger_text = (world.root / ".agents/parity-ledger.md").read_text()
    later = "| 2026-03-01 / `abc1234` | e touched | `src/e.cpp` | ok |\n"
    write(world.root, ".agents/parity-ledger.md",
          ledger_text.replace("\n\nTrailing", "\n" + later + "\nTrailing"))
    assert json.loads(run(world.root, "audit", "--json").out)["findings"] == []
    write(world.root, ".agents/sync/carry-over.toml", (
        "schema = 1\n\n"
        f"[carried.{world.up.pin}]\n"
        'disposition = "PORT-NOW"\n'
        'subject = "[Core] Tweak b (#11)"\n'
        'reason = "carry-over: next cycle"\n'
        'since = ".agents/sync/2026-01-01-0000000.md"\n'
        f'since_target = "{world.up.pin}"\n'
        'by = "advance"\n'
        "pr = 11\n"))
    assert json.loads(run(world.root, "audit", "--json").out)["findings"] == ["src/e.cpp"]
    # Decided IGNORE, it is closed: the later row notes the file again.
    write(world.root, ".agents/sync/decisions.toml", (
        f'schema = 1\n\n[decisions.{world.up.pin}]\ndisposition = "IGNORE"\n'
        'reason = "nothing to port"\n'))
    assert json.loads(run(world.root, "audit", "--json").out)["findings"] == []


_WORD = st.text(alphabet="ab/.", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["2026-01-02", "2026-03-04", "", "2025-12-31"]),
                          st.lists(_WORD, max_size=4)), max_size=6), _WORD)
def test_latest_mention_is_the_last_row_that_names_the_path(
        rows: list[tuple[str, list[str]]], needle: str) -> None:
    lines = "".join(f"| {day or 'none'} x | {' '.join(words) or '-'} | - | - |\n"
                    for day, words in rows)
    table = ledger.find_table("| Date / commit | What it does | Upstream equivalent | Parity "
                              "status |\n|---|---|---|---|\n" + lines, path="l.md")
    hits = [(i, day) for i, (day, words) in enumerate(rows) if any(needle in w for w in words)]
    assert ledger.latest_mention(table, needle) == (ledger.Mention(*hits[-1]) if hits else None)


_SHAS = ["a1b2c3d4e5", "a1b2c3d", "f00dfeed12"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(_WORD, max_size=3),
                          st.lists(st.sampled_from(["vllm#7", "vllm#8", *_SHAS]), max_size=2)),
                max_size=5), _WORD,
       st.sampled_from(["a1b2c3d4e5" + "0" * 30, "f00dfeed" + "1" * 32]),
       st.sampled_from([7, 9, None]))
def test_names_change_is_a_row_naming_the_path_and_the_commit(
        rows: list[tuple[list[str], list[str]]], needle: str, sha: str, pr: int | None) -> None:
    lines = "".join(f"| 2026-01-01 x | {' '.join(words) or '-'} | {' '.join(refs) or '-'} | - |\n"
                    for words, refs in rows)
    table = ledger.find_table("| Date / commit | What it does | Upstream equivalent | Parity "
                              "status |\n|---|---|---|---|\n" + lines, path="l.md")

    def names(refs: list[str]) -> bool:
        return any(r == f"vllm#{pr}" or (not r.startswith("vllm#") and sha.startswith(r))
                   for r in refs)

    def holds(words: list[str], refs: list[str]) -> bool:  # any run of path characters
        return any(needle in w for w in re.findall(r"[A-Za-z0-9_./+-]+", " ".join(words + refs)))

    expected = any(holds(words, refs) and names(refs) for words, refs in rows)
    assert ledger.names_change(table, (needle,), sha, pr) is expected


def test_check_reports_the_finding(world: World) -> None:
    found, _notes = check.findings(world.port)
    texts = [(f.severity, f.text) for f in found if "per-file pin" in f.text]
    assert [t[0] for t in texts] == ["warning"] and texts[0][1].startswith(
        "src/e.cpp:1: per-file pin behind the parity pin, and the upstream file changed")


def test_broken_probe_fails_the_control(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sha_verify.probe

    def blind(ref: gitio.Reference, pin: str, shas: object,
              upstream_ref: str) -> sha_verify.Probe:
        got = real(ref, pin, shas, upstream_ref)  # type: ignore[arg-type]
        return sha_verify.Probe(got.pin, {s: "not-upstream" for s in got.status}, {})

    monkeypatch.setattr(sha_verify, "probe", blind)
    r = run(world.root, "audit")
    assert r.rc == 7 and "positive control failed" in r.err
    assert "POSITIVE CONTROL FAILED" in r.out


def test_the_control_is_not_among_the_counts(world: World) -> None:
    # The control is a separate check: the counts add up to the files, without it.
    ref = gitio.open_repo(world.up.repo)
    a = audit.run_audit(world.port, ref, world.up.pin, "origin/main", surface.build(world.port))
    assert sum(a.counts().values()) == len(a.files) == 10
    assert all(f.path != audit.CONTROL_PATH for f in a.files)
    (head,) = (line for line in audit.summary_lines(a).lines if line.startswith("- Counts: "))
    assert head.endswith("(of 10 files; positive control, not counted: at-pin, as it must be)")


def test_wrapped_headers_are_counted(world: World) -> None:
    # A header wrapped over lines counts once, as a line grep would not.
    write(world.root, "src/wrapped.cpp",
          "// Ported from: vllm/\n//   a.py and vllm/b.py\n"
          f"//   @ {world.up.pin[:10]}\nint w;\n")
    doc = json.loads(run(world.root, "audit", "--json").out)
    assert doc["counts"]["at-pin"] == COUNTS["at-pin"] + 1
    by_path = {f["path"]: f for f in doc["files"]}
    cited = [c["path"] for c in by_path["src/wrapped.cpp"]["citations"]]
    assert cited == ["vllm/a.py", "vllm/b.py"]


def test_audit_needs_the_reference(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_SOURCE")
    r = run(world.root, "audit")
    assert r.rc == 3 and "VLLM_SOURCE" in r.err


def test_example_port_audit(tmp_path: Path) -> None:
    from sync.dev import example

    examples = Path(__file__).resolve().parents[1] / "examples"
    root = example.build(tmp_path / "ex", examples)
    doc = json.loads(run(root, "audit", "--json").out)
    assert doc["control"]["ok"] is True
    assert sum(doc["counts"].values()) == len(doc["files"]) > 0
    # The example exercises every status the audit reports but no-sha (a header bump-headers
    # refuses, which the example's cycle bumps): test_content_pins has that one.
    assert all(n > 0 for s, n in doc["counts"].items() if s != "no-sha"), doc["counts"]
