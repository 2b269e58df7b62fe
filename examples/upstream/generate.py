"""Regenerate the bundled example's upstream history: `python examples/upstream/generate.py`.

Writes `history.fi` (a `git fast-import` stream, the source of truth) and
`marks.json` (readable name -> the SHA that commit gets once imported). The
output is byte-identical on every run: fixed author, dates one minute apart,
content derived only from the tables below.

The history is a small fake vLLM: ~80 commits up to the parity pin the bundled
port (`examples/port`) records, then ~40 commits a sync cycle has to classify.
The tree is pip-installable; its `setup.py` derives the version from git the way
a vLLM source build does. Changing anything here changes the SHAs; a run then also
rewrites, in `examples/port`, every citation of a named commit's old SHA (any
prefix of 7+ hex) and the pin's public version, so the port keeps citing the same
commits. tests/test_example.py checks the result.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from sync.dev.fastimport import History  # noqa: E402

SIGN_OFF = "Signed-off-by: Upstream Dev <dev@example.invalid>"

SCHED = "vllm/v1/core/sched/scheduler.py"
SCHED_OUT = "vllm/v1/core/sched/output.py"
KVM = "vllm/v1/core/kv_cache_manager.py"
KVU = "vllm/v1/core/kv_cache_utils.py"
POOL = "vllm/v1/core/block_pool.py"
ENGINE = "vllm/v1/engine/core.py"
CFG = "vllm/config/vllm.py"
CACHE = "vllm/config/cache.py"
SCHED_CFG = "vllm/config/scheduler.py"
SP = "vllm/sampling_params.py"
SAMPLER = "vllm/v1/sample/sampler.py"
TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
TOPK_NEW = "vllm/v1/sample/ops/topk_topp.py"
ROPE = "vllm/model_executor/layers/rotary_embedding.py"
NORM = "vllm/model_executor/layers/layernorm.py"
LUTILS = "vllm/model_executor/layers/utils.py"
MOE = "vllm/model_executor/layers/fused_moe/layer.py"
MOE_CFG = "vllm/model_executor/layers/fused_moe/configs/E=64,N=1408,device_name=NVIDIA_H200.json"
QWEN2 = "vllm/model_executor/models/qwen2.py"
QWEN3 = "vllm/model_executor/models/qwen3.py"
LLAMA = "vllm/model_executor/models/llama.py"
DSV2 = "vllm/model_executor/models/deepseek_v2.py"
GEMMA4 = "vllm/model_executor/models/gemma4.py"
REGISTRY = "vllm/model_executor/models/registry.py"
XGR = "vllm/model_executor/guided_decoding/xgrammar_decoding.py"
HERMES = "vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py"
PROTO = "vllm/entrypoints/openai/protocol.py"
LORA_L = "vllm/lora/layers.py"
LORA_M = "vllm/lora/models.py"
PLAT = "vllm/platforms/interface.py"
CUDA = "vllm/platforms/cuda.py"
ROCM = "vllm/platforms/rocm.py"
PSTATE = "vllm/distributed/parallel_state.py"
PYNCCL = "vllm/distributed/device_communicators/pynccl.py"
EAGLE = "vllm/v1/spec_decode/eagle.py"
MM = "vllm/multimodal/cache.py"
ENVS = "vllm/envs.py"

BASE_VERSION = "0.23.1rc1"
DEV_OFFSET = 6  # commits up to and including "[Release] Bump the version to 0.23.1rc0"

SETUP_PY = '''\
"""Build script of this (fake) vLLM: the version comes from git, like a vLLM source build."""

import os
import re
import subprocess
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent
BASE = "@BASE@"
# Commits up to and including the v0.23.1rc0 tag: the .devN count starts after them.
DEV_OFFSET = @OFFSET@


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def _archival_version():
    # sdist / `git archive` tarball: no history, so the only honest version is
    # setuptools-scm's no-tag fallback, and only if the archive recorded its commit.
    node = ""
    archival = ROOT / ".git_archival.txt"
    if archival.exists():
        m = re.search(r"^node: ([0-9a-f]{40})$", archival.read_text(), re.M)
        node = m.group(1) if m else ""
    if not node:
        raise SystemExit("vllm setup.py: cannot determine the version: no git checkout here "
                         "and .git_archival.txt names no commit; build from a git clone")
    return f"0.1.dev1+g{node[:9]}"


def get_vllm_version():
    try:
        top = Path(_git("rev-parse", "--show-toplevel")).resolve()
        sha = _git("rev-parse", "HEAD")
        count = int(_git("rev-list", "--count", "HEAD"))
        shallow = _git("rev-parse", "--is-shallow-repository") == "true"
    except (OSError, subprocess.CalledProcessError):
        return _archival_version()
    if top != ROOT:
        return _archival_version()
    if shallow:
        # No tag is reachable in a shallow clone: setuptools-scm falls back the same way.
        return f"0.1.dev{count}+g{sha[:9]}"
    return f"{BASE}.dev{count - DEV_OFFSET}+g{sha[:9]}"


VERSION = get_vllm_version()
# As setuptools-scm writes it: the version, and the commit it was measured at.
COMMIT_ID = "g" + VERSION.split("+g", 1)[1]
(ROOT / "vllm" / "_version.py").write_text(
    f'__version__ = "{VERSION}"\\n__commit_id__ = "{COMMIT_ID}"\\n')
DIST_VERSION = VERSION
if os.environ.get("VLLM_USE_PRECOMPILED", "").strip().lower() in ("1", "true"):
    # Only the distribution metadata says how it was built; vllm.__version__ does not.
    DIST_VERSION += ".precompiled" if "+" in VERSION else "+precompiled"

setup(
    name="vllm",
    version=DIST_VERSION,
    description="A high-throughput and memory-efficient inference engine for LLMs",
    packages=find_namespace_packages(include=["vllm", "vllm.*"]),
    python_requires=">=3.9",
)
'''.replace("@BASE@", BASE_VERSION).replace("@OFFSET@", str(DEV_OFFSET))

PYPROJECT = """\
[build-system]
# No setuptools-scm: setup.py derives the version from git itself.
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.ruff]
line-length = 80
"""

INITIAL: dict[str, str] = {
    "README.md": "# vLLM\n\nEasy, fast, and cheap LLM serving for everyone.\n",
    "setup.py": SETUP_PY,
    "pyproject.toml": PYPROJECT,
    ".gitignore": "vllm/_version.py\nbuild/\n*.egg-info/\n__pycache__/\n",
    ".gitattributes": ".git_archival.txt export-subst\n",
    ".git_archival.txt": "node: $Format:%H$\nref-names: $Format:%D$\n",
    "requirements/common.txt": "numpy\nrequests>=2.26.0\ntransformers>=4.56.0\n",
    "requirements/cuda.txt": "-r common.txt\ntorch==2.12.0\nflashinfer-python==0.6.15.post1\n",
    "vllm/__init__.py": (
        '"""vLLM: a high-throughput and memory-efficient inference engine for LLMs."""\n\n'
        "from vllm._version import __version__\n\n__all__ = [\"__version__\"]\n"
    ),
    ENVS: 'import os\n\nVLLM_HOST_IP = os.getenv("VLLM_HOST_IP", "")\n',
    SP: (
        '"""Sampling parameters for text generation."""\n\nfrom dataclasses import dataclass\n\n\n'
        "@dataclass\nclass SamplingParams:\n    n: int = 1\n    temperature: float = 1.0\n"
        "    top_p: float = 1.0\n    top_k: int = 0\n    max_tokens: int | None = 16\n"
    ),
    CFG: (
        "from dataclasses import dataclass, field\n\n"
        "from vllm.config.cache import CacheConfig\n\n\n"
        "@dataclass\nclass VllmConfig:\n    cache_config: CacheConfig = field(default_factory="
        "CacheConfig)\n"
    ),
    CACHE: (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass CacheConfig:\n"
        "    block_size: int = 16\n    gpu_memory_utilization: float = 0.9\n"
    ),
    SCHED_CFG: (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass SchedulerConfig:\n"
        "    max_num_seqs: int = 256\n    max_num_batched_tokens: int = 8192\n"
    ),
    SCHED: (
        '"""The V1 scheduler: decides which requests run in each engine step."""\n\n\n'
        "class Scheduler:\n    def __init__(self, scheduler_config, kv_cache_manager):\n"
        "        self.config = scheduler_config\n        self.kv_cache_manager = kv_cache_manager\n"
        "        self.waiting = []\n        self.running = []\n"
    ),
    SCHED_OUT: (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass SchedulerOutput:\n"
        "    scheduled_new_reqs: list\n    num_scheduled_tokens: dict\n"
    ),
    KVM: (
        "class KVCacheManager:\n    def __init__(self, block_pool, enable_caching=True):\n"
        "        self.block_pool = block_pool\n        self.enable_caching = enable_caching\n"
    ),
    KVU: '"""Helpers for block hashing and KV cache specs."""\n\nNONE_HASH = 0\n',
    POOL: (
        "class BlockPool:\n    def __init__(self, num_gpu_blocks):\n"
        "        self.free_block_queue = list(range(num_gpu_blocks))\n"
    ),
    ENGINE: (
        "class EngineCore:\n    def __init__(self, vllm_config, executor_class):\n"
        "        self.vllm_config = vllm_config\n        self.model_executor = executor_class()\n"
    ),
    TOPK: "def apply_top_k_top_p(logits, k, p):\n    return logits\n",
    SAMPLER: (
        '"""A layer that samples the next tokens from the model\'s outputs."""\n\n'
        "from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p\n\n\n"
        "class Sampler:\n    def forward(self, logits, sampling_metadata):\n"
        "        return logits.argmax(dim=-1)\n"
    ),
    ROPE: (
        "class RotaryEmbedding:\n    def __init__(self, head_size, rotary_dim, base=10000):\n"
        "        self.head_size = head_size\n        self.base = base\n"
    ),
    NORM: (
        "class RMSNorm:\n    def __init__(self, hidden_size, eps=1e-6):\n"
        "        self.hidden_size = hidden_size\n        self.variance_epsilon = eps\n"
    ),
    LUTILS: "def apply_rotary(x, cos, sin):\n    return x * cos + x * sin\n",
    LLAMA: (
        "class LlamaForCausalLM:\n"
        '    packed_modules_mapping = {"qkv_proj": ["q", "k", "v"]}\n'
    ),
    REGISTRY: (
        "_TEXT_GENERATION_MODELS = {\n"
        '    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n}\n'
    ),
    PROTO: (
        "from pydantic import BaseModel\n\n\nclass ChatCompletionRequest(BaseModel):\n"
        "    model: str | None = None\n    messages: list\n    max_tokens: int | None = None\n"
    ),
    "vllm/entrypoints/openai/serving_chat.py": "class OpenAIServingChat:\n    pass\n",
    LORA_L: "class BaseLayerWithLoRA:\n    pass\n",
    PLAT: "class Platform:\n    device_name: str = \"\"\n",
    CUDA: "from vllm.platforms.interface import Platform\n\n\nclass CudaPlatform(Platform):\n"
          "    device_name = \"cuda\"\n",
    ROCM: "from vllm.platforms.interface import Platform\n\n\nclass RocmPlatform(Platform):\n"
          "    device_name = \"rocm\"\n",
    PSTATE: "_WORLD = None\n\n\ndef get_world_group():\n    return _WORLD\n",
    "csrc/layernorm_kernels.cu": "#include <torch/all.h>\n\nvoid rms_norm(torch::Tensor& out);\n",
    "csrc/pos_encoding_kernels.cu": "#include <torch/all.h>\n\nvoid rotary_embedding();\n",
    "csrc/ops.h": "#pragma once\n\nvoid rms_norm();\nvoid rotary_embedding();\n",
    "docs/README.md": "# vLLM documentation\n",
    "tests/v1/sample/test_sampler.py": "def test_sampler_greedy():\n    assert True\n",
    "tests/distributed/test_comm_ops.py": "def test_all_reduce():\n    assert True\n",
    ".github/workflows/pre-commit.yml": "name: pre-commit\non: [pull_request]\njobs: {}\n",
    ".buildkite/test-pipeline.yaml": "steps:\n  - label: Basic correctness\n",
}

# (name or None, subject without the PR suffix, paths touched). PR numbers are
# assigned in order; a new path is created, an existing one gets a change.
BEFORE_PIN: list[tuple[str | None, str, list[str]]] = [
    (None, "[Core] Add a waiting-queue budget to the V1 scheduler", [SCHED]),
    (None, "[CI/Build] Add the pre-commit workflow", [".github/workflows/pre-commit.yml"]),
    (None, "[Model] Add Qwen2", [QWEN2, REGISTRY]),
    (None, "[Doc] Add the prefix caching design doc", ["docs/design/prefix_caching.md"]),
    ("v0_23_1rc0", "[Release] Bump the version to 0.23.1rc0", ["README.md"]),
    (None, "[Kernel] Add a fused add + RMSNorm kernel", ["csrc/layernorm_kernels.cu", NORM]),
    (None, "[Config] Validate CacheConfig.block_size", [CACHE]),
    (None, "[Sampler] Support per-request top-k and top-p", [TOPK, SAMPLER]),
    (None, "[Frontend] Add tools to ChatCompletionRequest", [PROTO]),
    (None, "[Bugfix] Fix a KV cache leak on aborted requests", [KVM]),
    (None, "[Model] Add Qwen3", [QWEN3, REGISTRY]),
    (None, "[Tool] Add the Hermes tool call parser", [HERMES]),
    (None, "[Misc] Add VLLM_LOGGING_LEVEL", [ENVS]),
    (None, "[Distributed] Initialise model-parallel groups lazily", [PSTATE]),
    (None, "[Test] Add sampler tests for top-k", ["tests/v1/sample/test_sampler.py"]),
    (None, "[Core] Add the engine core busy loop", [ENGINE]),
    (None, "[Perf] Cache the rotary cos/sin table", [ROPE]),
    (None, "[LoRA] Add LoRA layers for linear projections", [LORA_L]),
    (None, "[ROCm] Add ROCm platform detection", [ROCM]),
    (None, "[Model] Llama: read the head dim from the config", [LLAMA]),
    (None, "[Config] Add VllmConfig.compute_hash", [CFG]),
    (None, "[Bugfix] Respect max_tokens=0 in SamplingParams", [SP]),
    (None, "[V1] Add the block pool with a free-block queue", [POOL]),
    (None, "[Doc] Document the scheduling policy", ["docs/design/scheduler.md"]),
    (None, "[Core] Prefix caching: hash full blocks only", [KVU, KVM]),
    (None, "[Frontend] Validate response_format", [PROTO]),
    (None, "[Kernel] Add the neox-style RoPE kernel", ["csrc/pos_encoding_kernels.cu"]),
    (None, "[Spec Decode] Add the EAGLE proposer", [EAGLE]),
    (None, "[Model] Add DeepSeek-V2", [DSV2, REGISTRY]),
    (None, "[Bugfix] Fix the Hermes parser on nested JSON arguments", [HERMES]),
    (None, "[Misc] Clean up the scheduler output dataclasses", [SCHED_OUT]),
    (None, "[CI/Build] Run the sampler tests on every PR", [".buildkite/test-pipeline.yaml"]),
    ("qwen3_port", "[Model] Qwen3: tie word embeddings", [QWEN3]),
    (None, "[Sampler] Support min_p sampling", [SAMPLER, SP]),
    (None, "[Core] Chunked prefill in the V1 scheduler", [SCHED, SCHED_CFG]),
    (None, "[Platform] Add the platform interface", [PLAT, CUDA]),
    (None, "[Doc] Add the supported models table", ["docs/models/supported_models.md"]),
    (None, "[Feature] Structured output with xgrammar", [XGR]),
    (None, "[Perf] Avoid recomputing block hashes", [KVU]),
    (None, "[LoRA] Add the LoRA model manager", [LORA_M]),
    (None, "[Bugfix] Fix the RMSNorm epsilon for Qwen3", [NORM, QWEN3]),
    (None, "[Frontend] Add parallel_tool_calls to ChatCompletionRequest", [PROTO]),
    (None, "[Kernel] Add the fused MoE layer", [MOE]),
    (None, "[Distributed] Add the PyNccl communicator", [PYNCCL]),
    (None, "[Test] Add scheduler unit tests", ["tests/v1/core/test_scheduler.py"]),
    (None, "[Core] Engine core: handle abort requests", [ENGINE]),
    (None, "[Config] Add prefix_caching_hash_algo to CacheConfig", [CACHE]),
    (None, "[Misc] Remove unused imports in the sampler", [SAMPLER]),
    (None, "[Model] Llama: support llama3 rope_scaling", [LLAMA, ROPE]),
    (None, "[Multimodal] Add the processor cache", [MM]),
    (None, "[CI/Build] Cache pip downloads in CI", [".github/workflows/pre-commit.yml"]),
    ("prior_pin", "[Core] KV cache manager: free blocks in reverse order", [KVM]),
    (None, "[Doc] Add the LoRA guide", ["docs/features/lora.md"]),
    (None, "[Bugfix] Fix top-p when all probabilities are equal", [TOPK]),
    (None, "[Frontend] Add stream_options to the protocol", [PROTO]),
    (None, "[ROCm] Enable custom all-reduce on MI300", [ROCM]),
    (None, "[Sampler] Return logprobs from the sampler", [SAMPLER]),
    (None, "[Core] Scheduler: preemption by recompute", [SCHED]),
    (None, "[Model] Register the Qwen3-MoE architecture", [REGISTRY]),
    (None, "[Config] Split VllmConfig post-init validation", [CFG]),
    (None, "[Kernel] fp8 KV cache in reshape_and_cache", ["csrc/cache_kernels.cu", "csrc/ops.h"]),
    (None, "[Tool] Hermes: accept <tool_call> without a newline", [HERMES]),
    (None, "[Misc] Add VLLM_USE_PRECOMPILED to envs", [ENVS]),
    (None, "[Test] Add rotary embedding tests", ["tests/kernels/test_pos_encoding.py"]),
    (None, "[Distributed] Fix the world-size check for pipeline parallel", [PSTATE]),
    (None, "[Core] Engine core: step-level timing stats", [ENGINE]),
    (None, "[Bugfix] Fix RMSNorm with residual in fp16", [NORM]),
    (None, "[Perf] Faster top-k via torch.topk on GPU", [TOPK]),
    (None, "[Doc] Add the V1 architecture overview", ["docs/design/v1_architecture.md"]),
    (None, "[Model] Qwen3: fuse the qkv projection", [QWEN3]),
    (None, "[Config] CacheConfig: default block_size per platform", [CACHE, PLAT]),
    (None, "[Spec Decode] EAGLE: share the embedding with the target model", [EAGLE]),
    (None, "[Frontend] Validate logit_bias", [PROTO, SP]),
    (None, "[LoRA] Punica kernels for LoRA on H100", [LORA_L, "csrc/punica/bgmv.cu"]),
    (None, "[Core] Scheduler: honour max_num_batched_tokens across chunks", [SCHED]),
    (None, "[CI/Build] Add CODEOWNERS", [".github/CODEOWNERS"]),
    (None, "[Bugfix] Fix the llama rope theta from the config", [LLAMA]),
    (None, "[Misc] Update requirements for torch 2.13", ["requirements/common.txt"]),
    (None, "[Sampler] Apply penalties before temperature", [SAMPLER]),
    ("pin", "[Core] KV cache manager: expose usage stats", [KVM, ENGINE]),
]

MINP = "[Bugfix] Clamp `min_p` to [0, 1] in SamplingParams"

# The range a sync cycle sees. Special shapes (rename, delete, revert, re-land,
# no PR suffix) are spelled out in `build`.
AFTER_PIN: list[tuple[str, str, list[str]]] = [
    ("sched_preempted", "[Core] Track preempted requests separately in the scheduler", [SCHED]),
    ("docs_prefix_caching", "[Doc] Update the prefix caching design doc",
     ["docs/design/prefix_caching.md"]),
    ("gemma4", "[Model] Add Gemma-4", [GEMMA4, REGISTRY, "docs/models/supported_models.md"]),
    ("ci_precommit", "[CI/Build] Pin pre-commit hook versions",
     [".github/workflows/pre-commit.yml"]),
    ("kv_off_by_one", "[Bugfix] Fix an off-by-one in prefix cache hit accounting", [KVM]),
    ("rocm_rmsnorm", "[ROCm] Use AITER RMSNorm on MI300", [ROCM, NORM]),
    ("pipe_subject", "[Config] Accept `cache_dtype` values `auto` | `fp8` | `fp8_e5m2` only",
     [CACHE]),
    ("hermes_required", '[Frontend] Support `tool_choice="required"` with the Hermes parser',
     [HERMES, PROTO]),
    ("csrc_rope_fusion", "[Kernel] Fuse RoPE with the KV cache write",
     ["csrc/pos_encoding_kernels.cu", "tests/kernels/test_pos_encoding.py"]),
    ("minp_fix", MINP, [SP]),
    ("eagle3", "[Spec Decode] EAGLE-3 drafts for Qwen3", [EAGLE]),
    ("lora_moe", "[LoRA] Support LoRA on fused MoE layers", [LORA_L, LORA_M]),
    ("sampler_nan", "[Bugfix] Fix NaN logprobs when every token is masked", [SAMPLER]),
    ("minp_revert", "", [SP]),
    ("rename_topk", "[Refactor] Rename topk_topp_sampler to topk_topp", [SAMPLER]),
    ("docs_quant", "[Doc] Fix typos in the quantization guide", ["docs/features/quantization.md"]),
    ("nccl_symm", "[Distributed] Use NCCL symmetric memory for all-reduce", [PSTATE, PYNCCL]),
    ("delete_xgrammar", "[V0 Deprecation] Remove the V0 xgrammar guided decoding backend", []),
    ("qwen3_yarn", "[Model] Qwen3: support YaRN rope_scaling", [QWEN3]),
    ("minp_reland", MINP, [SP]),
    ("mm_block_hash", "[Core] Include multimodal extra keys in block hashes", [KVU]),
    ("flashinfer_bump", "[CI/Build] Bump FlashInfer to 0.6.16", ["requirements/cuda.txt"]),
    ("no_pr", "Fix a typo in the engine core shutdown log message", [ENGINE]),
    ("tests_preemption", "[Test] Add scheduler preemption tests",
     ["tests/v1/core/test_scheduler.py"]),
    ("reasoning_effort", "[Frontend] Add reasoning_effort to ChatCompletionRequest", [PROTO]),
    ("moe_h200", "[Kernel] Tune fused MoE configs for H200", [MOE_CFG]),
    ("swap_space", "[Config] Move swap_space to CacheConfig", [CACHE, CFG]),
    ("llama_rope_cache", "[Model] Llama: share the rotary embedding cache across layers",
     [LLAMA, ROPE]),
    ("codeowners", "[Chore] Update CODEOWNERS for the sampler", [".github/CODEOWNERS"]),
    ("topp_vectorise", "[Perf] Vectorise top-p renormalisation", [TOPK_NEW]),
    ("mm_cache_key", "[Multimodal] Key the processor cache by content hash", [MM]),
    ("envs_stats", "[Misc] Add VLLM_LOG_STATS_INTERVAL", [ENVS]),
    ("async_sched", "[Core] Async scheduling: overlap scheduling with model execution",
     [SCHED, ENGINE, SCHED_CFG]),
    ("docs_lora_cache", "[Doc] Document the LoRA adapter cache", ["docs/features/lora.md"]),
    ("platform_sleep", "[Platform] Add is_sleep_mode_available to the platform interface",
     [PLAT, CUDA]),
    ("hermes_stream", "[Tool] Hermes: stream partial tool-call arguments", [HERMES]),
    ("rmsnorm_fp32", "[Bugfix] Keep the RMSNorm residual in fp32 for Qwen3", [NORM]),
    ("ci_flaky", "[CI] Skip flaky distributed tests on 2-GPU runners",
     ["tests/distributed/test_comm_ops.py", ".buildkite/test-pipeline.yaml"]),
    ("layer_utils_types", "[Misc] Add type hints to the layer utils", [LUTILS]),
    ("tip", "[Core] Priority-aware preemption in the scheduler", [SCHED]),
]

_STOP = {"a", "an", "the", "to", "in", "of", "on", "for", "with", "by", "from", "and", "when",
         "every", "all", "only", "via", "across"}


def _clean(subject: str) -> str:
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", subject).replace("`", "")


def _words(subject: str) -> list[str]:
    text = _clean(subject).lower()
    return [w for w in re.findall(r"[a-z][a-z0-9]*", text) if w not in _STOP]


def _change(path: str, subject: str, pr: int, n: int) -> str:
    """A few plausible lines recording `subject` in the language of `path`."""
    clean = _clean(subject)
    ident = "_".join(_words(subject)[:4]) or "change"
    if path.endswith(".py"):
        if n % 3 == 0:
            return f"\n\n{ident.upper()} = {pr % 97 + 1}  # {clean}\n"
        return f'\n\ndef {ident}(*args, **kwargs):\n    """{clean}."""\n    return None\n'
    if path.endswith((".cu", ".h")):
        return f"\n// {clean}\nvoid {ident}();\n"
    if path.endswith(".md"):
        return f"\n## {clean}\n\nSee #{pr}.\n"
    if path.endswith(".json"):
        return json.dumps({"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "num_warps": 4}},
                          indent=4) + "\n"
    if path.endswith("CODEOWNERS"):
        return f"/vllm/v1/sample @sampler-team  # #{pr}\n"
    if path == "requirements/cuda.txt":
        return "-r common.txt\ntorch==2.13.0\nflashinfer-python==0.6.16\n"
    if path.endswith(".txt"):
        return "torch==2.13.0\n"
    return f"# {clean} (#{pr})\n"


def _inner_edit(text: str | None, subject: str, n: int) -> str | None:
    """After the pin, two commits in three change the body of a file's last definition (a
    line appended at its indentation) instead of adding a definition, so the symbol pass
    has definitions to match against the port's citations."""
    if text is None or n % 3 == 0:
        return None
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    indent = last[:len(last) - len(last.lstrip())]
    if not indent:
        return None
    ident = "_".join(_words(subject)[:3]) or "change"
    return text.rstrip("\n") + f"\n{indent}self_check_{ident} = {n}  # {_clean(subject)}\n"


class _Builder:
    """Tracks the tree so reverts and re-lands reproduce a commit's exact diff."""

    def __init__(self) -> None:
        self.history = History()
        self.files: dict[str, str] = {}
        self.names: dict[str, int] = {}
        self.diffs: dict[str, dict[str, tuple[str | None, str | None]]] = {}
        self._pending: dict[str, tuple[str | None, str | None]] = {}
        self.pr = 30012
        self.count = 0
        self.snapshots: dict[str, dict[str, str]] = {}

    def next_pr(self) -> int:
        self.pr += 78 + (self.count * 37) % 23
        return self.pr

    def put(self, path: str, text: str) -> None:
        before = self._pending.get(path, (self.files.get(path), None))[0]
        self._pending[path] = (before, text)
        self.files[path] = text
        self.history.modify(path, text)

    def touch(self, path: str, subject: str, pr: int, *, edits: bool = False) -> None:
        change = _change(path, subject, pr, self.count)
        inner = _inner_edit(self.files.get(path), subject, self.count) if edits else None
        if inner is not None:
            self.put(path, inner)
        elif path.endswith(".json") or path == "requirements/cuda.txt":
            self.put(path, change)
        elif path in self.files:
            self.put(path, self.files[path] + change)
        else:
            head = f'"""{_clean(subject)}."""\n' if path.endswith(".py") else ""
            self.put(path, head + change.lstrip("\n"))

    def delete(self, path: str) -> None:
        self._pending[path] = (self.files.pop(path), None)
        self.history.delete(path)

    def commit(self, name: str | None, message: str) -> int:
        self.count += 1
        mark = self.history.commit(message)
        if name is not None:
            self.names[name] = mark
            self.diffs[name] = self._pending
        self._pending = {}
        return mark

    def commit_on(self, name: str, branch: str, parent: int | None, message: str) -> int:
        """A named commit on `branch` (from `parent` when it starts the branch)."""
        self.count += 1
        mark = self.history.commit(message, branch, parent=parent)
        self.names[name] = mark
        self.diffs[name] = self._pending
        self._pending = {}
        return mark

    def sha(self, name: str) -> str:
        # The stream so far, imported once, says what SHA a commit got: reverts and
        # cherry-picks quote it in their messages, exactly as git writes them.
        with tempfile.TemporaryDirectory() as tmp:
            return self.history.write(Path(tmp) / "probe.git", bare=True)[self.names[name]]

    def apply(self, name: str, *, undo: bool) -> None:
        for path, (before, after) in sorted(self.diffs[name].items()):
            expect, target = (after, before) if undo else (before, after)
            if self.files.get(path) != expect:
                raise RuntimeError(f"{path} changed since {name}: cannot replay it cleanly")
            if target is None:
                self.delete(path)
            else:
                self.put(path, target)


def _message(subject: str, body: str = "") -> str:
    return subject + "\n\n" + (body + "\n\n" if body else "") + SIGN_OFF + "\n"


def build() -> tuple[History, dict[str, int]]:
    b = _Builder()
    for path, text in sorted(INITIAL.items()):
        b.put(path, text)
    b.commit("root", "Initial import of the vLLM source tree\n")
    for name, subject, paths in BEFORE_PIN:
        pr = b.next_pr()
        for path in paths:
            b.touch(path, subject, pr)
        b.commit(name, _message(f"{subject} (#{pr})"))
    prs: dict[str, int] = {}
    for name, subject, paths in AFTER_PIN:
        pr = b.next_pr()
        prs[name] = pr
        if name == "minp_revert":
            b.apply("minp_fix", undo=True)
            subject = f'Revert "{MINP} (#{prs["minp_fix"]})"'
            body = f"This reverts commit {b.sha('minp_fix')}."
        elif name == "minp_reland":
            b.apply("minp_fix", undo=False)
            body = (f"Re-land of #{prs['minp_fix']}; the revert in #{prs['minp_revert']} was "
                    f"for an unrelated CI failure.\n\n(cherry picked from commit "
                    f"{b.sha('minp_fix')})")
        elif name == "rename_topk":
            b.files[TOPK_NEW] = b.files.pop(TOPK)
            b.history.rename(TOPK, TOPK_NEW)
            b.put(SAMPLER, b.files[SAMPLER].replace("ops.topk_topp_sampler", "ops.topk_topp"))
            body = ""
        elif name == "delete_xgrammar":
            b.delete(XGR)
            body = "The V1 structured output manager replaces it."
        else:
            for path in paths:
                b.touch(path, subject, pr, edits=True)
            body = ""
        if name == "no_pr":
            b.commit(name, _message(subject, body))
        else:
            b.commit(name, _message(f"{subject} (#{pr})", body))
        b.snapshots[name] = dict(b.files)
    _release(b, prs)
    return b.history, b.names


# The release branch: forked from main at RELEASE_FORK, it takes a cherry-pick of a later
# main fix and the release notes, and is tagged v0.24.0 there (vLLM's release shape: the
# tag is on the release branch, not on main). Main gets the tag v0.25.0rc1 at RC_TAG.
# Built after main, so main's commits (and SHAs) do not change.
RELEASE_BRANCH = "releases/v0.24.0"
RELEASE_FORK = "sampler_nan"
RELEASE_PICK = "rmsnorm_fp32"
RC_TAG = "async_sched"


def _release(b: _Builder, prs: dict[str, int]) -> None:
    pick_sha = b.sha(RELEASE_PICK)
    main_files = b.files
    b.files = dict(b.snapshots[RELEASE_FORK])
    b.apply(RELEASE_PICK, undo=False)
    subject = next(s for n, s, _ in AFTER_PIN if n == RELEASE_PICK)
    b.commit_on("release_pick", RELEASE_BRANCH, b.names[RELEASE_FORK], _message(
        f"{subject} (#{prs[RELEASE_PICK]})", f"(cherry picked from commit {pick_sha})"))
    pr = b.next_pr()
    b.touch("docs/releases/v0.24.0.md", "[Doc] Release notes for v0.24.0", pr)
    b.commit_on("v0_24_0", RELEASE_BRANCH, None, _message(
        f"[Doc] Release notes for v0.24.0 (#{pr})"))
    b.files = main_files
    b.history.tag("v0.24.0", b.names["v0_24_0"], "vLLM v0.24.0\n")
    b.history.tag("v0.25.0rc1", b.names[RC_TAG], "vLLM v0.25.0rc1\n")


def carry_citations(text: str, old: dict[str, str], new: dict[str, str], label: str) -> str:
    """`text` with every prefix (7+ hex) of a named commit's old SHA replaced by the new
    SHA's prefix of the same length, and the pin's public version set to `label`."""
    moved = {old[n]: new[n] for n in old if n in new and old[n] != new[n]}

    def swap(m: re.Match[str]) -> str:
        hits = [sha for sha in moved if sha.startswith(m.group(0))]
        return moved[hits[0]][: len(m.group(0))] if len(hits) == 1 else m.group(0)

    text = re.sub(rf"{re.escape(BASE_VERSION)}\.dev[0-9]+", label, text)
    return re.sub(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])", swap, text)


def main() -> None:
    history, names = build()
    (HERE / "history.fi").write_bytes(history.stream())
    with tempfile.TemporaryDirectory() as tmp:
        shas = history.write(Path(tmp) / "upstream.git", bare=True)
    marks = {name: shas[mark] for name, mark in sorted(names.items())}
    marks_file = HERE / "marks.json"
    old = json.loads(marks_file.read_text(encoding="utf-8")) if marks_file.exists() else {}
    marks_file.write_text(json.dumps(marks, indent=2) + "\n", encoding="utf-8")
    # The history is linear, so the pin's mark is its `git rev-list --count`.
    label = f"{BASE_VERSION}.dev{names['pin'] - DEV_OFFSET}"
    for path in sorted((HERE.parent / "port").rglob("*")):
        if path.is_file():
            text = path.read_bytes().decode("utf-8")
            updated = carry_citations(text, old, marks, label)
            if updated != text:
                path.write_bytes(updated.encode("utf-8"))


if __name__ == "__main__":
    main()
