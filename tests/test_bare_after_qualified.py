"""`path (Class.method, helper)` reads the bare names after a qualified one as more methods
of that class (`Class.m + n`), as real headers mostly mean. When the class has no such
method but the module has a top-level definition of that name, the citation named the
module's: it was dropped ("names no definition") and a change to it was no hit, so the
port file that mirrors it was never told (a fail-open miss, the opposite of the rule)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned

MOD = "vllm/v1/engine/processor.py"

PIN_TEXT = '''\
class Processor:
    def process(self, x):
        return helper(x) + 1

    def reset(self):
        return None


def helper(x):
    return x * 2


def unrelated(x):
    return x - 1
'''

SHAPES = (
    Shape("helper", "[Bugfix] helper doubles twice", {MOD: PIN_TEXT.replace("x * 2", "x * 4")}),
    Shape("reset", "[Misc] reset returns 0", {MOD: PIN_TEXT.replace("return None", "return 0")}),
    Shape("unrelated", "[Misc] unrelated", {MOD: PIN_TEXT.replace("x - 1", "x - 2")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        "src/processor.cpp": f"// Ported from: {MOD} (Processor.process, helper) @ {pin}\nint a;\n",
        "src/methods.cpp": f"// Ported from: {MOD} (Processor.process, reset) @ {pin}\nint b;\n",
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: PIN_TEXT, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "bare", Plan(files, SHAPES, _port_files)) as w:
        yield w


def _verdicts(world: World, name: str) -> dict[str, str]:
    return {c["port_file"]: c["outcome"] for c in entry(world, name)["evidence"]["citations"]}


def test_a_top_level_name_after_a_qualified_one_is_cited(world: World) -> None:
    assert _verdicts(world, "helper")["src/processor.cpp"] == "hit"
    assert entry(world, "helper")["disposition"] == "PORT-NOW"
    notes = [c.get("note", "") for c in entry(world, "helper")["evidence"]["citations"]
             if c["port_file"] == "src/processor.cpp"]
    assert any("Processor.helper is read as the top-level helper" in n for n in notes), notes


def test_a_method_of_the_class_still_qualifies(world: World) -> None:
    verdicts = _verdicts(world, "reset")
    assert verdicts["src/methods.cpp"] == "hit"
    assert verdicts["src/processor.cpp"] != "hit"


def test_a_definition_not_named_is_still_no_hit(world: World) -> None:
    assert all(v != "hit" for v in _verdicts(world, "unrelated").values())
