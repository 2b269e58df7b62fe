"""`upstream-sync init`: discover a port's records, write the config and preferences example."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from sync import cli, port
from sync.dev.fastimport import git
from sync.records import config, prefs, starter
from sync.steps import discover as init_cmd
from sync.steps import surface

COMMIT = "5559679229bc961848b121ccdeaa8fa5d79bec98"
PIN_BLOCK = (
    "```parity-pin\n"
    f"vllm_commit = {COMMIT}\n"
    "vllm_runtime_version = 0.23.1rc1.dev1511+g555967922\n"
    "vllm_distribution_version = 0.23.1rc1.dev1511+g555967922.precompiled\n"
    "flashinfer_version = 0.6.15.post1\n"
    "```\n"
)
ORACLE = (
    "# {id}\n\n```oracle-pin\nid = {id}\nrole = core\nupstream = x\nscope = all\npin = {pin}\n"
    "pin_label = 0.23.1rc1.dev1511\npinned_on = 2026-01-01\ngateable = no\nevidence = -\n```\n"
)


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def make_port(root: Path) -> Path:
    files = {
        "docs/sync-protocol.md": "# Sync protocol\n\nPARITY PIN: see the block.\n\n" + PIN_BLOCK,
        "docs/oracles/vllm.md": ORACLE.format(id="vllm", pin=COMMIT),
        "docs/oracles/vllm-omni.md": ORACLE.format(id="vllm-omni", pin="UNPINNED"),
        "docs/ledger.md": (
            "# Ledger\n\n| Date / commit | What it does | Upstream equivalent | Parity status |\n"
            "|---|---|---|---|\n| 2026-01-01 `abc1234` | ports x | vllm/x.py | ✅ |\n"),
        "docs/porting-inventory.md": "# Inventory\n\n## T0\n\n- scheduler\n\n## 9. Deviations\n",
        "README.md": "Mentions the ```parity-pin fence in prose only; no block here.\n",
        "engine/core/sched.cpp": "// Ported from: vllm/x.py @ abcdef12\n#include <x>\n",
        "engine/core/sched.h": "#pragma once\n// Ported from: vllm/x.py @ abcdef12\n",
        "kernels/attn.cu": "// Mirrors vllm/attention/backend.py @ abcdef12\n",
        "tools/helper.py": "# a tool of our own\nprint('hi')\n",
        "third_party/lib.cpp": "// Ported from: vllm/y.py @ abcdef12\n",
        ".hidden/skip.cpp": "// Ported from: vllm/z.py @ abcdef12\n",
    }
    return write_files(root, files)


def init(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["init", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_init_writes_a_loadable_config(tmp: Path) -> None:
    root = make_port(tmp)
    code, out, err = init(str(root))
    assert (code, err) == (0, "")
    cfg_path = root / config.CONFIG_PATH
    assert out.splitlines() == [
        f"wrote {cfg_path}",
        "  protocol = docs/sync-protocol.md",
        "  ledger = docs/ledger.md",
        "  inventory = docs/porting-inventory.md",
        "  oracles = docs/oracles/*.md",
        "  port_roots = ['engine', 'kernels']",
        "  [check] feature_globs = ['engine/**', 'kernels/**', 'tests/**'] (what check-commit "
        "counts as feature work)",
        "  [oracles.vllm] build_mode = \"precompiled\" (the pin block's distribution version "
        "0.23.1rc1.dev1511+g555967922.precompiled)",
        "  warning: no gates configured — an advance refuses until [golden] scripts or "
        "[parity.suites.<name>] are configured, or [gates] none = true declares that the port "
        "has none",
        f"wrote {root / '.agents/developer-preferences.md.example'} (copy it to "
        "developer-preferences.md and fill it in)",
        f"edited {root / '.gitignore'} (added /.agents/developer-preferences.md, "
        "/.agents/sync/.lock, /.agents/sync/.txn-*)",
    ]
    assert cfg_path.read_text() == (
        "# upstream-sync configuration (keys: docs/adopting.md in upstream-sync)\n"
        "schema = 1\n\n"
        "[paths]\n"
        'protocol = "docs/sync-protocol.md"\n'
        'ledger = "docs/ledger.md"\n'
        'inventory = "docs/porting-inventory.md"\n'
        'oracles = "docs/oracles/*.md"\n\n'
        "[surface]\n"
        "port_roots = [\n"
        '    "engine",\n'
        '    "kernels",\n'
        "]\n"
        "mirrored = [\n"
        '    "vllm/",\n'
        "]\n\n"
        "[check]\n"
        "feature_globs = [\n"
        '    "engine/**",\n'
        '    "kernels/**",\n'
        '    "tests/**",\n'
        "]\n\n"
        "[oracles.vllm]\n"
        'build_mode = "precompiled"\n'
    ) + starter.RULES
    cfg = config.load(root)
    assert cfg.feature_globs == ("engine/**", "kernels/**", "tests/**")
    assert (cfg.protocol, cfg.ledger, cfg.inventory, cfg.oracles) == (
        "docs/sync-protocol.md", "docs/ledger.md", "docs/porting-inventory.md",
        "docs/oracles/*.md")
    assert cfg.port_roots == ("engine", "kernels")
    assert cfg.sync_dir == ".agents/sync"  # not discovered: the default stays
    example = root / ".agents/developer-preferences.md.example"
    assert example.read_text() == prefs.example_text()
    assert (root / ".gitignore").read_text() == (
        "/.agents/developer-preferences.md\n/.agents/sync/.lock\n/.agents/sync/.txn-*\n")


def test_mirrored_adds_csrc_when_the_headers_cite_kernels(tmp: Path) -> None:
    # walk17 B6: a port whose headers cite vLLM's kernels mirrors csrc/ too (a csrc-only
    # commit is then INVENTORY, not "touches no mirrored path").
    root = make_port(tmp)
    (root / "kernels/cache.cu").write_text(
        "// Ported from: csrc/cache_kernels.cu @ abcdef12\n__global__ void k();\n")
    code, out, err = init(str(root))
    assert code == 0, err
    assert "  mirrored = ['csrc/', 'vllm/'] (the headers cite those trees)" in out.splitlines()
    assert config.load(root).mirrored == ("csrc/", "vllm/")


def test_gitignore_is_appended_once_keeping_crlf(tmp: Path) -> None:
    root = make_port(tmp)
    (root / ".gitignore").write_bytes(b"build/\r\n*.o")
    assert init(str(root))[0] == 0
    assert (root / ".gitignore").read_bytes() == (
        b"build/\r\n*.o\r\n/.agents/developer-preferences.md\r\n/.agents/sync/.lock\r\n"
        b"/.agents/sync/.txn-*\r\n")
    assert init(str(root), "--force")[0] == 0
    assert (root / ".gitignore").read_bytes().count(b"developer-preferences") == 1
    assert (root / ".gitignore").read_bytes().count(b".lock") == 1


@pytest.mark.parametrize(("old", "added"), [
    (b"build/\r\n*.o\r", b"\n"),  # a lone CR at the end: made CRLF, not CR CR LF
    (b"a\r\nb\r\nc\n", b""),  # ends in LF already: no empty line added
])
def test_gitignore_lines_follow_a_lone_cr_or_an_lf_without_an_empty_line(
        tmp: Path, old: bytes, added: bytes) -> None:
    """A CRLF .gitignore ending in a lone CR got CRLF after it (CR CR LF), one ending in a
    plain LF got CRLF after that (an empty line): every old byte is kept, the lines go on
    with the file's dominant ending."""
    root = make_port(tmp)
    (root / ".gitignore").write_bytes(old)
    assert init(str(root))[0] == 0
    assert (root / ".gitignore").read_bytes() == old + added + (
        b"/.agents/developer-preferences.md\r\n/.agents/sync/.lock\r\n/.agents/sync/.txn-*\r\n")


def test_existing_example_is_kept(tmp: Path) -> None:
    root = make_port(tmp)
    example = root / ".agents/developer-preferences.md.example"
    example.parent.mkdir(parents=True)
    example.write_text("ours\n")
    assert init(str(root))[0] == 0
    assert example.read_text() == "ours\n"


def test_refuses_to_overwrite_without_force(tmp: Path) -> None:
    root = make_port(tmp)
    cfg_path = root / config.CONFIG_PATH
    cfg_path.parent.mkdir(parents=True)
    cfg_path.write_text("schema = 1\n# hand-tuned\n")
    code, out, err = init(str(root))
    assert (code, out) == (2, "")
    assert err == (f"upstream-sync: error: {cfg_path} already exists — pass --force to "
                   "rewrite it\n")
    assert cfg_path.read_text() == "schema = 1\n# hand-tuned\n"
    assert init(str(root), "--force")[0] == 0
    assert config.load(root).protocol == "docs/sync-protocol.md"


def test_refuses_without_a_pin_block(tmp: Path) -> None:
    root = make_port(tmp)
    (root / "docs/sync-protocol.md").write_text("# no block\n")
    code, out, err = init(str(root))
    assert (code, out) == (2, "")
    assert err == (f"upstream-sync: error: found 0 ```parity-pin blocks under {root}, need "
                   "exactly one — keep one pin block in the protocol file (see README) and "
                   "rerun\n")
    assert not (root / config.CONFIG_PATH).exists()


def test_refuses_two_pin_blocks_in_one_file(tmp: Path) -> None:
    root = make_port(tmp)
    with (root / "docs/sync-protocol.md").open("a") as fh:
        fh.write("\nOld pin:\n\n" + PIN_BLOCK)
    code, _, err = init(str(root))
    assert code == 2
    assert err.startswith(f"upstream-sync: error: found 2 ```parity-pin blocks under {root} "
                          "(docs/sync-protocol.md), need exactly one")
    assert not (root / config.CONFIG_PATH).exists()


def test_refuses_pin_blocks_in_two_files(tmp: Path) -> None:
    root = make_port(tmp)
    (root / "docs/copy.md").write_text(PIN_BLOCK)
    code, _, err = init(str(root))
    assert code == 2
    assert "found 2 ```parity-pin blocks" in err
    assert "(docs/copy.md, docs/sync-protocol.md)" in err


def test_not_a_directory(tmp: Path) -> None:
    code, _, err = init(str(tmp / "nope"))
    assert code == 2 and "is not a directory" in err


def test_json_output(tmp: Path) -> None:
    root = make_port(tmp)
    code, out, _ = init(str(root), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["config"] == str(root / config.CONFIG_PATH)
    assert doc["paths"]["protocol"] == "docs/sync-protocol.md"
    assert doc["found"]["oracles"] == ["docs/oracles/vllm-omni.md", "docs/oracles/vllm.md"]
    assert doc["port_roots"] == ["engine", "kernels"]


def test_ambiguous_records_keep_defaults(tmp: Path) -> None:
    root = make_port(tmp)
    (root / "docs/old-ledger.md").write_text((root / "docs/ledger.md").read_text())
    (root / "other/oracles").mkdir(parents=True)
    (root / "other/oracles/x.md").write_text(ORACLE.format(id="x", pin="UNPINNED"))
    found = init_cmd.discover(root)
    assert found["found"]["ledger"] == ["docs/ledger.md", "docs/old-ledger.md"]
    assert "ledger" not in found["paths"] and "oracles" not in found["paths"]
    code, out, _ = init(str(root))
    assert code == 0
    assert ("  ledger: not found uniquely (2 candidates: docs/ledger.md, docs/old-ledger.md); "
            "default .agents/parity-ledger.md kept — to use one, set [paths] ledger = "
            '"<path>" in .agents/upstream-sync.toml') in out.splitlines()
    assert config.load(root).ledger == ".agents/parity-ledger.md"


def test_ambiguous_records_name_a_few_candidates(tmp: Path) -> None:
    """'not found uniquely (N candidates)' named none of them, nor how to pick one."""
    root = make_port(tmp)
    for n in range(4):
        (root / f"docs/old-ledger-{n}.md").write_text((root / "docs/ledger.md").read_text())
    code, out, _ = init(str(root))
    assert code == 0
    assert ("  ledger: not found uniquely (5 candidates: docs/ledger.md, docs/old-ledger-0.md, "
            "docs/old-ledger-1.md +2 more); default .agents/parity-ledger.md kept — to use "
            'one, set [paths] ledger = "<path>" in .agents/upstream-sync.toml'
            ) in out.splitlines()


def test_port_from_option_and_environment(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_port(tmp / "a")
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["--port", str(root), "init"], out=out, err=err) == 0
    other = make_port(tmp / "b")
    monkeypatch.setenv("SYNC_PORT", str(other))
    assert cli.main(["init"], out=out, err=err) == 0
    assert (other / config.CONFIG_PATH).exists()


# -- what the real port states (findings §6, recipe 16) ------------------------------------------

EMPTY_PIN = PIN_BLOCK.replace(".precompiled", ".empty")


def make_real_shaped(root: Path) -> Path:
    files = {
        ".agents/upstream-sync.md": "# Upstream sync\n\n" + EMPTY_PIN,
        ".agents/porting-inventory.md": "# Inventory\n\n## T0\n\n## 9. Deviations\n",
        ".agents/state.md": "# State\n\nT0 done. ## 9 notes\n",
        ".agents/feature-matrix.md": "# Features\n\nT0 | ## 9\n",
        "docs/design.md": "# Design\n\n## 9 T0 scope\n",
        ".agents/parity-ledger.md": (
            "| Date / commit | What it does | Upstream equivalent | Parity status |\n"
            "|---|---|---|---|\n| 2026-07-02 `462d673` | x | vllm/x.py | ok |\n"),
        "tools/parity/README.md": (
            "# Parity harness\n\nRegenerate:\n"
            "    ssh dgx.casa 'cd ~/work/port && ~/venvs/vllm-oracle/bin/python \\\n"
            "      tools/parity/dump_ops.py --out tests/parity/goldens'\n"
            "then commit the changed goldens.\n"),
        ".agents/state.md.bak": "python3 tools/parity/dump_ops.py --model $M --out x\n",
        "tools/parity/dump_ops.py": "# Ported from: vllm/x.py @ abcdef12\nprint('dump')\n",
        "tests/parity/test_op_parity.cpp": "// Ported from: tests/x.py @ abcdef12\nint t;\n",
        "src/gguf.cpp": "// Ported from llama.cpp (local fork) ggml/src/ggml.c @ 237ad9b96\n",
        ".agents/developer-preferences.example.md": (
            "# Developer preferences\n\nSet these in your shell or `.env`:\n\n"
            "- `VLLM_SOURCE`: your vLLM clone\n- `VLLM_ORACLE`: the oracle venv\n"
            "- `GATE_HOST`: the GPU host\n"),
        ".gitignore": "build/\n",
    }
    return write_files(root, files)


def test_init_reads_what_a_real_port_states(tmp: Path) -> None:
    root = make_real_shaped(tmp)
    code, out, err = init(str(root))
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert "  inventory = .agents/porting-inventory.md" in lines
    assert not any("not found uniquely" in ln for ln in lines)
    assert ('  [oracles.vllm] build_mode = "empty" (the pin block\'s distribution version '
            "0.23.1rc1.dev1511+g555967922.empty)") in lines
    assert ("  [golden] script from tools/parity/README.md:4: tools/parity/dump_ops.py --out "
            "{out}") in lines
    assert not any("warning: no gates" in ln for ln in lines)
    assert "  the docs name gate host(s) dgx.casa: set gate_hosts (SYNC_GATE_HOSTS) where " \
        "gates run" in lines
    assert any(ln.startswith("  other upstreams the headers cite by name: llama.cpp (1 "
                             "citation)") for ln in lines)
    assert lines[-2:] == [
        "kept the port's own preferences example .agents/developer-preferences.example.md; no "
        "second one written: VLLM_SOURCE (read as reference_checkout), GATE_HOST (mapped to "
        "gate_hosts), VLLM_ORACLE (no preference holds it)",
        f"edited {root / '.gitignore'} (added /.agents/developer-preferences.md, "
        "/.agents/sync/.lock, /.agents/sync/.txn-*)"]
    assert not (root / ".agents/developer-preferences.md.example").exists()
    cfg = config.load(root)
    assert cfg.oracle("vllm").build_mode == "empty"
    assert cfg.golden_dir == "tests/parity/goldens"
    assert cfg.golden_scripts == (("{python}", "tools/parity/dump_ops.py", "--out", "{out}"),)
    assert cfg.preference_variables == (("gate_hosts", "GATE_HOST"),)
    doc = json.loads(init(str(root), "--force", "--json")[1])
    assert doc["written"] == [str(root / config.CONFIG_PATH)]  # .gitignore already has them


def test_the_ports_variable_names_are_read(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_real_shaped(tmp)
    assert init(str(root))[0] == 0
    monkeypatch.setenv("GATE_HOST", "dgx.casa")
    monkeypatch.delenv("SYNC_GATE_HOSTS", raising=False)
    from sync import port

    p = port.locate(str(root))
    assert p.preferences().gate_hosts == ("dgx.casa",)
    assert p.preferences().source_of("gate_hosts") == "env GATE_HOST"


def test_no_gates_is_a_warning_and_advance_refuses_until_declared(tmp: Path) -> None:
    root = make_real_shaped(tmp)
    (root / "tools/parity/README.md").write_text("# Parity harness\n\nNothing to run yet.\n")
    code, out, _ = init(str(root))
    assert code == 0 and "  warning: no gates configured" in out
    from sync import port
    from sync.steps.advance import blockers

    p = port.locate(str(root))
    assert blockers.gates_declared(p) == [
        "no gates are configured — configure [golden] scripts or [parity.suites.<name>] in "
        ".agents/upstream-sync.toml, or declare that the port has none with [gates] none = true"]
    cfg = root / config.CONFIG_PATH
    cfg.write_text(cfg.read_text() + "\n[gates]\nnone = true\n")
    assert blockers.gates_declared(port.locate(str(root))) == []


def test_force_keeps_what_the_old_configuration_set_by_hand(tmp: Path) -> None:
    """walk-s4 U9: `init --force` rewrote the file and a hand-made table was gone, unsaid.
    It is said, and the old file is kept beside the new one; a re-run that drops nothing
    writes no copy."""
    root = make_port(tmp)
    assert init(str(root))[0] == 0
    cfg = root / config.CONFIG_PATH
    assert init(str(root), "--force")[0] == 0
    assert not cfg.with_name(cfg.name + ".bak").exists()
    old = cfg.read_text() + '\n[oracles.pytorch]\npaths = ["aten/"]\n'
    cfg.write_text(old)
    code, out, err = init(str(root), "--force")
    assert (code, err) == (0, "")
    backup = cfg.with_name(cfg.name + ".bak")
    assert (f"kept the old configuration as {backup}: it set oracles.pytorch.paths, which "
            "discovery does not; copy back what you still want") in out.splitlines()
    assert backup.read_text() == old and "pytorch" not in cfg.read_text()


def test_files_that_are_not_utf8_are_read_and_said(tmp: Path) -> None:
    """h2: init read a file that is not UTF-8 as empty, without a word: a ledger with one
    Latin-1 byte was "not found", the headers of a root's only file were missed. Read as the
    scan reads port files (replacement characters), each is said at its first bad byte."""
    root = make_port(tmp)
    ledger = root / "docs/ledger.md"
    ledger.write_bytes(ledger.read_bytes().replace(b"ports x", b"ports caf\xe9"))
    (root / "tools/own.cpp").write_bytes(b"// Ported from: vllm/t.py @ abcdef12\n// \xff\n")
    code, out, err = init(str(root))
    assert code == 0
    tail = (", so init read it with replacement characters (a header or record block with a "
            "bad byte inside is not found) — re-save it as UTF-8")
    said = [f"docs/ledger.md:5: is not UTF-8 (byte 0xe9 at column 35, offset 133){tail}",
            f"tools/own.cpp:2: is not UTF-8 (byte 0xff at column 4, offset 40){tail}"]
    assert err.splitlines() == [f"warning: {s}" for s in said]
    assert "  ledger = docs/ledger.md" in out.splitlines()
    assert "  port_roots = ['engine', 'kernels', 'tools']" in out.splitlines()
    code, out, _ = init(str(root), "--force", "--json")
    assert code == 0 and json.loads(out)["not_utf8"] == said


def test_a_pin_block_hidden_by_a_byte_that_is_not_utf8_is_said_before_the_refusal(
        tmp: Path) -> None:
    root = make_port(tmp)
    proto = root / "docs/sync-protocol.md"
    proto.write_bytes(proto.read_bytes().replace(b"```parity-pin", b"```parity\xff-pin"))
    code, _, err = init(str(root))
    assert code == 2 and err.splitlines()[0].startswith(
        "warning: docs/sync-protocol.md:5: is not UTF-8 (byte 0xff at column 10, offset ")
    assert "found 0 ```parity-pin blocks" in err.splitlines()[1]


def test_ported_files_the_default_header_globs_miss_are_configured(tmp: Path) -> None:
    """a port whose ported files are `.cuh` headers and `CMakeLists.txt` had them left out
    of port_roots and of the header globs, unsaid: the scan never read them, so a change to
    the upstream file they mirror was not PORT-NOW. Init writes the globs that read them."""
    root = make_port(tmp)
    write_files(root, {"cuda/ops.cuh": "/*\n * Mirrors vllm/ops.py @ abcdef12\n */\n",
                       "engine/CMakeLists.txt": "# Ported from: vllm/x.py @ abcdef12\n"})
    code, out, err = init(str(root))
    assert (code, err) == (0, "")
    assert ("  header_globs = default + ['**/*.cuh', '**/CMakeLists.txt'] (ported files the "
            "default globs miss: cuda/ops.cuh, engine/CMakeLists.txt)") in out.splitlines()
    cfg = config.load(root)
    assert cfg.port_roots == ("cuda", "engine", "kernels")
    assert cfg.header_globs == (*config.Config().header_globs, "**/*.cuh", "**/CMakeLists.txt")
    scanned = [rel for rel, _ in surface.port_files(port.locate(str(root)))]
    assert "cuda/ops.cuh" in scanned and "engine/CMakeLists.txt" in scanned


def test_a_submodule_is_not_a_port_root(tmp: Path) -> None:
    """a vendored dependency checked out as a git submodule (its own `.git`) whose
    sources say they were adapted from vLLM became a port root: audit and bump-headers
    took its files for the port's."""
    dep = write_files(tmp / "flashinfer", {"csrc/q.cu": "// Adapted from vllm/a.py @ abcdef12\n"})
    root = make_port(tmp / "port")
    for repo in (dep, root):
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-qm", "import")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(dep),
        "extern/flashinfer")
    assert (root / "extern/flashinfer/csrc/q.cu").is_file()
    code, _, err = init(str(root))
    assert (code, err) == (0, "")
    assert config.load(root).port_roots == ("engine", "kernels")


def test_force_keeps_rules_and_values_changed_by_hand(tmp: Path) -> None:
    """`init --force` compared the key names only, so a rule of the port's own (or a
    starter rule tuned as docs/adopting.md says) and a hand-widened port_roots were dropped,
    unsaid and with no copy kept: `rules` and `surface.port_roots` were set either way."""
    root = make_port(tmp)
    assert init(str(root))[0] == 0
    cfg = root / config.CONFIG_PATH
    old = (cfg.read_text().replace('    "kernels",\n]', '    "kernels",\n    "tools",\n]', 1)
           + '\n[[rules]]\nid = "no-frontend"\ntags = ["Frontend"]\ndisposition = "IGNORE"\n'
           'reason = "the port has no frontend"\n')
    cfg.write_text(old)
    assert config.load(root).port_roots == ("engine", "kernels", "tools")
    code, out, err = init(str(root), "--force")
    assert (code, err) == (0, "")
    backup = cfg.with_name(cfg.name + ".bak")
    assert (f"kept the old configuration as {backup}: it set rules, surface.port_roots, which "
            "discovery does not; copy back what you still want") in out.splitlines()
    assert backup.read_text() == old


@pytest.mark.parametrize("fence", ["~~~parity-pin", "  ```parity-pin", "````parity-pin"])
def test_a_pin_block_fenced_so_it_is_not_read_is_named(tmp: Path, fence: str) -> None:
    """a pin block in a `~~~` fence, indented (in a list item) or opened with four
    backticks was refused as '0 ```parity-pin blocks' by init and status alike, with no
    word of the block the maintainer can see in the file. The refusal names its line."""
    root = make_port(tmp)
    proto = root / "docs/sync-protocol.md"
    closing = fence.replace("parity-pin", "")
    proto.write_text(proto.read_text().replace("```parity-pin", fence)
                     .replace("\n```\n", f"\n{closing}\n"))
    code, _, err = init(str(root))
    assert code == 2
    assert (f"docs/sync-protocol.md:5 opens one with {fence.strip()!r}, which is not read — "
            "fence the block with ``` at the start of its line and rerun") in err
    cfg = root / config.CONFIG_PATH
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('[paths]\nprotocol = "docs/sync-protocol.md"\n')
    out, errs = io.StringIO(), io.StringIO()
    assert cli.main(["--port", str(root), "status"], out=out, err=errs) == 4
    assert errs.getvalue() == (
        "upstream-sync: error: docs/sync-protocol.md:5: expected exactly one ```parity-pin "
        f"block, found 0 (line 5 opens one with {fence.strip()!r}, which is not read) — fence "
        "the block with ``` at the start of its line\n")


def test_a_record_not_found_is_said_with_what_to_do(tmp: Path) -> None:
    """a port with no ledger and no inventory read 'ledger: not found uniquely (0
    candidates); default kept', naming neither the path now configured nor what to do, and
    `check` then failed on the missing ledger."""
    root = make_port(tmp)
    (root / "docs/ledger.md").unlink()
    (root / "docs/porting-inventory.md").unlink()
    code, out, err = init(str(root))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert ("  ledger: none found (no table with the header Date / commit | What it does | "
            "Upstream equivalent | Parity status); .agents/parity-ledger.md is configured, and "
            "check fails until it exists — create it with that header, or set [paths] ledger "
            "to your ledger") in lines
    assert ("  inventory: none found (no porting-inventory.md, no file with tiers T0..T3 and a "
            "## 9 deviations section); .agents/porting-inventory.md is configured, and "
            "inventory annotate refuses until it exists — create it, or set [paths] inventory "
            "to your inventory") in lines



def test_a_record_at_its_default_path_that_does_not_read_is_not_called_missing(
        tmp: Path) -> None:
    """the default path holds a ledger whose header is worded otherwise: init is not to
    say that none exists, but that this file holds no ledger table."""
    root = make_port(tmp)
    (root / "docs/ledger.md").unlink()
    write_files(root, {".agents/parity-ledger.md": "| Date/commit | What | Upstream | Status |\n"
                                                   "|---|---|---|---|\n"})
    code, out, err = init(str(root))
    assert (code, err) == (0, "")
    assert ("  ledger: .agents/parity-ledger.md holds no table with the header Date / commit | "
            "What it does | Upstream equivalent | Parity status, and check fails until it does "
            "— fix its header row, or set [paths] ledger to your ledger") in out.splitlines()


def test_init_says_an_advance_needs_the_core_oracle_file(tmp: Path) -> None:
    """A port with no oracle registry was told to create one 'when the port records its
    oracles', as if it were optional: the advance refuses without the core oracle file."""
    root = make_port(tmp)
    shutil.rmtree(root / "docs/oracles")
    code, out, _ = init(str(root))
    assert code == 0
    assert ("  oracles: no oracle registry found — create .agents/oracles/vllm.md (one "
            "```oracle-pin block): an advance refuses without it, as it rewrites that file's "
            "pin") in out.splitlines(), out
