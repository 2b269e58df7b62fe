"""Edits inside cited files that are not what a citation names: definitions removed from a
file cited whole, a method removed from a cited class, a renamed function; and the
changed lines of hunks that carry git's context lines, against a line-range citation of a
non-Python file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from symbolfixture import Plan, Shape, World, build_plan, report_doc, synced

from sync.dev.fastimport import History
from sync.upstream import gitio, history

QUANT = "vllm/model_executor/layers/quantization/modelopt.py"
PARSER = "vllm/reasoning/mistral_reasoning_parser.py"
KERNEL = "csrc/core/scalar_type.hpp"

MODELOPT = '''\
"""ModelOpt quantization."""


class Fp8MoEMethod:
    def create_weights(self, layer):
        layer.w = 1

    def select_gemm_impl(self, layer):
        return "triton"

    def apply(self, layer, x):
        return x * layer.w


class MxFp8FusedMoE:
    def select_gemm_impl(self, layer):
        return "cutlass"

    def apply(self, layer, x):
        return x


def dequant(w, scale):
    out = w * scale
    return out
'''

MISTRAL = '''\
"""The Mistral reasoning parser."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.tokenizers import MistralTokenizer


class MistralReasoningParser:
    def start_token(self):
        return "[THINK]"

    def end_token(self):
        return "[/THINK]"
'''

# The parser moves to another module: the cited file stays, as a re-export.
MISTRAL_MOVED = '''\
"""The Mistral reasoning parser."""

from vllm.parser.mistral import MistralReasoningParser

__all__ = ["MistralReasoningParser"]
'''

SCALAR = "".join(f"// line {n}\n" if n % 10 else f"static constexpr int k{n} = {n};\n"
                 for n in range(1, 41))


def _lines(text: str, edit: dict[int, list[str] | None]) -> str:
    """`text` with line n replaced by the lines edit[n] (None: deleted), 1-based."""
    out: list[str] = []
    for n, line in enumerate(text.splitlines(keepends=True), start=1):
        new = edit.get(n, [line])
        out += new or []
    return "".join(out)


def _insert_after(text: str, n: int, line: str) -> str:
    return _lines(text, {n: [text.splitlines(keepends=True)[n - 1], line]})


SHAPES = (
    Shape("drop_methods", "[MoE Refactor] Select the GEMM in the factory", {
        QUANT: MODELOPT.replace('''    def select_gemm_impl(self, layer):
        return "triton"

''', "").replace('''    def select_gemm_impl(self, layer):
        return "cutlass"

''', "")}),
    Shape("rename_function", "[Quant] Name the dequant helper", {
        QUANT: MODELOPT.replace("def dequant(", "def dequantize(")}),
    Shape("gut_module", "[Parser] Move the Mistral parser", {PARSER: MISTRAL_MOVED}),
    # Three context lines around each change: a hunk's header starts 3 lines above it.
    Shape("insert_below", "[Kernel] Add k14b", {
        KERNEL: _insert_after(SCALAR, 14, "static constexpr int k14b = 0;\n")}),
    Shape("insert_at_edge", "[Kernel] Add k7b", {
        KERNEL: _insert_after(SCALAR, 7, "static constexpr int k7b = 0;\n")}),
    Shape("modify_below", "[Kernel] Reword line 13", {
        KERNEL: SCALAR.replace("// line 13\n", "// line thirteen\n")}),
    Shape("delete_above", "[Kernel] Drop lines 5-6", {KERNEL: _lines(SCALAR, {5: None, 6: None})}),
    # One hunk with a deletion above the cited lines and an insertion inside them.
    Shape("delete_and_insert", "[Kernel] Drop line 5, add k10b", {
        KERNEL: _insert_after(_lines(SCALAR, {5: None}), 10, "static constexpr int k10b = 0;\n")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        "src/nvfp4_dequant.cpp": f"// Ported from: {QUANT} (NVFP4 dequant) @ {pin}\nint d;\n",
        "src/fp8_moe.cpp": f"// Ported from: {QUANT}::Fp8MoEMethod @ {pin}\nint f;\n",
        "src/mx_select.cpp": f"// Ported from: {QUANT}::MxFp8FusedMoE.select_gemm_impl @ {pin}\n"
                             "int m;\n",
        "src/mistral.cpp": f"// Ported from: {PARSER} @ {pin}\nint r;\n",
        # Lines 5-6 are the `if TYPE_CHECKING:` block: a statement, named by its head.
        "src/mistral_types.cpp": f"// Ported from: {PARSER}:5-6 @ {pin}\nint t;\n",
        "src/scalar_type.cpp": f"// Ported from: {KERNEL}:8-12 @ {pin}\nint s;\n",
    }


PIN_FILES = {QUANT: MODELOPT, PARSER: MISTRAL, KERNEL: SCALAR, "README.md": "fake vllm\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with synced(lambda: build_plan(tmp_path_factory.mktemp("edits"), Plan(
            PIN_FILES, SHAPES, _port_files, {"README.md": "older\n"}))) as w:
        yield w


def _doc(world: World) -> dict[str, Any]:
    return report_doc(world)


def _entry(world: World, name: str) -> dict[str, Any]:
    return next(e for e in _doc(world)["entries"] if e["sha"] == world.sha(name))


def _verdicts(world: World, name: str) -> dict[str, tuple[str, str]]:
    """port file -> (outcome, why) of each citation the commit's symbol pass judged."""
    return {c["port_file"]: (c["outcome"], c["why"])
            for c in _entry(world, name)["evidence"]["citations"]}


def _moves(world: World, name: str) -> list[tuple[str, list[str]]]:
    return [(m["path"], m["port_files"]) for m in _doc(world)["moves"]
            if m["sha"] == world.sha(name)]


def _report(world: World) -> str:
    (md,) = (world.port / ".agents/sync").glob("*.md")
    return md.read_text()


# -- definitions removed from a cited file --------------------------------------------------------


def test_definitions_removed_from_a_file_cited_whole_are_a_change_to_it(world: World) -> None:
    v = _verdicts(world, "drop_methods")
    assert v["src/nvfp4_dequant.cpp"] == (
        "whole-file", "whole-file citation; removes Fp8MoEMethod.select_gemm_impl, "
        "MxFp8FusedMoE.select_gemm_impl")
    # A method removed from a cited class changes that class: the class is not deleted.
    assert v["src/fp8_moe.cpp"] == (
        "hit", "Fp8MoEMethod.select_gemm_impl nests in the cited Fp8MoEMethod (removed)")
    # Only the citation that names the removed method has its cited definition deleted.
    assert v["src/mx_select.cpp"] == ("deleted", "deletes MxFp8FusedMoE.select_gemm_impl")
    e = _entry(world, "drop_methods")
    assert (e["disposition"], e["rule"]) == ("PORT-NOW", "symbol-hit")
    assert e["reason"] == (
        f"{QUANT}::Fp8MoEMethod.select_gemm_impl → src/fp8_moe.cpp; {QUANT} (whole-file "
        "citation; removes Fp8MoEMethod.select_gemm_impl, MxFp8FusedMoE.select_gemm_impl) → "
        "src/nvfp4_dequant.cpp")
    assert _moves(world, "drop_methods") == [
        (f"{QUANT}::MxFp8FusedMoE.select_gemm_impl", ["src/mx_select.cpp"])]


def test_a_renamed_function_is_no_deletion(world: World) -> None:
    """A function renamed with its body unchanged (and nothing left calling the old name) is
    a renaming under a whole-file citation: an IGNORE candidate, not a change to port
    (walk-s3 D6), and never a deletion."""
    v = _verdicts(world, "rename_function")
    assert v["src/nvfp4_dequant.cpp"] == (
        "non-semantic", "dequant: renamed to dequantize; dequantize: renamed from dequant")
    assert v["src/fp8_moe.cpp"][0] == v["src/mx_select.cpp"][0] == "non-semantic"
    e = _entry(world, "rename_function")
    assert (e["disposition"], e["rule"]) == ("IGNORE", "non-semantic")
    assert _moves(world, "rename_function") == []


def test_a_renamed_definition_cited_by_name_is_re_pointed(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Cited by `::dequant`, the same renaming leaves the anchor naming nothing: the
    citation is re-pointed, as for a deletion, and the reason says to what."""
    plan = Plan({QUANT: MODELOPT, "README.md": "x\n"}, (
        Shape("rename_function", "[Quant] Name the dequant helper",
              {QUANT: MODELOPT.replace("def dequant(", "def dequantize(")}),),
        lambda m: {"src/dequant.cpp": f"// Ported from: {QUANT}::dequant @ {m['pin'][:10]}\n"})
    with synced(lambda: build_plan(tmp_path_factory.mktemp("renamed"), plan)) as w:
        e = next(e for e in report_doc(w)["entries"] if e["sha"] == w.sha("rename_function"))
        (v,) = e["evidence"]["citations"]
        assert (v["outcome"], v["why"]) == ("deleted", "renames dequant to dequantize")
        assert (e["disposition"], e["rule"]) == ("INVENTORY", "cited-deleted")


def test_a_gutted_file_cited_whole_names_no_statement_as_cited(world: World) -> None:
    e = _entry(world, "gut_module")
    assert (e["disposition"], e["rule"]) == ("PORT-NOW", "whole-file")
    assert "deleted upstream" not in e["reason"]
    # The line range's statement is gone, but its internal name is not what the port cites.
    assert _verdicts(world, "gut_module")["src/mistral_types.cpp"] == (
        "deleted", "deletes the cited lines")
    assert _moves(world, "gut_module") == []
    moves = _report(world).split("## Upstream moves and deletions of cited paths\n", 1)[1]
    assert "<" not in moves.split("\n## ", 1)[0]


# -- changed lines of hunks with context --------------------------------------------------------


def test_a_listing_with_context_gives_the_exact_changed_lines(tmp_path: Path) -> None:
    h = History()
    h.modify(KERNEL, SCALAR)
    h.commit("base")
    h.modify(KERNEL, _lines(_insert_after(SCALAR, 20, "// new\n"), {5: None, 6: None})
             .replace("// line 33\n", "// line 33!\n"))
    change = h.commit("change")
    shas = h.write(tmp_path / "r")
    listed = history.commit_patches(gitio.open_repo(tmp_path / "r"), [shas[change]], [KERNEL])
    (fp,) = listed[shas[change]].files
    # git's default context: each header starts three lines above its change.
    assert [(h.old_start, h.old_count) for h in fp.hunks] == [(2, 8), (18, 6), (30, 7)]
    assert [h.old_spans for h in fp.hunks] == [((5, 6),), ((20, 21),), ((33, 33),)]
    assert [h.deleted for h in fp.hunks] == [(5, 6), (), (33,)]
    assert [h.added for h in fp.hunks] == [(), (19,), (32,)]


def test_a_line_range_citation_next_to_a_change(world: World) -> None:
    def line_verdict(name: str) -> tuple[str, str]:
        return _verdicts(world, name)["src/scalar_type.cpp"]

    fallback = "not Python (.hpp)"
    assert line_verdict("insert_below") == ("miss", f"{fallback}; changed lines 14-15 lie "
                                            "outside the cited lines 8-12")
    assert line_verdict("insert_at_edge") == ("path-level", f"{fallback}; a hunk overlaps the "
                                              "cited lines 8-12")
    assert line_verdict("modify_below") == ("miss", f"{fallback}; changed lines 13 lie "
                                            "outside the cited lines 8-12")
    assert line_verdict("delete_above") == ("miss", f"{fallback}; changed lines 5-6 lie "
                                            "outside the cited lines 8-12")
    assert line_verdict("delete_and_insert") == ("path-level", f"{fallback}; a hunk overlaps "
                                                 "the cited lines 8-12")
    assert [_entry(world, n)["disposition"] for n in (
        "insert_below", "insert_at_edge", "modify_below", "delete_above", "delete_and_insert",
    )] == ["INVENTORY", "PORT-NOW", "INVENTORY", "INVENTORY", "PORT-NOW"]


# -- a line range past the end of a file read by lines --------------------------------------------


def _past_port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/scalar_past.cpp": f"// Ported from: {KERNEL}:50-60 @ {pin}\nint p;\n",
            "src/scalar_tail.cpp": f"// Ported from: {KERNEL}:35-60 @ {pin}\nint t;\n"}


@pytest.fixture(scope="module")
def past_end(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    shapes = (Shape("modify_below", "[Kernel] Reword line 13", {
        KERNEL: SCALAR.replace("// line 13\n", "// line thirteen\n")}),)
    with synced(lambda: build_plan(tmp_path_factory.mktemp("past"), Plan(
            {KERNEL: SCALAR, "README.md": "fake vllm\n"}, shapes, _past_port_files))) as w:
        yield w


def test_a_line_range_wholly_past_the_end_of_the_file_is_compared_as_the_whole_file(
        past_end: World) -> None:
    """`:50-60` of a 40-line kernel names no line of it: a stale anchor, which must not make
    every change "outside the cited lines" (a Python range that holds no definition is read
    as the whole file too). A range that reaches past the end but starts inside stands."""
    v = _verdicts(past_end, "modify_below")
    assert v["src/scalar_past.cpp"] == ("path-level", "not Python (.hpp): compared as a whole file")
    assert v["src/scalar_tail.cpp"] == ("miss", "not Python (.hpp); changed lines 13 lie outside "
                                        "the cited lines 35-60")
    (cited,) = [c for c in _entry(past_end, "modify_below")["evidence"]["citations"]
                if c["port_file"] == "src/scalar_past.cpp"]
    assert "lines 50-60 lie past the end of" in json.dumps(cited)
    assert _entry(past_end, "modify_below")["disposition"] == "PORT-NOW"


def test_a_miss_of_a_line_range_in_a_file_read_by_lines_names_the_cited_lines(
        world: World) -> None:
    assert _entry(world, "modify_below")["reason"] == (
        f"touches ported files, not ported code: {KERNEL}: not Python (.hpp); changed lines 13 "
        "lie outside the cited lines 8-12; the port mirrors lines 8-12 (src/scalar_type.cpp)")
