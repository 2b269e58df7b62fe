"""A synthetic upstream of real-looking Python (and one CUDA file) and a port citing it by
symbol, by line range, at an older SHA and as whole files: one commit per shape the symbol
pass must tell apart (see `SHAPES`), all in one range, classified by one `sync`.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sync import cli
from sync.dev import example
from sync.dev.fastimport import History, git

SCHED = "vllm/v1/core/sched/scheduler.py"
KVU = "vllm/v1/core/kv_cache_utils.py"
REG = "vllm/model_executor/models/registry.py"
RUNNER = "vllm/v1/worker/gpu/model_runner.py"
CFG = "vllm/config/vllm.py"
CU = "csrc/attention/attention_kernels.cu"
BROKEN = "vllm/v1/sample/ops/penalties.py"
OLD = "vllm/v1/worker/old_runner.py"
NEW = "vllm/v1/worker/new_runner.py"
ARGS = "vllm/engine/arg_utils.py"

SCHEDULER = '''\
"""The V1 scheduler."""

import logging

logger = logging.getLogger(__name__)


class Scheduler:
    """Decides which requests run in each engine step."""

    max_waiting = 16

    def __init__(self, config):
        self.config = config
        self.waiting = []

    @staticmethod
    def budget(n):
        return n * 2

    def update_from_output(self, output):
        """Drop the finished requests."""
        for req in output:
            if req.done:
                self.waiting.remove(req)
        return len(self.waiting)

    def schedule(self):
        logger.debug("scheduling %d", len(self.waiting))
        return self.waiting[: self.max_waiting]

    class Stats:
        def total(self):
            return 0
'''

KV_UTILS = '''\
"""Block hashing helpers."""

NONE_HASH = 0


def hash_block(parent, tokens):
    return hash((parent, tuple(tokens)))
'''

REGISTRY = '''\
_TEXT_GENERATION_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
}


def resolve(arch):
    return _TEXT_GENERATION_MODELS[arch]
'''

RUNNER_OLDER = '''\
"""The model runner."""


class GPUModelRunner:
    def prepare_inputs(self, batch):
        ids = [r.token for r in batch]
        return ids

    def load_model(self):
        return None

    def execute_model(self, batch):
        out = self.prepare_inputs(batch)
        if self.speculator is not None:
            out = self.speculator.propose(out)
        return out
'''

# The pin inserts a method above prepare_inputs: lines cited at the older SHA moved down.
RUNNER_PIN = RUNNER_OLDER.replace('''class GPUModelRunner:
''', '''class GPUModelRunner:
    def warm_up(self):
        for _ in range(3):
            self.load_model()
        return True

''')

CUDA = "".join(f"// line {n}\n" if n % 10 else f"__global__ void kernel_{n}() {{}}\n"
               for n in range(1, 41))

PENALTIES = '''\
def apply_penalties(logits, counts, penalty):
    return logits - counts * penalty
'''

OLD_RUNNER = '''\
class OldRunner:
    def step(self, batch):
        total = 0
        for item in batch:
            total += item
        return total

    def reset(self):
        return None
'''

ARG_UTILS = '''\
class EngineArgs:
    model: str = "facebook/opt-125m"
'''


def _config(extra_body: str = "", at: int = -1) -> str:
    """vllm/config/vllm.py with a 200-line `__post_init__` (statement i sets `self.f{i}`)."""
    body = [f"        self.f{i} = {i}\n" for i in range(200)]
    if at >= 0:
        body[at] = extra_body
    return ("class VllmConfig:\n    def __post_init__(self):\n" + "".join(body)
            + "\n    def compute_hash(self):\n        return 0\n")


@dataclass(frozen=True)
class Link:
    """A file that is a symbolic link to `target` (mode 120000)."""

    target: str


@dataclass(frozen=True)
class Shape:
    name: str
    subject: str
    files: Mapping[str, str | Link | None]  # path -> new text (None: delete)
    rename: tuple[str, str] | None = None


def _sched(old: str, new: str) -> dict[str, str | None]:
    return {SCHED: SCHEDULER.replace(old, new, 1)}


# Each shape is applied to the tree at the pin (so each commit changes one thing) and
# reverted by the next, except where a shape builds on the pin's text itself.
SHAPES = (
    Shape("in_method", "[Core] Skip aborted requests in update_from_output",
          _sched("            if req.done:", "            if req.done or req.aborted:")),
    Shape("beside", "[Core] Cap the schedule at half the budget",
          _sched("        return self.waiting[: self.max_waiting]",
                 "        return self.waiting[: self.max_waiting // 2]")),
    Shape("nested_class", "[Core] Count the stats",
          _sched("            return 0", "            return 1")),
    Shape("decorator", "[Perf] Cache the budget",
          _sched("    @staticmethod\n", "    @staticmethod\n    @functools.cache\n")),
    Shape("dict_row_added", "[Model] Add Kimi", {
        REG: REGISTRY.replace('    "Qwen3ForCausalLM"',
                              '    "KimiForCausalLM": ("kimi", "KimiForCausalLM"),\n'
                              '    "Qwen3ForCausalLM"'),
        "vllm/model_executor/models/kimi.py": "class KimiForCausalLM:\n    pass\n"}),
    Shape("dict_row_changed", "[Model] Qwen3 moves to its V2 class", {
        REG: REGISTRY.replace('("qwen3", "Qwen3ForCausalLM")', '("qwen3", "Qwen3V2ForCausalLM")')}),
    Shape("dict_row_repointed", "[Model] Llama moves to the llama4 module", {
        REG: REGISTRY.replace('("llama", "LlamaForCausalLM")', '("llama4", "LlamaForCausalLM")'),
        "vllm/model_executor/models/llama4.py": "class LlamaForCausalLM:\n    pass\n"}),
    Shape("adds_only", "[Core] Add a chained block hash", {
        KVU: KV_UTILS + "\n\ndef chain_hash(blocks):\n"
        "    return [hash_block(0, b) for b in blocks]\n"}),
    Shape("whole_file_change", "[Core] Hash the tokens as a list", {
        KVU: KV_UTILS.replace("tuple(tokens)", "list(tokens)")}),
    Shape("rename_with_edits", "[Refactor] Rename the old runner", {
        NEW: OLD_RUNNER.replace("total += item", "total += item * 2")}, rename=(OLD, NEW)),
    Shape("syntax_error", "[Misc] Half-finished penalties", {
        BROKEN: PENALTIES.replace("return logits", "return (logits")}),
    Shape("cu_outside", "[Kernel] Tune kernel_30", {
        CU: CUDA.replace("__global__ void kernel_30() {}", "__global__ void kernel_30() { }")}),
    Shape("cu_inside", "[Kernel] Tune kernel_10", {
        CU: CUDA.replace("__global__ void kernel_10() {}", "__global__ void kernel_10() { }")}),
    Shape("moved_lines_hit", "[Core] Prepare inputs from the prompt", {
        RUNNER: RUNNER_PIN.replace("ids = [r.token for r in batch]",
                                   "ids = [r.prompt_token for r in batch]")}),
    Shape("moved_lines_miss", "[Core] Warm up five times", {
        RUNNER: RUNNER_PIN.replace("range(3)", "range(5)")}),
    Shape("deferred_branch", "[Spec Decode] Propose with the batch", {
        RUNNER: RUNNER_PIN.replace("self.speculator.propose(out)",
                                   "self.speculator.propose(out, batch)")}),
    Shape("comment_only", "[Misc] Explain the loop", _sched(
        "        for req in output:\n", "        # Finished requests leave the queue.\n"
        "        for req in output:\n")),
    Shape("logging_only", "[UX] Quieter scheduling logs", _sched(
        'logger.debug("scheduling %d", len(self.waiting))',
        'logger.info("scheduling %d requests", len(self.waiting))')),
    Shape("cited_deleted", "[Core] Drop the scheduler stats",
          _sched("\n    class Stats:\n        def total(self):\n            return 0\n", "")),
    Shape("huge_other", "[Config] Default f30 to -1", {
        CFG: _config("        self.f30 = -1\n", 30)}),
    Shape("huge_cited", "[Config] Default f105 to -1", {
        CFG: _config("        self.f105 = -1\n", 105)}),
    Shape("mention_only", "[Frontend] Default to opt-350m", {
        ARGS: ARG_UTILS.replace("opt-125m", "opt-350m")}),
)

PIN_FILES = {SCHED: SCHEDULER, KVU: KV_UTILS, REG: REGISTRY, RUNNER: RUNNER_PIN,
             CFG: _config(), CU: CUDA, BROKEN: PENALTIES, OLD: OLD_RUNNER, ARGS: ARG_UTILS,
             "README.md": "fake vllm\n"}


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@dataclass(frozen=True)
class World:
    repo: Path
    port: Path
    marks: dict[str, str]

    def sha(self, name: str) -> str:
        return self.marks[name]


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin, older = marks["pin"][:10], marks["older"][:10]
    start = line_of(RUNNER_OLDER, "    def prepare_inputs")
    end = start + 2
    # At the older SHA, lines start-end are prepare_inputs; at the pin, warm_up is there.
    assert "def warm_up" in RUNNER_PIN.splitlines()[start - 1]
    huge = line_of(_config(), "self.f100 ")
    # From the last line of __init__ over the blank line between (the class's own) to the
    # decorator of budget: it names __init__ and budget, not the whole class.
    init_end = line_of(SCHEDULER, "        self.waiting = []")
    budget = line_of(SCHEDULER, "    @staticmethod")
    return {
        "src/init_budget.cpp": f"// Ported from: {SCHED}:{init_end}-{budget} @ {pin}\nint ib;\n",
        "src/scheduler.cpp": f"// Ported from: {SCHED}::Scheduler.update_from_output @ {pin}\n"
                             "int s;\n",
        "src/stats.cpp": f"// Ported from: {SCHED}::Scheduler.Stats @ {pin}\nint st;\n",
        "src/budget.cpp": f"// Ported from: {SCHED}::Scheduler.budget @ {pin}\nint b;\n",
        "src/registry.cpp": f"// Ported from: {REG}::_TEXT_GENERATION_MODELS @ {pin}\nint r;\n",
        "src/kv_cache_utils.cpp": f"// Ported from: {KVU} @ {pin}\nint k;\n",
        "src/new_runner.cpp": f"// Ported from: {OLD}::OldRunner.step @ {pin}\nint o;\n",
        "src/penalties.cpp": f"// Ported from: {BROKEN} @ {pin}\nint p;\n",
        "src/kernels.cu": f"// Ported from: {CU}:8-12 @ {pin}\nint c;\n",
        "src/prepare.cpp": f"// Ported from: {RUNNER}:{start}-{end} @ {older}\nint i;\n",
        "src/runner.cpp": (f"// Ported from: {RUNNER}::GPUModelRunner.execute_model @ {pin}\n"
                           "//\n// DEFERRED: speculator drafts (spec decode) are not ported.\n"
                           "int e;\n"),
        "src/config.cpp": f"// Ported from: {CFG}:{huge}-{huge + 10} @ {pin}\nint g;\n",
        "src/flags.cpp": (f"// Ported from: {KVU} @ {pin}\nint f;\n\n"
                          f"// The model default follows {ARGS} upstream.\nint model;\n"),
    }


@dataclass(frozen=True)
class Plan:
    """An upstream to build: its files at the pin (and, where they differ, at the older
    commit before it), one commit per shape, and the port files citing it."""

    pin_files: Mapping[str, str | Link]
    shapes: tuple[Shape, ...]
    port_files: Callable[[dict[str, str]], dict[str, str]]
    older_files: dict[str, str | Link] = field(default_factory=dict)


def build(tmp: Path) -> World:
    return build_plan(tmp, Plan(PIN_FILES, SHAPES, _port_files, {RUNNER: RUNNER_OLDER}))


def build_plan(tmp: Path, plan: Plan) -> World:
    h = History()
    for path, text in sorted(plan.pin_files.items()):
        _put(h, path, plan.older_files.get(path, text))
    older = h.commit("Initial import (#1)")
    for path in sorted(plan.older_files):
        _put(h, path, plan.pin_files[path])
    pin = h.commit("[Core] Warm up the runner (#2)")
    marks_at: dict[str, int] = {"older": older, "pin": pin}
    pin_files = plan.pin_files
    for n, shape in enumerate(plan.shapes):
        if shape.rename is not None:
            h.rename(*shape.rename)
        for path, content in shape.files.items():
            if content is None:
                h.delete(path)
            else:
                _put(h, path, content)
        marks_at[shape.name] = h.commit(f"{shape.subject} (#{100 + n})")
        for path in shape.files:  # back to the pin's text, so the next shape starts there
            if path in pin_files and shape.rename is None:
                _put(h, path, pin_files[path])
        if any(p in pin_files for p in shape.files) and shape.rename is None:
            h.commit(f"Restore after {shape.name} (#{500 + n})")
    repo = tmp / "vllm"
    shas = h.write(repo, checkout="main")
    marks = {name: shas[m] for name, m in marks_at.items()}
    git(repo, "update-ref", "refs/remotes/origin/main", shas[max(shas)])
    git(repo, "checkout", "-q", marks["pin"])
    port = tmp / "port"
    files = {
        ".agents/upstream-sync.md": _protocol(marks["pin"]),
        ".agents/developer-preferences.md": example.preferences_text(repo, tmp / "oracles"),
        **plan.port_files(marks),
    }
    for rel, text in files.items():
        (port / rel).parent.mkdir(parents=True, exist_ok=True)
        (port / rel).write_text(text)
    return World(repo, port, marks)


def _put(h: History, path: str, content: str | Link) -> None:
    if isinstance(content, Link):
        h.symlink(path, content.target)
    else:
        h.modify(path, content)


def _protocol(pin: str) -> str:
    return ("# Protocol\n\n```parity-pin\n"
            f"vllm_commit = {pin}\nvllm_runtime_version = 0.1.0.dev2+g{pin[:9]}\n"
            f"vllm_distribution_version = 0.1.0.dev2+g{pin[:9]}\n"
            "flashinfer_version = 0.6.15\n```\n")


def run(port: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["--port", str(port), *argv], out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def synced(make: Callable[[], World]) -> Iterator[World]:
    """A world `make` builds under hermetic git settings, synced once (a module fixture)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        w = make()
        rc, _out, err = run(w.port, "sync")
        assert rc == 0, err
        yield w


def report_doc(world: World) -> dict[str, Any]:
    """The world's sync report, as its JSON companion has it."""
    (path,) = (world.port / ".agents/sync").glob("*.json")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@contextlib.contextmanager
def planned(factory: pytest.TempPathFactory, name: str, plan: Plan) -> Iterator[World]:
    """`plan` built in a fresh folder named `name`, synced once (a module fixture's world)."""
    with synced(lambda: build_plan(factory.mktemp(name), plan)) as w:
        yield w


def entry(world: World, name: str) -> dict[str, Any]:
    """The report's entry of the world's commit `name`, as its JSON companion has it."""
    found: dict[str, Any] = next(e for e in report_doc(world)["entries"]
                                 if e["sha"] == world.sha(name))
    return found
