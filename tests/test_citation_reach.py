"""What a port cites reaches the symbol pass whole (walk-s6a): every anchor of a citation,
not only its first (`:1-2 (f), :5-6 (g)`, `+ :5-6`, `::f, ::g`, an anchor wrapped onto the
next line, one after a parenthetical of prose); a citing statement in a file's body with
its anchors; and a path written without its root (`a/b.py` for `vllm/a/b.py`). Each of
these, missed, turned a change to a cited definition into INVENTORY."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from symbolfixture import Plan, Shape, World, entry, planned, run

from sync.headers import citations
from sync.steps import report

MOD = "vllm/a/b.py"
OTHER = "vllm/a/other.py"

PIN_TEXT = '''\
def do_f(x):
    return x + 1


def do_g(x):
    return x * 2


def do_h(x):
    return x - 1


class Box:
    def first(self):
        return 1

    def second(self):
        return 2
''' + "\n\nclass Big:\n" + "".join(f"    a{i} = {i}\n" for i in range(160)) + (
    "    def m(self):\n        return 99\n")
BIG_FIELD, BIG_M = 22, 182  # `a0 = 0`, `def m`: a field of a 160-line class and its method

SHAPES = (Shape("change_g", "[Bugfix] Change do_g", {MOD: PIN_TEXT.replace("x * 2", "x * 3")}),
          Shape("rocm_h", "[ROCm] Tune do_h", {MOD: PIN_TEXT.replace("x - 1", "x - 2")}),
          Shape("second", "[Bugfix] Box.second", {MOD: PIN_TEXT.replace("return 2", "return 3")}),
          Shape("first", "[Bugfix] Box.first", {MOD: PIN_TEXT.replace("return 1", "return 0")}),
          Shape("big_field", "[Bugfix] Big.a100",
                {MOD: PIN_TEXT.replace("a100 = 100", "a100 = 7")}),
          Shape("big_m", "[Bugfix] Big.m", {MOD: PIN_TEXT.replace("return 99", "return 98")}),
          Shape("rocm_adds", "[ROCm] Add a helper",
                {OTHER: "def other():\n    return 0\n\n\ndef helper():\n    return 1\n"}))
RULES = ('[[rules]]\nid = "platforms-not-targeted"\ntags = ["ROCm"]\n'
         'disposition = "INVENTORY"\nreason = "a platform this port does not target"\n')


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        "src/cont_paren.cpp": f"// Ported from: {MOD}:1-2 (do_f), :5-6 (do_g) @ {pin}\nint a;\n",
        "src/cont_plus.cpp": f"// Ported from: {MOD}:1-2 + :5-6 @ {pin}\nint b;\n",
        "src/cont_syms.cpp": f"// Ported from: {MOD}::do_f, ::do_g @ {pin}\nint c;\n",
        "src/cont_parens.cpp": f"// Ported from: {MOD} (do_f), (do_g) @ {pin}\nint d;\n",
        "src/cont_wrapped.cpp": f"// Ported from: {MOD}\n//   :5-6 `do_g` @ {pin}\nint e;\n",
        "src/cont_aside.cpp": (f"// Ported from: {MOD}:1-2 `do_f` (the entry point)\n"
                               f"//   + :5-6 `do_g` @ {pin}\nint f;\n"),
        "src/body.cpp": (f"// Ported from: {OTHER} @ {pin}\nint g;\n\n"
                         f"// Ported from: {MOD}:5 (do_g).\nint gg;\n"),
        "src/relative.cpp": f"// Mirrors vLLM a/b.py::do_g @ {pin}\nint h;\n",
        # walk-s7 N1: the symbol on the comment's next line, the stale line number on this.
        "src/body_wrapped.cpp": (f"// Ported from: {OTHER} @ {pin}\nint p;\n\n"
                                 f"// Ported from: {MOD}:1\n//   (do_g). A struct.\nint pp;\n"),
        "src/only_f.cpp": f"// Ported from: {MOD}::do_f @ {pin}\nint i;\n",
        "src/body_mention.cpp": (f"// Ported from: {OTHER} @ {pin}\nint j;\n\n"
                                 f"// See {MOD}:5 (do_g) for the shape.\nint jj;\n"),
        "src/h.cpp": f"// Ported from: {MOD}::do_h @ {pin}\nint k;\n",
        # walk-s8 D3: one name stale, one found: the lines are not dropped for the name.
        "src/stale_name.cpp": (f"// Ported from: {MOD}:1-2 (do_f), :5-6 (gone_name) @ {pin}\n"
                               "int q;\n"),
        "src/box_lines.cpp": f"// Ported from: {MOD}:14-15 (class Box) @ {pin}\nint m;\n",
        "src/box_pinless.cpp": f"// Ported from: {MOD}:14-15 (class Box)\nint n;\n",
        "src/big.cpp": f"// Ported from: {MOD}:{BIG_FIELD},{BIG_M}-{BIG_M + 1} @ {pin}\nint o;\n",
        ".agents/upstream-sync.toml": RULES,
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: PIN_TEXT, OTHER: "def other():\n    return 0\n", "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "reach", Plan(files, SHAPES, _port_files)) as w:
        yield w


def _entry(world: World, name: str = "change_g") -> dict[str, Any]:
    return entry(world, name)


def _verdicts(world: World, name: str = "change_g") -> dict[str, str]:
    """port file -> outcome of each citation the commit's symbol pass judged."""
    return {c["port_file"]: c["outcome"]
            for c in _entry(world, name)["evidence"]["citations"]}


@pytest.mark.parametrize("port_file", ["src/cont_paren.cpp", "src/cont_plus.cpp",
                                       "src/cont_syms.cpp", "src/cont_parens.cpp",
                                       "src/cont_wrapped.cpp", "src/cont_aside.cpp",
                                       "src/body.cpp", "src/relative.cpp",
                                       "src/body_wrapped.cpp", "src/stale_name.cpp"])
def test_a_change_to_a_cited_definition_is_a_hit_however_it_is_cited(
        world: World, port_file: str) -> None:
    assert _verdicts(world).get(port_file) == "hit", _verdicts(world)


def test_what_is_not_cited_stays_out(world: World) -> None:
    verdicts = _verdicts(world)
    assert verdicts["src/only_f.cpp"] == "miss"
    # A path in the body no verb cites stays a mention, anchors or not.
    assert verdicts["src/body_mention.cpp"] == "mention"
    entry = _entry(world)
    assert entry["disposition"] == "PORT-NOW"
    assert "src/relative.cpp" in entry["port_files"] and "src/body.cpp" in entry["port_files"]


@pytest.mark.parametrize(("text", "lines", "symbols"), [
    (f"// Ported from: {MOD}:1-2 (do_f), :5-6 (do_g) @ abcdef12\n", "1-2,5-6", ("do_f", "do_g")),
    (f"// Ported from: {MOD}:1-2 + :5-6 @ abcdef12\n", "1-2,5-6", ()),
    (f"// Ported from: {MOD}::do_f, ::do_g @ abcdef12\n", None, ("do_f", "do_g")),
    (f"// Ported from: {MOD} (do_f), (see below) @ abcdef12\n", None, ("do_f",)),
    (f"// Ported from: {MOD}:1-2, {OTHER}:3 @ abcdef12\n", "1-2", ()),
    (f"// Ported from: {MOD} (`do_f`, `do_g`) @ abcdef12\n", None, ("do_f", "do_g")),
])
def test_every_anchor_of_a_citation_is_read(text: str, lines: str | None,
                                            symbols: tuple[str, ...]) -> None:
    c = citations.parse_header(text, "p.cpp").citations[0]
    assert (c.path, c.lines, c.symbols) == (MOD, lines, symbols)


def test_a_rule_over_a_change_to_cited_code_is_listed_apart(world: World) -> None:
    """walk-s6a 2: a subject tag's rule classifies the commit (the maintainer's rule), but
    the symbol pass found a hit, so the report lists it apart for review, not in the bulk
    of its disposition's section."""
    e = _entry(world, "rocm_h")
    assert (e["disposition"], e["rule"], e["ruled_over_code"]) == (
        "INVENTORY", "rule platforms-not-targeted", True)
    assert "touches ported code: vllm/a/b.py::do_h → src/h.cpp" in e["reason"]
    text = _listed_apart(world, "rocm_h", report.RULED)
    assert f'1 of them (INVENTORY 1) is listed under "{report.RULED}".' in text
    assert _entry(world)["ruled_over_code"] is False


def _listed_apart(world: World, name: str, title: str) -> str:
    """The report, once checked to list commit `name` under `title`, not under INVENTORY,
    and to read back: a second run writes the same report."""
    (md,) = (world.port / ".agents/sync").glob("*.md")
    text = md.read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{world.sha(name)[:10]}`" in section
    inventory = text.split("## INVENTORY\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{world.sha(name)[:10]}`" not in inventory
    assert run(world.port, "sync")[0] == 0
    assert md.read_text() == text
    return text


def test_a_rule_over_ported_files_but_not_ported_code_is_listed_with_those(
        world: World) -> None:
    """walk-s12 O5: a rule classified a commit that the symbol pass found touches ported
    files, not ported code; its reason said so, but the section a reviewer scans for those
    left it out."""
    e = _entry(world, "rocm_adds")
    assert (e["disposition"], e["rule"], e["not_ported_code"], e["ruled_over_code"]) == (
        "INVENTORY", "rule platforms-not-targeted", True, False)
    assert "; touches ported files, not ported code: vllm/a/other.py → " in e["reason"]
    _listed_apart(world, "rocm_adds", report.NOT_PORTED)


def test_lines_inside_the_named_class_cite_those_lines(world: World) -> None:
    """walk-s6a 7: `:134-229 (class Platform)` made any change to the 800-line class a
    hit. Lines read at the cited SHA narrow the name; without a SHA they may be stale, and
    the name stands."""
    verdicts = _verdicts(world, "second")
    assert verdicts["src/box_lines.cpp"] == "miss"
    assert verdicts["src/box_pinless.cpp"] == "hit"
    assert _verdicts(world, "first")["src/box_lines.cpp"] == "hit"


def test_a_field_and_a_method_of_a_huge_class_cite_those_two(world: World) -> None:
    """walk-s6a 7: `compilation.py:683-684,1438-1444` (a field of a 1,175-line class and
    one of its methods) made a change to any other field of the class a hit."""
    assert PIN_TEXT.splitlines()[BIG_FIELD - 1] == "    a0 = 0"
    assert PIN_TEXT.splitlines()[BIG_M - 1] == "    def m(self):"
    assert _verdicts(world, "big_field")["src/big.cpp"] == "other-statements"
    assert _verdicts(world, "big_m")["src/big.cpp"] == "hit"
