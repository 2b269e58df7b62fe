"""A line range over statements of a huge function that holds a nested helper
(`serve.py:1188-1284` inside the 590-line `benchmark`, across its inner
`process_one_metric`) cited the whole function, as a range over two definitions does: a
change to any other statement of it was a hit. The helper nests in the function, so the
range is one in the function, compared statement by statement."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned

MOD = "vllm/benchmarks/serve.py"

BODY = "".join(f"    a{i} = {i}\n" for i in range(170))
PIN_TEXT = ("def benchmark():\n" + BODY + "    def inner(x):\n        return x + 1\n\n"
            "    total = inner(a0)\n    return total\n")
FIRST, LAST = 172, 175  # `def inner` .. `total = inner(a0)`

SHAPES = (
    Shape("early", "[Bugfix] a5", {MOD: PIN_TEXT.replace("a5 = 5\n", "a5 = 55\n")}),
    Shape("inside", "[Bugfix] inner", {MOD: PIN_TEXT.replace("x + 1", "x + 2")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/bench.cpp": f"// Ported from: {MOD}:{FIRST}-{LAST} @ {pin}\nint a;\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: PIN_TEXT, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "nested", Plan(files, SHAPES, _port_files)) as w:
        yield w


def _outcome(world: World, name: str) -> str:
    found = entry(world, name)
    (cite,) = found["evidence"]["citations"]
    outcome: str = cite["outcome"]
    return outcome


def test_the_range_is_read_as_statements_of_the_huge_function() -> None:
    lines = PIN_TEXT.splitlines()
    assert (lines[FIRST - 1], lines[LAST - 1]) == ("    def inner(x):", "    total = inner(a0)")


def test_another_statement_of_the_function_is_not_the_cited_range(world: World) -> None:
    assert _outcome(world, "early") == "other-statements"


def test_a_change_inside_the_cited_range_is_a_hit(world: World) -> None:
    assert _outcome(world, "inside") == "hit"
