"""Coarse citations: a large upstream file cited whole that made a commit PORT-NOW is listed
in the report with the definitions each citing port file names (DESIGN §8: "the report says
so, so ports learn to cite symbols")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from symbolfixture import Plan, Shape, World, build_plan, report_doc, synced

from sync.steps import coarse

OPS = "vllm/_custom_ops.py"
SMALL = "vllm/v1/sample/ops/bad_words.py"


def _ops(body_of_gemm: str = "    return a @ b") -> str:
    fns = [f"def op_number_{i}(x):\n    return x + {i}\n" for i in range(120)]
    return ("import torch\n\n\n" + "\n\n".join(fns)
            + "\n\ndef apply_repetition_penalties(logits, penalties):\n"
            + "    return logits * penalties\n"
            + f"\n\ndef rocm_unquantized_gemm(a, b):\n{body_of_gemm}\n"
            + "\n\nclass Sampler:\n    def __init__(self):\n        self.k = 1\n\n"
            + "    def top_k_only(self, x):\n        return x\n")


SMALL_TEXT = "def apply_bad_words(logits, words):\n    return logits\n"


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {
        # Names one definition in CamelCase and a class's method (its class is then left out).
        "src/penalties_test.cpp": (f"// Ported from: {OPS} + {SMALL} @ {pin}\n"
                                     "TEST(ApplyRepetitionPenalties) {}\n"
                                     "void TopKOnly(Sampler& s);\n// forward build sample\n"),
        # Names none of the file's definitions (one-word names are no evidence).
        "src/ops.cpp": f"// Ported from: {OPS} @ {pin}\nint forward_build;\n",
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plan = Plan({OPS: _ops(), SMALL: SMALL_TEXT, "README.md": "fake vllm\n"}, (
        Shape("gemm", "[ROCm] Tune the unquantized gemm",
              {OPS: _ops("    return torch.mm(a, b)")}),
        Shape("bad_words", "[Sampler] Skip empty bad words",
              {SMALL: SMALL_TEXT.replace("return logits", "return logits if words else logits")}),
    ), _port_files)
    with synced(lambda: build_plan(tmp_path_factory.mktemp("coarse"), plan)) as w:
        yield w


def _section(w: World) -> list[str]:
    (report,) = (w.port / ".agents/sync").glob("*.md")
    text = report.read_text()
    body = text.split("## Coarse citations (large files cited whole)\n\n", 1)[1]
    return body.split("\n## ", 1)[0].strip().splitlines()


def test_a_large_file_cited_whole_is_listed_with_the_names_its_port_files_hold(
        world: World) -> None:
    doc = report_doc(world)
    by_subject = {e["subject"].split(" (#")[0]: e for e in doc["entries"]}
    # Whole-file citations make PORT-NOW by design; each shape's revert is a commit too.
    gemm_e = by_subject["[ROCm] Tune the unquantized gemm"]
    restore_e = by_subject["Restore after gemm"]
    bad_e = by_subject["[Sampler] Skip empty bad words"]
    assert gemm_e["disposition"] == restore_e["disposition"] == bad_e["disposition"] == (
        "PORT-NOW")
    gemm, restored = gemm_e["sha"][:10], restore_e["sha"][:10]
    lines = _section(world)
    assert lines[0].startswith("A file cited whole makes a change to any of its definitions")
    size = len(_ops().splitlines())
    assert lines[2:] == [
        f"- `{OPS}` ({size} lines, 125 definitions) cited whole by src/ops.cpp: PORT-NOW "
        f"`{gemm}`, `{restored}`; the port file names none of its definitions",
        f"- `{OPS}` ({size} lines, 125 definitions) cited whole by src/penalties_test.cpp: "
        f"PORT-NOW `{gemm}`, `{restored}`; the port file names apply_repetition_penalties, "
        "Sampler.top_k_only: cite "
        f"`{OPS} (apply_repetition_penalties, Sampler.top_k_only)` if that is what it mirrors",
    ]
    # The small file's PORT-NOW is not coarse: not listed.
    assert all(SMALL not in line for line in lines)
    assert doc["coarse_citations"] == [
        {"path": OPS, "lines": size, "port_file": "src/ops.cpp",
         "commits": [gemm_e["sha"], restore_e["sha"]], "decided": {}, "definitions": 125,
         "named": []},
        {"path": OPS, "lines": size, "port_file": "src/penalties_test.cpp",
         "commits": [gemm_e["sha"], restore_e["sha"]], "decided": {}, "definitions": 125,
         "named": ["apply_repetition_penalties", "Sampler.top_k_only"]},
    ]


def test_the_suggested_anchor_parses_and_makes_the_citation_precise(world: World) -> None:
    from sync.headers.citations import parse_header

    anchor = f"{OPS} (apply_repetition_penalties, Sampler.top_k_only)"
    header = parse_header(f"// Ported from: {anchor} @ {world.sha('pin')[:10]}\n", "x.cpp")
    assert [(c.path, c.symbols) for c in header.citations] == [
        (OPS, ("apply_repetition_penalties", "Sampler.top_k_only"))]


def test_named_wants_two_words_and_skips_dunders() -> None:
    defs = ("build", "Sampler", "Sampler.__init__", "Sampler.top_k_only", "KVCacheSpec",
            "_make_request", "forward_native")
    text = "KvCacheSpec kv; MakeRequest(); build(); Sampler s; __init__; forwardNative"
    assert coarse.named(defs, text) == ("KVCacheSpec", "_make_request", "forward_native")
    # walk-s12 O1: a field of a class's words is not the class, nor a private name the
    # public one; a private name is named in CamelCase as a C++ port writes it.
    assert coarse.named(("ToolChoice", "get_function_parameters", "_private_helper"),
                        "tool_choice; _get_function_parameters(); PrivateHelper()") == (
        "_private_helper",)
    assert coarse.named(("ToolChoice", "get_function_parameters"),
                        "ToolChoice c; GetFunctionParameters()") == (
        "ToolChoice", "get_function_parameters")
    # A class stays when none of its members is named; it goes when one is.
    assert coarse.named(defs, "Sampler") == ()  # one word: no evidence
    assert coarse.named(("TopKSampler", "TopKSampler.top_k_only"), "TopKSampler") == (
        "TopKSampler",)
    assert coarse.named(("TopKSampler", "TopKSampler.top_k_only"),
                        "TopKSampler; TopKOnly") == ("TopKSampler.top_k_only",)
    # ... and to its constructor, which a C++ port writes under the class's name.
    assert coarse.named(("InputProcessor", "InputProcessor.__init__", "InputProcessor.process"
                         "_inputs"), "InputProcessor::InputProcessor() {} ProcessInputs()") == (
        "InputProcessor.__init__", "InputProcessor.process_inputs")
    # A module-level assignment is named as a definition is.
    assert coarse.named(("_MODELS", "BUILTIN_TAG_MODELS"), "BUILTIN_TAG_MODELS, _MODELS") == (
        "BUILTIN_TAG_MODELS",)


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}(\.[A-Za-z_][A-Za-z0-9_]{0,12})?",
                      fullmatch=True)


@given(st.lists(_NAME, max_size=12), st.text(max_size=300))
def test_named_is_an_ordered_subset_on_any_text(defs: list[str], text: str) -> None:
    got = coarse.named(defs, text)
    assert list(got) == [d for d in defs if d in got]
    assert all(not d.rsplit(".", 1)[-1].startswith("__") or not d.endswith("__") for d in got)


def test_explain_says_a_large_whole_file_citation_is_coarse(world: World) -> None:
    from symbolfixture import run

    rc, out, err = run(world.port, "explain", world.sha("gemm")[:10])
    assert rc == 0, err
    size = len(_ops().splitlines())
    assert out.count(f"        coarse: a {size}-line file cited whole; cite what the port file "
                     "mirrors (the report's Coarse citations name the candidates)\n") == 2
    rc, out, err = run(world.port, "explain", world.sha("bad_words")[:10])
    assert rc == 0, err
    assert "coarse:" not in out  # a small file cited whole is not coarse


def test_a_decided_commit_stays_listed_with_what_was_decided(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """walk-s3 D14: deciding a false PORT-NOW is when the advice matters most; the line keeps
    the commit and says what was decided, and the length is the file's at the target."""
    from symbolfixture import run

    plan = Plan({OPS: _ops(), "README.md": "fake vllm\n"}, (
        Shape("gemm", "[ROCm] Tune the unquantized gemm",
              {OPS: _ops("    return torch.mm(a, b)")}),), _port_files)
    with synced(lambda: build_plan(tmp_path_factory.mktemp("decided"), plan)) as w:
        gemm = w.sha("gemm")
        rc, _out, err = run(w.port, "decide", gemm[:10], "IGNORE", "ROCm only")
        assert rc == 0, err
        rc, _out, err = run(w.port, "sync")
        assert rc == 0, err
        lines = _section(w)[2:]
        assert len(lines) == 2 and all(
            f"PORT-NOW `{gemm[:10]}` (decided IGNORE), `" in line for line in lines), lines
        assert all(f"({len(_ops().splitlines())} lines," in line for line in lines)
        docs = report_doc(w)["coarse_citations"]
        assert [d["decided"] for d in docs] == [{gemm: "IGNORE"}] * 2
