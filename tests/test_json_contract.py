"""One machine contract: every command with `--json` prints exactly one JSON document.

On success the command's own document; on a refusal (any exit code) the same document,
or the refusal alone, with `ok: false`, the exit code and the error (kind, message, fix).
Text goes to stderr. Every command and sub-action runs here over a success and a refusal
on the bundled example (`advance-omni`'s success needs an omni oracle: it is in
tests/test_oracle.py, checked the same way).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sync import cli
from sync.dev import example
from sync.dev.fastimport import git

REPO = Path(__file__).resolve().parents[1]
HOST = socket.gethostname()


@dataclass(frozen=True)
class Ready:
    base: Path  # the example, synced, gated, with an oracle at the target
    target: str


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def one_document(out: str) -> Any:
    """stdout is one JSON document and nothing else (json.loads refuses trailing text)."""
    return json.loads(out)


@pytest.fixture(scope="module")
def ready(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ready]:
    base = tmp_path_factory.mktemp("contract")
    with pytest.MonkeyPatch.context() as mp:
        home = base / "home"
        home.mkdir()
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for var in ("VLLM_SOURCE", "SYNC_FETCH_REMOTE", "SYNC_BRANCH", "SYNC_ORACLE_HOME"):
            mp.delenv(var, raising=False)
        example.build(base / "ex", REPO / "examples")
        mp.setenv("SYNC_PORT", str(base / "ex" / "port"))
        mp.setenv("SYNC_GATE_HOSTS", HOST)
        for argv in (("sync",), ("oracle", "build", "--commit", "target"), ("golden",),
                     ("parity",)):
            rc, _, err = call(*argv)
            assert rc == 0, (argv, err)
        doc = one_document(call("status", "--json")[1])
        yield Ready(base / "ex", doc["cycle"]["target"])


@pytest.fixture
def port(ready: Ready, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the port and of the reference checkout (the oracle home shared)."""
    dst = tmp_path / "port"
    shutil.copytree(ready.base / "port", dst, symlinks=True)
    ref = tmp_path / "vllm"
    shutil.copytree(ready.base / "vllm", ref, symlinks=True)
    monkeypatch.setenv("SYNC_PORT", str(dst))
    monkeypatch.setenv("VLLM_SOURCE", str(ref))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(ready.base / "oracles"))
    monkeypatch.setenv("SYNC_GATE_HOSTS", HOST)
    monkeypatch.setenv("HOME", str(tmp_path))
    return dst


def _head(port: Path) -> str:
    return git(port, "rev-parse", "HEAD").strip()


def _stale_sentence_out(port: Path) -> None:
    p = port / ".agents/upstream-sync.md"
    p.write_text(p.read_text().replace(
        " The advance re-validated the T0 goldens with zero drift (Qwen3-0.6B greedy and top-p "
        "traces bit-identical).", ""))


def _advanced(port: Path) -> list[str]:
    _carry_everything(port)
    _stale_sentence_out(port)
    assert call("advance")[0] == 0
    return ["rollback", "--dry-run"]


def _carry_everything(port: Path) -> None:
    doc = one_document(call("sync", "--json")[1])
    for e in doc["entries"]:
        if e["disposition"] == "PORT-NOW":
            assert call("decide", e["sha"], "PORT-NOW", "carry-over: later")[0] == 0


def _fresh_port(port: Path) -> list[str]:
    """A copy of the example port with no configuration (what `init` starts from)."""
    fresh = port.parent / "fresh"
    shutil.copytree(REPO / "examples" / "port", fresh)
    (fresh / ".agents/upstream-sync.toml").unlink()
    return ["init", str(fresh)]


def _behind_is_an_error(port: Path) -> list[str]:
    """`audit` refuses a file behind the pin without a ledger note only when told to."""
    cfg = port / ".agents/upstream-sync.toml"
    cfg.write_text(cfg.read_text() + '\n[check]\nbehind_without_note = "error"\n')
    return ["audit"]


def _a_wrong_span(port: Path) -> list[str]:
    (port / "docs/BENCHMARKS.md").write_text("At <!--pin:commit-->0123456789<!--/pin-->.\n")
    return ["check"]


def _ready_to_advance(port: Path) -> list[str]:
    _carry_everything(port)
    _stale_sentence_out(port)
    return ["advance", "--dry-run"]


def _feature_commit(port: Path) -> list[str]:
    (port / "src/feature.cpp").write_text("int feature;\n")
    git(port, "add", "src/feature.cpp")
    git(port, "-c", "user.name=D", "-c", "user.email=d@example.invalid", "commit", "-qm",
        "Feature only")
    return ["check-commit", "HEAD"]


def _gate_file(port: Path) -> list[str]:
    (gate,) = (port / ".agents/sync/gates").glob("*.json")
    shutil.copy(gate, port.parent / "shard.json")
    return ["gates", "merge", str(port.parent / "shard.json")]


def _target_env(port: Path) -> Path:
    """The oracle environment the module built at the cycle's target (the shared home)."""
    target = one_document(call("status", "--json")[1])["cycle"]["target"]
    return Path(os.environ["SYNC_ORACLE_HOME"]) / f"vllm-{target[:10]}"


Setup = Callable[[Path], list[str]]
# command -> (success argv, refusal argv, refusal exit code); a callable builds argv on the
# port copy first (and may prepare it).
CASES: dict[str, tuple[list[str] | Setup, list[str] | Setup, int]] = {
    "init": (_fresh_port, ["init"], 2),  # the port already has a configuration
    "status": (["status"], ["--port", "/nonexistent", "status"], 2),
    "fetch": (["fetch"], ["fetch", "--target", "v9.9.9"], 2),
    "sync": (["sync"], ["sync", "--target", "no-such-ref"], 2),
    "decide": (["decide", "#37314", "IGNORE", "docs only"], ["decide", "37314", "IGNORE", "x"], 2),
    "explain": (["explain", "#37215"], ["explain", "#1"], 2),
    "queue": (["queue"], ["queue", "--patch", "README.md"], 2),
    "bump-headers": (["bump-headers", "--check", "src/vllm/config/cache.h"],
                     ["bump-headers", "src/missing.cpp"], 2),
    "ledger add": (lambda p: ["ledger", "add", "--commit", _head(p)[:10], "--what", "Port it",
                              "--pr", "37580", "--status", "ok"],
                   ["ledger", "add", "--commit", "abc1234", "--what", "w", "--pr", "1",
                    "--status", "s"], 2),
    "inventory annotate": (["inventory", "annotate", "--pr", "38122", "--tier", "T2"],
                           ["inventory", "annotate", "--pr", "0", "--tier", "T2"], 2),
    "audit": (["audit"], _behind_is_an_error, 7),
    "oracle build": (["oracle", "build", "--commit", "target", "--if-missing"],
                     ["oracle", "build", "--oracle", "../x"], 2),
    "oracle probe": (["oracle", "probe", "--commit", "target"], ["oracle", "probe"], 3),
    "oracle verify": (["oracle", "verify", "--commit", "target"], ["oracle", "verify"], 3),
    # Adopting the target's own environment in place re-measures it and records it again.
    "oracle adopt": (lambda p: ["oracle", "adopt", str(_target_env(p)), "--commit", "target"],
                     ["oracle", "adopt", "/nonexistent", "--commit", "target"], 3),
    "oracle gc": (["oracle", "gc", "--dry-run"], ["oracle", "gc", "--oracle", "../x"], 2),
    "golden": (["golden"], ["golden", "--target", "0000000"], 6),
    "parity": (["parity"], ["parity", "--suite", "nope"], 2),
    "gates merge": (_gate_file, ["gates", "merge", "/nonexistent.json"], 2),
    "advance": (_ready_to_advance, ["advance"], 6),
    "rollback": (_advanced, ["rollback"], 2),
    "advance-omni": ([], ["advance-omni", "0" * 40, "--oracle", "vllm"], 2),
    "check": (["check"], _a_wrong_span, 7),
    "check-commit": (_feature_commit, ["check-commit", "no..such"], 2),
}


def _argv(spec: list[str] | Setup, port: Path) -> list[str]:
    return spec(port) if callable(spec) else spec


def test_every_command_has_a_case() -> None:
    names = set()
    for module in cli.COMMAND_MODULES:
        name = cli.command_name(module)
        parser = cli.build_parser([name])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        chosen = sub.choices[name]
        actions = [a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)]
        names |= {f"{name} {a}" for a in actions[0].choices} if actions else {name}
    assert names == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_success_prints_one_document(name: str, port: Path) -> None:
    spec = CASES[name][0]
    if spec == []:
        pytest.skip("its success needs an omni oracle: tests/test_oracle.py checks it")
    argv = _argv(spec, port)
    rc, out, err = call(*argv, "--json")
    assert rc == 0, (argv, err)
    doc = one_document(out)
    assert isinstance(doc, dict) and doc, argv
    assert doc["ok"] is True and "error" not in doc


@pytest.mark.parametrize("name", list(CASES))
def test_refusal_prints_one_document_with_the_error(name: str, port: Path) -> None:
    _, spec, code = CASES[name]
    argv = _argv(spec, port)
    rc, out, err = call(*argv, "--json")
    assert rc == code, (argv, rc, err)
    doc = one_document(out)
    assert doc["ok"] is False and doc["exit_code"] == rc
    error = doc["error"]
    assert set(error) == {"kind", "message", "fix", "text", "exit_code"}
    assert error["exit_code"] == rc and error["message"] and error["kind"].isidentifier()
    # The same one line is on stderr, for people and logs.
    assert f"upstream-sync: error: {error['text']}" in err


def test_refusals_keep_the_command_document(port: Path) -> None:
    """A refused advance lists its unmet lines; check its violations; bump its files."""
    rc, out, _ = call("advance", "--json")
    doc = one_document(out)
    assert rc == 6 and doc["advanced"] is False and doc["unmet"]
    assert all(isinstance(u, str) for u in doc["unmet"])
    assert doc["error"]["kind"] == "BlockedCycle"
    _carry_everything(port)
    _stale_sentence_out(port)
    rc, out, _ = call("advance", "--dry-run", "--json")
    doc = one_document(out)
    assert rc == 0 and doc["dry_run"] is True and doc["diff"].startswith("--- a/")
    assert doc["paragraph"].startswith("Active pin (advanced ")


def test_usage_errors_before_a_command_are_documents_too(port: Path) -> None:
    for argv in (["--json"], ["ledger", "--json"], ["nope", "--json"],
                 ["decide", "--json"], ["sync", "--no-such-flag", "--json"]):
        rc, out, _ = call(*argv)
        doc = one_document(out)
        assert rc == 2 and doc["ok"] is False and doc["exit_code"] == 2, argv
