"""The starter rule set `init` writes: it loads, every rule says why, none names a commit, and
it classifies the tagged shapes of real vLLM subjects as its comments say."""

from __future__ import annotations

import re

import pytest

from sync.records import config, starter
from sync.steps import classify
from sync.upstream.history import Change, Commit

RULES = config.parse("schema = 1\n" + starter.RULES).rules
ACTIVE = [line for line in starter.RULES.splitlines() if line and not line.startswith("#")]


def _commit(subject: str, *paths: str) -> Commit:
    return Commit("f" * 40, (), "a <a@b>", "2026-01-01T00:00:00+00:00", subject, "",
                  tuple(Change("M", p) for p in paths))


def _rule(subject: str, *paths: str) -> str | None:
    hit = next((r for r in RULES if classify.rule_matches(r, _commit(subject, *paths))), None)
    return None if hit is None else f"{hit.id} {hit.disposition}"


def test_the_starter_rules_load_and_each_says_why() -> None:
    assert [r.id for r in RULES] == ["vendored-dependency-pins", "ci-docs-tests",
                                     "repository-plumbing",
                                     "platforms-not-targeted", "platform-files",
                                     "not-ported-frontends"]
    assert all(r.reason and r.disposition in ("IGNORE", "INVENTORY") for r in RULES)
    # The commented rules load too, once a maintainer uncomments them.
    uncommented = re.sub(r"^# (?=\[\[rules\]\]|id|tags|disposition|reason)", "",
                         starter.RULES, flags=re.M)
    assert len(config.parse("schema = 1\n" + uncommented).rules) == len(RULES) + 2


def test_rules_never_name_a_commit() -> None:
    for line in ACTIVE:
        assert re.search(r"\b[0-9a-f]{7,40}\b", line) is None, line
        assert re.search(r"#\d+|vllm#", line) is None, line


@pytest.mark.parametrize(("subject", "paths", "want"), [
    ("[CI] Pin pre-commit hooks (#1)", (".github/workflows/pre-commit.yml",),
     "ci-docs-tests IGNORE"),
    ("[CI/Build] Skip flaky tests (#2)", ("tests/distributed/test_comm_ops.py",),
     "ci-docs-tests IGNORE"),
    # A CI commit that edits runtime code is not CI-only: the platform rule takes it.
    ("[ROCm][CI] Restore Mistral tool-parser compatibility (#3)",
     ("vllm/tool_parsers/mistral_tool_parser.py",), "platforms-not-targeted INVENTORY"),
    # ...and without a platform tag it reaches the symbol pass.
    ("[CI] Fix the scheduler under CI (#4)", ("vllm/v1/core/sched/scheduler.py",), None),
    ("Bump docker base image (#5)", ("docker/Dockerfile",), "repository-plumbing IGNORE"),
    ("[XPU] Enable fp8 (#6)", ("vllm/platforms/xpu.py",), "platforms-not-targeted INVENTORY"),
    ("Enable gfx1250 (#7)", ("vllm/platforms/rocm.py", "vllm/_aiter_ops.py"),
     "platform-files INVENTORY"),
    ("Enable gfx1250 ROCm architecture (#8)",
     ("vllm/model_executor/layers/utils.py", "vllm/platforms/rocm.py"), None),
    ("[Rust Frontend] Add a router (#9)", ("rust/src/main.rs",), "not-ported-frontends IGNORE"),
    # A [Build] commit that moves a vendored dependency's pin is noted (a real range's
    # flash-attention bump), not ignored as CI.
    ("[Build] Update pin to build ABI stable FA2 (#11)",
     ("cmake/external_projects/vllm_flash_attn.cmake",), "vendored-dependency-pins INVENTORY"),
    ("[Build] Fix CUDA release wheel builds (#12)", ("docker/Dockerfile", "setup.py"),
     "ci-docs-tests IGNORE"),
    # ...but one that edits runtime code as well reaches the symbol pass.
    ("[Attention] Enable masked MHA for sparse MLA prefills (#13)",
     ("cmake/external_projects/flashmla.cmake", "vllm/v1/attention/backends/mla/common.py"),
     None),
    # [Bugfix] is the tag of the one commit of a real range a maintainer would port.
    ("[Bugfix] Universally align block table width (#10)", ("vllm/v1/worker/block_table.py",),
     None),
])
def test_the_starter_rules_on_real_subject_shapes(subject: str, paths: tuple[str, ...],
                                                  want: str | None) -> None:
    assert _rule(subject, *paths) == want
