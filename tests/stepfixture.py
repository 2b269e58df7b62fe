"""A small synthetic upstream (real git, fast-import) and a port tree citing it, for step-5 tests.

Upstream `main`:  base -> older -> PIN -> a-again -> delete-gone -> add-model -> TARGET -> beyond
(`origin/main` is `beyond`, so a header can be ahead of the target), plus a `pr` branch
whose head is not an upstream commit, and a release branch `origin/releases/v0.1` forked
at the pin with one commit of its own, tagged `v0.1.0` (a release tag off `main`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from portfixture import Ran as Ran  # one CLI runner for every fixture
from portfixture import run as run

from sync import cli, port
from sync.dev.fastimport import History, git
from sync.records import cycle

LEDGER = (
    "# Parity ledger\n"
    "\n"
    "One row per ported upstream change.\n"
    "\n"
    "| Date / commit | What it does | Upstream equivalent | Parity status |\n"
    "|---|---|---|---|\n"
    "| 2025-12-02 / `4f1c2a9` | Port a | vllm#10 (`vllm/a.py`) | ✅ goldens |\n"
    "\n"
    "Trailing prose stays.\n"
)

INVENTORY = (
    "# Porting inventory\n"
    "\n"
    "## T0 — core\n"
    "\n"
    "- ✅ `4f1c2a9` Module a (vllm#10)\n"
    "- Module c, `vllm/c.py` (not started)\n"
    "\n"
    "## T2 — later\n"
    "\n"
    "- Models under `vllm/models/`\n"
    "\n"
    "## 9. Deviations\n"
    "\n"
    "### 9.1 A is synchronous\n"
    "\n"
    "`vllm/a.py` overlaps work; the port does not.\n"
    "\n"
    "### 9.1 B keeps fp32\n"
    "\n"
    "`src/b.cpp` keeps fp32 accumulators.\n"
    "\n"
    "### 9.2 Untouched\n"
    "\n"
    "`vllm/zzz.py` is never touched.\n"
)


@dataclass(frozen=True)
class Up:
    repo: Path
    base: str
    older: str
    pin: str
    a_again: str
    delete: str
    add_model: str
    target: str
    beyond: str
    pr_head: str
    release: str  # tag v0.1.0 on origin/releases/v0.1 (not on origin/main)


def build_upstream(repo: Path) -> Up:
    h = History()
    h.modify("vllm/a.py", "a = 1\n").modify("vllm/b.py", "b = 1\n").modify("vllm/c.py", "c = 1\n")
    h.modify("vllm/gone.py", "gone = 1\n").modify("README.md", "fake vllm\n")
    base = h.commit("Initial (#1)")
    h.modify("vllm/a.py", "a = 2\n")
    older = h.commit("[Core] Change a (#10)")
    h.modify("vllm/b.py", "b = 2\n")
    pin = h.commit("[Core] Tweak b (#11)")
    h.modify("vllm/a.py", "a = 3\nextra = True\n")
    a_again = h.commit("[Core] Change a again (#12)")
    h.delete("vllm/gone.py")
    delete = h.commit("[Misc] Delete gone (#13)")
    h.modify("vllm/models/new.py", "class New: ...\n")
    add_model = h.commit("[Model] Add new model (#14)")
    h.modify("vllm/c.py", "c = 2\n").modify("vllm/b.py", "b = 3\n")
    target = h.commit("[Core] Change c and b (#15)")
    h.modify("vllm/a.py", "a = 4\n")
    beyond = h.commit("[Core] Beyond the target (#16)")
    h.modify("vllm/a.py", "a = 99\n")
    pr_head = h.commit("WIP pr head", branch="pr", parent=pin)
    h.modify("vllm/b.py", "b = 2  # release fix\n")
    release = h.commit("[Bugfix] Release-only fix of b (#17)", branch="releases/v0.1",
                       parent=pin)
    marks = h.write(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", marks[beyond])
    git(repo, "update-ref", "refs/remotes/origin/releases/v0.1", marks[release])
    git(repo, "branch", "-q", "-D", "releases/v0.1")
    git(repo, "tag", "v0.1.0", marks[release])
    return Up(repo, *(marks[m] for m in (base, older, pin, a_again, delete, add_model, target,
                                           beyond, pr_head, release)))


def protocol_text(pin: str) -> str:
    return (
        "# Upstream sync protocol\n\nThe pin, as a running oracle reports itself.\n\n"
        "```parity-pin\n"
        f"vllm_commit = {pin}\n"
        f"vllm_runtime_version = 0.23.1rc1.dev1511+g{pin[:9]}\n"
        f"vllm_distribution_version = 0.23.1rc1.dev1511+g{pin[:9]}\n"
        "flashinfer_version = 0.6.15.post1\n"
        "```\n"
    )


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode())
    return path


def build_port(root: Path, up: Up) -> Path:
    write(root, ".agents/upstream-sync.md", protocol_text(up.pin))
    write(root, ".agents/parity-ledger.md", LEDGER)
    write(root, ".agents/porting-inventory.md", INVENTORY)
    write(root, "src/a.cpp", f"// Ported from: vllm/a.py @ {up.older[:10]}\n\nint a = 2;\n")
    write(root, "src/b.cpp", f"// Ported from: vllm/b.py @ {up.pin}\n\nint b = 2;\n")
    write(root, "src/c.cpp", f"// Ported from: vllm/c.py @ {up.pin[:8]}\n\nint c = 1;\n")
    write(root, "src/d.cpp", f"// Ported from: vllm/c.py @ {up.older[:12]}\n\nint d;\n")
    write(root, "src/gone.cpp", f"// Ported from: vllm/gone.py @ {up.pin[:10]}\n\nint g;\n")
    write(root, "src/hot.cpp", f"// Ported from: vllm/a.py @ {up.beyond[:12]}\n\nint h;\n")
    write(root, "src/pr.cpp", f"// Ported from: vllm/a.py @ {up.pr_head[:10]}\n\nint p;\n")
    write(root, "src/orig.cpp", "// Original to this port: no upstream mirror.\n\nint o;\n")
    write(root, "src/none.cpp", "#include <cstdio>\n\nint n;\n")
    return root


@pytest.fixture
def with_port_cmd(monkeypatch: pytest.MonkeyPatch) -> None:
    if "sync.cli.commands.queue" not in cli.COMMAND_MODULES:
        monkeypatch.setattr(cli, "COMMAND_MODULES",
                            (*cli.COMMAND_MODULES, "sync.cli.commands.queue"))


@dataclass
class World:
    up: Up
    root: Path

    @property
    def port(self) -> port.Port:
        return port.locate(str(self.root))

    def freeze(self, target: str | None = None, ref: str = "origin/main") -> cycle.Cycle:
        return cycle.save(self.port, self.up.pin, target or self.up.target, ref)


def make_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    up = build_upstream(tmp_path / "vllm")
    root = build_port(tmp_path / "port", up)
    monkeypatch.setenv("VLLM_SOURCE", str(up.repo))
    return World(up, root)


