"""Upstream Python files whose bytes are valid Python but unusual: a UTF-8 byte order mark,
and a form feed (a page break, `^L`) on a line of its own. Both must be read as Python
and their lines numbered as git numbers them, so the symbol pass sees the same changes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned

from sync.steps import symbols

BOM = "vllm/v1/bom_runner.py"
PAGED = "vllm/v1/paged.py"

RUNNER = '''\
class Runner:
    def step(self, b):
        return b + 1

    def reset(self):
        return None
'''

# A page break between two sections of a module, as Emacs users write them.
PAGES = "x = 1\n\x0c\ndef f():\n    return 1\n\n\ndef g(a):\n    return a\n"

SHAPES = (
    Shape("bom_beside", "[Core] Reset to zero",
          {BOM: "\ufeff" + RUNNER.replace("return None", "return 0")}),
    Shape("bom_inside", "[Core] Step by two",
          {BOM: "\ufeff" + RUNNER.replace("b + 1", "b + 2")}),
    Shape("paged_signature", "[Core] g takes b",
          {PAGED: PAGES.replace("def g(a):", "def g(a, b=0):")}),
    Shape("paged_beside", "[Core] f returns two",
          {PAGED: PAGES.replace("return 1", "return 2")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/step.cpp": f"// Ported from: {BOM}::Runner.step @ {pin}\nint s;\n",
            "src/g.cpp": f"// Ported from: {PAGED}::g @ {pin}\nint g;\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plan = Plan({BOM: "\ufeff" + RUNNER, PAGED: PAGES, "README.md": "fake vllm\n"}, SHAPES,
                _port_files)
    with planned(tmp_path_factory, "blobs", plan) as w:
        yield w


@pytest.mark.parametrize(("name", "disposition", "rule"), [
    ("bom_beside", "INVENTORY", "not-mirrored"),
    ("bom_inside", "PORT-NOW", "symbol-hit"),
    ("paged_signature", "PORT-NOW", "symbol-hit"),
    ("paged_beside", "INVENTORY", "not-mirrored"),
])
def test_unusual_but_valid_python_is_compared_by_definitions(
        world: World, name: str, disposition: str, rule: str) -> None:
    e = entry(world, name)
    assert (e["disposition"], e["rule"]) == (disposition, rule), e["reason"]


def test_an_outline_numbers_lines_as_git_does() -> None:
    outline = symbols.outline(("\ufeff" + PAGES).encode())
    assert len(outline.lines) == PAGES.count("\n")
    at = {n: u.name for n in range(1, len(outline.lines) + 1) if (u := outline.at(n))}
    assert at[7] == at[8] == "g"
    assert outline.code(7) and not outline.blank(7)
