"""Upstream Python files whose bytes are valid Python but unusual: a UTF-8 byte order mark.
It must be read as Python, so the symbol pass sees the definitions a commit changes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from symbolfixture import Plan, Shape, World, build_plan, report_doc, synced

BOM = "vllm/v1/bom_runner.py"

RUNNER = '''\
class Runner:
    def step(self, b):
        return b + 1

    def reset(self):
        return None
'''

SHAPES = (
    Shape("bom_beside", "[Core] Reset to zero",
          {BOM: "\ufeff" + RUNNER.replace("return None", "return 0")}),
    Shape("bom_inside", "[Core] Step by two",
          {BOM: "\ufeff" + RUNNER.replace("b + 1", "b + 2")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/step.cpp": f"// Ported from: {BOM}::Runner.step @ {pin}\nint s;\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plan = Plan({BOM: "\ufeff" + RUNNER, "README.md": "fake vllm\n"}, SHAPES, _port_files)
    with synced(lambda: build_plan(tmp_path_factory.mktemp("blobs"), plan)) as w:
        yield w


def _entry(world: World, name: str) -> dict[str, Any]:
    sha = world.sha(name)
    return next(e for e in report_doc(world)["entries"] if e["sha"] == sha)


@pytest.mark.parametrize(("name", "disposition", "rule"), [
    ("bom_beside", "INVENTORY", "not-mirrored"),
    ("bom_inside", "PORT-NOW", "symbol-hit"),
])
def test_unusual_but_valid_python_is_compared_by_definitions(
        world: World, name: str, disposition: str, rule: str) -> None:
    e = _entry(world, name)
    assert (e["disposition"], e["rule"]) == (disposition, rule), e["reason"]
