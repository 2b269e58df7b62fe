"""Oracle build/probe/verify and omni isolation, against real virtualenvs of a fake upstream."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from fakeupstream import (
    FLASHINFER,
    Upstream,
    add_distribution,
    copy_env,
    hand_install,
    make_port,
    make_upstream,
    oracle_doc,
    pin_doc,
    run_cli,
    site_packages,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from nodac import need_setpriv, run_closed

from sync.dev.fastimport import git
from sync.infra.errors import (
    BlockedCycle,
    EnvironmentUnresolved,
    MalformedRecord,
    SyncError,
    UsageError,
)
from sync.port import Port
from sync.records import config, cycle
from sync.steps.verify import build as oracle_build
from sync.steps.verify import golden, installed, isolation, oracle, watch
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import probe as oracle_probe

CONFIG = """\
[oracles.vllm]
build_env = { VLLM_PRECOMPILED_WHEEL_LOCATION = "{wheel}" }
build_mode = "precompiled"
"""


@dataclass(frozen=True)
class World:
    up: Upstream
    omni_up: Upstream
    port: Path
    home: Path
    env: Path  # the core oracle at the pin
    omni_env: Path
    base: Path

    def environ(self, home: Path | None = None) -> dict[str, str]:
        return {"VLLM_SOURCE": str(self.up.path), "VLLM_OMNI_SOURCE": str(self.omni_up.path),
                "SYNC_ORACLE_HOME": str(home or self.home)}


def _setenv(mp: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for k, v in values.items():
        mp.setenv(k, v)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("oracle")
    mp = pytest.MonkeyPatch()
    home_dir = base / "userhome"
    home_dir.mkdir()
    (home_dir / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
    mp.setenv("HOME", str(home_dir))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("SYNC_PORT", "SYNC_GATE_HOSTS", "SETUPTOOLS_SCM_PRETEND_VERSION"):
        mp.delenv(var, raising=False)
    try:
        up = make_upstream(base / "vllm")
        omni_up = make_upstream(base / "vllm-omni", package="vllm_omni", dist="vllm-omni",
                                tag="0.1.0")
        omni_runtime = omni_up.runtime(omni_up.pin, 2)
        port = make_port(base / "port", up, config=CONFIG,
                         omni=(omni_up.pin, omni_runtime.split("+")[0]))
        home = base / "venvs"
        w = World(up, omni_up, port, home, home / f"vllm-{up.pin[:10]}",
                  home / f"vllm-omni-{omni_up.pin[:10]}", base)
        _setenv(mp, w.environ())
        p = Port(port, config.load(port))
        prefs = p.preferences()
        oracle_build.build(p, prefs, "vllm")
        add_distribution(site_packages(w.env), "flashinfer-python", FLASHINFER)
        oracle_build.build(p, prefs, "vllm-omni")
        yield w
    finally:
        mp.undo()


@pytest.fixture
def env(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    _setenv(monkeypatch, world.environ())
    return world


def require_proof(p: Port, commit: str) -> isolation.Proof:
    """`isolation.require` as advance-omni asks it: against the core pin's environment."""
    home = oracle.oracle_home(p, p.preferences())
    return isolation.require(p, "vllm-omni", commit, core_env=watch.core_env(p, home))


def port_of(w: World, **changes: Any) -> Port:
    p = Port(w.port, config.load(w.port))
    return replace(p, config=replace(p.config, **changes)) if changes else p


def verify_lines(w: World, port: Port | None = None, commit: str | None = None) -> list[str]:
    p = port or port_of(w)
    v = oracle_verify.verify(p, p.preferences(), "vllm", commit)
    return [str(m) for m in v.mismatches]


def other_home(w: World, tmp: Path, env_src: Path | None = None, commit: str | None = None
               ) -> Path:
    """A second oracle home holding a copy of the good oracle (optionally under another commit)."""
    home = tmp / "venvs"
    copy_env(env_src or w.env, home / f"vllm-{(commit or w.up.pin)[:10]}")
    return home


def rewrite_pin(port: Path, up: Upstream, **values: str) -> None:
    runtime = up.runtime(up.pin, 2)
    doc = {"commit": up.pin, "runtime": runtime, "dist": runtime + ".precompiled",
           "flashinfer": FLASHINFER, **values}
    (port / ".agents/upstream-sync.md").write_text(pin_doc(**doc))


@pytest.fixture
def port_copy(world: World, tmp_path: Path) -> Path:
    dst = tmp_path / "port"
    shutil.copytree(world.port, dst)
    return dst


# -- build -----------------------------------------------------------------------------------


def test_build_layout_record_and_untouched_reference(env: World) -> None:
    assert env.env.name == f"vllm-{env.up.pin[:10]}"
    rec = oracle.read_marker(env.env)
    assert rec is not None
    assert (rec.oracle, rec.commit, rec.build_mode) == ("vllm", env.up.pin, "precompiled")
    assert rec.build_env == {"VLLM_PRECOMPILED_WHEEL_LOCATION": str(env.up.wheel)}
    assert rec.installer == ("uv" if oracle_build.find_uv() is not None else "pip")
    # Bound to the installed files: the RECORD's digest, the files the tree does not hold.
    dist_info = next(site_packages(env.env).glob("vllm-*.dist-info"))
    assert rec.record_sha256 == hashlib.sha256((dist_info / "RECORD").read_bytes()).hexdigest()
    assert rec.not_in_tree == ["vllm/_C.abi3.so", "vllm/_version.py"]
    # Where the precompiled binaries came from, and the dependency set.
    assert rec.binaries is not None
    assert (rec.binaries["wheel"], rec.binaries["commit"], rec.binaries["warning"]) == (
        env.up.wheel.name, env.up.pin[:9], None)
    assert rec.binaries["sha256"] == hashlib.sha256(env.up.wheel.read_bytes()).hexdigest()
    freeze = (env.env / oracle.FREEZE).read_text()
    assert rec.freeze_sha256 == hashlib.sha256(freeze.encode()).hexdigest()
    assert "vllm @ file://" in freeze
    log = Path(rec.log or "")
    assert log.parent == env.home / "logs" and "[extract] vllm/_C.abi3.so" in log.read_text()
    # The reference checkout's work tree, HEAD, worktrees and refs are as fast-import left them.
    assert git(env.up.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(env.up.path, "rev-parse", "HEAD").strip() == env.up.pin
    assert len(git(env.up.path, "worktree", "list").splitlines()) == 1
    assert not (env.up.path / "vllm" / "_version.py").exists()
    assert sorted(git(env.up.path, "for-each-ref", "--format=%(refname)").split()) == [
        "refs/heads/main", "refs/heads/side", "refs/tags/v0.2.1rc1"]


def test_build_without_uv_uses_venv_and_pip(env: World, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's second installer: a machine without uv builds with venv + pip."""
    monkeypatch.setitem(sys.modules, "uv", None)  # `import uv` fails, as where it is absent
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "uv").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert oracle_build.find_uv() is None and shutil.which("git") is not None
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    p = port_of(env)
    built = oracle_build.build(p, p.preferences(), "vllm")
    assert built.record.installer == "pip"
    assert not (built.env / "bin" / "uv").exists()
    add_distribution(site_packages(built.env), "flashinfer-python", FLASHINFER)
    assert verify_lines(env) == []


def test_existing_env_needs_rebuild(env: World) -> None:
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "build"])
    assert rc == 2 and "already exists" in err and "--rebuild" in err


def test_pretend_version_refused(env: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETUPTOOLS_SCM_PRETEND_VERSION", "0.2.1")
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "build", "--rebuild"])
    assert rc == 2 and "SETUPTOOLS_SCM_PRETEND_VERSION is set in the environment" in err
    monkeypatch.delenv("SETUPTOOLS_SCM_PRETEND_VERSION")
    forged = config.OracleConfig("vllm", build_env=(("SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM",
                                                     "1.0"),))
    p = port_of(env, oracle_configs=(forged,))
    with pytest.raises(UsageError, match=r"oracles\.vllm\.build_env"):
        oracle_build.build(p, p.preferences(), "vllm", rebuild=True)
    assert oracle.read_marker(env.env) is not None  # nothing was torn down


@pytest.mark.parametrize("where", ["port", "reference", "port-repo"])
def test_oracle_home_inside_a_checkout_refused(env: World, monkeypatch: pytest.MonkeyPatch,
                                               where: str) -> None:
    inside = {"port": env.port / ".venvs", "reference": env.up.path / "venvs",
              "port-repo": env.port / ".agents" / "venvs"}[where]
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(inside))
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "probe"])
    assert rc == 3 and "lies inside" in err and "SYNC_ORACLE_HOME" in err
    assert not inside.exists()


def test_oracle_home_unset_refused(env: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNC_ORACLE_HOME")
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert rc == 3 and "oracle_home is not set" in err and "SYNC_ORACLE_HOME" in err


def test_release_tag_pin_in_source_mode_keeps_previous_env(env: World, port_copy: Path
                                                           ) -> None:
    """A pin at the release tag: `0.2.1rc1` names no commit; `vllm_commit_id` asserts it."""
    (port_copy / ".agents/upstream-sync.toml").write_text(
        '[oracles.vllm]\nbuild_mode = "source"\nrequire_flashinfer = false\n')
    released = "0.2.1rc1"
    without = pin_doc(env.up.released, released, released)
    (port_copy / ".agents/upstream-sync.md").write_text(without)
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "build"])
    assert rc == 4 and "a released version names no commit, so it is a pin only with " \
        "vllm_commit_id" in err
    commit_id = f"g{env.up.released[:9]}"
    (port_copy / ".agents/upstream-sync.md").write_text(
        without.replace("```\n", f"vllm_commit_id = {commit_id}\n```\n", 2)
        .replace("```parity-pin\nvllm_commit_id", "```parity-pin\nvllm_commit_id"))
    p = Port(port_copy, config.load(port_copy))
    assert p.pin_record().pin.commit_id == commit_id
    built = oracle_build.build(p, p.preferences(), "vllm")
    try:
        assert env.env in built.kept  # the previous pin's environment stays for rollback
        assert env.env.is_dir()
        probe = oracle_probe.probe(p, p.preferences(), "vllm")
        assert (probe.runtime_version, probe.distribution_version, probe.commit_id) == (
            released, released, commit_id)  # source mode adds no suffix
        assert verify_lines(env, p) == []
        assert oracle_verify.measured_pin(p, probe) == p.pin_record().pin
        # A pin block asserting another commit id is a mismatch, not a pass.
        (port_copy / ".agents/upstream-sync.md").write_text(
            (port_copy / ".agents/upstream-sync.md").read_text().replace(
                commit_id, f"g{env.up.released[:7]}"))
        assert verify_lines(env, Port(port_copy, config.load(port_copy))) == [
            f"commit id: oracle reports '{commit_id}', the pin block (.agents/upstream-sync.md) "
            f"(vllm_commit_id) says 'g{env.up.released[:7]}'"]
    finally:
        shutil.rmtree(built.env)


# -- probe -----------------------------------------------------------------------------------


def test_probe_reports_the_installed_oracle(env: World) -> None:
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "probe", "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    runtime = env.up.runtime(env.up.pin, 2)
    assert doc["runtime_version"] == runtime
    assert doc["distribution_version"] == runtime + ".precompiled"
    assert doc["distribution_count"] == 1
    assert doc["module_file"] == str(site_packages(env.env) / "vllm" / "__init__.py")
    assert doc["sys_prefix"] == str(env.env)
    assert doc["flashinfer_version"] == FLASHINFER
    assert doc["torch_version"] is None
    assert doc["editable"] is False and doc["isolated"] is True
    assert doc["build"]["build_mode"] == "precompiled"
    # Without --json: the same measurement as text, one line a field.
    rc, text, err = run_cli(["--port", str(env.port), "oracle", "probe"])
    assert rc == 0, err
    assert doc["commit_id"] == f"g{env.up.pin[:9]}"
    assert text.splitlines()[:6] == [
        f"oracle vllm at {env.up.pin[:10]}: {env.env}",
        f"  runtime version:      {runtime}",
        f"  distribution version: {runtime}.precompiled (1 installed)",
        f"  commit id:            g{env.up.pin[:9]}",
        f"  FlashInfer:           {FLASHINFER}",
        "  Torch:                absent"]
    assert text.splitlines()[-1] == "  build mode:           precompiled"


def test_probe_from_inside_the_source_checkout(env: World, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    """cwd, PYTHONPATH and an active venv all point at the checkout: the env still wins."""
    monkeypatch.chdir(env.up.path)
    monkeypatch.setenv("PYTHONPATH", str(env.up.path))
    monkeypatch.setenv("VIRTUAL_ENV", str(env.base))
    # Positive control: without the tool's isolation the checkout shadows the install.
    naive = subprocess.run([str(env.env / "bin" / "python"), "-c",
                            "import vllm; print(vllm.__file__)"], capture_output=True,
                           text=True, check=True)
    assert naive.stdout.strip() == str(env.up.path / "vllm" / "__init__.py")
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "probe", "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["module_file"] == str(site_packages(env.env) / "vllm" / "__init__.py")
    assert str(env.up.path) not in doc["sys_path"]
    assert verify_lines(env) == []


def test_probe_without_an_env(env: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                              ) -> None:
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "empty"))
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "probe"])
    assert rc == 3 and "no oracle environment for vllm" in err and "oracle build" in err


# -- verify ----------------------------------------------------------------------------------


def test_verify_good_oracle_records_the_measurement(env: World, port_copy: Path) -> None:
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 0, err
    runtime = env.up.runtime(env.up.pin, 2)
    assert out == (f"oracle vllm at {env.up.pin[:10]} verified: runtime {runtime}, distribution "
                   f"{runtime}.precompiled, commit id g{env.up.pin[:9]}, FlashInfer {FLASHINFER}, "
                   "Torch absent, build mode precompiled, binaries "
                   f"{env.up.wheel.name} (version {runtime}, commit g{env.up.pin[:9]})\n")
    doc = json.loads((port_copy / f".agents/sync/gates/{env.up.pin[:7]}.json").read_text())
    gate = doc["gates"]["oracle:vllm"]
    assert gate["status"] == "PASS"
    assert gate["oracle"]["runtime_version"] == runtime
    assert gate["oracle"]["build_mode"] == "precompiled"
    assert gate["oracle"]["commit_id"] == f"g{env.up.pin[:9]}"
    assert gate["oracle"]["binaries"] == (f"{env.up.wheel.name} (version {runtime}, commit "
                                          f"g{env.up.pin[:9]})")


def test_a_verify_that_finds_the_same_oracle_leaves_its_gate_record_as_it_was(
        env: World, port_copy: Path) -> None:
    """The gate record is committed with the cycle: verifying the same oracle again (the
    oracle session, after an advance) must not rewrite it only to re-date its entry."""
    record = port_copy / f".agents/sync/gates/{env.up.pin[:7]}.json"

    def verify(code: int = 0) -> dict[str, Any]:
        rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
        assert rc == code, err + out
        gate: dict[str, Any] = json.loads(record.read_text())["gates"]["oracle:vllm"]
        return gate

    def dated(when: str) -> None:
        doc = json.loads(record.read_text())
        gate = doc["gates"]["oracle:vllm"]
        gate.update(time=when, duration_s=9.0)
        gate["oracle"]["time"] = when
        record.write_text(json.dumps(doc, indent=2) + "\n")

    verify()
    dated("2000-01-01T00:00:00Z")  # what a rewrite would change
    before, stamp = record.read_bytes(), record.stat().st_mtime_ns
    assert verify()["time"] == "2000-01-01T00:00:00Z"
    assert (record.read_bytes(), record.stat().st_mtime_ns) == (before, stamp)
    # One dated in the future is refused by the advance: running verify again re-dates it.
    dated("2999-01-01T00:00:00Z")
    assert verify()["time"] < "2999"
    # Another outcome is recorded.
    rewrite_pin(port_copy, env.up, flashinfer="0.6.16")
    assert verify(5)["status"] == "FAIL"


@pytest.mark.parametrize(("change", "expected"), [
    ({"runtime": "RT9", "dist": "RT9.precompiled"}, [
        "runtime version: oracle reports 'RT2', the pin block (.agents/upstream-sync.md) "
        "says 'RT9'",
        "distribution version: oracle reports 'RT2.precompiled', the pin block "
        "(.agents/upstream-sync.md) says 'RT9.precompiled'"]),
    ({"flashinfer": "0.6.16"}, [
        f"flashinfer: oracle reports '{FLASHINFER}', the pin block (.agents/upstream-sync.md) "
        "says '0.6.16'"]),
])
def test_each_string_mismatch(env: World, port_copy: Path, change: dict[str, str],
                              expected: list[str]) -> None:
    runtime = {"RT2": env.up.runtime(env.up.pin, 2), "RT9": env.up.runtime(env.up.pin, 9)}

    def real(s: str) -> str:
        for k, v in runtime.items():
            s = s.replace(k, v)
        return s

    rewrite_pin(port_copy, env.up, **{k: real(v) for k, v in change.items()})
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 5
    assert out.splitlines() == [f"mismatch: {real(e)}" for e in expected]
    assert f"refused ({len(expected)} mismatch" in err
    gates_doc = json.loads((port_copy / f".agents/sync/gates/{env.up.pin[:7]}.json").read_text())
    assert gates_doc["gates"]["oracle:vllm"]["status"] == "FAIL"


@pytest.mark.parametrize("action", [["verify"], ["build", "--rebuild"], ["build", "--if-missing"]])
def test_config_and_pin_suffix_disagree_refused_before_building(
        env: World, port_copy: Path, action: list[str]) -> None:
    runtime = env.up.runtime(env.up.pin, 2)
    rewrite_pin(port_copy, env.up, dist=runtime + ".empty")
    before = (env.env / oracle.MARKER).read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", *action])
    assert (rc, out) == (2, "")
    assert err.splitlines() == [
        "upstream-sync: error: [oracles.vllm] build_mode in .agents/upstream-sync.toml is "
        "'precompiled' but the pin block's distribution version (.empty) says build mode "
        "empty: building would measure an oracle the pin does not describe — set build_mode = "
        "\"empty\""]
    assert (env.env / oracle.MARKER).read_bytes() == before  # nothing was torn down


def test_existing_env_in_another_mode_refused_before_building(env: World, port_copy: Path,
                                                              tmp_path: Path) -> None:
    """`build --if-missing` keeps an existing env only when it was built in the pin's mode."""
    home = other_home(env, tmp_path)
    marker = home / env.env.name / oracle.MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "build_mode": "empty"}))
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "build", "--if-missing"])
    assert rc == 2 and f"{home / env.env.name} was built in mode 'empty', but [oracles.vllm] " \
        "build_mode in .agents/upstream-sync.toml says 'precompiled'" in err


def test_build_mode_label_must_match_the_suffix(env: World, tmp_path: Path) -> None:
    home = other_home(env, tmp_path)
    marker = home / env.env.name / oracle.MARKER
    doc = json.loads(marker.read_text())
    marker.write_text(json.dumps({**doc, "build_mode": "source"}))
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    assert verify_lines(env) == [
        "build mode: built in mode 'source', but [oracles.vllm] build_mode in "
        ".agents/upstream-sync.toml says 'precompiled'"]


def test_env_built_for_another_commit(env: World, tmp_path: Path, port_copy: Path) -> None:
    """The pin moved to `middle` but the environment there is a copy of the pin's build."""
    home = other_home(env, tmp_path, commit=env.up.middle)
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    runtime = env.up.runtime(env.up.middle, 1)
    rewrite_pin(port_copy, env.up, commit=env.up.middle, runtime=runtime,
                dist=runtime + ".precompiled")
    lines = verify_lines(env, Port(port_copy, config.load(port_copy)))
    pin_runtime = env.up.runtime(env.up.pin, 2)
    assert lines[0] == f"build: built at {env.up.pin[:10]}, expected {env.up.middle[:10]}"
    assert lines[1] == (f"commit: runtime version '{pin_runtime}' names g{env.up.pin[:9]}, not "
                        f"{env.up.middle[:10]}: built at another commit")
    assert [line.split(":")[0] for line in lines[2:]] == ["commit id", "tree", "runtime version",
                                                         "distribution version"]


def test_shallow_clone_build_with_a_copied_record(env: World, tmp_path: Path) -> None:
    """A shallow clone of another commit, given the genuine build record: refused, the
    refusal naming the shallow build first."""
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "side",
                    f"file://{env.up.path}", str(shallow)], check=True)
    home = tmp_path / "venvs"
    bad = home / env.env.name
    hand_install(bad, shallow, extra_env={"VLLM_USE_PRECOMPILED": "1",
                                          "VLLM_PRECOMPILED_WHEEL_LOCATION": str(env.up.wheel)})
    shutil.copy(env.env / oracle.MARKER, bad / oracle.MARKER)
    add_distribution(site_packages(bad), "flashinfer-python", FLASHINFER)
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    shallow_runtime = f"0.1.dev1+g{env.up.middle[:9]}"
    p = port_of(env)
    v = oracle_verify.verify(p, p.preferences(), "vllm")
    assert {m.kind for m in v.mismatches} == {"shallow", "foreign", "tree", "copied-record", None}
    assert f"commit: runtime version '{shallow_runtime}' is a shallow clone's (0.1.devN: " \
        "setuptools-scm saw no tag)" in [str(m) for m in v.mismatches]
    assert v.verdict.startswith("a shallow-clone build: commit: ")
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert rc == 5 and err.startswith(f"upstream-sync: error: oracle vllm at {env.up.pin[:10]} "
                                      f"refused ({len(v.mismatches)} mismatches): a "
                                      f"shallow-clone build: commit: runtime version "
                                      f"'{shallow_runtime}'")


def test_editable_install_from_the_reference_checkout(env: World, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home = other_home(env, tmp_path)
    src = tmp_path / "reference"
    subprocess.run(["git", "clone", "-q", str(env.up.path), str(src)], check=True)
    hand_install(home / env.env.name, src, editable=True,
                 extra_env={"VLLM_USE_PRECOMPILED": "1",
                            "VLLM_PRECOMPILED_WHEEL_LOCATION": str(env.up.wheel)})
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    monkeypatch.setenv("VLLM_SOURCE", str(src))
    module = src / "vllm" / "__init__.py"
    assert verify_lines(env)[:3] == [
        f"module file: {module} is not under the env {home / env.env.name}",
        f"module file: {module} is under $VLLM_SOURCE (vllm source checkout) ({src})",
        "editable: vllm is installed editable: the oracle must be a non-editable install",
    ]


def test_two_distributions_on_the_path(env: World, tmp_path: Path) -> None:
    home = other_home(env, tmp_path)
    extra = tmp_path / "extra"
    add_distribution(extra, "vllm", "0.0.1")
    (site_packages(home / env.env.name) / "extra.pth").write_text(f"{extra}\n")
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    lines = verify_lines(env)
    assert len(lines) == 1
    assert lines[0].startswith("distributions: 2 distributions named vllm on the path, "
                               "expected exactly one (")
    assert "0.0.1 at " + str(extra) in lines[0]


def test_flashinfer_absent_and_torch_required(env: World, tmp_path: Path) -> None:
    home = other_home(env, tmp_path)
    for d in site_packages(home / env.env.name).glob("flashinfer_python-*"):
        shutil.rmtree(d)
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    strict = config.OracleConfig("vllm", build_env=(("VLLM_USE_PRECOMPILED", "1"),),
                                 build_mode="precompiled", require_torch=True)
    assert verify_lines(env, port_of(env, oracle_configs=(strict,))) == [
        "flashinfer: FlashInfer is not installed (a precompiled build has it)",
        "torch: Torch is not installed (config requires it)",
    ]
    relaxed = replace(strict, require_flashinfer=False, require_torch=False)
    assert verify_lines(env, port_of(env, oracle_configs=(relaxed,))) == []


def test_missing_build_record_and_broken_import(env: World, tmp_path: Path) -> None:
    home = other_home(env, tmp_path)
    (home / env.env.name / oracle.MARKER).unlink()
    (site_packages(home / env.env.name) / "vllm" / "ops.py").write_text("raise OSError('x')\n")
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    lines = verify_lines(env)
    assert lines[0] == ("build: upstream-sync-oracle.json is missing: not built (or adopted) by "
                        "upstream-sync, or the build did not finish")
    assert lines[1] == "module: import vllm failed: OSError: x"


def test_malformed_build_record(env: World, tmp_path: Path) -> None:
    home = other_home(env, tmp_path)
    (home / env.env.name / oracle.MARKER).write_text("{")
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    rc, _, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert rc == 4 and oracle.MARKER in err


def test_installed_files_closed_to_this_user_are_refused_not_counted_as_modified(
        env: World, tmp_path: Path) -> None:
    """A mode-0 RECORD or module file of the installed vllm crashed probe, verify and adopt
    with 'internal error: PermissionError', and a mode-0 INSTALLER was 'modified after the
    install' (rc 5, 'rebuild it'); each is a refusal (rc 3) naming the file."""
    need_setpriv()
    home = other_home(env, tmp_path)
    copy = home / env.env.name
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    dist = next(site_packages(copy).glob("vllm-*.dist-info"))
    every: list[tuple[str, ...]] = [("oracle", "probe"), ("oracle", "verify"),
                                    ("oracle", "adopt", str(copy))]
    cases = [(dist / "RECORD", every), (site_packages(copy) / "vllm" / "ops.py", every[1:2]),
             (dist / "INSTALLER", every[1:2])]
    for closed, argvs in cases:
        refusal = (f"oracle environment {copy} cannot be read: {closed} (Permission denied) — "
                   "give this user access to it, or run as the user who made it")
        results = run_closed(closed, closed, env.port, argvs)
        assert [(r.returncode, r.stderr) for r in results] == [
            (3, f"upstream-sync: error: {refusal}\n")] * len(argvs), closed
    assert run_cli(["--port", str(env.port), "oracle", "verify"])[0] == 0  # nothing changed


def test_an_installed_script_closed_to_this_user_is_refused_not_passed(
        env: World, tmp_path: Path) -> None:
    """A mode-0 bin/vllm-add was skipped by the check for scripts that run another
    environment's Python, so verify and adopt passed an environment whose script could be a
    copy's: each refuses it (rc 3) naming the script, as other unreadable installed files."""
    need_setpriv()
    home = other_home(env, tmp_path)
    copy = home / env.env.name
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    script = copy / "bin" / "vllm-add"
    assert script.is_file()
    refusal = (f"oracle environment {copy} cannot be read: {script} (Permission denied) — "
               "give this user access to it, or run as the user who made it")
    argvs: list[tuple[str, ...]] = [("oracle", "verify"), ("oracle", "adopt", str(copy))]
    results = run_closed(script, script, env.port, argvs)
    assert [(r.returncode, r.stderr) for r in results] == [
        (3, f"upstream-sync: error: {refusal}\n")] * 2
    assert run_cli(["--port", str(env.port), "oracle", "verify"])[0] == 0  # nothing changed


def test_commit_rule_messages() -> None:
    sha = "c1edac23945dac33a317da7651db4e8c274f314e"
    assert oracle_verify.commit_rule("0.2.1rc1.dev2+gc1edac239", sha) is None
    # The whole local segment: a build suffix or a dirty date in the runtime is refused.
    assert "build-mode suffix .precompiled" in (
        oracle_verify.commit_rule("0.2.1rc1.dev2+gc1edac239.precompiled", sha) or "")
    assert "uncommitted changes" in (
        oracle_verify.commit_rule("0.2.1rc1.dev2+gc1edac239.d20261201", sha) or "")
    assert "not g<7..40 hex>" in (
        oracle_verify.commit_rule("0.2.1rc1.dev2+gc1edac239x", sha) or "")
    assert "no +g<sha>" in (oracle_verify.commit_rule("0.26.0", sha) or "")
    assert "not g<7..40 hex>" in (oracle_verify.commit_rule("0.26.0+cu130", sha) or "")
    assert "not a valid version" in (oracle_verify.commit_rule("banana", sha) or "")
    assert "shallow clone" in (oracle_verify.commit_rule("0.1.dev1+gc1edac239", sha) or "")
    assert "built at another commit" in (
        oracle_verify.commit_rule("0.2.1rc1.dev2+gdeadbeef", sha) or "")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_commit_rule_never_raises(text: str) -> None:
    result = oracle_verify.commit_rule(text, "c1edac23945dac33a317da7651db4e8c274f314e")
    assert result is None or isinstance(result, str)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=20)
GOOD_MARKER = {"schema": 2, "oracle": "vllm", "commit": "a" * 40, "build_mode": "source",
               "build_env": {}, "installer": "uv", "python": "/p", "source": "/s", "host": "h",
               "built_at": "t", "origin": "built", "log": None, "record_sha256": "r",
               "not_in_tree": ["vllm/_version.py"], "binaries": None, "wheel": None,
               "wheel_sha256": None, "constraints": None, "constraints_sha256": None,
               "freeze_sha256": None, "inputs": {}}


def test_build_record_round_trip_and_schema_1(tmp_path: Path) -> None:
    (tmp_path / oracle.MARKER).write_text(json.dumps(GOOD_MARKER))
    record = oracle.read_marker(tmp_path)
    assert record is not None and record.as_doc() == GOOD_MARKER
    (tmp_path / oracle.MARKER).write_text(json.dumps({**GOOD_MARKER, "schema": 1}))
    with pytest.raises(MalformedRecord, match=r"older upstream-sync \(schema 1\), not bound "
                       r"to the installed files — rebuild the oracle, or measure and record it "
                       r"with 'upstream-sync oracle adopt ENV'"):
        oracle.read_marker(tmp_path)
    (tmp_path / oracle.MARKER).write_text(json.dumps({**GOOD_MARKER, "not_in_tree": [1]}))
    with pytest.raises(MalformedRecord, match="not_in_tree must be a list of strings"):
        oracle.read_marker(tmp_path)


def _mutations(good: Mapping[str, object]) -> st.SearchStrategy[object]:
    return st.builds(lambda key, value: {**good, key: value},
                     st.sampled_from(sorted(good)), JSON) | JSON


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | _mutations(GOOD_MARKER).map(lambda d: json.dumps(d).encode()))
def test_build_record_fuzz(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    env = tmp_path_factory.getbasetemp() / "marker-fuzz"
    env.mkdir(exist_ok=True)
    (env / oracle.MARKER).write_bytes(data)
    with contextlib.suppress(SyncError):
        oracle.read_marker(env)


_RECORD_ROW = st.lists(st.sampled_from(["vllm/a.py", "../../../bin/vllm", "sha256=x", "", "\0",
                                        "a" * 140_000, "\"", "\r"]), max_size=3)


@settings(max_examples=50, deadline=None)
@given(st.lists(_RECORD_ROW.map("".join), max_size=3),
       st.sampled_from([b"__version__ = '1'", b"x = " + b"-" * 200_000 + b"1",
                        b"x" + b".a" * 100_000]))
def test_a_damaged_record_or_version_file_is_read_or_refused_typed(
        tmp_path_factory: pytest.TempPathFactory, rows: list[str], version: bytes) -> None:
    """A RECORD field over csv's limit raised _csv.Error, a script named with a NUL a
    ValueError, a `_version.py` nested too deep for the parser MemoryError or RecursionError:
    each is refused typed, or read (a script with a NUL is no file: it is counted gone)."""
    site = tmp_path_factory.getbasetemp() / "record-fuzz"
    (site / "vllm-1.0.dist-info").mkdir(parents=True, exist_ok=True)
    (site / "vllm").mkdir(exist_ok=True)
    (site / "vllm-1.0.dist-info" / "RECORD").write_text(
        "".join(f"{row},sha256=x,1\n" for row in rows))
    (site / "vllm" / "_version.py").write_bytes(version)
    try:
        inst = installed.read(site / "vllm-1.0.dist-info", "vllm")
    except SyncError as exc:
        assert isinstance(exc, EnvironmentUnresolved) and "RECORD" in str(exc)
        return
    if not any(set(r) & set('"\r') for r in rows):  # a quote or CR re-splits the rows
        assert all(r in inst.changed for r in rows if "\0" in r)


# -- omni ------------------------------------------------------------------------------------


def test_omni_oracle_verifies_and_proves_isolation(env: World) -> None:
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify", "--oracle",
                            "vllm-omni"])
    assert rc == 0, err + out
    runtime = env.omni_up.runtime(env.omni_up.pin, 2)
    assert out.startswith(f"oracle vllm-omni at {env.omni_up.pin[:10]} verified: runtime "
                          f"{runtime}, distribution {runtime}, ")
    assert out.rstrip().endswith("against vLLM absent")
    assert env.omni_env.is_dir() and env.omni_env != env.env
    p = port_of(env)
    proof = require_proof(p, env.omni_up.pin)
    assert {c.op: c.status for c in proof.checks} == {"build": "PASS", "verify": "PASS"}
    assert proof.core_envs == (str(env.env),)
    assert all(c.core_before == c.core_after == {str(env.env): c.core_after[str(env.env)]}
               and isolation.ABSENT not in c.core_after.values() for c in proof.checks)
    # The omni verification records no core gate.
    gates_file = env.port / f".agents/sync/gates/{env.up.pin[:7]}.json"
    assert not gates_file.exists() or "vllm-omni" not in gates_file.read_text()


def test_an_omni_verify_that_finds_the_same_leaves_its_isolation_record_as_it_was(
        env: World, port_copy: Path) -> None:
    """The isolation record is committed: an omni verify run again that measures the same
    check must not rewrite it only to re-date the check."""
    rec = port_copy / f".agents/sync/isolation/vllm-omni-{env.omni_up.pin[:10]}.json"

    def verify() -> dict[str, Any]:
        rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                                "vllm-omni"])
        assert rc == 0, err + out
        check: dict[str, Any] = json.loads(rec.read_text())["checks"]["verify"]
        return check

    verify()
    doc = json.loads(rec.read_text())
    doc["checks"]["verify"]["time"] = "2000-01-01T00:00:00Z"  # what a rewrite would change
    rec.write_text(json.dumps(doc, indent=2) + "\n")
    before, stamp = rec.read_bytes(), rec.stat().st_mtime_ns
    assert verify()["time"] == "2000-01-01T00:00:00Z"
    assert (rec.read_bytes(), rec.stat().st_mtime_ns) == (before, stamp)
    # A check that differs in more than its time is recorded.
    doc["checks"]["verify"]["host"] = "elsewhere"
    rec.write_text(json.dumps(doc, indent=2) + "\n")
    assert verify()["host"] == socket.gethostname()


OMNI_DUMP = ("import os, sys, vllm_omni; d = os.path.join(sys.argv[1], 'omni-case'); "
             "os.makedirs(d); open(os.path.join(d, 'v.txt'), 'w').write(vllm_omni.__version__)")


def test_omni_golden_carries_both_commits(env: World, port_copy: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_GATE_HOSTS", socket.gethostname())
    p = replace(Port(port_copy, config.load(port_copy)), config=replace(
        config.load(port_copy), golden_scripts=(("{python}", "-c", OMNI_DUMP, "{out}"),),
        golden_needs_gpu=False))
    outcome = golden.run(p, p.preferences(), golden.Request(oracle_id="vllm-omni"))
    g = outcome.gate
    assert (g.name, g.status) == ("golden:vllm-omni", "PASS")
    assert g.oracle is not None and g.oracle["commit"] == env.omni_up.pin
    assert "vllm_commit" in g.oracle  # the vLLM it ran against (none installed here)
    manifest = json.loads((port_copy / "goldens/omni-case/manifest.json").read_text())
    assert manifest["oracle"]["oracle"] == "vllm-omni"
    assert (port_copy / "goldens/omni-case/v.txt").read_text() == \
        env.omni_up.runtime(env.omni_up.pin, 2)
    proof = require_proof(p, env.omni_up.pin)
    assert {c.op: c.status for c in proof.checks}["golden"] == "PASS"
    # Pending elsewhere, with a handoff naming the omni oracle.
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    p = replace(p)  # a new run: the port's records (preferences included) are read afresh
    pending = golden.run(p, p.preferences(), golden.Request(oracle_id="vllm-omni")).gate
    assert pending.handoff == (f"upstream-sync golden --oracle vllm-omni --target {env.up.pin} "
                               "--strict")


def test_omni_pin_label_mismatch(env: World, port_copy: Path) -> None:
    (port_copy / ".agents/oracles/vllm-omni.md").write_text(
        oracle_doc("vllm-omni", "omni", env.omni_up.pin, "0.1.1"))
    p = Port(port_copy, config.load(port_copy))
    v = oracle_verify.verify(p, p.preferences(), "vllm-omni")
    public = env.omni_up.runtime(env.omni_up.pin, 2).split("+")[0]
    assert [str(m) for m in v.mismatches] == [
        f"pin label: oracle reports '{public}', .agents/oracles/vllm-omni.md (pin_label) says "
        "'0.1.1'"]


def test_omni_unpinned_refused(env: World, port_copy: Path) -> None:
    text = oracle_doc("vllm-omni", "omni", "UNPINNED", "none").replace("2026-01-01", "-")
    (port_copy / ".agents/oracles/vllm-omni.md").write_text(text)
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "probe", "--oracle",
                          "vllm-omni"])
    assert rc == 5 and "UNPINNED" in err


def test_an_unpinned_omni_oracle_is_measured_at_a_commit_and_advanced(env: World,
                                                                      port_copy: Path) -> None:
    text = oracle_doc("vllm-omni", "omni", "UNPINNED", "none").replace("2026-01-01", "-")
    (port_copy / ".agents/oracles/vllm-omni.md").write_text(text)
    pin = env.omni_up.pin
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                            "vllm-omni", "--commit", pin, "--shape-only"])
    assert rc == 0, err
    assert out.startswith(f"oracle vllm-omni at {pin[:10]} verified (shape only")
    # Its pin is what stays refused: there is none.
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                          "vllm-omni"])
    assert rc == 5 and "UNPINNED" in err
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", pin])
    assert rc == 0, err
    assert out.startswith(f"advanced vllm-omni UNPINNED → {pin[:10]}")
    assert f"pin = {pin}" in (port_copy / ".agents/oracles/vllm-omni.md").read_text()


def _advised(err: str) -> list[list[str]]:
    """The upstream-sync commands an error's advice quotes, as argv."""
    return [c.split()[1:] for c in err.split("'")[1::2] if c.startswith("upstream-sync ")]


def _omni_pinned_before_middle(env: World, port_copy: Path) -> None:
    """The port's omni pin moved back to the released commit, so that the middle one (built
    by the tests that advance to it) is ahead of it: what an advance moves to."""
    (port_copy / ".agents/oracles/vllm-omni.md").write_text(
        oracle_doc("vllm-omni", "omni", env.omni_up.released, env.omni_up.tag))


def test_advance_omni_advice_is_commands_that_run(env: World, tmp_path: Path,
                                                  port_copy: Path) -> None:
    os.environ["SYNC_ORACLE_HOME"] = str(other_home(env, tmp_path))
    _omni_pinned_before_middle(env, port_copy)
    commit = env.omni_up.middle  # not the omni pin: what an advance moves to
    rc, _, err = run_cli(["--port", str(port_copy), "advance-omni", commit])
    assert rc == 6 and "is not proven" in err
    for argv in _advised(err):  # build, then verify
        rc, out, err2 = run_cli(["--port", str(port_copy), *argv])
        assert rc == 0, err2
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit])
    assert rc == 0, err
    assert "isolation proven (build, verify)" in out


def test_omni_build_that_modifies_the_core_env_is_detected(env: World, tmp_path: Path,
                                                          port_copy: Path) -> None:
    home = other_home(env, tmp_path)
    record = next(site_packages(home / env.env.name).glob("vllm-*.dist-info")) / "RECORD"
    (port_copy / ".agents/upstream-sync.toml").write_text(
        CONFIG + f'\n[oracles.vllm-omni]\nbuild_env = {{ FAKE_UPSTREAM_TOUCH = "{record}" }}\n')
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build", "--oracle",
                            "vllm-omni"])
    assert rc == 5
    assert out.splitlines()[1:] == [
        f"isolation: core environment {home / env.env.name}: lib/python3.11/site-packages/"
        f"{record.parent.name} RECORD changed"]
    assert "core sync cycle" in err
    p = Port(port_copy, config.load(port_copy))
    proof = isolation.load(p, "vllm-omni", env.omni_up.pin)
    assert proof is not None and [c.op for c in proof.failures] == ["build"]
    with pytest.raises(BlockedCycle, match="treat it as a core sync cycle"):
        require_proof(p, env.omni_up.pin)
    # Sticky: a clean verify afterwards does not clear the failed build.
    oracle_verify.verify(p, p.preferences(), "vllm-omni")
    with pytest.raises(BlockedCycle):
        require_proof(p, env.omni_up.pin)


def _open_cycle(env: World, tmp_path: Path, port_copy: Path) -> tuple[Path, Path]:
    """A home holding the core oracle at the pin and at an open cycle's target (the one the
    advance pins next); returns the home and the target's environment."""
    home = other_home(env, tmp_path)
    target_env = copy_env(env.env, home / f"vllm-{env.up.middle[:10]}")
    cycle.save(Port(port_copy, config.load(port_copy)), env.up.pin, env.up.middle, "main")
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    return home, target_env


def _touching(port_copy: Path, target: Path) -> None:
    (port_copy / ".agents/upstream-sync.toml").write_text(
        CONFIG + f'\n[oracles.vllm-omni]\nbuild_env = {{ FAKE_UPSTREAM_TOUCH = "{target}" }}\n')


def test_an_omni_build_that_modifies_the_cycle_targets_core_env_is_detected(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    """The core oracle at the cycle's target is the one the advance pins next: an omni build
    that writes into it fails isolation, naming it, as one writing into the pin's does."""
    home, target_env = _open_cycle(env, tmp_path, port_copy)
    record = next(site_packages(target_env).glob("vllm-*.dist-info")) / "RECORD"
    _touching(port_copy, record)
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build", "--oracle",
                            "vllm-omni"])
    assert rc == 5, err + out
    assert out.splitlines()[1:] == [
        f"isolation: core environment {target_env}: lib/python3.11/site-packages/"
        f"{record.parent.name} RECORD changed"]
    p = Port(port_copy, config.load(port_copy))
    proof = isolation.load(p, "vllm-omni", env.omni_up.pin)
    assert proof is not None and [c.op for c in proof.failures] == ["build"]
    assert list(proof.failures[0].core_after) == [str(home / env.env.name), str(target_env)]
    with pytest.raises(BlockedCycle, match=f"core environment {target_env}: "):
        require_proof(p, env.omni_up.pin)
    oracle_verify.verify(p, p.preferences(), "vllm-omni")  # sticky
    with pytest.raises(BlockedCycle, match="treat it as a core sync cycle"):
        require_proof(p, env.omni_up.pin)


def test_the_cycle_targets_core_env_changed_since_the_checks_is_named(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    home, target_env = _open_cycle(env, tmp_path, port_copy)
    for argv in (["oracle", "build"], ["oracle", "verify"]):
        rc, out, err = run_cli(["--port", str(port_copy), *argv, "--oracle", "vllm-omni"])
        assert rc == 0, err + out
    p = Port(port_copy, config.load(port_copy))
    proof = require_proof(p, env.omni_up.pin)
    assert proof.core_envs == (str(home / env.env.name), str(target_env))
    add_distribution(site_packages(target_env), "intruder", "1.0")
    with pytest.raises(BlockedCycle, match=f"the core environment {target_env} is not what "
                       "its build check left"):
        require_proof(p, env.omni_up.pin)


def test_a_proof_naming_one_core_environment_is_still_read(env: World, port_copy: Path
                                                          ) -> None:
    """Schema 1 named one core environment for the whole proof: it still proves."""
    digest = isolation.fingerprint(env.env).digest
    check = {**GOOD_CHECK, "core_before": digest, "core_after": digest}
    doc = {**GOOD_PROOF, "core_env": str(env.env), "checks": {"build": check, "verify": check}}
    p = Port(port_copy, config.load(port_copy))
    isolation.path(p, "vllm-omni", "a" * 40).write_text(json.dumps(doc))
    proof = require_proof(p, "a" * 40)
    assert proof.core_envs == (str(env.env),)
    assert [c.core_after for c in proof.checks] == [{str(env.env): digest}] * 2


def test_omni_env_pointing_into_the_core_env_is_detected(env: World, tmp_path: Path,
                                                         port_copy: Path) -> None:
    home = other_home(env, tmp_path)
    omni = copy_env(env.omni_env, home / env.omni_env.name)
    core_site = site_packages(home / env.env.name)
    (site_packages(omni) / "core.pth").write_text(f"{core_site}\n")
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    p = Port(port_copy, config.load(port_copy))
    v = oracle_verify.verify(p, p.preferences(), "vllm-omni")
    lines = [str(m) for m in v.mismatches]
    label = f"the core environment {env.env.name}"
    assert f"isolation: lib/python3.11/site-packages/core.pth points into {label}: " \
           f"{core_site}" in lines
    assert f"isolation: sys.path entry points into {label}: {core_site}" in lines
    with pytest.raises(BlockedCycle, match="failed during verify"):
        require_proof(p, env.omni_up.pin)


def test_omni_needs_the_core_env(env: World, tmp_path: Path, port_copy: Path) -> None:
    home = tmp_path / "venvs"
    copy_env(env.omni_env, home / env.omni_env.name)
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                          "vllm-omni"])
    assert rc == 3 and "build the core oracle first" in err


# -- isolation units -------------------------------------------------------------------------


def test_fingerprint_and_compare(tmp_path: Path) -> None:
    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    assert isolation.fingerprint(tmp_path / "nope").digest == isolation.ABSENT
    d = add_distribution(site, "vllm", "1.0")
    before = isolation.fingerprint(env)
    assert isolation.compare(before, isolation.fingerprint(env)) == []
    (d / "RECORD").write_text("changed\n")
    add_distribution(site, "intruder", "2.0")
    (site / "x.pth").write_text("/tmp\n")
    after = isolation.fingerprint(env)
    assert before.digest != after.digest
    where = f"core environment {env}"
    assert isolation.compare(before, after) == [
        f"{where}: lib/python3.11/site-packages/intruder-2.0.dist-info was added (version 2.0)",
        f"{where}: lib/python3.11/site-packages/vllm-1.0.dist-info RECORD changed",
        f"{where}: lib/python3.11/site-packages/x.pth was added",
    ]


def test_scan_finds_links_shebangs_and_direct_urls(tmp_path: Path) -> None:
    core = tmp_path / "core"
    core.mkdir()
    env = tmp_path / "omni"
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "tool").write_text(f"#!{core}/bin/python\nprint()\n")
    (env / "link").symlink_to(core)
    d = add_distribution(site, "x", "1")
    (d / "direct_url.json").write_text(json.dumps({"url": f"file://{core}/src"}))
    (env / "pyvenv.cfg").write_text(f"home = {core}/bin\n")
    lines = isolation.scan(env, [("core", core)])
    assert sorted(line.split(" points")[0] for line in lines) == sorted([
        "pyvenv.cfg home", "symlink link", "shebang of bin/tool",
        "lib/python3.11/site-packages/x-1.dist-info/direct_url.json"])


GOOD_CHECK = {"status": "PASS", "time": "t", "host": "h", "core_before": "x", "core_after": "x",
              "problems": []}
GOOD_PROOF = {"schema": 1, "oracle": "vllm-omni", "commit": "a" * 40, "core_env": "/e",
              "checks": {"build": GOOD_CHECK}}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | _mutations(GOOD_PROOF).map(json.dumps)
       | _mutations(GOOD_CHECK).map(lambda c: json.dumps({**GOOD_PROOF, "checks": {"b": c}})))
def test_isolation_record_fuzz(text: str) -> None:
    with contextlib.suppress(MalformedRecord):
        isolation.parse(text, rel="p.json")


def test_require_without_proof(tmp_path: Path) -> None:
    (tmp_path / ".agents").mkdir()
    p = Port(tmp_path, config.Config())
    with pytest.raises(BlockedCycle, match="is not proven"):
        isolation.require(p, "vllm-omni", "a" * 40, core_env=tmp_path / "venvs/vllm-x")


def test_a_failed_golden_check_is_named_with_its_run_and_a_gone_environment_is_not_rebuilt(
        tmp_path: Path) -> None:
    """The way out of a failed check names what records each failed check again (a golden,
    its run), and rebuilds only the core environments still as the failure left them: one
    since removed holds nothing it wrote."""
    (tmp_path / ".agents/sync/isolation").mkdir(parents=True)
    p = Port(tmp_path, config.Config())
    kept, gone = tmp_path / "venvs/vllm-aaaaaaaaaa", tmp_path / "venvs/vllm-bbbbbbbbbb"
    kept.mkdir(parents=True)
    check = {**GOOD_CHECK, "status": "FAIL", "time": "2026-01-01T00:00:00Z",
             "core_before": {str(kept): "x", str(gone): "x"},
             "core_after": {str(kept): "y", str(gone): "x"}, "problems": ["it wrote"]}
    commit = "c" * 40
    isolation.path(p, "vllm-omni", commit).write_text(json.dumps(
        {"schema": 2, "oracle": "vllm-omni", "commit": commit, "checks": {"golden": check}}))
    with pytest.raises(BlockedCycle) as raised:
        isolation.require(p, "vllm-omni", commit, core_env=kept)
    assert raised.value.fix == (
        "treat it as a core sync cycle: rebuild the core oracle ('upstream-sync oracle build "
        "--oracle vllm --commit aaaaaaaaaa --rebuild'), regenerate the goldens and re-verify "
        f"it, then run 'upstream-sync oracle build --oracle vllm-omni --commit {commit} "
        f"--rebuild', 'upstream-sync oracle verify --oracle vllm-omni --commit {commit} "
        "--shape-only' and 'upstream-sync golden --oracle vllm-omni'")


def test_ids_and_commit_specs(env: World) -> None:
    p = port_of(env)
    prefs = p.preferences()
    with pytest.raises(UsageError):
        oracle.check_id("../x")
    assert oracle.resolve_commit(p, prefs, "vllm", "side") == env.up.middle
    assert oracle.resolve_commit(p, prefs, "vllm", env.up.middle[:8]) == env.up.middle
    with pytest.raises(UsageError, match="not a commit"):
        oracle.resolve_commit(p, prefs, "vllm", "nope")
    with pytest.raises(UsageError, match="follows its own pin"):
        oracle.resolve_commit(p, prefs, "vllm-omni", "target")
    with pytest.raises(UsageError, match="no sync cycle"):
        oracle.resolve_commit(p, prefs, "vllm", "target")
    with pytest.raises(EnvironmentUnresolved):
        oracle_build.build(p, prefs, "vllm", "f" * 40)


def test_omni_identity_names_the_vllm_it_ran_against() -> None:
    p = oracle_probe.Probe(
        oracle="vllm-omni", commit="b" * 40, env="/e", python="/e/bin/python",
        distribution="vllm-omni", runtime_version="0.1.0.dev2+gbbbbbbbbb",
        distribution_version="0.1.0.dev2+gbbbbbbbbb", distributions=(), module_file=None,
        import_error=None, sys_prefix="/e", sys_path=(), isolated=True,
        flashinfer_version=None, torch_version="2.13.0",
        vllm_version="0.2.1rc1.dev2+gc1edac239.precompiled", build=None)
    ident = oracle_verify.identity(p)
    assert (ident["commit"], ident["vllm_commit"], ident["vllm_version"]) == (
        "b" * 40, "c1edac239", "0.2.1rc1.dev2+gc1edac239.precompiled")
    core = oracle_verify.identity(replace(p, oracle="vllm", commit="c" * 40))
    assert core["vllm_commit"] == "c" * 40


def test_advance_omni_with_isolation_proof(env: World, port_copy: Path) -> None:
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                          "vllm-omni"])
    assert rc == 0, err
    before = (port_copy / ".agents/upstream-sync.md").read_bytes()
    omni = (port_copy / ".agents/oracles/vllm-omni.md").read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin,
                            "--dry-run", "--json"])
    assert rc == 0, err
    doc = json.loads(out)  # the machine contract: one document, even for a dry run
    assert doc["dry_run"] is True and doc["pin_after"] == env.omni_up.pin
    assert (port_copy / ".agents/oracles/vllm-omni.md").read_bytes() == omni
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin,
                            "--dry-run"])
    assert rc == 0 and out.endswith("; ran against vLLM absent\n"), err + out
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin])
    assert rc == 0, err + out
    assert "isolation proven (build, verify)" in out
    # No vLLM in the omni environment: said as verify says it, not as Python's None.
    assert out.endswith(" and vLLM absent\n"), out
    text = (port_copy / ".agents/oracles/vllm-omni.md").read_text()
    assert f"pin = {env.omni_up.pin}" in text
    # The core pin block is untouched; the event names both commits.
    assert (port_copy / ".agents/upstream-sync.md").read_bytes() == before
    (event,) = (port_copy / ".agents/sync/events").glob("*-omni-advance.toml")
    assert env.omni_up.pin in event.read_text() and "vllm_commit" in event.read_text()


def test_advance_omni_dry_run_writes_nothing(env: World, port_copy: Path) -> None:
    """A dry run measures the omni oracle (its verify is watched) but records no check: it
    says what the advance would record."""
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--oracle",
                          "vllm-omni"])
    assert rc == 0, err
    rec = port_copy / f".agents/sync/isolation/vllm-omni-{env.omni_up.pin[:10]}.json"
    doc = json.loads(rec.read_text())
    doc["checks"]["verify"]["time"] = "2000-01-01T00:00:00Z"  # what a rewrite would change
    rec.write_text(json.dumps(doc))
    status = git(port_copy, "status", "--porcelain", "--untracked-files=all")
    before = rec.read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin,
                            "--dry-run", "--json"])
    assert rc == 0, err
    assert json.loads(out)["would_record"] == {
        "isolation": {"op": "verify", "status": "PASS", "core_envs": [str(env.env)],
                      "problems": []}}
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin,
                            "--dry-run"])
    assert rc == 0, err
    assert out.splitlines()[0] == (f"dry run: would record isolation check verify: PASS "
                                   f"(core environment {env.env} unchanged)")
    assert rec.read_bytes() == before
    assert git(port_copy, "status", "--porcelain", "--untracked-files=all") == status


def test_advance_omni_refused_as_core_cycle_when_isolation_failed(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    home = other_home(env, tmp_path)
    record = next(site_packages(home / env.env.name).glob("vllm-*.dist-info")) / "RECORD"
    (port_copy / ".agents/upstream-sync.toml").write_text(
        CONFIG + f'\n[oracles.vllm-omni]\nbuild_env = {{ FAKE_UPSTREAM_TOUCH = "{record}" }}\n')
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    assert run_cli(["--port", str(port_copy), "oracle", "build", "--oracle", "vllm-omni"])[0] == 5
    before = (port_copy / ".agents/oracles/vllm-omni.md").read_bytes()
    rc, _, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin])
    assert rc == 6 and "treat it as a core sync cycle" in err
    assert (port_copy / ".agents/oracles/vllm-omni.md").read_bytes() == before


def _failed_omni_build(env: World, tmp_path: Path, port_copy: Path) -> Path:
    """An omni build at the omni commit after the pin that wrote into the core environment,
    verified since; returns its isolation record."""
    home = other_home(env, tmp_path)
    record = next(site_packages(home / env.env.name).glob("vllm-*.dist-info")) / "RECORD"
    (port_copy / ".agents/upstream-sync.toml").write_text(
        CONFIG + f'\n[oracles.vllm-omni]\nbuild_env = {{ FAKE_UPSTREAM_TOUCH = "{record}" }}\n')
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    _omni_pinned_before_middle(env, port_copy)
    commit = env.omni_up.middle
    for argv in (["oracle", "build"], ["oracle", "verify", "--shape-only"]):
        run_cli(["--port", str(port_copy), *argv, "--oracle", "vllm-omni", "--commit", commit])
    return port_copy / f".agents/sync/isolation/vllm-omni-{commit[:10]}.json"


def test_a_failed_isolation_check_gives_way_once_the_core_oracle_is_rebuilt(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    """A clean omni build after one that wrote into the core environment proves nothing of
    that environment, which is still the one the failed build touched: the failure stands.
    The refusal's way out, run as it says it, is the core sync cycle's rebuild of the core
    oracle and the omni checks again; then the omni pin advances."""
    rec = _failed_omni_build(env, tmp_path, port_copy)
    cfg = ".agents/upstream-sync.toml"
    shutil.copyfile(env.port / cfg, port_copy / cfg)  # the cause, fixed
    commit, core = env.omni_up.middle, Path(os.environ["SYNC_ORACLE_HOME"]) / env.env.name
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build", "--oracle", "vllm-omni",
                            "--commit", commit, "--rebuild"])
    assert rc == 0, err + out
    failed = json.loads(rec.read_text())["checks"]["build"]
    assert failed["status"] == "FAIL"  # sticky: the core environment is as it left it
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit])
    assert (rc, out) == (6, ""), err + out
    omni = (f"'upstream-sync oracle build --oracle vllm-omni --commit {commit} --rebuild' and "
            f"'upstream-sync oracle verify --oracle vllm-omni --commit {commit} --shape-only'")
    assert err == (
        f"upstream-sync: error: isolation of oracle vllm-omni at {commit[:10]} failed during "
        f"build ({failed['problems'][0]}): the omni oracle touched what a core oracle measures "
        "itself from — treat it as a core sync cycle: rebuild the core oracle ('upstream-sync "
        f"oracle build --oracle vllm --commit {env.up.pin[:10]} --rebuild'), regenerate the "
        f"goldens and re-verify it, then run {omni}\n")
    rebuild, *again = _advised(err)
    rc, out, err = run_cli(["--port", str(port_copy), *rebuild])
    assert rc == 0 and out.startswith(f"built oracle vllm at {env.up.pin[:10]}: {core}"), err
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit])
    assert (rc, out) == (6, ""), err + out
    assert err.endswith(f" — the core oracle was built again since: run {omni}\n"), err
    assert _advised(err) == again
    for argv in again:
        rc, out, err = run_cli(["--port", str(port_copy), *argv])
        assert rc == 0, err + out
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit])
    assert rc == 0, err + out
    assert "isolation proven (build, verify)" in out


def _forge_status(doc: dict[str, Any]) -> None:
    doc["checks"]["build"]["status"] = "PASS"


def _forge_all(doc: dict[str, Any]) -> None:
    build = doc["checks"]["build"]
    build.update(status="PASS", problems=[], core_after=build["core_before"])


def _stale(doc: dict[str, Any]) -> None:  # the pin's clean record, copied over this one
    pin = Path(str(doc["__port"])) / f".agents/sync/isolation/vllm-omni-{doc['__pin'][:10]}.json"
    doc.clear()
    doc.update(json.loads(pin.read_text()))
    doc["checks"].setdefault("verify", doc["checks"]["build"])  # as a verify there leaves it


@pytest.mark.parametrize(("edit", "code", "said"), [
    (_forge_status, 4, "it was not written by the check"),
    (_forge_all, 6, "is not what its build check left"),
    (_stale, 4, "a record copied from another commit proves nothing"),
])
def test_advance_omni_refuses_a_forged_or_stale_isolation_record(
        env: World, tmp_path: Path, port_copy: Path, edit: Any, code: int, said: str) -> None:
    rec = _failed_omni_build(env, tmp_path, port_copy)
    doc = json.loads(rec.read_text())
    assert doc["checks"]["build"]["status"] == "FAIL"
    doc.update(__port=str(env.port), __pin=env.omni_up.pin)
    edit(doc)
    doc.pop("__port", None)
    doc.pop("__pin", None)
    rec.write_text(json.dumps(doc))
    before = (port_copy / ".agents/oracles/vllm-omni.md").read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.middle])
    assert (rc, out) == (code, ""), err + out
    assert said in err and err.count("\n") == 1 and "Traceback" not in err
    assert (port_copy / ".agents/oracles/vllm-omni.md").read_bytes() == before
    assert not list((port_copy / ".agents/sync").glob("events/*omni-advance*"))


def _proven(port_copy: Path, commit: str) -> tuple[str, Path, bytes]:
    """The omni oracle built and verified at `commit` (its isolation proven): the port's
    status, the proof's path and bytes, for a refusal to be shown to leave all as they were."""
    for argv in (["oracle", "build"], ["oracle", "verify", "--shape-only"]):
        rc, out, err = run_cli(["--port", str(port_copy), *argv, "--oracle", "vllm-omni",
                                "--commit", commit])
        assert rc == 0, err + out
    rec = port_copy / f".agents/sync/isolation/vllm-omni-{commit[:10]}.json"
    return git(port_copy, "status", "--porcelain", "--untracked-files=all"), rec, rec.read_bytes()


def test_advance_omni_refuses_a_commit_behind_the_pin_unless_allowed(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    """As a sync target behind the pin is refused, an omni commit behind the omni pin is:
    before anything is measured or written; --allow-behind moves the pin back."""
    os.environ["SYNC_ORACLE_HOME"] = str(other_home(env, tmp_path))
    commit = env.omni_up.middle  # an ancestor of the omni pin
    status, rec, proof = _proven(port_copy, commit)
    for dry in ([], ["--dry-run"]):
        rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit, *dry])
        assert (rc, out) == (2, ""), err + out
        assert err == (f"upstream-sync: error: {commit[:10]} is behind the pin "
                       f"{env.omni_up.pin[:10]} of oracle vllm-omni (an ancestor of it): "
                       "advance-omni only moves forward — pick a commit after the pin, or "
                       "pass --allow-behind to move the pin back\n")
        assert git(port_copy, "status", "--porcelain", "--untracked-files=all") == status
        assert rec.read_bytes() == proof
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit, "--allow-behind"])
    assert rc == 0, err + out
    assert out.startswith(f"advanced vllm-omni {env.omni_up.pin[:10]} → {commit[:10]}")
    assert f"pin = {commit}" in (port_copy / ".agents/oracles/vllm-omni.md").read_text()


def _omni_rewritten(env: World, tmp_path: Path) -> str:
    """A clone of the omni upstream, made the omni source, where a commit on the released one
    rewrites the line the pin is on (a force-push): it is neither behind nor after the pin."""
    src = tmp_path / "vllm-omni"
    git(tmp_path, "clone", "-q", str(env.omni_up.path), str(src))
    ops = b"def add(a, b):\n    return a + b + 0\n"
    msg = b"[Core] Rewritten add (#2)\n"
    stamp = b"Upstream Dev <dev@example.invalid> 1767230000 +0000\n"
    git(src, "fast-import", "--quiet", input=(
        b"commit refs/heads/rewritten\nmark :1\nauthor " + stamp + b"committer " + stamp
        + b"data %d\n" % len(msg) + msg + b"from " + env.omni_up.released.encode() + b"\n"
        + b"M 100644 inline vllm_omni/ops.py\ndata %d\n" % len(ops) + ops + b"\n"))
    os.environ["VLLM_OMNI_SOURCE"] = str(src)
    return git(src, "rev-parse", "rewritten").strip()


def test_advance_omni_refuses_a_commit_off_the_pins_line_unless_allowed(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    """As a sync target that does not descend from the pin is refused, an omni commit off the
    omni pin's line is: before anything is measured or written; --allow-divergent takes it."""
    os.environ["SYNC_ORACLE_HOME"] = str(other_home(env, tmp_path))
    commit = _omni_rewritten(env, tmp_path)
    status, rec, proof = _proven(port_copy, commit)
    for extra in ([], ["--dry-run"], ["--allow-behind"]):  # behind is not off the line
        rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit, *extra])
        assert (rc, out) == (2, ""), err + out
        assert err == (f"upstream-sync: error: {commit[:10]} does not descend from the pin "
                       f"{env.omni_up.pin[:10]} of oracle vllm-omni — pick a commit on the "
                       "pin's line, or pass --allow-divergent\n")
        assert git(port_copy, "status", "--porcelain", "--untracked-files=all") == status
        assert rec.read_bytes() == proof
    # Nor is a commit behind the pin off its line: --allow-divergent does not move it back.
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.middle,
                            "--allow-divergent"])
    assert (rc, out) == (2, "") and "is behind the pin" in err, err + out
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", commit,
                            "--allow-divergent"])
    assert rc == 0, err + out
    assert out.startswith(f"advanced vllm-omni {env.omni_up.pin[:10]} → {commit[:10]}")
    assert f"pin = {commit}" in (port_copy / ".agents/oracles/vllm-omni.md").read_text()


def test_an_omni_proof_made_before_the_core_pin_moved_does_not_prove_the_new_pins_isolation(
        env: World, tmp_path: Path, port_copy: Path) -> None:
    """The omni oracle is proven isolated from the core oracle it is pinned alongside: a proof
    whose checks watched the core environment of the pin before a core advance says nothing
    of the one the pin measures itself from now, so advance-omni refuses it until they run
    again."""
    home = other_home(env, tmp_path)
    os.environ["SYNC_ORACLE_HOME"] = str(home)
    for argv in (["oracle", "build"], ["oracle", "verify"]):
        rc, out, err = run_cli(["--port", str(port_copy), *argv, "--oracle", "vllm-omni"])
        assert rc == 0, err + out
    # The core pin advances to the middle commit, its oracle built there.
    moved = copy_env(env.env, home / f"vllm-{env.up.middle[:10]}")
    runtime = env.up.runtime(env.up.middle, 1)
    rewrite_pin(port_copy, env.up, commit=env.up.middle, runtime=runtime,
                dist=runtime + ".precompiled")
    omni = (port_copy / ".agents/oracles/vllm-omni.md").read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin])
    assert (rc, out) == (6, ""), err + out
    assert err.startswith(f"upstream-sync: error: isolation of oracle vllm-omni at "
                          f"{env.omni_up.pin[:10]} is not proven against the core environment "
                          f"{moved}, the one the core pin measures itself from: its build "
                          f"check watched {home / env.env.name} (the core pin moved since)")
    assert (port_copy / ".agents/oracles/vllm-omni.md").read_bytes() == omni
    for argv in _advised(err):  # build --rebuild, then verify
        rc, out, err2 = run_cli(["--port", str(port_copy), *argv])
        assert rc == 0, err2 + out
    rc, out, err = run_cli(["--port", str(port_copy), "advance-omni", env.omni_up.pin])
    assert rc == 0, err + out
    assert "isolation proven (build, verify)" in out


def test_advance_omni_without_proof_is_refused(env: World, port_copy: Path) -> None:
    rc, _, err = run_cli(["--port", str(port_copy), "advance-omni", "0" * 40])
    assert rc == 6 and "is not proven" in err


def test_adopt_a_precompiled_env_records_binaries_of_unknown_provenance(
        env: World, tmp_path: Path, port_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    subprocess.run(["git", "clone", "-q", str(env.up.path), str(src)], check=True)
    real = tmp_path / "ports-own-venv"
    hand_install(real, src, extra_env={"VLLM_USE_PRECOMPILED": "1",
                                       "VLLM_PRECOMPILED_WHEEL_LOCATION": str(env.up.wheel)})
    add_distribution(site_packages(real), "flashinfer-python", FLASHINFER)
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "adopt", str(real)])
    assert rc == 0, err + out
    rec = oracle.read_marker(real)
    assert rec is not None and rec.not_in_tree == ["vllm/_C.abi3.so", "vllm/_version.py"]
    assert rec.binaries is not None and rec.binaries["files"] == "1"
    warning = "adopted: where its precompiled binaries came from is not known"
    assert rec.binaries["warning"] == warning
    rc, out, _ = run_cli(["--port", str(port_copy), "status"])
    assert f"  warning: {warning}" in out.splitlines()


def test_a_core_environment_moved_under_a_golden_check_names_the_golden_run(
        tmp_path: Path) -> None:
    """A core environment that is no longer what the proof's checks left (the core oracle
    rebuilt since) is re-proven by running each recorded check again: with a golden check
    in the proof, its run too, or the next advance is refused for it in turn."""
    (tmp_path / ".agents/sync/isolation").mkdir(parents=True)
    p = Port(tmp_path, config.Config())
    core = tmp_path / "venvs/vllm-aaaaaaaaaa"
    core.mkdir(parents=True)
    check = {**GOOD_CHECK, "core_before": {str(core): "old"}, "core_after": {str(core): "old"}}
    commit = "c" * 40
    for ops, run_golden in ((("build", "verify"), ""),
                        (("build", "golden", "verify"), " and 'upstream-sync golden --oracle "
                                                        "vllm-omni'")):
        isolation.path(p, "vllm-omni", commit).write_text(json.dumps(
            {"schema": 2, "oracle": "vllm-omni", "commit": commit,
             "checks": dict.fromkeys(ops, check)}))
        with pytest.raises(BlockedCycle, match="is not what its build check left") as raised:
            isolation.require(p, "vllm-omni", commit, core_env=core)
        build = f"'upstream-sync oracle build --oracle vllm-omni --commit {commit} --rebuild'"
        verify = f"'upstream-sync oracle verify --oracle vllm-omni --commit {commit} --shape-only'"
        rest = f", {verify}{run_golden}" if run_golden else f" and {verify}"
        assert raised.value.fix == f"verify the core oracle, then run {build}{rest}"
