"""Gate records, eligibility, the report's Gates section, and `parity` suites."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakeupstream import pin_doc, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.cli import build_parser
from sync.dev.fastimport import History
from sync.infra.atomic import port_lock
from sync.infra.errors import BlockedCycle, MalformedRecord, SyncError
from sync.port import Port
from sync.records import config, cycle, gates, prefs, schema

PIN = "c1edac23945dac33a317da7651db4e8c274f314e"
TARGET = "e24d1b24aa0f7c3e8d5b6a1c2f9e0d4b3a2c1f00"
RUNTIME = "0.2.1rc1.dev2+gc1edac239"
PY = sys.executable

CONFIG = f"""\
[parity.suites.op]
command = ["{PY}", "-c", "import sys; print('op', sys.argv[1:])", "{{port}}", "{{target7}}"]

[parity.suites.behavioral]
command = ["{PY}", "-c", "import sys; print('line one'); print('broken'); sys.exit(4)"]

[parity.suites.model]
command = ["{PY}", "-c", "pass"]
needs_gpu = true
"""


def make(tmp: Path, config_text: str = CONFIG) -> Path:
    root = tmp / "port"
    h = History()
    h.modify(".agents/upstream-sync.md", pin_doc(PIN, RUNTIME, RUNTIME + ".precompiled"))
    h.modify(".agents/upstream-sync.toml", config_text)
    h.commit("Port")
    h.write(root)
    return root


def port_at(root: Path) -> Port:
    return Port(root, config.load(root))


ORACLE_ID: dict[str, str | None] = {"id": "vllm", "commit": "a" * 40,
                                    "version": "0.1.0.dev1+gaaaaaaaaa"}


def result(name: str, status: gates.Status = "PASS", **kw: object) -> gates.GateResult:
    base: dict[str, object] = {"command": "cmd", "duration_s": 1.25, "host": "dgx",
                               "time": "2026-01-02T03:04:05Z"}
    if status != "PENDING" and name.startswith(("golden", "oracle:")):
        base["oracle"] = ORACLE_ID  # what a golden or oracle gate records
    base.update(kw)
    return gates.GateResult(name, status, **base)  # type: ignore[arg-type]


def gate_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_GATE_HOSTS", socket.gethostname())


# -- the gates record -------------------------------------------------------------------------


def test_record_and_load_round_trip(tmp_path: Path) -> None:
    p = port_at(make(tmp_path))
    assert gates.load(p, PIN) == []
    a = result("parity:op")
    b = result("golden", "PENDING", duration_s=None, handoff="upstream-sync golden --strict",
               detail="host x is not a gate host")
    gates.record(p, PIN, a)
    gates.record(p, PIN, b)
    assert gates.load(p, PIN) == [b, a]
    a2 = result("parity:op", "FAIL", detail="exit 4")
    gates.record(p, PIN, a2)
    assert gates.load(p, PIN) == [b, a2]
    path = p.sync_dir / "gates" / f"{PIN[:7]}.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == 1 and doc["target"] == PIN and list(doc["gates"]) == [
        "golden", "parity:op"]
    assert gates.load(p, TARGET) == []  # another target has its own file


def test_record_waits_for_the_port_lock(tmp_path: Path) -> None:
    p = port_at(make(tmp_path))
    with (port_lock(p.sync_dir / ".lock"), pytest.raises(BlockedCycle, match="holds the lock"),
          gates.locked(p, wait_s=0.3)):
        pass
    with gates.locked(p, wait_s=0.3):
        pass


@pytest.mark.parametrize(("text", "why"), [
    ("{", "not valid JSON"),
    ("[]", "exactly schema, target and gates"),
    (json.dumps({"schema": 2, "target": PIN, "gates": {}}), "schema 2, expected 1"),
    (json.dumps({"schema": 1, "target": TARGET, "gates": {}}), "recorded for target"),
    (json.dumps({"schema": 1, "target": PIN, "gates": []}), "keyed by gate name"),
    (json.dumps({"schema": 1, "target": PIN, "gates": {"g": {"status": "OK"}}}), "missing key"),
])
def test_malformed_gates_file(tmp_path: Path, text: str, why: str) -> None:
    p = port_at(make(tmp_path))
    path = p.sync_dir / "gates" / f"{PIN[:7]}.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(MalformedRecord, match=why) as info:
        gates.load(p, PIN)
    where = ":1: " if text == "{" else ": "  # JSON that does not parse: at its line
    assert str(info.value).startswith(f".agents/sync/gates/{PIN[:7]}.json{where}")
    rc, _, _ = run_cli(["--port", str(p.root), "parity", "--suite", "model"])
    assert rc == 4


GOOD_GATE = {"status": "PASS", "command": "c", "duration_s": 1.0, "host": "h",
             "time": "2026-01-02T03:04:05Z", "handoff": None, "detail": None,
             "oracle": {"oracle": "vllm", "commit": None}}
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200)
       | st.builds(lambda k, v: json.dumps({"schema": 1, "target": PIN,
                                            "gates": {"g": {**GOOD_GATE, k: v}}}),
                   st.sampled_from(sorted(GOOD_GATE)), JSON)
       | JSON.map(lambda v: json.dumps({"schema": 1, "target": PIN, "gates": v})))
def test_gates_parser_fuzz(text: str) -> None:
    try:
        out = gates.parse(text, PIN, rel="g.json")
    except SyncError as exc:
        assert isinstance(exc, MalformedRecord)
        return
    assert all(isinstance(r, gates.GateResult) for r in out)


# -- eligibility -----------------------------------------------------------------------------


def prefs_with(tmp_path: Path, hosts: str | None) -> prefs.Preferences:
    env = {"SYNC_GATE_HOSTS": hosts} if hosts is not None else {}
    return prefs.load(tmp_path / "none.md", env)


def test_eligibility(tmp_path: Path) -> None:
    host = socket.gethostname()
    ok, why = gates.eligible(prefs_with(tmp_path, None), needs_gpu=False)
    assert not ok and why.startswith("no gate hosts are configured (set SYNC_GATE_HOSTS")
    ok, why = gates.eligible(prefs_with(tmp_path, "dgx, dgx2"), needs_gpu=False)
    assert (ok, why) == (False, f"host {host} is not a gate host (dgx, dgx2)")
    ok, why = gates.eligible(prefs_with(tmp_path, f"dgx,{host.split('.')[0]}"), needs_gpu=False)
    assert (ok, why) == (True, f"host {host} is a gate host")
    ok, why = gates.eligible(prefs_with(tmp_path, host), needs_gpu=True)
    gpu, how = gates.gpu_visible()
    assert ok is gpu and how in why


# -- the report section ----------------------------------------------------------------------


def test_render_section_golden_text() -> None:
    omni = {"oracle": "vllm-omni", "commit": "b" * 40, "runtime_version": "0.1.0.dev2+gbbbbbbbbb",
            "vllm_commit": "a" * 40}
    core = {"oracle": "vllm", "commit": PIN, "runtime_version": RUNTIME, "vllm_commit": PIN}
    results = [
        result("parity:op", "FAIL", detail="exit 4", command="ctest -R op|x"),
        result("golden", oracle=core, detail="zero drift (3 cases)",
               command="upstream-sync golden --oracle vllm --target " + PIN),
        result("golden:vllm-omni", oracle=omni, detail="drift in 1 of 2 cases: changed `x`",
               duration_s=None),
        result("parity:model", "PENDING", duration_s=None, detail="no GPU visible",
               handoff=f"upstream-sync parity --suite model --target {PIN} --strict"),
    ]
    assert gates.render_section(results) == (
        f"- `golden` **PASS** — 1.2 s on dgx at 2026-01-02T03:04:05Z; oracle vllm @ "
        f"`{PIN[:10]}` ({RUNTIME}); zero drift (3 cases); command: `upstream-sync golden "
        f"--oracle vllm --target {PIN}`\n"
        f"- `golden:vllm-omni` **PASS** — on dgx at 2026-01-02T03:04:05Z; oracle vllm-omni @ "
        f"`bbbbbbbbbb` (0.1.0.dev2+gbbbbbbbbb) against vLLM `aaaaaaaaaa`; drift in 1 of 2 "
        "cases: changed \\`x\\`; command: `cmd`\n"
        "- `parity:model` **PENDING** — no GPU visible; handoff: `upstream-sync parity --suite "
        f"model --target {PIN} --strict`\n"
        "- `parity:op` **FAIL** — 1.2 s on dgx at 2026-01-02T03:04:05Z; exit 4; command: "
        "ctest -R op\\|x\n"
    )
    assert gates.render_section([]) == ""


# -- parity ----------------------------------------------------------------------------------


def test_parity_pass_fail_and_pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path)
    gate_host(monkeypatch)
    rc, _, err = run_cli(["--port", str(root), "parity"])
    assert rc == 7
    assert "1 parity suite(s) failed: parity:behavioral" in err
    assert "  | line one\n  | broken\n" in err  # the failing suite's output tail
    recorded = {r.name: r for r in gates.load(port_at(root), PIN)}
    assert recorded["parity:op"].status == "PASS"
    # The record names no path of this machine: `{port}` is kept as `.` (suites run there).
    assert recorded["parity:op"].command.endswith(f" . {PIN[:7]}")
    assert str(root) not in gates.path(port_at(root), PIN).read_text()
    assert recorded["parity:op"].duration_s is not None
    assert recorded["parity:behavioral"].status == "FAIL"
    assert recorded["parity:behavioral"].detail == "exit 4"
    model = recorded["parity:model"]
    if gates.gpu_visible()[0]:
        assert model.status == "PASS"
    else:
        assert model.status == "PENDING"
        assert model.handoff == f"upstream-sync parity --suite model --target {PIN} --strict"


def test_parity_one_suite_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path)
    gate_host(monkeypatch)
    rc, out, err = run_cli(["--port", str(root), "parity", "--suite", "op", "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    assert [d["name"] for d in doc["gates"]] == ["parity:op"]
    assert doc["gates"][0]["status"] == "PASS"
    assert [r.name for r in gates.load(port_at(root), PIN)] == ["parity:op"]


def test_parity_pending_and_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path)
    monkeypatch.setenv("SYNC_GATE_HOSTS", "dgx")
    rc, out, err = run_cli(["--port", str(root), "parity", "--suite", "op"])
    handoff = f"upstream-sync parity --suite op --target {PIN} --strict"
    assert rc == 0 and out == f"parity:op PENDING; handoff: {handoff}\n"
    rc, out, err = run_cli(["--port", str(root), "parity", "--suite", "op", "--strict"])
    assert rc == 6 and "1 parity suite(s) PENDING under --strict: parity:op" in err
    assert handoff in err
    (r,) = gates.load(port_at(root), PIN)
    assert (r.status, r.handoff) == ("PENDING", handoff)


def test_parity_records_against_the_cycle_target(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path)
    gate_host(monkeypatch)
    cycle.save(port_at(root), PIN, TARGET, "origin/main")
    rc, _, err = run_cli(["--port", str(root), "parity", "--suite", "op"])
    assert rc == 0, err
    assert [r.name for r in gates.load(port_at(root), TARGET)] == ["parity:op"]
    assert gates.load(port_at(root), PIN) == []
    rc, _, err = run_cli(["--port", str(root), "parity", "--suite", "op", "--target", PIN])
    assert rc == 6 and f"gate target is {TARGET[:10]}" in err


def test_parity_with_no_suites_configured_has_nothing_to_gate(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """walk-s13 U5: the gates workflow runs `parity --strict` on every port; a port with
    no suites (an advance needs none) passes it, and records no gate."""
    root = make(tmp_path, "schema = 1\n")
    gate_host(monkeypatch)
    rc, out, err = run_cli(["--port", str(root), "parity", "--strict"])
    assert (rc, out) == (0, "no parity suites are configured: nothing to gate (add "
                            "[parity.suites.<name>] command = [...] to the port's config to "
                            "gate on one)\n"), err
    rc, out, _ = run_cli(["--port", str(root), "parity", "--strict", "--json"])
    assert rc == 0 and json.loads(out) == {"gates": [], "ok": True}
    assert gates.load(port_at(root), PIN) == []


@pytest.mark.parametrize(("config_text", "argv", "why"), [
    ("schema = 1\n", ["--suite", "op"], "no parity suite named 'op' — none is configured"),
    (CONFIG, ["--suite", "nope"], "no parity suite named 'nope'"),
    ('[parity.suites.x]\ncommand = ["{bad}"]\n', [], "uses {bad}"),
])
def test_parity_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_text: str,
                             argv: list[str], why: str) -> None:
    root = make(tmp_path, config_text)
    gate_host(monkeypatch)
    rc, _, err = run_cli(["--port", str(root), "parity", *argv])
    assert rc == 2 and why in err


def test_parity_command_that_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    root = make(tmp_path, '[parity.suites.x]\ncommand = ["/nonexistent/tool"]\n')
    gate_host(monkeypatch)
    rc, _, _ = run_cli(["--port", str(root), "parity"])
    assert rc == 7
    (r,) = gates.load(port_at(root), PIN)
    assert r.status == "FAIL" and r.detail is not None and "could not start" in r.detail


def test_oracle_needs_an_action(tmp_path: Path) -> None:
    rc, _, err = run_cli(["--port", str(make(tmp_path)), "oracle"])
    assert rc == 2 and "build, probe, verify, adopt or gc" in err


@pytest.mark.parametrize("name", ["golden", "golden:vllm-omni[1/2]", "oracle:vllm"])
def test_gates_merge_refuses_an_oracle_gate_result_with_no_oracle(tmp: Path, name: str) -> None:
    """walk-s3 D4: a golden PASS with no oracle identity was merged and met the advance's
    gate; a gate that runs a verified oracle records it, so one without is refused."""
    root = make(tmp)
    made = tmp / "made.json"
    made.write_text(gates.render_doc(PIN, [result(name, "PASS", oracle=None)]))
    before = gates.load(port_at(root), PIN)
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(made)])
    assert rc == 4
    assert (f"gate {name!r} is PASS with no oracle identity: golden and oracle gates record "
            "the verified oracle they ran") in err
    assert gates.load(port_at(root), PIN) == before
    # A parity suite runs no oracle: its PASS has none, and is merged.
    made.write_text(gates.render_doc(PIN, [result("parity:ops", "PASS")]))
    assert run_cli(["--port", str(root), "gates", "merge", str(made)])[0] == 0


def test_gates_merge_refuses_a_result_from_the_future(tmp: Path) -> None:
    """walk-s6b D1: the later run wins a merge, so a record dated 2030 beat a real FAIL."""
    root = make(tmp)
    p = port_at(root)
    gates.record(p, PIN, result("golden", "FAIL", time=gates.now()))
    before = gates.load(p, PIN)
    made = tmp / "made.json"
    made.write_text(gates.render_doc(PIN, [result("golden", "PASS",
                                                  time="2030-01-01T00:00:00Z")]))
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(made)])
    assert rc == 4, err
    assert "gate 'golden' is dated 2030-01-01T00:00:00Z, in the future" in err
    assert gates.load(p, PIN) == before
    # A time in another shape would sort anywhere against real runs: refused when read.
    made.write_text(gates.render_doc(PIN, [result("golden", "PASS",
                                                  time="2030-01-01 00:00:00")]))
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(made)])
    assert rc == 4 and "has time '2030-01-01 00:00:00', not one a gate writes" in err, err
    assert gates.load(p, PIN) == before
    # A few minutes ahead is a gate host's clock, not a forgery.
    soon = (datetime.now(UTC) + timedelta(minutes=3)).strftime(gates.TIME)
    made.write_text(gates.render_doc(PIN, [result("golden", "PASS", time=soon)]))
    assert run_cli(["--port", str(root), "gates", "merge", str(made)])[0] == 0


def test_gates_merge_of_a_missing_or_broken_artifact(tmp: Path) -> None:
    """walk-s13 N1: a file the command line names that cannot be read is a usage error
    (exit 2), not "a record in the port does not parse"; an artifact that is not JSON is
    refused at its line, with the artifact's fix, not the port record's."""
    root = make(tmp)
    before = gates.load(port_at(root), PIN)
    gone = tmp / "nonexist.json"
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(gone)])
    assert rc == 2
    assert err.splitlines() == [
        f"upstream-sync: error: {gone}: cannot read it: No such file or directory — name a "
        "gate record file from a gate run's artifact (.agents/sync/gates/<target7>.json)"]
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(tmp)])
    assert rc == 2 and f"{tmp}: cannot read it: it is a directory" in err, err
    bad = tmp / "bad.json"
    bad.write_text('{"schema": 1,\n "target": "x",\n')
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(bad)])
    assert rc == 4
    assert err.splitlines() == [
        f"upstream-sync: error: {bad}:3: not valid JSON (Expecting property name enclosed in "
        "double quotes at column 1) — download the gate run's artifact again, or run the gate "
        "again; nothing was merged"]
    assert gates.load(port_at(root), PIN) == before


def test_gates_merge_folds_shard_records(tmp: Path) -> None:
    root = make(tmp)
    p = port_at(root)
    gates.record(p, PIN, result("golden[1/2]", "PENDING", handoff="upstream-sync golden ..."))
    gates.record(p, PIN, result("golden[2/2]", "PENDING", handoff="upstream-sync golden ..."))
    shard1 = tmp / "shard1.json"
    shard1.write_text(gates.render_doc(PIN, [
        result("golden[1/2]", "PASS", time="2026-01-03T00:00:00Z", host="gpu1"),
        result("golden[2/2]", "PENDING", handoff="upstream-sync golden ...")]))
    shard2 = tmp / "shard2.json"
    shard2.write_text(gates.render_doc(PIN, [
        result("golden[2/2]", "FAIL", time="2026-01-03T00:01:00Z", host="gpu2")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard1), str(shard2)])
    assert rc == 0, err
    assert out.splitlines() == [
        "golden[1/2]: PENDING → PASS (gpu1, 2026-01-03T00:00:00Z)",
        "golden[2/2]: PENDING → FAIL (gpu2, 2026-01-03T00:01:00Z)",
        # This port configures no [golden] scripts: its golden shards are not required.
        *(f"golden[{i}/2]: merged, but .agents/upstream-sync.toml does not require it — the "
          "advance needs no result of it, yet refuses one that is not a PASS" for i in (1, 2)),
        f"merged 2 file(s) into the gate record for {PIN[:10]}: 2 gate(s) changed"]
    assert {g.name: g.status for g in gates.load(p, PIN)} == {
        "golden[1/2]": "PASS", "golden[2/2]": "FAIL"}
    # A second merge of the same files changes nothing.
    assert run_cli(["--port", str(root), "gates", "merge", str(shard1)])[1].endswith(
        "0 gate(s) changed\n")


def test_gates_merge_notes_each_gate_the_configuration_does_not_require(tmp: Path) -> None:
    """walk N5b: a merged gate that no [golden] script or [parity.suites] names (a suite
    since removed, the oracle job's oracle:vllm) was folded in without a word, as if it
    counted towards the advance. Each is noted, in the text and in JSON `unrequired`."""
    root = make(tmp)  # requires parity:op, parity:behavioral and parity:model, no golden
    shard = tmp / "shard.json"
    shard.write_text(gates.render_doc(PIN, [
        result("parity:op"), result("parity:gone"), result("oracle:vllm"),
        result("golden[1/2]")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard)])
    assert rc == 0, err
    noted = [line for line in out.splitlines() if "does not require it" in line]
    assert noted == [
        f"{name}: merged, but .agents/upstream-sync.toml does not require it — the advance "
        "needs no result of it, yet refuses one that is not a PASS"
        for name in ("golden[1/2]", "oracle:vllm", "parity:gone")]
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard), "--json"])
    doc = json.loads(out)
    assert (rc, doc["changed"], doc["unrequired"]) == (
        0, [], ["golden[1/2]", "oracle:vllm", "parity:gone"])
    # Only required gates: nothing to note.
    shard.write_text(gates.render_doc(PIN, [result("parity:model")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard), "--json"])
    assert (rc, json.loads(out)["unrequired"]) == (0, [])


def test_gates_merge_names_the_missing_shards_of_a_sharded_gate(tmp: Path) -> None:
    """a merge of golden[1/2] alone did not say that golden[2/2] was still missing; only
    the advance said it later. The merge names the shards the port's record lacks."""
    root = make(tmp, CONFIG + '\n[golden]\nscripts = [["{python}", "a.py"], ["{python}", '
                '"b.py"], ["{python}", "c.py"]]\n')
    shard1, shard3 = tmp / "shard1.json", tmp / "shard3.json"
    shard1.write_text(gates.render_doc(PIN, [result("golden[1/3]", "PASS", host="gpu1")]))
    shard3.write_text(gates.render_doc(PIN, [result("golden[3/3]", "PASS", host="gpu3")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard1)])
    assert rc == 0, err
    said = (f"golden[2/3], golden[3/3]: not in the gate record for {PIN[:10]} yet — the "
            "advance needs every shard: run it on a gate host and merge its record too")
    assert said in out.splitlines()
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard3), "--json"])
    assert (rc, json.loads(out)["missing_shards"]) == (0, ["golden[2/3]"])
    shard2 = tmp / "shard2.json"
    shard2.write_text(gates.render_doc(PIN, [result("golden[2/3]", "PASS", host="gpu2")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(shard2)])
    assert rc == 0 and "not in the gate record" not in out, err
    assert json.loads(run_cli(["--port", str(root), "gates", "merge", str(shard2), "--json"]
                              )[1])["missing_shards"] == []


def test_gates_merge_target_only_asserts_the_checkouts_gate_target(tmp: Path) -> None:
    """walk N5: --target read 'full target SHA (default: the open cycle's, else the pin)',
    as if it chose the record merged into; it only checks that the checkout's is the one
    named, and its help says so."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    gates_sub = next(a for a in sub.choices["gates"]._actions
                     if isinstance(a, argparse._SubParsersAction))
    (action,) = (a for a in gates_sub.choices["merge"]._actions if a.dest == "target")
    assert action.help == (
        "the target the files were gated at, as a handoff names it (7 to 40 hex digits); "
        "refused unless it is this checkout's gate target (the open cycle's, else the pin), "
        "the one merged into with or without it")
    root = make(tmp)
    shard = tmp / "shard.json"
    shard.write_text(gates.render_doc(PIN, [result("parity:op")]))
    argv = ["--port", str(root), "gates", "merge", str(shard), "--target"]
    assert run_cli([*argv, PIN[:7]])[0] == 0
    rc, _, err = run_cli([*argv, TARGET])
    assert rc == 6 and (f"this checkout's gate target is {PIN[:10]}, but --target names "
                        f"{TARGET[:10]}") in err, err


def test_gates_merge_of_another_targets_record_names_both_targets(tmp: Path) -> None:
    """walk N5a: a well-formed record of another target (an earlier cycle's, which an
    artifact of the gates folder holds too) was refused as malformed (exit 4), with the fix
    'download the gate run's artifact again', which gives the same file. It is the wrong
    file: exit 2, naming its target and the port's, and what to name instead."""
    root = make(tmp)
    before = gates.load(port_at(root), PIN)
    other = tmp / "other.json"
    other.write_text(gates.render_doc(TARGET, [result("golden")]))
    ours = tmp / "ours.json"
    ours.write_text(gates.render_doc(PIN, [result("parity:ops", "PASS")]))
    rc, _, err = run_cli(["--port", str(root), "gates", "merge", str(ours), str(other)])
    assert (rc, err.splitlines()) == (2, [
        f"upstream-sync: error: {other} records gates for target {TARGET[:10]}, but this "
        f"port's gates are for {PIN[:10]} (the pin) — name only gate records of runs at "
        f"{PIN[:10]} (gates/{PIN[:7]}.json in a gate run's artifact); nothing was merged"])
    assert gates.load(port_at(root), PIN) == before
    other.write_text(json.dumps({"schema": 1, "target": "main", "gates": {}}))
    rc, _, err = run_cli(["--port", str(root), "gates", "merge", str(other)])
    assert rc == 2 and f"{other} records gates for target 'main', but this port's" in err


def test_a_gate_record_stores_no_absolute_local_path(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    port = port_at(root)
    r = gates.GateResult("golden", "FAIL", f"upstream-sync golden --out {root}/x", 1.0, "h",
                         gates.now(), None,
                         f"golden script 1 exited 1: File {tmp_path}/home/venv/x.py, {root}",
                         ORACLE_ID)
    gates.record(port, PIN, r)
    text = gates.path(port, PIN).read_text()
    assert str(tmp_path) not in text
    (got,) = gates.load(port, PIN)
    assert got.command == "upstream-sync golden --out ./x"
    assert got.detail == "golden script 1 exited 1: File ~/venv/x.py, ."


def test_gates_merge_of_a_pass_and_a_fail_of_the_same_second_keeps_the_fail(tmp: Path) -> None:
    """Two runs of one gate dated the same second: the file named last won, so naming the
    files in another order turned a FAIL into a PASS. The FAIL is kept, in any order."""
    root = make(tmp)
    p = port_at(root)
    at = "2026-01-03T00:00:00Z"
    passed, failed = tmp / "pass.json", tmp / "fail.json"
    passed.write_text(gates.render_doc(PIN, [result("parity:op", time=at, host="gpu1")]))
    failed.write_text(gates.render_doc(PIN, [result("parity:op", "FAIL", time=at, host="gpu2",
                                                    detail="exit 1")]))
    for order in ((passed, failed), (failed, passed)):
        gates.path(p, PIN).unlink(missing_ok=True)
        rc, out, err = run_cli(["--port", str(root), "gates", "merge", *map(str, order)])
        assert rc == 0, err
        assert {g.name: g.status for g in gates.load(p, PIN)} == {"parity:op": "FAIL"}
    # The port's own FAIL is not replaced by a PASS of the same second either.
    rc, out, _ = run_cli(["--port", str(root), "gates", "merge", str(passed)])
    assert rc == 0 and out.endswith("0 gate(s) changed\n")
    assert {g.name: g.status for g in gates.load(p, PIN)} == {"parity:op": "FAIL"}


def test_gates_merge_counts_each_gate_and_each_file_once(tmp: Path) -> None:
    """A gate two files changed was said twice ('none → PASS', then 'PASS → FAIL': the record
    never held that PASS) and counted as two gates changed; a file named twice was counted
    as two files merged."""
    root = make(tmp)
    early, late = tmp / "early.json", tmp / "late.json"
    early.write_text(gates.render_doc(PIN, [result("parity:op", time="2026-01-03T00:00:00Z")]))
    late.write_text(gates.render_doc(PIN, [result("parity:op", "FAIL", host="gpu2",
                                                  time="2026-01-03T00:05:00Z")]))
    rc, out, err = run_cli(["--port", str(root), "gates", "merge", str(early), str(late)])
    assert rc == 0, err
    assert [line for line in out.splitlines() if "does not require" not in line] == [
        "parity:op: none → FAIL (gpu2, 2026-01-03T00:05:00Z)",
        f"merged 2 file(s) into the gate record for {PIN[:10]}: 1 gate(s) changed"]
    rc, out, _ = run_cli(["--port", str(root), "gates", "merge", str(late),
                          str(tmp / "." / "late.json")])
    assert rc == 0 and out.splitlines()[-1] == (
        f"merged 1 file(s) (of 2 named) into the gate record for {PIN[:10]}: 0 gate(s) changed")


def test_a_gate_record_holding_a_gate_twice_is_refused(tmp: Path) -> None:
    """JSON keeps the last of two equal keys without a word: a record holding a gate twice
    (a merge conflict resolved by keeping both sides) lost its FAIL to the PASS after it."""
    root = make(tmp)
    p = port_at(root)
    fail_doc = json.dumps(schema.as_doc(result("parity:op", "FAIL")))
    pass_doc = json.dumps(schema.as_doc(result("parity:op")))
    twice = (f'{{"schema": 1, "target": "{PIN}", "gates": {{"parity:op": {fail_doc}, '
             f'"parity:op": {pass_doc}}}}}')
    made = tmp / "made.json"
    made.write_text(twice)
    rc, _out, err = run_cli(["--port", str(root), "gates", "merge", str(made)])
    assert rc == 4
    assert (f"{made}: key 'parity:op' appears twice in one object (a merge conflict resolved "
            "by keeping both sides?): which one holds cannot be told") in err
    assert gates.load(p, PIN) == []
    gates.path(p, PIN).parent.mkdir(parents=True, exist_ok=True)
    gates.path(p, PIN).write_text(twice)
    with pytest.raises(MalformedRecord, match="appears twice"):
        gates.load(p, PIN)
