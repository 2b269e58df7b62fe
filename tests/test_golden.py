"""`golden`: gated regeneration with a verified oracle, uniform manifests, drift, shards."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from fakeupstream import Upstream, make_port, make_upstream, pin_doc, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.dev.fastimport import git
from sync.infra.errors import CheckFailed, UsageError
from sync.port import Port
from sync.records import config, cycle, gates
from sync.steps.verify import build as oracle_build
from sync.steps.verify import golden

CONFIG = """\
[oracles.vllm]
build_env = { VLLM_PRECOMPILED_WHEEL_LOCATION = "{wheel}" }
build_mode = "precompiled"
require_flashinfer = false

[golden]
dir = "goldens"
needs_gpu = false
scripts = [
  ["{python}", "tools/dump.py", "{out}", "alpha", "beta"],
  ["{python}", "tools/dump.py", "{out}", "gamma"],
]
"""
IDENTITY_KEYS = ["oracle", "commit", "runtime_version", "distribution_version", "commit_id",
                 "flashinfer_version", "torch_version", "build_mode", "binaries", "vllm_commit",
                 "vllm_version", "host", "time"]


@dataclass(frozen=True)
class World:
    up: Upstream
    port: Path
    home: Path
    env: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("golden")
    mp = pytest.MonkeyPatch()
    try:
        for var in ("SYNC_PORT", "SYNC_GATE_HOSTS", "SETUPTOOLS_SCM_PRETEND_VERSION"):
            mp.delenv(var, raising=False)
        up = make_upstream(base / "vllm")
        port = make_port(base / "port", up, config=CONFIG)
        home = base / "venvs"
        mp.setenv("VLLM_SOURCE", str(up.path))
        mp.setenv("SYNC_ORACLE_HOME", str(home))
        p = Port(port, config.load(port))
        built = oracle_build.build(p, p.preferences(), "vllm")
        yield World(up, port, home, built.env)
    finally:
        mp.undo()


@pytest.fixture
def port(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the port (a git checkout) on a gate host."""
    monkeypatch.setenv("VLLM_SOURCE", str(world.up.path))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(world.home))
    monkeypatch.setenv("SYNC_GATE_HOSTS", f"other-host,{socket.gethostname()}")
    monkeypatch.delenv("DUMP_SALT", raising=False)
    dst = tmp_path / "port"
    shutil.copytree(world.port, dst)
    return dst


def gate_doc(port: Path, target: str) -> dict[str, dict[str, object]]:
    doc = json.loads((port / f".agents/sync/gates/{target[:7]}.json").read_text())
    assert doc["target"] == target
    gates_: dict[str, dict[str, object]] = doc["gates"]
    return gates_


def commit_all(port: Path, message: str) -> None:
    git(port, "add", "-A")
    git(port, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-m",
        message)


def with_config(port: Path, **changes: Any) -> Port:
    p = Port(port, config.load(port))
    return replace(p, config=replace(p.config, **changes))


# -- PENDING ---------------------------------------------------------------------------------


def test_pending_on_a_host_that_is_not_a_gate_host(world: World, port: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    rc, out, err = run_cli(["--port", str(port), "golden"])
    assert rc == 0, err
    handoff = f"upstream-sync golden --oracle vllm --target {world.up.pin} --strict"
    host = socket.gethostname()
    assert out == (f"golden PENDING — host {host} is not a gate host (dgx)\n"
                   f"handoff: {handoff}\n")
    g = gate_doc(port, world.up.pin)["golden"]
    assert g["status"] == "PENDING" and g["handoff"] == handoff
    assert g["duration_s"] is None and g["oracle"] is None
    assert not (port / "goldens").exists()
    section = gates.render_section(gates.load(Port(port, config.load(port)), world.up.pin))
    assert section == (f"- `golden` **PENDING** — host {host} is not a gate host (dgx); "
                       f"handoff: `{handoff}`\n")


def test_an_oracle_id_no_oracle_file_declares_is_refused(world: World, port: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """walk-s4 D4: `golden --oracle nosuch` recorded a PENDING gate that nothing could
    clear; refused before anything is written, as `oracle probe` refuses it."""
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    rc, _out, err = run_cli(["--port", str(port), "golden", "--oracle", "nosuch"])
    assert rc == 2 and "no oracle file declares id 'nosuch'" in err
    record = port / f".agents/sync/gates/{world.up.pin[:7]}.json"
    assert not record.exists() or "golden:nosuch" not in gate_doc(port, world.up.pin)


def test_strict_makes_pending_an_error(world: World, port: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNC_GATE_HOSTS")
    rc, out, err = run_cli(["--port", str(port), "golden", "--strict", "--shard", "2/3"])
    assert rc == 6 and out == ""
    assert "gate golden[2/3] is PENDING: no gate hosts are configured" in err
    assert f"--target {world.up.pin} --shard 2/3 --strict" in err
    assert gate_doc(port, world.up.pin)["golden[2/3]"]["status"] == "PENDING"


def test_strict_json_prints_the_gate_with_the_error(world: World, port: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`golden --strict --json` on a PENDING gate printed only the refusal, without the
    gate (name, status, handoff) that `golden --json` prints: one document holds both."""
    monkeypatch.delenv("SYNC_GATE_HOSTS")
    rc, out, err = run_cli(["--port", str(port), "golden", "--strict", "--shard", "2/3",
                            "--json"])
    assert rc == 6, err
    doc = json.loads(out)
    handoff = f"upstream-sync golden --oracle vllm --target {world.up.pin} --shard 2/3 --strict"
    assert (doc["name"], doc["status"], doc["handoff"]) == ("golden[2/3]", "PENDING", handoff)
    assert doc["ok"] is False and doc["exit_code"] == 6
    assert doc["error"]["kind"] == "BlockedCycle"
    assert doc["error"]["message"] == f"gate golden[2/3] is PENDING: {doc['detail']}"
    assert doc["detail"].startswith("no gate hosts are configured")
    assert doc["error"]["fix"] == f"run on a gate host: {handoff}"


def test_pending_without_a_gpu(world: World, port: Path) -> None:
    if gates.gpu_visible()[0]:
        pytest.skip("this host shows a GPU")
    p = with_config(port, golden_needs_gpu=True)
    outcome = golden.run(p, p.preferences())
    assert outcome.gate.status == "PENDING"
    assert outcome.gate.detail is not None and "no GPU visible" in outcome.gate.detail


def test_pending_recorded_against_the_cycle_target(world: World, port: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    p = Port(port, config.load(port))
    cycle.save(p, world.up.pin, world.up.middle, "origin/main")  # a target that is not the pin
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    rc, out, _ = run_cli(["--port", str(port), "golden"])
    assert rc == 0 and f"--target {world.up.middle} --strict" in out
    assert gate_doc(port, world.up.middle)["golden"]["status"] == "PENDING"
    # On a gate host the oracle must be built at the target, not at the pin.
    monkeypatch.setenv("SYNC_GATE_HOSTS", socket.gethostname())
    rc, _, err = run_cli(["--port", str(port), "golden"])
    assert rc == 3 and f"no oracle environment for vllm at {world.up.middle[:10]}" in err


# -- PASS and drift --------------------------------------------------------------------------


def test_golden_writes_manifests_and_reports_drift(world: World, port: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, err = run_cli(["--port", str(port), "golden"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("golden PASS (")
    assert lines[1:] == ["  new: alpha", "  new: beta", "  new: gamma",
                         "golden drift: nothing to compare: 3 new cases (alpha, beta, gamma)"]
    runtime = world.up.runtime(world.up.pin, 2)
    for case in ("alpha", "beta", "gamma"):
        d = port / "goldens" / case
        assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()) == [
            "manifest.json", "sub/raw.bin", "values.txt"]
        # Produced by the oracle's interpreter: its version and its prefix.
        assert (d / "values.txt").read_text() == f"{case} {runtime} 5 {world.env}\n"
        m = json.loads((d / "manifest.json").read_text())
        assert list(m) == ["schema", "case", "gate", "target", "script", "oracle", "files",
                           "extra"]
        assert (m["schema"], m["case"], m["gate"], m["target"]) == (1, case, "golden",
                                                                    world.up.pin)
        assert list(m["oracle"]) == IDENTITY_KEYS
        assert m["oracle"]["commit"] == world.up.pin
        assert m["oracle"]["runtime_version"] == runtime
        assert m["oracle"]["distribution_version"] == runtime + ".precompiled"
        assert m["oracle"]["build_mode"] == "precompiled"
        assert m["oracle"]["host"] == socket.gethostname()
        assert sorted(m["files"]) == ["sub/raw.bin", "values.txt"]
        assert m["extra"]["device"] == "cpu"
    g = gate_doc(port, world.up.pin)["golden"]
    assert g["status"] == "PASS"
    assert g["detail"] == "nothing to compare: 3 new cases (alpha, beta, gamma)"
    assert g["command"] == f"upstream-sync golden --oracle vllm --target {world.up.pin}"

    commit_all(port, "Goldens at the pin")
    rc, out, _ = run_cli(["--port", str(port), "golden"])
    assert rc == 0 and out.splitlines()[1:] == ["golden drift: zero drift (3 cases)"]

    monkeypatch.setenv("DUMP_SALT", "beta= salted")
    rc, out, _ = run_cli(["--port", str(port), "--debug", "golden", "--json"])
    doc = json.loads(out)
    assert rc == 0 and doc["detail"] == "drift in 1 of 3 cases: changed beta"
    assert doc["cases"][1] == {"case": "beta", "drift": "changed", "changed": ["values.txt"]}
    assert (port / "goldens/beta/values.txt").read_text().endswith(" salted\n")


@pytest.mark.parametrize(("drifts", "said"), [
    ("uu", "zero drift (2 cases)"),
    ("n", "nothing to compare: 1 new case (c0)"),
    ("un", "zero drift (1 compared case; 1 new: c1)"),
    ("cnu", "drift in 1 of 2 compared cases: changed c0; 1 new: c1"),
    ("cc", "drift in 2 of 2 cases: changed c0, c1"),
])
def test_a_new_case_is_counted_apart_from_drift(drifts: str, said: str) -> None:
    """walk-s9 U3: a case run for the first time has no golden to drift from."""
    kinds = {"u": "unchanged", "n": "new", "c": "changed"}
    results = [golden.CaseResult(f"c{i}", kinds[k], ())  # type: ignore[arg-type]
               for i, k in enumerate(drifts)]
    assert golden.summary(results) == said


def test_drift_without_git_compares_with_the_files_on_disk(world: World, port: Path) -> None:
    shutil.rmtree(port / ".git")
    p = Port(port, config.load(port))
    first = golden.run(p, p.preferences())
    assert [c.drift for c in first.cases] == ["new", "new", "new"]
    (port / "goldens/gamma/sub/raw.bin").write_bytes(b"old bytes")
    (port / "goldens/gamma/stale.txt").write_text("gone next run")
    second = golden.run(p, p.preferences())
    assert second.summary == "drift in 1 of 3 cases: changed gamma"
    assert second.cases[2].changed == ("stale.txt", "sub/raw.bin")
    assert not (port / "goldens/gamma/stale.txt").exists()  # a case is replaced whole


def test_refuses_an_oracle_that_does_not_verify(world: World, port: Path) -> None:
    runtime, claimed = world.up.runtime(world.up.pin, 2), world.up.runtime(world.up.pin, 9)
    (port / ".agents/upstream-sync.md").write_text(
        pin_doc(world.up.pin, claimed, claimed + ".precompiled"))  # a transcribed pin
    rc, out, err = run_cli(["--port", str(port), "golden"])
    assert rc == 5 and out == ""
    assert (f"mismatch: runtime version: oracle reports '{runtime}', the pin "
            f"block (.agents/upstream-sync.md) says '{claimed}'") in err
    assert "refused (2 mismatches)" in err
    assert not (port / "goldens").exists()
    assert not (port / f".agents/sync/gates/{world.up.pin[:7]}.json").exists()


# -- shards ----------------------------------------------------------------------------------


def test_shards_deal_scripts_round_robin(world: World, port: Path) -> None:
    rc, out, err = run_cli(["--port", str(port), "golden", "--shard", "2/2"])
    assert rc == 0, err
    assert out.splitlines()[-1] == "golden drift: nothing to compare: 1 new case (gamma)"
    assert sorted(p.name for p in (port / "goldens").iterdir()) == ["gamma"]
    assert gate_doc(port, world.up.pin)["golden[2/2]"]["status"] == "PASS"
    rc, _, err = run_cli(["--port", str(port), "golden", "--shard", "3/2"])
    assert rc == 2 and "--shard '3/2' is not i/n" in err


def test_self_sharding_scripts_run_in_every_shard(world: World, port: Path) -> None:
    script = ("{python}", "tools/dump.py", "{out}", "s{shard}of{shards}")
    p = with_config(port, golden_scripts=(script, ("{python}", "tools/dump.py", "{out}", "a"),
                                          ("{python}", "tools/dump.py", "{out}", "b")))
    names = [c.name for c in golden.run(p, p.preferences(),
                                        golden.Request(shard=golden.Shard(1, 2))).cases]
    assert names == ["s1of2", "a"]
    names = [c.name for c in golden.run(p, p.preferences(),
                                        golden.Request(shard=golden.Shard(2, 2))).cases]
    assert names == ["s2of2", "b"]
    with pytest.raises(UsageError, match="shard 3/3 has no golden script"):
        golden.run(replace(p, config=replace(p.config, golden_scripts=p.config.golden_scripts[1:])),
                   p.preferences(), golden.Request(shard=golden.Shard(3, 3)))


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("script", "why"), [
    (("{python}", "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"),
     "golden script 1 exited 3: boom"),
    (("{python}", "-c", "import pathlib, sys; pathlib.Path(sys.argv[1], 'x.txt').write_text('')",
      "{out}"), "golden script 1 wrote 'x.txt' directly under {out}"),
    (("{python}", "-c", "pass"), "golden script 1 wrote no case under {out}"),
    (("{python}", "-c", "import os, sys; os.makedirs(os.path.join(sys.argv[1], 'c')); "
      "open(os.path.join(sys.argv[1], 'c', 'manifest.json'), 'w').close()", "{out}"),
     "golden script 1: c/manifest.json is reserved"),
])
def test_script_failures_record_fail(world: World, port: Path, script: tuple[str, ...],
                                     why: str) -> None:
    (port / ".agents/upstream-sync.toml").write_text(
        CONFIG.split("[golden]")[0] + "[golden]\nneeds_gpu = false\nscripts = ["
        + json.dumps(list(script)) + "]\n")
    rc, _, err = run_cli(["--port", str(port), "golden"])
    assert rc == 7 and f"gate golden FAILED: {why}" in err
    g = gate_doc(port, world.up.pin)["golden"]
    assert g["status"] == "FAIL" and str(g["detail"]).startswith(why)
    assert not (port / "goldens").exists()


def test_duplicate_case_across_scripts(world: World, port: Path) -> None:
    dump = ("{python}", "tools/dump.py", "{out}", "same")
    p = with_config(port, golden_scripts=(dump, dump))
    with pytest.raises(CheckFailed, match="case 'same' written by golden scripts 1 and 2"):
        golden.run(p, p.preferences())


def test_handoff_for_another_target_refused(world: World, port: Path) -> None:
    rc, _, err = run_cli(["--port", str(port), "golden", "--target", world.up.middle])
    assert rc == 6 and f"--target names {world.up.middle[:10]}" in err
    rc, _, err = run_cli(["--port", str(port), "golden", "--target", world.up.pin[:9]])
    assert rc == 0, err


@pytest.mark.parametrize(("scripts", "why"), [
    ("[]", "no golden scripts are configured"),
    ('[["python3", "tools/dump.py"]]', "golden script 1 does not start with {python}"),
    ('[["{python}", "{nope}"]]', "uses {nope}"),
    ('[["{python}", "{python!r}"]]', "uses {python}"),
    ('[["{python}", "{out"]]', "write literal braces as {{ and }}"),
])
def test_script_config_refused(world: World, port: Path, scripts: str, why: str) -> None:
    (port / ".agents/upstream-sync.toml").write_text(
        f"[golden]\nneeds_gpu = false\nscripts = {scripts}\n")
    rc, _, err = run_cli(["--port", str(port), "golden"])
    assert rc == 2 and why in err


# -- parsers ---------------------------------------------------------------------------------


def test_expand_and_literal_braces() -> None:
    values = {k: k.upper() for k in golden.PLACEHOLDERS}
    assert golden.expand("{{x}}-{out}/{shard}", values) == "{x}-OUT/SHARD"
    assert golden.parse_shard("1/1") == golden.Shard(1, 1)
    assert str(golden.parse_shard("2/5")) == "2/5"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_parse_shard_fuzz(text: str) -> None:
    try:
        s = golden.parse_shard(text)
    except UsageError:
        return
    assert 1 <= s.index <= s.count and str(s) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("{}!:.[]0abcoutpyhn "), max_size=20)
       | st.text(max_size=20))
def test_placeholder_fuzz(text: str) -> None:
    values = {k: "v" for k in golden.PLACEHOLDERS}
    try:
        result = golden.expand(text, values)
    except UsageError:
        return
    assert isinstance(result, str)


def test_a_shard_with_no_script_is_refused_off_a_gate_host_too(world: World, port: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """Off a gate host, `golden --shard 3/3` with two scripts recorded golden[3/3] PENDING
    with a handoff every gate host refuses ('shard 3/3 has no golden script'): the advance
    then waited on a shard that can never run. It is refused everywhere, nothing recorded."""
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    rc, out, err = run_cli(["--port", str(port), "golden", "--shard", "3/3"])
    assert (rc, out) == (2, "")
    assert err.splitlines() == ["upstream-sync: error: shard 3/3 has no golden script (2 "
                                "configured) — use fewer shards"]
    assert not (port / f".agents/sync/gates/{world.up.pin[:7]}.json").exists()
