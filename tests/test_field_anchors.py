"""A citation anchored on a field of a class (`protocol.py::ChatCompletionRequest.tool_choice`:
a pydantic or dataclass field, no definition of its own) cites that field's statement in the
class. It was read as a whole-file citation ("names no definition"), so a change anywhere in
the file was PORT-NOW for a port file that mirrors one field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned

MOD = "vllm/entrypoints/protocol.py"

PIN_TEXT = '''\
class Request:
    model: str = "m"
    tool_choice: str = "auto"
    max_tokens: int = 16

    def to_params(self):
        return {"max_tokens": self.max_tokens}


def other_helper(x):
    return x + 1
'''

SHAPES = (
    Shape("choice", "[Bugfix] Default tool_choice", {MOD: PIN_TEXT.replace('"auto"', '"none"')}),
    Shape("tokens", "[Bugfix] Default max_tokens", {MOD: PIN_TEXT.replace("= 16", "= 32")}),
    Shape("method", "[Bugfix] to_params", {MOD: PIN_TEXT.replace('{"max_tokens"', '{"n"')}),
    Shape("helper", "[Bugfix] other_helper", {MOD: PIN_TEXT.replace("x + 1", "x + 2")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        "src/choice.cpp": f"// Ported from: {MOD}::Request.tool_choice @ {pin}\nint a;\n",
        "src/mixed.cpp": (f"// Ported from: {MOD} (other_helper, Request.tool_choice) @ {pin}\n"
                          "int b;\n"),
        "src/whole_class.cpp": (f"// Ported from: {MOD} (Request, Request.tool_choice) @ {pin}\n"
                                "int c;\n"),
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: PIN_TEXT, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "fields", Plan(files, SHAPES, _port_files)) as w:
        yield w


def _verdicts(world: World, name: str) -> dict[str, str]:
    found = entry(world, name)
    return {c["port_file"]: c["outcome"] for c in found["evidence"]["citations"]}


def _disposition(world: World, name: str) -> str:
    found = entry(world, name)
    disposition: str = found["disposition"]
    return disposition


def test_a_change_to_the_cited_field_is_a_hit(world: World) -> None:
    assert _verdicts(world, "choice") == {
        "src/choice.cpp": "hit", "src/mixed.cpp": "hit", "src/whole_class.cpp": "hit"}
    assert _disposition(world, "choice") == "PORT-NOW"


def test_another_field_of_the_class_is_not_the_cited_one(world: World) -> None:
    verdicts = _verdicts(world, "tokens")
    assert verdicts["src/choice.cpp"] == "other-statements"
    assert verdicts["src/mixed.cpp"] == "other-statements"
    assert verdicts["src/whole_class.cpp"] == "hit"  # the class is cited whole too


@pytest.mark.parametrize("shape", ["method", "helper"])
def test_code_outside_the_class_fields_is_not_the_cited_field(world: World, shape: str) -> None:
    verdicts = _verdicts(world, shape)
    assert verdicts["src/choice.cpp"] == "miss", verdicts
    expected = {"method": ("miss", "hit"), "helper": ("hit", "miss")}[shape]
    assert (verdicts["src/mixed.cpp"], verdicts["src/whole_class.cpp"]) == expected

