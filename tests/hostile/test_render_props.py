"""Properties of the one escaping rule: hostile values rendered into every record, read back.

Each record a value from upstream or a person lands in (the report's every section, the
ledger row `ledger add` writes, an inventory annotation, the gate lines, the deviations
lines) is rendered from generated hostile text, then read back the way the tool reads it:
no value starts a line, a heading, a list item, a table cell, a link, a comment or a pin
span, no character in it hides or disguises what a reviewer reads (each is shown as its
escape), and what reads back is exactly what was rendered.
"""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from portfixture import Fixture, build

from sync import port as port_mod
from sync.infra.errors import SyncError, UsageError
from sync.records import events, gates, inventory, ledger, paragraph, spans
from sync.records.decisions import ALL
from sync.records.deviations import Deviation, touched
from sync.records.mdtext import SUBJECT_MAX, cell, code, escape, flat, short_subject, unescape
from sync.steps import report
from sync.steps.classify import Entry
from sync.steps.surface import Surface
from sync.upstream import history
from sync.upstream.gitio import short

from .generators import (
    INVISIBLE,
    angles_safe,
    bare,
    budget,
    hides_nothing,
    hostile_path,
    hostile_text,
    no_markup,
    one_line,
    prose,
    saying,
)


def _sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


# -- the rule itself ------------------------------------------------------------------------


@budget(300)
@given(hostile_text)
def test_every_escape_is_one_line_opens_nothing_and_reads_back(text: str) -> None:
    for out in (escape(text), escape(text, reason=True), cell(text)):
        assert one_line(out) and no_markup(out) and hides_nothing(out), out
        assert unescape(out) == flat(text)
    rendered = code(text)
    assert one_line(rendered) and angles_safe(rendered) and hides_nothing(rendered)
    if rendered.startswith("`"):
        assert rendered.count("`") == 2 and rendered[1:-1] == flat(text)
    else:
        assert no_markup(rendered) and unescape(rendered) == flat(text)
    # A reason can never end like the ` _(auto: rule)_` tail of an entry line.
    assert "_(" not in escape(text, reason=True).replace("\\_(", "")


@pytest.mark.parametrize("char", INVISIBLE)
def test_an_invisible_character_is_shown_as_its_escape_wherever_it_is_rendered(
        char: str) -> None:
    """h2: a zero-width space before `#` or inside `](`, a bidi override reversing a
    subject, passed into the report unseen. Each is shown as its escape, in prose, a cell
    and a path, in the text every one of them reads back to."""
    shown = char.encode("unicode_escape").decode("ascii")
    assert flat(f"a{char}#b") == f"a{shown}#b"
    assert short_subject(f"{char}s") == f"{shown}s"
    for out in (escape(f"x{char}](y)"), escape(f"{char}r", reason=True), cell(f"{char}|"),
                code(f"vllm/a{char}.py")):
        assert hides_nothing(out) and shown in unescape(out), out


@given(st.text(max_size=20), st.sampled_from(INVISIBLE),
       st.integers(SUBJECT_MAX - 15, SUBJECT_MAX))
def test_a_long_subject_is_cut_between_characters_never_inside_an_escape(
        tail: str, char: str, at: int) -> None:
    subject = "s" * at + char + tail + "x" * SUBJECT_MAX
    out = short_subject(subject)
    assert len(out) <= SUBJECT_MAX and out.endswith("…")
    # The kept text is the escapes of the first k characters, for the largest k that fits.
    shown = [flat(c) if not c.isspace() else " " for c in " ".join(subject.split())]
    ends = list(itertools.accumulate(map(len, shown)))
    k = max(i for i, end in enumerate([0, *ends]) if end <= SUBJECT_MAX - 1)
    assert out[:-1] == "".join(shown[:k])


# -- the report: every section --------------------------------------------------------------

_entry = st.tuples(saying, saying, st.sampled_from(ALL), st.booleans(),
                   st.sampled_from(["ported-path", "mirrored-path", "rule rocm-2.x"]),
                   st.lists(hostile_path, max_size=2))
_move = st.tuples(hostile_path, st.one_of(st.none(), hostile_path),
                  st.lists(hostile_path, min_size=1, max_size=2))


def _model(entries: list[tuple[str, str, str, bool, str, list[str]]],
           moves: list[tuple[str, str | None, list[str]]], ref: str,
           lines: list[str]) -> report.Model:
    es = tuple(Entry(_sha(i), i or None, subject, disp, reason, rule, auto,  # type: ignore[arg-type]
                     tuple(paths), tuple(paths)) for i, (subject, reason, disp, auto, rule, paths)
               in enumerate(entries))
    mvs = tuple(report.Move(old, "deleted" if new is None else "renamed", new, _sha(100 + i),
                            i, tuple(files)) for i, (old, new, files) in enumerate(moves))
    results = [gates.GateResult(f"parity:s{i}", "PENDING", text, None, text, text,
                                handoff=text or "x", detail=text) for i, text in enumerate(lines)]
    return report.Model(
        "2026-01-01", "a" * 40, "0.1.0.dev1+gaaaaaaa", "b" * 40, ref, "c" * 40, False,
        history.RangeStats(len(es), 1, 1, 1), "ACTIVE", es, moves=mvs,
        reverts=tuple((_sha(i), _sha(i + 1)) for i in range(min(2, len(es)))),
        gates=tuple(gates.render_section(results).splitlines()),
        deviations=tuple(f"- §9 \"{escape(x, reason=True)}\": {code(x)} touched by `abc`"
                         for x in lines),
        carry_over=tuple(f"- unmet: {cell(x)}" for x in lines if flat(x)),
        enumerated=len(es))


@budget(120)
@given(st.lists(_entry, max_size=6), st.lists(_move, max_size=3),
       st.from_regex(r"[A-Za-z0-9_./@{}^~:+-]{1,20}", fullmatch=True),
       st.lists(hostile_text, max_size=3))
def test_report_renders_hostile_values_and_reads_back_only_what_it_wrote(
        entries: list[tuple[str, str, str, bool, str, list[str]]],
        moves: list[tuple[str, str | None, list[str]]], ref: str, lines: list[str]) -> None:
    m = _model(entries, moves, ref, lines)
    text = report.render(m)
    rendered = text.splitlines()
    allowed = {"## " + h for s in report.LAYOUT for h in s.headings if h}
    assert rendered[0].startswith("# Upstream sync report ")
    assert all(x in allowed for x in rendered[1:] if x.startswith("#")), rendered
    # Only the summary table has cells; no value opens a comment, a tag or a pin span.
    assert len([x for x in rendered if x.startswith("|")]) == 2 + len(report.SECTIONS) + 1
    assert angles_safe(text) and hides_nothing(text)
    assert spans.marker_problems(text, path="r.md") == [] == spans.scan_text(text, path="r.md")
    # (`- [x]` opens the mechanical checks' task list: the renderer's own, not a value's.)
    assert all(not bare(prose(x), "|[]") for x in rendered if not x.startswith(("|", "- [")))
    moved = text.split("## Upstream moves and deletions of cited paths\n\n")[1].split("\n\n")[0]
    assert len(moved.splitlines()) == max(1, len(m.moves))
    # Read back: exactly the entries rendered, each line the one the renderer wrote.
    back = report.read_back(text, {short(e.sha): report.entry_prefix(e) for e in m.entries})
    assert back.unparsed == () and back.notes == ""
    assert [(p.sha_prefix, p.disposition, p.reason, p.auto_rule, p.line) for p in back.entries] == [
        (short(e.sha), e.disposition, flat(e.reason), e.rule if e.auto else None,
         report.entry_line(e)) for e in sorted(m.entries, key=lambda e: ALL.index(e.disposition))]


@budget(80)
@given(st.lists(saying, min_size=1, max_size=3), st.lists(saying, max_size=3))
def test_a_forged_entry_line_is_never_read_as_an_entry(subjects: list[str],
                                                         forged: list[str]) -> None:
    """Lines that only look like entries (a second line for a commit, a line for a commit
    outside the range, another prefix) are kept verbatim, never read as decisions."""
    es = [Entry(_sha(i), i, s, "PORT-NOW", "r", "ported-path", True, (), ())
          for i, s in enumerate(subjects)]
    prefixes = {short(e.sha): report.entry_prefix(e) for e in es}
    lines = [report.entry_line(e) for e in es]
    fakes = [f"{report.entry_prefix(es[0])}IGNORE: {escape(f, reason=True)}" for f in forged]
    fakes += [f"- `{short(_sha(999))}` vllm#1 x — IGNORE: {escape(f, reason=True)}"
              for f in forged]
    text = "## PORT-NOW\n\n" + "\n".join(lines + fakes) + "\n"
    back = report.read_back(text, prefixes)
    got = {short(p.sha_prefix) for p in back.entries}
    if forged:
        assert short(es[0].sha) not in got  # two lines for it: neither is read
    assert got <= set(prefixes)
    assert all(p.disposition == "PORT-NOW" for p in back.entries)


# -- ledger rows, inventory annotations, deviations, gate lines ------------------------------

LEDGER = ("# Parity ledger\n\n"
          "| Date / commit | What it does | Upstream equivalent | Parity status |\n"
          "|---|---|---|---|\n| 2026-01-01 / `abc1234` | Port b | vllm#2 (`vllm/b.py`) | ✅ |\n"
          "\nTrailing prose.\n")


@budget(150)
@given(st.tuples(saying, saying, saying, saying))
def test_a_ledger_row_of_hostile_cells_is_one_row(cells: tuple[str, str, str, str]) -> None:
    new, row = ledger.appended(LEDGER, cells, rel="ledger.md")
    old = ledger.find_table(LEDGER, path="ledger.md")
    again = ledger.find_table(new, path="ledger.md")
    assert again.rows[:-1] == old.rows and len(again.rows) == len(old.rows) + 1
    assert again.rows[-1].cells == tuple(ledger.escape_cell(c) for c in cells)
    assert new.replace(row + "\n", "", 1) == LEDGER  # every other byte kept
    assert one_line(row) and len(bare(row, "|")) == 5 and hides_nothing(row)
    assert "<" not in row.replace("<br>", "") and not bare(row, "[]")
    for c, got in zip(cells, again.rows[-1].cells, strict=True):
        assert [unescape(p) for p in got.split(" <br> ")] == [
            flat(x) for x in c.splitlines() if x.strip()]


INVENTORY = ("# Porting inventory\n\n## T0 — core\n\n- ✅ Module a, `vllm/a.py`\n\n"
             "## T2 — later\n\n- Models under `vllm/models/`\n\n## 9. Deviations\n\n"
             "### 9.1 A is synchronous\n\n`vllm/a.py` overlaps work.\n")


@budget(120)
@given(st.one_of(st.none(), hostile_text), st.lists(hostile_path, max_size=2),
       st.one_of(st.none(), hostile_text), st.booleans())
def test_an_inventory_annotation_of_hostile_text_adds_one_line(
        note: str | None, paths: list[str], subject: str | None, on_row: bool) -> None:
    inv = inventory.parse(INVENTORY, path="inv.md")
    title = inventory.cycle_title("2026-01-01", "b" * 40)
    req = inventory.Request(pr=321, tier="T0" if on_row else "T2",
                            paths=["vllm/a.py"] if on_row else paths, subject=subject,
                            note=note, section_title=title, intro="Intro.")
    result = inventory.annotate(inv, req)
    again = inventory.parse(result.text, path="inv.md")
    before = [h.text for h in inv.headings]
    assert [h.text for h in again.headings] in (before, [*before[:3], title, *before[3:]])
    assert one_line(result.row) and "vllm#321" in result.row
    assert angles_safe(result.text) and hides_nothing(result.text)
    assert spans.marker_problems(result.text, path="inv.md") == []
    added = [x for x in result.text.splitlines() if x not in INVENTORY.splitlines()]
    assert all(not bare(prose(x), "|[]") for x in added)


@budget(100)
@given(st.lists(st.tuples(hostile_text.filter(str.strip), st.lists(hostile_path, min_size=1,
                                                                   max_size=2)),
                min_size=1, max_size=3))
def test_deviation_lines_of_hostile_titles_and_paths(devs: list[tuple[str, list[str]]]) -> None:
    class Inv:
        deviations = tuple(Deviation("9.1", title, 1, title, tuple(paths), (), ())
                           for title, paths in devs)

    changes = tuple(history.Change("M", p, None, None) for _, paths in devs for p in paths)
    commit = history.Commit(_sha(1), (), "a <a@b>", "2026-01-01", "s (#1)", "", changes)
    out = touched(Inv(), [commit], Surface({}, {}, ()))
    assert 1 <= len(out) <= len(devs)
    for line in out:
        assert one_line(line) and line.startswith("- §") and angles_safe(line)
        assert hides_nothing(line)
        assert not bare(prose(line), "|[]")


@budget(120)
@given(st.lists(st.tuples(st.from_regex(gates.NAME, fullmatch=True),
                          st.sampled_from(gates.STATUSES), hostile_text, hostile_text,
                          hostile_text), max_size=4, unique_by=lambda t: t[0]))
def test_gate_lines_of_hostile_records(rows: list[tuple[str, str, str, str, str]]) -> None:
    results = [gates.GateResult(name, status, command, 1.0, host, host,  # type: ignore[arg-type]
                                handoff=(text or "x") if status == "PENDING" else None,
                                detail=text, oracle={"oracle": text, "commit": text,
                                                     "runtime_version": text})
               for name, status, command, host, text in rows]
    text = gates.render_section(results)
    assert len(text.splitlines()) == len(results) and angles_safe(text) and hides_nothing(text)
    assert all(line.startswith("- `") and not bare(prose(line), "|[]")
               for line in text.splitlines())


_BEFORE_ESC = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~"})


@budget(60)
@given(saying)
def test_a_line_an_earlier_escaping_wrote_still_reads_back(subject: str) -> None:
    """Reports written before `<` became an entity escaped every opener with a backslash:
    such a line is still its commit's entry (not an unparsed line), read back as it is."""
    # What the earlier escaping could not tell apart (a literal `&lt;`, control characters)
    # reads back otherwise, as any unparseable line: kept verbatim.
    assume("&lt;" not in subject and flat(subject) == " ".join(subject.split()))
    e = Entry(_sha(1), 1, subject, "PORT-NOW", "r", "ported-path", True, (), ())
    line = report.entry_line(e)
    old_subject = " ".join(short_subject(subject).split()).translate(_BEFORE_ESC)
    earlier = f"- `{short(e.sha)}` vllm#1 {old_subject} — PORT-NOW: r _(auto: ported-path)_"
    back = report.read_back(f"## PORT-NOW\n\n{earlier}\n", {short(e.sha): report.entry_prefix(e)})
    assert back.unparsed == ()
    assert [(p.disposition, p.reason, p.line) for p in back.entries] == [
        ("PORT-NOW", "r", earlier)]
    assert unescape(earlier) == unescape(line)


@pytest.mark.parametrize("char", ["\u200b", "\u200f", "\u2060", "\ufeff", "\u00ad",
                                  "\U000e0041"])
def test_a_line_written_before_invisible_characters_were_shown_still_reads_back(
        char: str) -> None:
    """The escaping before h2 wrote a zero-width character of a subject as it was: such a
    line is still its commit's entry (a hand edit on it is read), not an unparsed line."""
    e = Entry(_sha(1), 1, f"[Core] x{char}# y (#1)", "PORT-NOW", "r", "ported-path", True,
              (), ())
    shown = char.encode("unicode_escape").decode("ascii").replace("\\", "\\\\")
    earlier = report.entry_line(e).replace(shown, char).replace("PORT-NOW: r", "IGNORE: by hand")
    assert char in earlier
    back = report.read_back(f"## PORT-NOW\n\n{earlier}\n", {short(e.sha): report.entry_prefix(e)})
    assert back.unparsed == ()
    assert [(p.disposition, p.reason, p.line) for p in back.entries] == [
        ("IGNORE", "by hand", earlier)]


# -- records stored as TOML/JSON: what is written reads back exactly -------------------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    return build(tmp_path_factory.mktemp("records"))


@budget(80)
@given(hostile_text, hostile_text)
def test_a_state_event_of_hostile_text_reads_back_exactly(synthetic: Fixture, detail: str,
                                                         report_path: str) -> None:
    p = port_mod.locate(str(synthetic.port))
    try:
        path, data = events.staged(p, "stall", detail=detail, report=report_path)
    except SyncError:
        return  # refused (a report path that is no port-relative path): written nothing
    back = events._from_bytes(data, path, "e.toml")
    assert (back.detail, back.report) == (detail, report_path)
    assert b"\n[" not in data  # no value opened a table of its own


@budget(80)
@given(st.lists(st.tuples(st.from_regex(gates.NAME, fullmatch=True), hostile_text,
                          hostile_text), max_size=3, unique_by=lambda t: t[0]))
def test_a_gate_record_of_hostile_text_reads_back_exactly(
        rows: list[tuple[str, str, str]]) -> None:
    results = [gates.GateResult(name, "PENDING", command, None, "h", "2026-01-02T03:04:05Z",
                                handoff=command or "x",
                                detail=detail) for name, command, detail in rows]
    again = gates.parse(gates.render_doc("b" * 40, results), "b" * 40, rel="g.json")
    assert again == sorted(results, key=lambda r: r.name)


PARAGRAPH = ("# Protocol\n\nActive pin (advanced 2026-01-01): current parity pin abcdef123 "
             "(vLLM 0.1.0) and the narrative after it.\n")


@budget(120)
@given(hostile_text)
def test_the_parity_pin_paragraph_takes_only_a_bare_version(label: str) -> None:
    para = paragraph.find(PARAGRAPH, path="p.md")
    try:
        text = paragraph.render(PARAGRAPH, para, date="2026-02-02", sha="abcdef1234",
                                release_label=label)
    except UsageError:
        return  # refused: nothing written
    again = paragraph.find(text, path="p.md")
    assert again.release_label == label and len(text.splitlines()) == len(PARAGRAPH.splitlines())
    assert angles_safe(text) and not bare(text, "|[]`*")
