"""sync.dev.realoracle (what `nox -s real-oracle` runs) on a small case made of the fake upstream.

The real case takes minutes and GBs; its shape is reproduced here: a folder holding
`vllm/` (whose pyproject builds with an exact torch) and `port/` pinned to a Python-only
build, then a pin at the release tag written from the measured oracle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakeupstream import Upstream, make_port, make_upstream, pin_doc

from sync.dev import realoracle
from sync.dev.fastimport import History, git
from sync.port import Port
from sync.records import config, pins
from sync.steps.verify import identity as oracle_verify


def make_case(case: Path) -> tuple[Upstream, Path, str]:
    """A case folder as the real one is shaped: `vllm/` and `port/`, the port pinned to a
    Python-only build and not configured yet (init configures it)."""
    up = make_upstream(case / "vllm")
    port = make_port(case / "port", up, config="")
    runtime = up.runtime(up.pin, 2)
    (port / ".agents/upstream-sync.md").write_text(pin_doc(up.pin, runtime, runtime + ".empty"))
    (port / ".agents/upstream-sync.toml").unlink()
    git(port, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-am",
        "case")
    return up, port, runtime


def test_the_commits_own_torch_pin_is_read(tmp_path: Path) -> None:
    h = History()
    h.modify("pyproject.toml", '[build-system]\nrequires = [\n  "setuptools>=77",\n'
             '  "torch == 2.13.0",\n  "wheel",\n]\n')
    one = h.commit("pyproject")
    h.modify("pyproject.toml", '[build-system]\nrequires = ["setuptools"]\n')
    two = h.commit("no torch")
    marks = h.write(tmp_path / "up")
    assert realoracle._torch_pin(tmp_path / "up", marks[one]) == "2.13.0"
    assert realoracle._torch_pin(tmp_path / "up", marks[two]) is None


def test_prepare_then_pin_at_the_release_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    case = tmp_path / "case"
    up, port, _runtime = make_case(case)
    where = realoracle.prepare(case, tmp_path / "unused")
    assert where == {"port": port, "source": case / "vllm", "home": case / "oracles"}
    cfg = config.load(port)
    assert cfg.oracle("vllm").build_mode == "empty"  # init, from the pin block's suffix
    assert cfg.oracle("vllm").constraints is None  # the fake builds with no torch to pin
    monkeypatch.setenv("VLLM_SOURCE", str(where["source"]))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(where["home"]))
    capsys.readouterr()
    out = tmp_path / "said" / "pin-at.json"
    out.parent.mkdir()
    assert realoracle.main(["pin-at", f"v{up.tag}", "--work", str(case), "--out", str(out)]) == 0
    copy = case / f"port-at-v{up.tag}"
    said = capsys.readouterr()
    # The JSON comes back through --out (nox no longer captures the output, so the tag's
    # build shows its progress as it runs); stdout ends with the same line.
    assert json.loads(out.read_text()) == {"port": str(copy)}
    assert said.out.splitlines()[-1] == out.read_text().strip()
    assert said.err.startswith(f"[checkout] {case / 'vllm'} at {up.released[:10]} ")
    pin = pins.load(copy / ".agents/upstream-sync.md").pin
    assert (pin.commit, pin.runtime_version, pin.distribution_version, pin.commit_id) == (
        up.released, up.tag, f"{up.tag}+empty", f"g{up.released[:9]}")
    p = Port(copy, config.load(copy))
    assert oracle_verify.verify(p, p.preferences(), "vllm").mismatches == ()
    assert (port / ".agents/upstream-sync.md").read_text().count(up.pin) == 1  # untouched


def test_prepare_refuses_a_folder_that_is_no_case(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"holds neither port/ and vllm/ nor prepare\.sh"):
        realoracle.prepare(tmp_path, tmp_path / "work")
    assert realoracle.paths(tmp_path, tmp_path / "w")["port"] == tmp_path / "w" / "port"


def test_pin_at_a_ref_that_is_no_commit_copies_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """pin-at with a mistyped ref copied the whole port to `port-at-<ref>` and only then
    found the ref was no commit: the copy was left behind (and a --work never prepared
    crashed in the copy). The ref is resolved first."""
    case = tmp_path / "case"
    make_case(case)
    where = realoracle.prepare(case, tmp_path / "unused")
    monkeypatch.setenv("VLLM_SOURCE", str(where["source"]))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(where["home"]))
    with pytest.raises(SystemExit, match=r"v9\.9\.9 is not a commit of "):
        realoracle.main(["pin-at", "v9.9.9", "--work", str(case)])
    assert not (case / "port-at-v9.9.9").exists()
    # A --work that was never prepared: one line (no FileNotFoundError from the copy).
    bare = tmp_path / "bare"
    bare.mkdir()
    assert realoracle.main(["pin-at", "v9.9.9", "--work", str(bare)]) == 3
    assert list(bare.iterdir()) == []


def test_run_is_the_whole_session(tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`nox -s real-oracle -- CASE --at TAG`: build and verify at the pin, status, then the
    oracle pinned and verified at the tag; a failing step's exit code ends it."""
    case = tmp_path / "case"
    up, port, runtime = make_case(case)
    assert realoracle.main(["run", str(case), "--at", f"v{up.tag}"]) == 0
    # run() set the case's checkout and oracle home for its commands only.
    assert "VLLM_SOURCE" not in os.environ and "SYNC_ORACLE_HOME" not in os.environ
    said = capsys.readouterr().out
    paths = next(line for line in said.splitlines() if line.startswith("{"))
    assert json.loads(paths)["port"] == str(port)
    assert f"oracle vllm at {up.pin[:10]} verified" in said
    assert f"oracle vllm at {up.released[:10]} verified" in said
    (port / ".agents/upstream-sync.md").write_text(pin_doc(up.pin, runtime, runtime + ".cpu"))
    assert realoracle.main(["run", str(case)]) != 0  # the env's mode is not the pin's now


ADDED = 'constraints = ".agents/oracle-constraints.txt"\ninstaller = "pip"\n'


@pytest.mark.parametrize(("text", "expected"), [
    ("# top comment\n[oracles.vllm]  # the core oracle\nbuild_mode = \"empty\"\n\n"
     "# [[rules]] a commented template\n",
     "# top comment\n[oracles.vllm]  # the core oracle\n" + ADDED + "build_mode = \"empty\"\n\n"
     "# [[rules]] a commented template\n"),
    ("# only comments\n", "# only comments\n\n[oracles.vllm]\n" + ADDED),
    ("[oracles.vllm]", "[oracles.vllm]\n" + ADDED),
    ("[oracles.vllm]\r\nbuild_mode = \"empty\"\r\n",
     "[oracles.vllm]\r\n" + ADDED.replace("\n", "\r\n") + "build_mode = \"empty\"\r\n"),
])
def test_the_constraints_lines_go_in_keeping_every_other_byte(text: str, expected: str) -> None:
    """walk-s6b U8: the configuration was rewritten by tomli_w, its comments and commented
    rule templates lost."""
    assert realoracle.with_constraints(text) == expected
