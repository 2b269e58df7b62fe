from __future__ import annotations

import json
from pathlib import Path

import pytest
from stepfixture import World, make_world, run, with_port_cmd, write

from sync.headers import verify as sha_verify
from sync.steps import audit, check, surface
from sync.upstream import gitio

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]

COUNTS = {"at-pin": 3, "behind": 2, "ahead": 1, "not-upstream": 1, "original": 1,
          "no-header": 1}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


def test_audit_counts_with_positive_control(world: World) -> None:
    port = world.port
    ref = gitio.open_repo(world.up.repo)
    a = audit.run_audit(port, ref, world.up.pin, "origin/main", surface.build(port))
    assert a.control_ok
    assert a.counts() == COUNTS
    assert {f.path: f.status for f in a.files} == {
        "src/a.cpp": "behind", "src/b.cpp": "at-pin", "src/c.cpp": "at-pin",
        "src/d.cpp": "behind", "src/gone.cpp": "at-pin", "src/hot.cpp": "ahead",
        "src/pr.cpp": "not-upstream", "src/orig.cpp": "original", "src/none.cpp": "no-header"}
    # a.cpp's upstream path is named by a ledger row; d.cpp has no note.
    assert [f.path for f in a.findings] == ["src/d.cpp"]
    summary = audit.summary_lines(a)
    assert summary.lines[0] == (
        "- Counts: at-pin 3, behind 2, ahead 1, not-upstream 1, original 1, no-header 1 "
        "(of 9 files; positive control counted at-pin)")
    assert f"- `src/d.cpp` behind: vllm/c.py @ {world.up.older[:12]}; ledger note: MISSING" \
        in summary.lines


def test_audit_command_json(world: World) -> None:
    r = run(world.root, "audit", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["counts"] == COUNTS and doc["control"]["ok"] is True
    assert doc["findings"] == ["src/d.cpp"] and doc["severity"] == "warning"
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path["src/a.cpp"]["citations"] == [
        {"path": "vllm/a.py", "sha": world.up.older[:10], "status": "behind", "line": 1,
         "lines": None, "symbol": None}]
    assert by_path["src/a.cpp"]["noted"] is True and by_path["src/d.cpp"]["finding"] is True
    assert by_path["src/orig.cpp"]["citations"] == []


def test_audit_command_text_and_severity(world: World) -> None:
    r = run(world.root, "audit")
    assert r.rc == 0, r.err
    assert ("warning: src/d.cpp: behind the parity pin with no ledger note — bump the header or "
            "add a ledger row naming it") in r.out
    write(world.root, ".agents/upstream-sync.toml", '[check]\nbehind_without_note = "error"\n')
    r = run(world.root, "audit")
    assert r.rc == 7 and "1 file(s) behind the pin without a ledger note" in r.err
    assert "error: src/d.cpp" in r.out


def test_ledger_note_naming_the_file_clears_the_finding(world: World) -> None:
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "d stays behind",
            "--upstream", "src/d.cpp waits for vllm#15", "--status", "🚧 behind pin (noted)")
    assert r.rc == 0, r.err
    doc = json.loads(run(world.root, "audit", "--json").out)
    assert doc["findings"] == [] and doc["counts"] == COUNTS


def test_check_reports_the_finding(world: World) -> None:
    found, _notes = check.findings(world.port)
    texts = [(f.severity, f.text) for f in found if "per-file pin" in f.text]
    assert texts == [("warning", f"src/d.cpp:1: per-file pin behind the parity pin (vllm/c.py @ "
                      f"{world.up.older[:12]}) with no ledger note — bump the header or add a "
                      "ledger row naming the file")]


def test_broken_probe_fails_the_control(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sha_verify.classify_shas

    def blind(ref: gitio.Reference, pin: str, shas: object, upstream_ref: str) -> dict[str, str]:
        return {s: "not-upstream" for s in real(ref, pin, shas, upstream_ref)}  # type: ignore[arg-type]

    monkeypatch.setattr(sha_verify, "classify_shas", blind)
    r = run(world.root, "audit")
    assert r.rc == 7 and "positive control failed" in r.err
    assert "POSITIVE CONTROL FAILED" in r.out


def test_wrapped_headers_are_counted(world: World) -> None:
    # A header wrapped over lines counts once, as a line grep would not.
    write(world.root, "src/wrapped.cpp",
          "// Ported from: vllm/v1/\n//   a.py and vllm/b.py\n"
          f"//   @ {world.up.pin[:10]}\nint w;\n")
    doc = json.loads(run(world.root, "audit", "--json").out)
    assert doc["counts"]["at-pin"] == COUNTS["at-pin"] + 1


def test_audit_needs_the_reference(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_SOURCE")
    r = run(world.root, "audit")
    assert r.rc == 3 and "VLLM_SOURCE" in r.err


def test_example_port_audit(tmp_path: Path) -> None:
    from sync.dev import example

    examples = Path(__file__).resolve().parents[1] / "examples"
    root = example.build(tmp_path / "ex", examples)
    doc = json.loads(run(root, "audit", "--json").out)
    assert doc["control"]["ok"] is True
    assert sum(doc["counts"].values()) == len(doc["files"]) > 0
    # The example exercises every status the audit reports.
    assert all(n > 0 for n in doc["counts"].values()), doc["counts"]
