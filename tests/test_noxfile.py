"""The real noxfile, run by the real nox over a fake suite that installs with no index:
warm sessions skip the install, a source change reinstalls, typed exit codes pass through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakesuite import Suite, make_suite, nox_backends


@pytest.fixture
def suite(tmp: Path) -> Suite:
    return make_suite(tmp / "upstream-sync")


@pytest.fixture
def port(tmp: Path) -> Path:
    d = tmp / "port"
    d.mkdir()
    return d


@pytest.mark.parametrize("backend", nox_backends())
def test_a_warm_session_installs_nothing_until_the_sources_change(
        suite: Suite, port: Path, backend: str) -> None:
    cold = suite.nox("-s", "status", "--", "--json", cwd=port, backend=backend)
    assert cold.returncode == 0, cold.stderr
    assert suite.builds() == 1
    warm = suite.nox("-s", "status", "--", "--json", cwd=port, backend=backend)
    assert warm.returncode == 0, warm.stderr
    assert suite.builds() == 1
    assert "nothing to install" in warm.stderr
    (suite.root / "README.md").write_text("not a source of the package\n")
    suite.nox("-s", "status", cwd=port, backend=backend)
    assert suite.builds() == 1
    suite.set_version("2")
    changed = suite.nox("-s", "status", cwd=port, backend=backend)
    assert changed.returncode == 0, changed.stderr
    assert suite.builds() == 2
    # The command that ran is the changed one: a reinstall, not a cached wheel.
    assert [(c["argv"], c["version"]) for c in suite.calls()] == [
        (["status", "--json"], "1"), (["status", "--json"], "1"), (["status"], "1"),
        (["status"], "2")]
    assert {c["invoked_from"] for c in suite.calls()} == {str(port)}


def test_no_install_leaves_a_stale_venv_to_be_installed_next_time(suite: Suite,
                                                                 port: Path) -> None:
    assert suite.nox("-s", "sync", cwd=port).returncode == 0
    suite.set_version("2")
    assert suite.nox("-s", "sync", "--no-install", cwd=port).returncode == 0
    assert suite.builds() == 1  # --no-install: as asked, and no stamp claims version 2
    assert suite.nox("-s", "sync", cwd=port).returncode == 0
    assert suite.builds() == 2
    assert [c["version"] for c in suite.calls()] == ["1", "1", "2"]


@pytest.mark.parametrize("code", [2, 3, 6, 7])
def test_a_typed_exit_code_is_the_exit_code_of_nox(suite: Suite, port: Path, code: int) -> None:
    proc = suite.nox("-s", "advance", "--", "--dry-run", cwd=port, FAKE_EXIT=str(code))
    assert proc.returncode == code, proc.stderr
    assert f"upstream-sync exited {code}: nox exits {code} too" in proc.stderr
    assert [c["argv"] for c in suite.calls()] == [["advance", "--dry-run"]]


def test_through_nox_a_refusal_is_still_one_json_document_and_its_code(
        suite: Suite, port: Path) -> None:
    """The machine contract holds through nox: stdout is the command's one document (nox
    logs to stderr), and the exit code is the command's."""
    refusal = json.dumps({"advanced": False, "unmet": ["gate golden is PENDING"], "ok": False,
                          "exit_code": 6, "error": {"kind": "BlockedCycle"}}) + "\n"
    proc = suite.nox("-s", "advance", "--", "--json", cwd=port, FAKE_EXIT="6",
                     FAKE_STDOUT=refusal)
    assert proc.returncode == 6, proc.stderr
    assert json.loads(proc.stdout) == json.loads(refusal)


def test_an_internal_error_stays_nox_failure(suite: Suite, port: Path) -> None:
    proc = suite.nox("-s", "advance", cwd=port, FAKE_EXIT="1")
    assert proc.returncode == 1
    assert "Session advance failed" in proc.stderr


def test_a_typed_exit_stops_a_two_command_session_at_once(suite: Suite, port: Path) -> None:
    proc = suite.nox("-s", "oracle", "--", "--commit", "target", cwd=port, FAKE_EXIT="3")
    assert proc.returncode == 3
    assert [c["argv"] for c in suite.calls()] == [
        ["oracle", "build", "--if-missing", "--commit", "target"]]


def test_the_cli_session_forwards_everything_after_the_double_dash(suite: Suite,
                                                                   port: Path) -> None:
    proc = suite.nox("-s", "cli", "--", "decide", "#12", "IGNORE", "a reason", cwd=port)
    assert proc.returncode == 0, proc.stderr
    assert [c["argv"] for c in suite.calls()] == [["decide", "#12", "IGNORE", "a reason"]]
    bare = suite.nox("-s", "cli", cwd=port)
    assert bare.returncode == 1 and "give the command after --" in bare.stderr
