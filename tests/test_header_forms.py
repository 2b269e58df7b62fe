"""The header forms of the real port (findings §2, §10 recipes 2-12), one test per shape.

Each text is the real header's shape, shortened; the expectation is what a maintainer reading
it says: which paths are citations (per-file pins), which are mentions, which project a
citation belongs to, and the anchors the symbol pass needs.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.headers import oracles
from sync.headers.citations import Header, parse_header

S = "d28fbddc"


def read(text: str, path: str = "a.cpp", local: set[str] | None = None) -> Header:
    ups = oracles.Upstreams(local=lambda p: p in (local or set()))
    h = oracles.attribute(parse_header(text, path), ups, path)
    for c in h.citations:
        if c.sha_start is not None:
            assert text[c.sha_start:c.sha_end] == c.sha
    return h


def cited(h: Header) -> list[tuple[str, str | None]]:
    return [(c.path, c.sha) for c in h.citations]


def mentioned(h: Header) -> list[str]:
    return [m.path for m in h.mentions]


# -- recipe 2, 3: citations and mentions ----------------------------------------------------------


def test_see_on_the_next_line_is_a_mention() -> None:
    text = (f"// Ported from: vllm/v1/core/kv_cache_coordinator.py @ {S}\n"
            "// See include/vllm/v1/core/kv_cache_coordinator.h for the scope / deferred list\n"
            "#include <x>\n")
    h = read(text)
    assert cited(h) == [("vllm/v1/core/kv_cache_coordinator.py", S)]
    assert mentioned(h) == ["include/vllm/v1/core/kv_cache_coordinator.h"]


def test_a_path_deep_in_a_long_comment_is_a_mention() -> None:
    text = (f"// Ported from: vllm/outputs.py @ {S}\n//\n"
            + "// The public request-result types, mirrored field by field.\n//\n" * 15
            + "// DEVIATIONS, recorded:\n"
            "//   - finish_reason uses that SAME mapping\n"
            "//     (vllm/v1/engine/__init__.py FINISH_REASON_STRINGS).\n"
            "//   - stop_reason as in vllm/v1/engine/types.h.\n")
    h = read(text, local={"vllm/v1/engine/types.h"})
    assert cited(h) == [("vllm/outputs.py", S)]
    assert mentioned(h) == ["vllm/v1/engine/__init__.py", "vllm/v1/engine/types.h"]


def test_port_local_records_and_model_ids_are_never_citations() -> None:
    text = (f"// Upstream: vllm/model_executor/models/glm4.py @ {S}; config\n"
            "// zai-org/GLM-4-9B-0414/config.json (hidden 4096). Spec:\n"
            "// .agents/specs/glm.md. Ported from tests/vt/test_glm.cpp and\n"
            "// include/vllm/model_executor/models/glm4.h @ " + S + ".\n")
    h = read(text, path="src/glm4.cpp", local={"tests/vt/test_glm.cpp",
                                               "include/vllm/model_executor/models/glm4.h"})
    assert cited(h) == [("vllm/model_executor/models/glm4.py", S)]
    assert {m.path: m.why for m in h.mentions} == {
        ".agents/specs/glm.md": "record", "tests/vt/test_glm.cpp": "port-local",
        "include/vllm/model_executor/models/glm4.h": "port-local"}


def test_a_header_citing_only_the_port_is_no_header() -> None:
    h = read("# Mirror of scripts/deepseek-v2-neartie-gap.py.\nimport os\n", "scripts/x.py",
             local={"scripts/deepseek-v2-neartie-gap.py"})
    assert h.kind == "NONE" and mentioned(h) == ["scripts/deepseek-v2-neartie-gap.py"]


# -- recipe 4, 5: group SHAs and wraps -------------------------------------------------------------


def test_group_sha_in_the_middle() -> None:
    text = ("// Ported from: vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py\n"
            f"//               (OffloadingConnectorScheduler) @ {S}\n"
            "//               vllm/distributed/kv_transfer/kv_connector/factory.py:27-125\n"
            "// See include/vllm/v1/kv_offload/kv_connector.h.\n")
    h = read(text)
    assert cited(h) == [
        ("vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py", S),
        ("vllm/distributed/kv_transfer/kv_connector/factory.py", S)]
    assert h.citations[0].symbols == ("OffloadingConnectorScheduler",)
    assert h.citations[1].lines == "27-125"


def test_group_sha_at_the_end() -> None:
    text = ("// Ported from:\n//   tests/kernels/core/test_pos_encoding.py:54-193\n"
            "//   tests/kernels/core/test_mrope.py:16-126\n// and the reference selection in\n"
            "//   vllm/model_executor/layers/rotary_embedding/mrope.py:14-198\n"
            "// @ d28fbddc2b97.\n")
    assert cited(read(text)) == [
        ("tests/kernels/core/test_pos_encoding.py", "d28fbddc2b97"),
        ("tests/kernels/core/test_mrope.py", "d28fbddc2b97"),
        ("vllm/model_executor/layers/rotary_embedding/mrope.py", "d28fbddc2b97")]


@pytest.mark.parametrize("text", [
    "// Ported from:\n//   vllm/model_executor/layers/rotary_embedding/\n"
    f"//   dynamic_ntk_alpha_rope.py:9-43\n// @ {S}.\n",
    "// Reimplemented from the WIRE FORMAT of: vllm/model_executor/layers/rotary_embedding/"
    f"dynamic_ntk_alpha_rope\n// .py @ {S} (registry names).\n",
    "// Ported from vllm/model_executor/layers/rotary_embedding/dynamic_ntk_alpha_rope.py @\n"
    f"// {S}.\n",
    "// Faithful 1:1 port of vllm/model_executor/layers/rotary_embedding/dynamic_ntk_alpha_rope"
    f".py @\n// pin {S} — the seam.\n",
])
def test_wraps(text: str) -> None:
    assert cited(read(text)) == [
        ("vllm/model_executor/layers/rotary_embedding/dynamic_ntk_alpha_rope.py", S)]


def test_see_before_a_records_path_on_the_next_line_does_not_join() -> None:
    text = (f"// Ported from: vllm/platforms/interface.py @ {S} — the seam. See\n"
            "// .agents/porting-inventory.md §9 note 8, and\n// .agents/specs/seam.md.\n")
    h = read(text)
    assert cited(h) == [("vllm/platforms/interface.py", S)]
    assert mentioned(h) == [".agents/porting-inventory.md", ".agents/specs/seam.md"]


# -- recipe 6: anchors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "symbols", "lines"), [
    (f"// Ported from: vllm/v1/worker/gpu_model_runner.py::_prepare_inputs @ {S}\n"
     "// (+ _update_states, _get_cumsum_and_arange; the num_scheduled_tokens_np build)\n",
     ("_prepare_inputs", "_update_states", "_get_cumsum_and_arange"), None),
    (f"// Ported from: vllm/entrypoints/openai/chat_completion/serving.py @ {S}\n"
     "// (OpenAIServingChat.create_chat_completion + chat_completion_stream_generator +\n"
     "// chat_completion_full_generator).\n",
     ("OpenAIServingChat.create_chat_completion",
      "OpenAIServingChat.chat_completion_stream_generator",
      "OpenAIServingChat.chat_completion_full_generator"), None),
    (f"// Ported from: vllm/config/kv_transfer.py @ {S} (KVTransferConfig:22-121;\n"
     "//               KVProducer/KVConsumer/KVRole:11-13).\n",
     ("KVTransferConfig", "KVProducer", "KVConsumer", "KVRole"), "22-121,11-13"),
    (f"// Faithful 1:1 port of vllm/platforms/interface.py:134-229 (class Platform) @ {S}\n",
     ("Platform",), "134-229"),
    (f"// Ported from: vllm/model_executor/layers/attention/attention.py:204-236,387-400 @ {S}\n",
     (), "204-236,387-400"),
    (f"// Ported from: vllm/v1/worker/gpu/model_runner.py @ {S}\n"
     "// (GPUModelRunner: initialize_kv_cache / execute_model — the T0 slice).\n",
     ("GPUModelRunner.initialize_kv_cache", "GPUModelRunner.execute_model"), None),
    (f"// Ported from: vllm/tool_parsers/utils.py @ {S} - handle_single_tool,\n"
     "//  get_parameter_value, make_valid_python).\n",
     ("handle_single_tool", "get_parameter_value", "make_valid_python"), None),
    (f"// Ported from: vllm/model_executor/layers/fused_moe/layer.py @ {S}\n"
     "// (NVFP4 W4A16 dequant)\n", (), None),
    (f"// Ported from: vllm/v1/engine/async_llm.py @ {S}\n"
     "// (AsyncLLM :70-745: add_request :280-410, generate :524-635)\n",
     ("AsyncLLM", "add_request", "generate"), "70-745,280-410,524-635"),
    (f"// Ported from: vllm/entrypoints/openai/api_server.py @ {S} (the route shapes)\n", (),
     None),
    (f"// Ported from: vllm/v1/attention/backends/flash_attn.py @ {S}\n"
     "// (FlashAttentionImpl.forward SEMANTICS: paged K/V)\n", (), None),
    # A prose item at the end leaves the items before it (the real model_registry.h).
    ("// Ported from: vllm/model_executor/models/registry.py\n"
     f"//               @ {S}\n"
     "// (_ModelInfo:746-796, _ModelRegistry:998-1082,\n"
     "//  resolve_model_cls:1244-1296, global registry:1396-1404).\n",
     ("_ModelInfo", "_ModelRegistry", "resolve_model_cls"), "746-796,998-1082,1244-1296"),
    (f"// Ported from: vllm/v1/attention/backends/flash_attn.py @ {S}\n"
     "// (the paged path, FlashAttentionImpl.forward)\n", (), None),
])
def test_anchors(text: str, symbols: tuple[str, ...], lines: str | None) -> None:
    c = read(text).citations[0]
    assert (c.symbols, c.lines) == (symbols, lines)
    assert c.symbol == (symbols[0] if symbols else None)


def test_ours_upstream_table_rows_anchor_the_full_path() -> None:
    text = (f"// WHAT THIS IS A PORT OF (file:line on BOTH sides, @ pin {S})\n"
            "//   OURS                 <-  UPSTREAM\n"
            "//   DeepseekV2Params     <-  vllm/model_executor/models/deepseek_v2.py\n"
            "//                            :1189-1244 (DecoderLayer config reads)\n"
            "//   DeepseekV2MlaWeights <-  deepseek_v2.py:1003-1049\n"
            "//                            `DeepseekV2MLAAttention.__init__`\n"
            "//   DeepseekV2DenseMlp   <-  deepseek_v2.py:229-274 `DeepseekV2MLP`\n")
    (c,) = read(text).citations
    assert (c.path, c.sha) == ("vllm/model_executor/models/deepseek_v2.py", S)
    assert c.symbols == ("DeepseekV2MLAAttention.__init__", "DeepseekV2MLP")
    # The range wrapped onto the line after the path is the first row's anchor (walk-s6a).
    assert c.lines == "1189-1244,1003-1049,229-274"


def test_a_basename_later_joins_the_full_citation() -> None:
    text = (f"// Ported from: vllm/v1/engine/core.py @ {S}\n// (EngineCore.step).\n//\n"
            "// step() mirrors core.py:479-508 exactly.\n"
            "// (mirrors utils.py:497-499 as well)\n")
    (c,) = read(text).citations
    assert c.path == "vllm/v1/engine/core.py" and c.lines == "479-508"


def test_a_relative_path_in_bullets_keeps_the_statements_directory() -> None:
    text = (f"// Ported from: vllm/entrypoints/openai/api_server.py @ {S} (the route\n"
            "// shapes) + the per-endpoint api_router modules\n"
            "//   - completion/api_router.py:34    POST /v1/completions\n")
    h = read(text)
    assert cited(h) == [("vllm/entrypoints/openai/api_server.py", S),
                        ("completion/api_router.py", S)]
    assert h.citations[1].near == "vllm/entrypoints/openai/api_server.py"


# -- recipe 7: verbs ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    f"// Ports tests/reasoning/test_mistral_reasoning_parser.py @ {S}\n",
    "// Tests for the Request / RequestStatus / FinishReason port\n"
    f"// (tests/reasoning/test_mistral_reasoning_parser.py @ {S}).\n",
    f"// Ported oracle: tests/reasoning/test_mistral_reasoning_parser.py @ {S} reduced to\n",
    "// Ported from / grounded in: tests/reasoning/test_mistral_reasoning_parser.py @ "
    f"{S}\n",
    "// REIMPLEMENTED FROM WIRE FORMAT: tests/reasoning/test_mistral_reasoning_parser.py @ "
    f"{S}.\n",
    "// UPSTREAM (ported FROM, ground-every-impl rule):\n"
    f"//   tests/reasoning/test_mistral_reasoning_parser.py:1-9 @ {S}\n",
    f"// (Upstream: tests/reasoning/test_mistral_reasoning_parser.py @ {S}; config x)\n",
    "// Tests for the parser (mistral_tool_parser.py\n"
    f"// @ {S}). Ports the upstream cases from\n"
    "// tests/reasoning/test_mistral_reasoning_parser.py - the SAME fixture input.\n",
])
def test_verbs(text: str) -> None:
    h = read(text)
    assert h.kind == "PORTED"
    assert cited(h) == [("tests/reasoning/test_mistral_reasoning_parser.py", S)]


def test_docstring_header_with_bullets_and_a_later_commit() -> None:
    text = ('"""Orchestration helpers.\n\nThis wrapper mirrors its CLI and result schema from:\n\n'
            "* ``vllm/benchmarks/serve.py:321-353,563-748``\n"
            "* ``tests/benchmarks/test_serve_cli.py:58-132``\n\n"
            "at executable-oracle commit ``d28fbddc2b97dd42018bc8703dbcc31fa8032b37``.\n"
            '"""\n')
    h = read(text, "tools/bench/gate.py")
    sha = "d28fbddc2b97dd42018bc8703dbcc31fa8032b37"
    assert cited(h) == [("vllm/benchmarks/serve.py", sha),
                        ("tests/benchmarks/test_serve_cli.py", sha)]
    assert h.citations[0].lines == "321-353,563-748"


# -- recipe 8, 9, 10: not paths, originals, the port's own commits ---------------------------------


def test_slash_separated_words_are_not_paths() -> None:
    text = (f"// Ported from vllm/v1/sample/sampler.py @ {S}.\n"
            "// Takes FP16/BF16/ inputs over the AttentionBackend/AttentionImpl/ and\n"
            "// worker/gpu/ seams; see ggml/src/ggml-metal/ for the dispatch.\n")
    h = read(text)
    assert cited(h) == [("vllm/v1/sample/sampler.py", S)]
    assert mentioned(h) == ["ggml/src/ggml-metal/"]


@pytest.mark.parametrize(("text", "watched"), [
    ("// vllm.cpp original (vt runtime, inventory deviation §9.1); no upstream mirror.\n", []),
    ("// vllm.cpp original (Qwen3.6 MoE forward). Semantics mirrored 1:1 from\n"
     "// the pinned upstream forward (vllm/model_executor/models/qwen3_next.py +\n"
     f"// qwen3_5.py @ {S}): embed -> N decoder layers.\n",
     [("vllm/model_executor/models/qwen3_next.py", S), ("qwen3_5.py", S)]),
    ("// Vulkan skeleton gates. Newly authored — vLLM has no Vulkan tests to port. Mirrors\n"
     "// the shape of tests/vt/test_metal_backend.cpp.\n", []),
    ("// vllm.cpp original (env-flag plumbing); the kernels port the prefill conv that\n"
     "// mirrors vLLM's FLA kernel (vllm/model_executor/layers/mamba/ops/causal_conv1d.py\n"
     "// _causal_conv1d_fwd_kernel:397-452).\n//\n"
     "// HISTORY: flipping it is wrong (a875397 lesson); landed OPT-IN at 861b518.\n",
     [("vllm/model_executor/layers/mamba/ops/causal_conv1d.py", None)]),
])
def test_originals_watch_what_they_mirror_and_carry_no_pins(
        text: str, watched: list[tuple[str, str | None]]) -> None:
    h = read(text, "src/x.h", local={"tests/vt/test_metal_backend.cpp"})
    assert h.kind == "ORIGINAL" and h.pins == ()
    assert [(c.path, c.sha) for c in h.watched] == watched
    if "qwen3_5.py" in text:
        assert h.watched[1].near == "vllm/model_executor/models/qwen3_next.py"


def test_ports_then_not_ported_stays_ported() -> None:
    text = ("// Ports the BaseThinkingReasoningParser behavioural contract from\n"
            f"// tests/reasoning/test_base_thinking_reasoning_parser.py @ {S}.\n//\n"
            "// The streaming half is intentionally NOT ported (no caller yet).\n")
    h = read(text)
    assert h.kind == "PORTED"
    assert cited(h) == [("tests/reasoning/test_base_thinking_reasoning_parser.py", S)]


# -- recipe 11, 12: other oracles and prefixes ----------------------------------------------------


@pytest.mark.parametrize(("text", "oracle", "path", "sha"), [
    ("// Ported from llama.cpp (local fork) ggml/src/ggml-cpu/ggml-cpu.c @ 237ad9b96\n"
     "// (b9892).\n", "llama.cpp", "ggml/src/ggml-cpu/ggml-cpu.c", "237ad9b96"),
    ("// Ported from: lmcache/v1/protocol.py:23-321 @ LMCache 8570aad.\n", "LMCache",
     "lmcache/v1/protocol.py", "8570aad"),
    ("// launcher, ported from vllm-project/flash-attention @ "
     "2c839c33742309ec41e620bf837495ec9926c56e:\n//   csrc/flash_attn/flash_api.cpp:30-147.\n"
     "// This is the exact FA2 source pinned by vLLM v0.25.0 target d28fbdd.\n",
     "vllm-project/flash-attention", "csrc/flash_attn/flash_api.cpp",
     "2c839c33742309ec41e620bf837495ec9926c56e"),
    ("// 1:1 mirror of llama.cpp's `type_traits_cpu[]` table, ported from the local fork @\n"
     "// 237ad9b96 `ggml/src/ggml-cpu/ggml-cpu.c:211-406`.\n", "llama.cpp",
     "ggml/src/ggml-cpu/ggml-cpu.c", "237ad9b96"),
    ("// Ported from installed FlashInfer 0.6.12\n"
     "// `data/include/flashinfer/gemm/fp4_gemm_template_sm120.h:99-195`\n", "FlashInfer",
     "data/include/flashinfer/gemm/fp4_gemm_template_sm120.h", None),
])
def test_other_oracles_by_name(text: str, oracle: str, path: str, sha: str | None) -> None:
    h = read(text)
    assert [(c.oracle, c.path, c.sha) for c in h.citations] == [(oracle, path, sha)]


def test_the_false_friend_llama_cpp_is_the_ports_own_file() -> None:
    text = (f"// Ported from: vllm/tool_parsers/llama_tool_parser.py @ {S}\n//\n"
            "// DEVIATIONS from upstream (all documented at the helper sites in llama.cpp):\n")
    h = read(text)
    assert [(c.oracle, c.path) for c in h.citations] == [
        ("vllm", "vllm/tool_parsers/llama_tool_parser.py")]


def test_a_registered_oracle_by_name_prefix_or_pin() -> None:
    ups = oracles.Upstreams((oracles.Oracle("llama.cpp", oracles.names_of(
        "llama.cpp", "https://github.com/ggml-org/llama.cpp"), ("ggml/",),
        "237ad9b961f009ae19ac29dbce4cd0c1251f94b3"),))
    for text in ("// Ported from llama.cpp @ 237ad9b96: src/llama.c\n",
                 "// Ported from: ggml/src/x.c @ abcdef12\n",
                 "// Ported from: src/llama-model.cpp @ 237ad9b96\n"):
        (c,) = oracles.attribute(parse_header(text, "a.cpp"), ups, "a.cpp").citations
        assert c.oracle == "llama.cpp", text


@pytest.mark.parametrize(("cited_as", "upstream"), [
    ("vllm/csrc/libtorch_stable/cache_kernels.cu", "csrc/libtorch_stable/cache_kernels.cu"),
    ("vllm/tests/v1/core/test_prefix_caching.py", "tests/v1/core/test_prefix_caching.py"),
    ("vllm/docs/features/kv_offloading_usage.md", "docs/features/kv_offloading_usage.md"),
    ("vllm/v1/core/sched/scheduler.py", "vllm/v1/core/sched/scheduler.py"),
])
def test_prefix_rewrites(cited_as: str, upstream: str) -> None:
    (c,) = read(f"// Ported from: {cited_as} @ {S}\n").citations
    assert (c.path, c.upstream_path) == (cited_as, upstream)


def test_configured_rewrites() -> None:
    ups = oracles.Upstreams(rewrites=(("upstream/", ""),))
    h = parse_header(f"// Ported from: upstream/vllm/x.py @ {S}\n", "a.cpp")
    (c,) = oracles.attribute(h, ups, "a.cpp").citations
    assert c.upstream_path == "vllm/x.py"


# -- properties -----------------------------------------------------------------------------------

_TOKENS = st.sampled_from([
    "// ", "\n", " ", "Ported from", "Ports", "Mirrors", "port of", "See", "see", ". ", "; ",
    "(", ")", "vllm/a.py", "vllm/b/c.py", "tests/vt/x.cpp", ".agents/s.md", "::Sym", ":1-2,3",
    " (A, B)", " (Class: a / b)", " `Sym`", "@ ", S, "237ad9b96", "llama.cpp", "LMCache",
    "vllm.cpp original", "no upstream mirror", "ORIGINAL", "+ ", "and ", "- ", "c.py",
    "zai-org/M-1/config.json", "FP16/BF16/", "<-", "—", "é", "\t", "vllm/csrc/k.cu",
])
_IDENT = re.compile(r"[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*")
_LINES = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")


@settings(max_examples=500, deadline=None)
@given(st.lists(_TOKENS, max_size=50), st.sampled_from(["a.cpp", "a.py"]))
def test_hostile_headers_keep_the_grammars_promises(parts: list[str], path: str) -> None:
    text = "".join(parts)
    if path.endswith(".py"):
        text = text.replace("// ", "# ")
    h = read(text, path, local={"tests/vt/x.cpp"})
    lines = text.count("\n") + 1
    cited_paths = {c.path for c in h.citations}
    for c in h.citations:
        assert 1 <= c.line <= lines
        assert all(_IDENT.fullmatch(s) for s in c.symbols), c.symbols
        assert c.lines is None or _LINES.fullmatch(c.lines), c.lines
        assert c.sha is None or 7 <= len(c.sha) <= 40
        assert c.path != "tests/vt/x.cpp" and not c.path.startswith(".agents/")
        assert not c.path.endswith("/config.json")
    assert all(m.path not in cited_paths for m in h.mentions)
    assert h.kind != "NONE" or not h.citations
    assert h.kind == "PORTED" or h.pins == ()


def test_a_brace_list_after_a_folder_cites_each_file() -> None:
    # The real port's `cache_policy.cpp` (walk-s6a 5): one citation per listed file.
    h = read(f"// Ported from: vllm/v1/kv_offload/cpu/policies/{{base,lru, arc}}.py @ {S}\n")
    assert cited(h) == [(f"vllm/v1/kv_offload/cpu/policies/{n}.py", S)
                        for n in ("base", "lru", "arc")]
    # The list may name folders of one file (the real `test_protocol.cpp`).
    h = read(f"// Tests for the protocol port\n// (vllm/entrypoints/openai/{{engine,completion}}/"
             f"protocol.py\n// @ {S}).\n")
    assert cited(h) == [(f"vllm/entrypoints/openai/{n}/protocol.py", S)
                        for n in ("engine", "completion")]
    # A name of the list may hold a folder of its own (walk-s8 D5).
    h = read(f"// Ported from: vllm/v1/core/{{sched/scheduler,kv_cache_manager}}.py @ {S}\n")
    assert cited(h) == [("vllm/v1/core/sched/scheduler.py", S),
                        ("vllm/v1/core/kv_cache_manager.py", S)]
    # A list that makes no file keeps the folder as it was cited.
    h = read(f"// Ported from: vllm/v1/kv_offload/cpu/{{x,y}} @ {S}\n")
    assert cited(h) == [("vllm/v1/kv_offload/cpu/", S)]
    # Braces a folder does not open are not a list of its files.
    plain = read(f"// Ported from: vllm/v1/kv_offload/cpu/policies/base.py {{x,y}} @ {S}\n")
    assert cited(plain) == [("vllm/v1/kv_offload/cpu/policies/base.py", S)]


def test_a_heading_verb_line_cites_the_table_after_a_blank_comment_line() -> None:
    # The real `cuda_mla_prefill.cu` (walk-s6a 6): the table follows a blank `//` line.
    text = ("// MLA prefill (CUDA).\n//\n"
            f"// ─── WHAT THIS IS A PORT OF (file:line on BOTH sides, @ pin {S}) ───────\n"
            "//\n//   OURS                <-  UPSTREAM\n"
            "//   MlaPrefill          <-  vllm/v1/attention/backends/mla/prefill/\n"
            "//                           flash_attn.py:153-203\n//\n// Prose follows.\n")
    assert cited(read(text)) == [("vllm/v1/attention/backends/mla/prefill/flash_attn.py", S)]
    # A paragraph after a verb line that is a sentence, not a heading, is not its list.
    prose = (f"// Ported from the scheduler @ {S}.\n//\n"
             "// See vllm/v1/core/sched/scheduler.py for the rest.\n")
    assert cited(read(prose)) == []
