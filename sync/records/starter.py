"""The starter `[[rules]]` set `init` writes into a new configuration, commented, for a
maintainer to edit (docs/adopting.md, "Tuning the starter rules").

vLLM subjects carry tags (`[CI]`, `[Doc]`, `[ROCm]`, `[XPU]`, ...) the symbol pass cannot
see: these rules turn the tags into dispositions, scoped by path so a tagged commit that
edits runtime code still reaches the symbol pass. Platforms the port does not target are
INVENTORY (the port's backend rows track them), not IGNORE. Rules never name SHAs or PR
numbers: a one-off is a decision (`upstream-sync decide`).
"""

from __future__ import annotations

RULES = '''
# -- Platforms this port does not target, as words of upstream code: a cited definition named
# for one (`rocm_unquantized_gemm_impl`), or changed only under an `if` that requires one
# (`if current_platform.is_rocm():`), is INVENTORY, not PORT-NOW. Delete a word your port
# targets (its backend matrix says which).
[classify]
untargeted_platforms = ["rocm", "aiter", "hip", "gfx", "xpu", "tpu", "hpu", "gaudi", "neuron"]

# -- Classification rules: a starter set to edit (docs/adopting.md, "Tuning the starter rules")
# Tried in order after recorded decisions and before the symbol pass; the first that matches
# classifies the commit and its reason goes into the report. Tags match case-insensitively.
# A rule names tags and paths, never SHAs or PR numbers: a one-off is `upstream-sync decide`.

# The pins of the dependencies upstream vendors into its build (flash-attention, FlashMLA,
# CUTLASS...): a port that vendors one too follows the pin, so it is noted, never ignored.
# One that edits runtime code too reaches the symbol pass (a rule never hides ported code).
[[rules]]
id = "vendored-dependency-pins"
paths_any = ["cmake/external_projects/**"]
paths_none = ["vllm/**", "csrc/**"]
disposition = "INVENTORY"
reason = "moves the pin of a dependency upstream vendors into its build: check the port's copy"

# CI, build, docs and tests that edit no runtime code. A [CI] commit that changes vllm/ or
# csrc/ (5 of 20 in one real range did) falls through to the symbol pass.
[[rules]]
id = "ci-docs-tests"
tags = ["CI", "CI/Build", "Build", "Doc", "Docs", "Test", "Tests", "UT", "MyPy", "Misc/CI"]
paths_none = ["vllm/**", "csrc/**"]
disposition = "IGNORE"
reason = "CI, build, docs or tests only: no upstream runtime code changes"

# Repository plumbing whatever the tag.
[[rules]]
id = "repository-plumbing"
paths_all = [".github/**", ".buildkite/**", "docker/**", "docs/**", "*.md",
             ".pre-commit-config.yaml"]
disposition = "IGNORE"
reason = "repository plumbing only (CI, docker, docs)"

# Platforms this port does not target: INVENTORY, so the port's backend rows keep track.
# Delete a tag your port targets (its backend matrix says which).
[[rules]]
id = "platforms-not-targeted"
tags = ["ROCm", "AMD", "XPU", "Intel GPU", "TPU", "HPU", "Gaudi", "Neuron", "s390x", "ppc64le",
        "Hardware", "Zen"]
disposition = "INVENTORY"
reason = "a platform this port does not target: note it in the inventory's backend rows"

# Files of those platforms, for the commits whose subject carries no tag.
[[rules]]
id = "platform-files"
paths_all = ["**/*rocm*", "**/*aiter*", "**/*xpu*", "**/*tpu*", "csrc/rocm/**"]
disposition = "INVENTORY"
reason = "only files of platforms this port does not target"

# Front ends and plumbing with no counterpart in a C++ port.
[[rules]]
id = "not-ported-frontends"
tags = ["Rust Frontend", "Rust", "torch.compile", "compile", "Compilation"]
disposition = "IGNORE"
reason = "Python-only machinery (the Rust front end, torch.compile plumbing): nothing to port"

# Features the port tiers later: uncomment and list the tags your inventory defers, with the
# tier in the reason. The symbol pass still reads every other commit.
# [[rules]]
# id = "deferred-features"
# tags = ["Spec Decode", "LoRA", "Multimodal", "KV Connector", "KV Offload", "Responses"]
# disposition = "INVENTORY"
# reason = "a feature the porting inventory tiers later (T2/T3): record it there"

# A CPU backend of the port's own: vLLM's CPU kernels are not mirrored.
# [[rules]]
# id = "vllm-cpu-kernels"
# tags = ["CPU"]
# disposition = "INVENTORY"
# reason = "vLLM CPU kernels are not mirrored; the port's CPU backend is its own"
'''
