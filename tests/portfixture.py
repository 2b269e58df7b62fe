"""A small synthetic upstream and a port citing it, for the sync pipeline tests.

`build(tmp)` makes, under `tmp`:

- `upstream.git`: a bare "remote". Its `main` ends at `tip`; `later1` and `later2` exist as
  objects beyond it (unreachable until `advance_remote` moves `main` onto them), so a test
  can make the remote gain commits after the clone;
- `vllm`: the reference checkout, a full (`--no-local`) clone whose `main` and work tree sit
  at the pin while `origin/main` is at `tip`;
- `port`: a port with valid records (pin block, PARITY PIN line, pin spans, core oracle file,
  ledger, config with rules, headers) as a git repository with one commit, plus untracked
  developer preferences pointing at `vllm`.

The range `pin..tip` (oldest first) has one commit of each shape a cycle must handle:

| name       | subject                                  | expected                            |
|------------|------------------------------------------|-------------------------------------|
| change_a   | [Core] Change a (#101)                   | PORT-NOW (vllm/a.py → src/a.cpp)    |
| rocm_b     | [ROCm] Tune b for MI300 (#102)           | IGNORE, rule rocm (demotes ported)  |
| add_model  | [Model] Add a new model (#103)           | INVENTORY (mirrored, not ported)    |
| docs       | [Doc] Update the docs (#104)             | IGNORE (unmirrored)                 |
| lora       | [LoRA] Add LoRA layers (#105)            | INVENTORY, rule lora (paths_any)    |
| tests_only | [Test] Add tests (#106)                  | IGNORE, rule tests-only (paths_all) |
| tests_and_a| [Core] Fix a with a test (#107)          | PORT-NOW (paths_all does not match) |
| delete     | [Misc] Delete gone (#108)                | PORT-NOW; a deletion of a cited path|
| rename     | [Refactor] Rename old_name (#109)        | PORT-NOW; a rename of a cited path  |
| fix_c      | [Bugfix] Fix c (#110)                    | PORT-NOW                            |
| revert_c   | Revert "[Bugfix] Fix c (#110)" (#111)    | PORT-NOW; reverts fix_c             |
| reland_c   | [Bugfix] Fix c (#110)                    | PORT-NOW; patch-identical to fix_c  |
| no_pr      | Fix a typo in the README                 | IGNORE; listed as without (#N)      |

plus `side` (branch `side`, forked before the pin: a target that does not descend from it),
`release` (branch `releases/v0.1`, forked at `rename` with one commit of its own: where a
release tag goes) and any `extra` commits, which come after `no_pr` (the last one is then
`tip`).
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sync import cli
from sync.dev import example
from sync.dev.fastimport import History, git, hermetic_env

RANGE = ("change_a", "rocm_b", "add_model", "docs", "lora", "tests_only", "tests_and_a",
         "delete", "rename", "fix_c", "revert_c", "reland_c", "no_pr")
RUNTIME = "0.1.0.dev2"
RELEASE = "0.1.0"

CONFIG = """\
# upstream-sync configuration of the synthetic test port.
schema = 1

[surface]
port_roots = ["src"]
mirrored = ["vllm/"]

[[rules]]
id = "rocm"
tags = ["ROCm"]
disposition = "IGNORE"
reason = "platform we don't target"

[[rules]]
id = "lora"
paths_any = ["vllm/lora/**"]
disposition = "INVENTORY"
reason = "LoRA not ported yet"

[[rules]]
id = "tests-only"
paths_all = ["tests/**"]
disposition = "IGNORE"
reason = "upstream tests only"
"""

LEDGER = """\
# Parity ledger

| Date / commit | What it does | Upstream equivalent | Parity status |
|---|---|---|---|
| 2026-01-01 / `abc1234` | Port module b | vllm#2 (`vllm/b.py`) | ✅ goldens |
"""

_IDENTITY = {
    "GIT_AUTHOR_NAME": "Port Dev", "GIT_AUTHOR_EMAIL": "port@example.invalid",
    "GIT_COMMITTER_NAME": "Port Dev", "GIT_COMMITTER_EMAIL": "port@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-02T12:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-02T12:00:00+0000",
}


def protocol_text(pin: str) -> str:
    return (
        "# Upstream sync protocol\n"
        "\n"
        f"Active pin (advanced 2026-01-01): current parity pin {pin[:9]} (vLLM {RELEASE}), "
        "the synthetic fixture's pin.\n"
        "\n"
        f"The oracle built at <!--pin:commit-->{pin[:10]}<!--/pin--> reports "
        f"<!--pin:label-->{RUNTIME}<!--/pin--> plus a local segment.\n"
        "\n"
        "```parity-pin\n"
        f"vllm_commit = {pin}\n"
        f"vllm_runtime_version = {RUNTIME}+g{pin[:9]}\n"
        f"vllm_distribution_version = {RUNTIME}+g{pin[:9]}\n"
        "flashinfer_version = 0.6.15\n"
        "```\n"
        "\n"
        "Never mix a sync cycle with feature work in the same commit.\n"
    )


def oracle_text(pin: str) -> str:
    return (
        "# Oracle: vllm (core)\n"
        "\n"
        "```oracle-pin\n"
        "id = vllm\n"
        "role = primary\n"
        "upstream = https://github.com/vllm-project/vllm\n"
        "scope = vllm/\n"
        f"pin = {pin}\n"
        f"pin_label = {RUNTIME}\n"
        "pinned_on = 2026-01-01\n"
        "gateable = no\n"
        "evidence = #1 (no gate host yet)\n"
        "```\n"
    )


@dataclass(frozen=True)
class Fixture:
    tmp: Path
    remote: Path  # bare upstream.git
    reference: Path  # the reference checkout (main at the pin, origin/main at tip)
    port: Path  # the port root (a git repository)
    marks: dict[str, str]  # commit name -> full SHA

    @property
    def pin(self) -> str:
        return self.marks["pin"]

    @property
    def tip(self) -> str:
        return self.marks["tip"]

    @property
    def sync_dir(self) -> Path:
        return self.port / ".agents" / "sync"

    def range_names(self) -> list[str]:
        """The commit names of pin..tip, oldest first."""
        names = list(RANGE)
        names += sorted((n for n in self.marks if n.startswith("extra")), key=lambda n: int(n[5:]))
        return names

    def reports(self) -> list[Path]:
        return sorted(self.sync_dir.glob("*.md"))

    def report(self) -> Path:
        found = self.reports()
        assert len(found) == 1, found
        return found[0]


def _history(extra: Sequence[tuple[str | bytes, Mapping[str, str]]]) -> tuple[History,
                                                                               dict[str, int]]:
    h = History()
    m: dict[str, int] = {}
    for path, text in (("vllm/a.py", "a = 1\n"), ("vllm/b.py", "b = 1\n"),
                       ("vllm/c.py", "c = 1\n"), ("vllm/gone.py", "gone = 1\n"),
                       ("vllm/old_name.py", "old = 1\n"), ("docs/index.md", "# Docs\n"),
                       ("README.md", "fake vllm\n")):
        h.modify(path, text)
    m["base"] = h.commit("Initial import (#1)")
    h.modify("vllm/a.py", "a = 2\n")
    m["pin"] = h.commit("[Core] Pin here (#2)")
    h.modify("vllm/a.py", "a = 3\n")
    m["change_a"] = h.commit("[Core] Change a (#101)")
    h.modify("vllm/b.py", "b = 2  # MI300\n")
    m["rocm_b"] = h.commit("[ROCm] Tune b for MI300 (#102)")
    h.modify("vllm/models/new.py", "class New: ...\n")
    m["add_model"] = h.commit("[Model] Add a new model (#103)")
    h.modify("docs/index.md", "# Docs\n\nMore.\n")
    m["docs"] = h.commit("[Doc] Update the docs (#104)")
    h.modify("vllm/lora/layers.py", "class LoRA: ...\n")
    m["lora"] = h.commit("[LoRA] Add LoRA layers (#105)")
    h.modify("tests/test_a.py", "def test_a(): ...\n")
    m["tests_only"] = h.commit("[Test] Add tests (#106)")
    h.modify("tests/test_a.py", "def test_a(): assert True\n").modify("vllm/a.py", "a = 4\n")
    m["tests_and_a"] = h.commit("[Core] Fix a with a test (#107)")
    h.delete("vllm/gone.py")
    m["delete"] = h.commit("[Misc] Delete gone (#108)")
    h.rename("vllm/old_name.py", "vllm/new_name.py")
    m["rename"] = h.commit("[Refactor] Rename old_name (#109)")
    h.modify("vllm/c.py", "c = 2\n")
    m["fix_c"] = h.commit("[Bugfix] Fix c (#110)")
    h.modify("vllm/c.py", "c = 1\n")
    m["revert_c"] = h.commit('Revert "[Bugfix] Fix c (#110)" (#111)\n\nIt broke the build.\n')
    h.modify("vllm/c.py", "c = 2\n")
    m["reland_c"] = h.commit("[Bugfix] Fix c (#110)\n\nRe-landed as it was.\n")
    h.modify("README.md", "fake vllm, no typo\n")
    m["no_pr"] = h.commit("Fix a typo in the README")
    for i, (message, files) in enumerate(extra):
        for path, text in files.items():
            h.modify(path, text)
        m[f"extra{i}"] = h.commit(message)
    m["tip"] = max(m.values())
    h.modify("vllm/a.py", "a = 5\n")
    m["later1"] = h.commit("[Core] Later change a (#201)")
    h.modify("vllm/b.py", "b = 3\n")
    m["later2"] = h.commit("[Core] Later change b (#202)")
    h.modify("vllm/side.py", "side = 1\n")
    m["side"] = h.commit("[Side] Diverge before the pin (#300)", branch="side",
                         parent=m["base"])
    h.modify("vllm/a.py", "a = 4  # release\n")
    m["release"] = h.commit("[Bugfix] Release-only fix of a (#400)", branch="releases/v0.1",
                            parent=m["rename"])
    return h, m


def _port_git(root: Path, *args: str) -> str:
    env = hermetic_env()
    env.update(_IDENTITY)
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, env=env,
                          check=True)
    return proc.stdout.decode()


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def build_port(root: Path, marks: Mapping[str, str], reference: Path) -> Path:
    pin = marks["pin"]
    write(root, ".agents/upstream-sync.md", protocol_text(pin))
    write(root, ".agents/upstream-sync.toml", CONFIG)
    write(root, ".agents/oracles/vllm.md", oracle_text(pin))
    write(root, ".agents/parity-ledger.md", LEDGER)
    write(root, ".gitignore", ".agents/developer-preferences.md\n.agents/sync/.lock\n")
    write(root, "src/a.cpp", f"// Ported from: vllm/a.py @ {pin[:10]}\n\nint a = 2;\n")
    write(root, "src/b.cpp", f"// Ported from: vllm/b.py @ {pin[:10]}\n\nint b = 1;\n")
    write(root, "src/c.cpp", f"// Ported from: vllm/c.py @ {pin[:10]}\n\nint c = 1;\n")
    write(root, "src/c_old.cpp", f"// Ported from: vllm/c.py @ {marks['base'][:10]}\n\nint d;\n")
    write(root, "src/gone.cpp", f"// Ported from: vllm/gone.py @ {pin[:10]}\n\nint g;\n")
    write(root, "src/old.cpp", f"// Ported from: vllm/old_name.py @ {pin[:10]}\n\nint o;\n")
    write(root, "src/orig.cpp", "// Original to this port: no upstream mirror.\n\nint x;\n")
    _port_git(root, "init", "-q", "-b", "main")
    _port_git(root, "add", "-A")
    _port_git(root, "commit", "-q", "--no-verify", "-m", "Import the synthetic port")
    write(root, ".agents/developer-preferences.md",
          example.preferences_text(reference, root.parent / "oracles"))
    return root


def build(tmp: Path, monkeypatch: pytest.MonkeyPatch | None = None, *,
          extra: Sequence[tuple[str | bytes, Mapping[str, str]]] = ()) -> Fixture:
    """Build the upstream, the reference checkout and the port under `tmp`.

    With `monkeypatch`, `VLLM_SOURCE` names the reference checkout too (the environment
    wins over the preferences file, which names it as well).
    """
    history, names = _history(extra)
    remote = tmp / "upstream.git"
    shas = history.write(remote, bare=True)
    marks = {name: shas[mark] for name, mark in names.items()}
    git(remote, "update-ref", "refs/heads/main", marks["tip"])
    reference = tmp / "vllm"
    # --no-local: a local clone would hardlink every object, the unreachable later
    # commits included, and a fetch test could then not tell fetched from present.
    git(tmp, "clone", "-q", "--no-local", str(remote), str(reference))
    git(reference, "reset", "-q", "--hard", marks["pin"])
    port = build_port(tmp / "port", marks, reference)
    if monkeypatch is not None:
        monkeypatch.setenv("VLLM_SOURCE", str(reference))
    return Fixture(tmp, remote, reference, port, marks)


def advance_remote(fx: Fixture, name: str) -> str:
    """Move the remote's `main` to the commit `name` (the remote gained commits)."""
    git(fx.remote, "update-ref", "refs/heads/main", fx.marks[name])
    return fx.marks[name]


@dataclass(frozen=True)
class Ran:
    rc: int
    out: str
    err: str


def run(port: Path, *argv: str) -> Ran:
    """One CLI invocation on `port`, with captured stdout/stderr."""
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["--port", str(port), *argv], out=out, err=err)
    return Ran(rc, out.getvalue(), err.getvalue())


def port_git(port: Path, *args: str) -> str:
    """Hermetic git with a fixed identity and date, for commits in the port repository."""
    return _port_git(port, *args)


def mtime_ns(path: Path) -> int:
    return os.stat(path).st_mtime_ns
