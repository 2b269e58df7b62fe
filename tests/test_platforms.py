"""Code of a platform the port does not target (walk-s12 W6: a ROCm change with no `[ROCm]`
tag made a whole-file citation PORT-NOW): `[classify] untargeted_platforms` names them, and
a change only to a definition named for one, or only under an `if` that requires one, is
INVENTORY `platform-not-targeted`. What an `if` requires is read with its negations: the
body of `if not is_rocm()` is the port's own path."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest
from symbolfixture import Plan, Shape, World, entry, planned

from sync.steps import classify, symbols

MOD = "vllm/a/ops.py"
PIN_TEXT = '''\
def gemm(x):
    if current_platform.is_rocm() and x > 0:
        return x + 1
    return x * 2


def rocm_gemm(x):
    return x - 1


def sample(x):
    if not current_platform.is_rocm():
        return x + 3
    return x


def tile(x):
    if on_gfx1250():
        return 256
    elif x:
        return 128
    return 64
'''


def _edit(old: str, new: str) -> dict[str, str | None]:
    assert PIN_TEXT.count(old) == 1, old
    return {MOD: PIN_TEXT.replace(old, new)}


SHAPES = (
    Shape("under_guard", "[Kernel] Tune gemm", _edit("return x + 1", "return x + 5")),
    Shape("in_test", "[Kernel] Gate gemm", _edit("x > 0:", "x > 1:")),
    Shape("named", "[Kernel] rocm gemm", _edit("return x - 1", "return x - 2")),
    Shape("negated", "[Kernel] Sample", _edit("return x + 3", "return x + 4")),
    Shape("after_guard", "[Kernel] gemm tail", _edit("return x * 2", "return x * 3")),
    Shape("digits", "[Kernel] gfx tile", _edit("return 256", "return 512")),
    Shape("elif", "[Kernel] tile elif", _edit("return 128", "return 96")),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        "src/ops.cpp": f"// Ported from: {MOD} @ {pin}\nint ops;\n",
        "src/gemm.cpp": f"// Ported from: {MOD}::gemm @ {pin}\nint gemm;\n",
        ".agents/upstream-sync.toml": '[classify]\nuntargeted_platforms = ["rocm", "gfx"]\n',
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = {MOD: PIN_TEXT, "README.md": "fake vllm\n"}
    with planned(tmp_path_factory, "platforms", Plan(files, SHAPES, _port_files)) as w:
        yield w


@pytest.mark.parametrize(("name", "want"), [
    ("under_guard", "platform-not-targeted"), ("in_test", "platform-not-targeted"),
    ("named", "platform-not-targeted"), ("digits", "platform-not-targeted"),
    ("negated", "whole-file"), ("after_guard", "symbol-hit"), ("elif", "whole-file")])
def test_only_code_of_an_untargeted_platform_is_not_port_work(
        world: World, name: str, want: str) -> None:
    e = entry(world, name)
    assert e["rule"] == want, e["reason"]
    assert e["disposition"] == ("INVENTORY" if want == "platform-not-targeted" else "PORT-NOW")


def test_the_reason_names_the_platform_and_the_section(world: World) -> None:
    e = entry(world, "under_guard")
    assert e["reason"] == (
        f"changes only code of a platform the port does not target: {MOD}: gemm: code for "
        "'rocm' only (named for it, or under an if requiring it) (src/gemm.cpp, src/ops.cpp)")
    assert e["not_ported_code"] is True
    assert "code for 'gfx' only" in entry(world, "digits")["reason"]


@pytest.mark.parametrize(("test", "words"), [
    ("is_rocm()", {"is", "rocm", "is_rocm"}),
    ("not is_rocm()", set()),
    ("a.is_rocm() and not b", {"a", "is", "rocm", "is_rocm"}),
    ("is_rocm() or is_xpu()", {"is"}),
    ("x is not None", {"x"}), ("x is None", set()), ("x == 0", set()), ("x != 0", {"x"}),
    ("x > 0", {"x"}), ("kind == 'rocm'", {"kind", "rocm"}), ("kind != 'rocm'", set()),
    ("kind in ('rocm', 'hip')", {"kind", "rocm", "hip"}), ("kind not in ('rocm',)", set()),
    ("not x and y", {"y"}), ("0 < x != 1", set()), ("x is False", set()),
])
def test_what_an_if_test_requires(test: str, words: set[str]) -> None:
    expr = ast.parse(test, mode="eval").body
    assert symbols.holding(expr) == words


def test_the_platform_named_is_the_first_of_the_configured_ones() -> None:
    """A set's order (the hash seed) chose between `rocm` and `aiter` in one reason."""
    words = frozenset({"rocm", "aiter", "ops", "is", "enabled"})
    assert classify._platform_word(words, ("rocm", "aiter")) == "rocm"
    assert classify._platform_word(words, ("aiter", "rocm")) == "aiter"
    assert classify._platform_word(frozenset({"gfx1250x"}), ("gfx",)) is None
