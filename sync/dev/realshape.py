"""A real-shaped benchmark input: an upstream of Python modules with classes and methods,
and a port whose files carry long, multi-line headers the way the real vllm.cpp tree does.

The synthetic benchmark's one-line headers hid where a real port's time goes (DESIGN §5):
here every port file opens with a licence line, a citation statement in one of the header
forms of DESIGN §3 (wrapped paths, several paths, anchors, the SHA on a later line, `#`
headers in Python tools, ORIGINAL declarations), a prose paragraph of mentions
(`See include/...`, `.agents/specs/...`, `vllm/envs.py:124`), and a body of roughly the
real files' size. The upstream's commits edit method bodies, add methods, rename modules
and touch documentation, so the symbol-level pass has real hunks to map.

Everything is deterministic: the same arguments give byte-identical trees.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from sync.dev.fastimport import History, hermetic_env

PACKAGES = ("vllm/v1/core/sched", "vllm/v1/worker", "vllm/config", "vllm/model_executor/layers",
            "vllm/model_executor/models", "vllm/entrypoints/openai", "vllm/v1/attention/backends",
            "vllm/distributed", "vllm/v1/sample", "vllm/multimodal")
OTHER = ("docs", "tests/v1", "csrc", ".github/workflows", "benchmarks")
TAGS = ("Core", "Bugfix", "Misc", "Model", "ROCm", "Doc", "CI", "Perf", "Frontend", "XPU")
CLASSES = 4
METHODS = 6


@dataclass(frozen=True)
class Upstream:
    repo: Path
    shas: list[str]  # the root first, then one per commit, oldest first
    modules: list[str]  # the Python modules the port cites (their names at the root)


def _module(index: int, revision: int = 0) -> str:
    """A module of CLASSES classes with METHODS methods each (about 300 lines)."""
    out = [f'"""Module {index}: synthetic upstream code."""', "", "import os", "",
           f"_REGISTRY_{index} = {{", *(f'    "m{k}": {k},' for k in range(8)), "}", ""]
    for c in range(CLASSES):
        out += ["", f"class Part{c}:", f'    """Part {c} of module {index}."""', ""]
        for m in range(METHODS):
            out += [f"    def step_{m}(self, x: int) -> int:",
                    f'        """Step {m}."""',
                    f"        y = x * {m + 1} + {revision}",
                    f"        if y > {index}:",
                    f"            y -= {c}",
                    "        for i in range(3):",
                    "            y += i",
                    "        return y", ""]
    return "\n".join(out) + "\n"


def _edit(text: str, n: int) -> str:
    """Change one statement inside one method (the hunk a real bug fix makes)."""
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if line.startswith("        y = x * ")]
    i = hits[n % len(hits)]
    lines[i] = f"{lines[i]} + {n % 7 + 1}"
    return "\n".join(lines)


def _add(text: str, n: int) -> str:
    """Add a method to the first class (an addition only)."""
    head, sep, rest = text.partition("class Part0:")
    return (head + sep + rest.replace("\n\n    def step_0", f"\n\n    def added_{n}(self) -> int:\n"
                                      f"        return {n}\n\n    def step_0", 1))


def build_upstream(root: Path, commits: int, modules: int = 400) -> Upstream:
    h = History()
    names = [f"{PACKAGES[i % len(PACKAGES)]}/mod_{i}.py" for i in range(modules)]
    texts = {name: _module(i) for i, name in enumerate(names)}
    for name, text in texts.items():
        h.modify(name, text)
    for i, top in enumerate(OTHER):
        h.modify(f"{top}/file_{i}.md", f"# {top}\n")
    marks = [h.commit("[Init] real-shaped upstream (#1)")]
    live = list(names)
    for n in range(1, commits + 1):
        marks.append(_one_commit(h, n, live, texts))
    repo = root / "upstream"
    shas = h.write(repo)
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/remotes/origin/main",
                    shas[marks[-1]]], env=hermetic_env(), check=True)
    return Upstream(repo, [shas[m] for m in marks], names)


def _one_commit(h: History, n: int, live: list[str], texts: dict[str, str]) -> int:
    k = (n * 7919) % len(live)
    kind = n % 10
    tag = TAGS[n % len(TAGS)]
    if kind == 0 and n % 30 == 0:
        old = live[k]
        new = old.replace(".py", f"_r{n}.py")
        texts[new] = _edit(texts.pop(old), n)
        h.rename(old, new).modify(new, texts[new])
        live[k] = new
        return h.commit(f"[{tag}] move {Path(old).name} (#{30000 + n})")
    if kind in (1, 2):
        top = OTHER[n % len(OTHER)]
        h.modify(f"{top}/file_{n % 50}.md", f"# {top}\nrevision {n}\n")
        return h.commit(f"[{tag}] update {top} (#{30000 + n})")
    f = live[k]
    texts[f] = _add(texts[f], n) if kind == 3 else _edit(texts[f], n)
    h.modify(f, texts[f])
    if kind == 4:
        g = live[(k + 131) % len(live)]
        texts[g] = _edit(texts[g], n + 1)
        h.modify(g, texts[g])
    return h.commit(f"[{tag}] change {Path(f).stem} ({n}) (#{30000 + n})")


# -- the port ---------------------------------------------------------------------------------

_LICENCE = "// SPDX-License-Identifier: Apache-2.0"
_MENTIONS = (
    "// See include/vllm/v1/core/sched/scheduler.h for the T0 scope of this slice, and",
    "// .agents/specs/mrv2-runner.md for the runner's contract with the scheduler.",
    "// The environment switch follows vllm/envs.py:124 (VLLM_USE_V2_MODEL_RUNNER); the",
    "// CUDA-graph capture sizes come from vllm/config/compilation.py and are not ported.",
)


def _citation(i: int, sha: str, mods: list[str]) -> list[str]:
    """One of the header forms of DESIGN §3, chosen by the file's index."""
    a, b, c = mods[i % len(mods)], mods[(i * 7 + 3) % len(mods)], mods[(i * 13 + 5) % len(mods)]
    form = i % 8
    if form == 0:
        return [f"// Ported from: {a} @ {sha[:8]}"]
    if form == 1:
        return [f"// Ported from: {a}::Part1.step_2 @ {sha[:10]}"]
    if form == 2:  # a path wrapped mid-way over two comment lines
        cut = a.rindex("/") + 1
        return [f"// Mirrors the scheduling loop of {a[:cut]}", f"// {a[cut:]} @ {sha[:12]}"]
    if form == 3:  # several paths, one SHA on a later line
        return ["// Ported from:", f"//   - {a} (Part0, Part2)", f"//   - {b}:40-88",
                f"//   - {c}", f"// at upstream commit {sha}"]
    if form == 4:
        return [f"// Reimplemented from the WIRE FORMAT of: {a} + {b} @ `{sha[:9]}`"]
    if form == 5:
        return [f"// Ported FROM {a} (Part3.step_5) @ pin {sha[:8]}"]
    if form == 6:
        return [f"// vllm.cpp original: no upstream mirror. Its semantics mirror {a},",
                "// so a change there is watched, not ported."]
    return [f"// port of {a} and {b} @{sha[:7]}"]


def _body(i: int, size: int) -> str:
    """About `size` bytes of C++-shaped code; like the real tree's bodies, it names an upstream
    path in a comment in one file of two, and has a DEFERRED note in one file of five."""
    chunk = (f"int step_{i}(int x) {{\n  // Keep the batch order stable across steps.\n"
             "  int y = x * 3;\n  for (int k = 0; k < 3; ++k) y += k;\n  return y;\n}\n\n")
    body = chunk * max(1, size // len(chunk))
    if i % 2 == 0:
        body = (f"// The reference loop is {PACKAGES[i % len(PACKAGES)]}/mod_{i}.py, kept in "
                "step order.\n") + body
    if i % 5 == 0:
        body = "// DEFERRED: speculative decoding and LoRA are not ported here.\n" + body
    return body


def build_port(root: Path, up: Upstream, pin: str, *, files: int = 2253,
               body_bytes: int = 16_000) -> Path:
    port = root / "port"
    agents = port / ".agents"
    (agents / "oracles").mkdir(parents=True)
    runtime = f"0.23.1rc1.dev1+g{pin[:9]}"
    (agents / "upstream-sync.md").write_text(
        "# Upstream sync protocol\n\n**Active pin (advanced 2026-07-26):** current parity pin "
        f"`{pin[:9]}` (vLLM 0.26.0.dev0, synthetic)\n\n```parity-pin\nvllm_commit = {pin}\n"
        f"vllm_runtime_version = {runtime}\nvllm_distribution_version = {runtime}.empty\n"
        "flashinfer_version = 0.6.15.post1\n```\n")
    (agents / "oracles/vllm.md").write_text(
        "# vllm\n\n```oracle-pin\nid = vllm\nrole = primary\nupstream = vllm-project/vllm\n"
        f"scope = all\npin = {pin}\npin_label = 0.26.0.dev0\npinned_on = 2026-07-26\n"
        "gateable = no\nevidence = #1\n```\n")
    (agents / "parity-ledger.md").write_text(
        "# Parity ledger\n\n"
        "| Date / commit | What it does | Upstream equivalent | Parity status |\n"
        "|---|---|---|---|\n"
        + "".join(f"| 2026-07-{1 + k % 28:02d} / `{k:07x}` | port {k} | vllm#{40000 + k} | ✅ |\n"
                  for k in range(800)))
    (agents / "developer-preferences.md").write_text(
        f"```sync-preferences\nreference_checkout = {up.repo}\nfetch_remote = origin\n"
        "branch = main\n```\n")
    for i in range(files):
        rel = f"src/{PACKAGES[i % len(PACKAGES)]}/file_{i}.cpp"
        path = port / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        header = [_LICENCE, "//", *_citation(i, pin, up.modules), "//", *_MENTIONS[: 1 + i % 4]]
        path.write_text("\n".join(header) + "\n\n#include <cstdint>\n\n" + _body(i, body_bytes))
    return port
