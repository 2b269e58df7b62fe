"""Moves of cited paths are judged at the target (walk-s11 D9): a cited file renamed away
and renamed back (or deleted and added again) within the range is where the citation says
at the target, so no "re-point the citation" is listed for it, and the rename back says what
it was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned, report_doc

MOD, AWAY, GONE = "vllm/a/kv.py", "vllm/a/kv_iface.py", "vllm/a/old.py"
TEXT = "def kv(x):\n    return x\n"

SHAPES = (
    Shape("away", "[Refactor] Rename kv", {}, rename=(MOD, AWAY)),
    Shape("back", "[Refactor] Rename kv back", {}, rename=(AWAY, MOD)),
    Shape("drop", "[Refactor] Drop old", {GONE: None}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/kv.cpp": f"// Ported from: {MOD} @ {pin}\nint kv;\n",
            "src/old.cpp": f"// Ported from: {GONE} @ {pin}\nint old;\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: TEXT, GONE: TEXT, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "moves", Plan(files, SHAPES, _port_files)) as w:
        yield w


def test_a_path_renamed_back_is_no_move_at_the_target(world: World) -> None:
    # `old.py` is deleted, then restored by the fixture's next commit: at the target it is
    # there too. (A path that stays moved is listed: test_symbols' cited_deleted.)
    assert report_doc(world)["moves"] == []
    assert entry(world, "back")["reason"].endswith(
        f"renamed from {AWAY} (back to the cited path), no lines changed (src/kv.cpp)")


# -- a cited file renamed, then changed under its new name -----------------------------------------

RUNNER, RENAMED, PKG, PACKAGE = ("vllm/w/runner.py", "vllm/w/gpu_runner.py", "vllm/w/attn.py",
                                 "vllm/w/attn/__init__.py")
CLASS = ("class Runner:\n    def step(self, b):\n        return b + 1\n\n"
         "    def reset(self):\n        return None\n")
LATER = (
    Shape("rename", "[Refactor] Rename the runner", {}, rename=(RUNNER, RENAMED)),
    Shape("step_renamed", "[Core] Step by two", {RENAMED: CLASS.replace("b + 1", "b + 2")}),
    Shape("reset_renamed", "[Core] Reset to zero",
          {RENAMED: CLASS.replace("b + 1", "b + 2").replace("None", "0")}),
    Shape("to_package", "[Refactor] attn becomes a package", {}, rename=(PKG, PACKAGE)),
    Shape("step_package", "[Core] Step by three", {PACKAGE: CLASS.replace("b + 1", "b + 3")}),
)


def _later_port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    line = CLASS.splitlines().index("        return b + 1") + 1
    return {"src/step.cpp": f"// Ported from: {RUNNER}::Runner.step @ {pin}\nint s;\n",
            "src/lines.cpp": f"// Ported from: {RUNNER}:{line} @ {pin}\nint l;\n",
            "src/attn.cpp": f"// Ported from: {PKG}::Runner.step @ {pin}\nint a;\n"}


@pytest.fixture(scope="module")
def later(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {RUNNER: CLASS, PKG: CLASS, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "later", Plan(files, LATER, _later_port_files)) as w:
        yield w


def test_a_change_under_the_new_name_of_a_renamed_cited_file_is_judged_by_its_citations(
        later: World) -> None:
    """A cited file renamed in the range (`foo.py` -> `bar.py`, or `foo.py` ->
    `foo/__init__.py`) and changed later under its new name: the change is to what the port
    cites, though its header still names the old path (not "not yet ported")."""
    step = entry(later, "step_renamed")
    assert (step["disposition"], step["rule"]) == ("PORT-NOW", "symbol-hit")
    assert step["reason"] == (f"{RENAMED}::Runner.step → src/lines.cpp (cites {RUNNER}), "
                              f"src/step.cpp (cites {RUNNER})")
    assert step["port_files"] == ["src/lines.cpp", "src/step.cpp"]
    reset = entry(later, "reset_renamed")
    assert (reset["disposition"], reset["rule"]) == ("INVENTORY", "not-mirrored")
    package = entry(later, "step_package")
    assert (package["disposition"], package["rule"]) == ("PORT-NOW", "symbol-hit")
    assert package["reason"] == f"{PACKAGE}::Runner.step → src/attn.cpp (cites {PKG})"
    assert [(m["path"], m["new_path"]) for m in report_doc(later)["moves"]] == [
        (RUNNER, RENAMED), (PKG, PACKAGE)]
