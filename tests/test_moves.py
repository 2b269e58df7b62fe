"""Moves of cited paths are judged at the target (walk-s11 D9): a cited file renamed away
and renamed back (or deleted and added again) within the range is where the citation says
at the target, so no "re-point the citation" is listed for it, and the rename back says what
it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from symbolfixture import Plan, Shape, World, build_plan, report_doc, synced

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
    with synced(lambda: build_plan(tmp_path_factory.mktemp("moves"),
                                   Plan(files, SHAPES, _port_files))) as w:
        yield w


def _entry(world: World, name: str) -> dict[str, Any]:
    return next(e for e in report_doc(world)["entries"] if e["sha"] == world.sha(name))


def test_a_path_renamed_back_is_no_move_at_the_target(world: World) -> None:
    # `old.py` is deleted, then restored by the fixture's next commit: at the target it is
    # there too. (A path that stays moved is listed: test_symbols' cited_deleted.)
    assert report_doc(world)["moves"] == []
    assert _entry(world, "back")["reason"].endswith(
        f"renamed from {AWAY} (back to the cited path), no lines changed (src/kv.cpp)")
