"""Literal copies of the pin outside the authority: listed by `check`, stale ones fail it."""

from __future__ import annotations

from pathlib import Path

import pytest
from portfixture import Fixture, build, run, write

from sync.port import Port
from sync.records import events
from sync.records.config import load as load_config


@pytest.fixture
def fx(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Fixture:
    f = build(tmp, monkeypatch)
    cfg = (f.port / ".agents/upstream-sync.toml").read_text()
    assert "[check]" not in cfg
    write(f.port, ".agents/upstream-sync.toml", cfg + '\n[check]\npin_copy_roots = ["tools"]\n')
    return f


def test_a_copy_of_the_current_pin_is_a_warning(fx: Fixture) -> None:
    write(fx.port, "tools/bench/harness.py", f'UPSTREAM_PIN = "{fx.pin}"\n')
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 0, r.out + r.err
    assert (f"warning: tools/bench/harness.py:1: literal copy of the pin {fx.pin} — read the "
            "parity-pin block instead of copying it") in r.out


def test_a_copy_of_a_superseded_pin_fails_check(fx: Fixture) -> None:
    old = "0123456789abcdef0123456789abcdef01234567"
    port = Port(fx.port, load_config(fx.port))
    events.append(port, "advance", pin_before=old, pin_after=fx.pin, report="r.md")
    write(fx.port, "tools/bench/harness.py", f"# pinned to {old[:12]}\nPIN = '{old}'\n")
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 7
    assert r.out.splitlines()[:2] == [
        f"tools/bench/harness.py:1: stale copy of a superseded pin {old[:12]} — read the "
        "parity-pin block instead",
        f"tools/bench/harness.py:2: stale copy of a superseded pin {old} — read the "
        "parity-pin block instead"]


def test_outside_the_scan_roots_nothing_is_listed(fx: Fixture) -> None:
    write(fx.port, "src/pin.cpp", f'// {fx.pin}\n')
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 0 and "literal copy" not in r.out


def test_a_copy_of_an_omni_pin_is_said_in_the_omni_oracles_words(fx: Fixture) -> None:
    """The omni pin lives in its oracle file: a copy of it is a warning naming that file, a
    copy of one an omni advance moved off is an error, and neither is sent to the
    parity-pin block, which holds no omni pin."""
    old, new = "a" * 40, "b" * 40
    text = (fx.port / ".agents/oracles/vllm.md").read_text()
    write(fx.port, ".agents/oracles/vllm-omni.md", text.replace("vllm (core)", "vllm-omni")
          .replace("id = vllm\n", "id = vllm-omni\n").replace("role = primary", "role = secondary")
          .replace("/vllm\n", "/vllm-omni\n").replace(f"pin = {fx.pin}", f"pin = {new}"))
    port = Port(fx.port, load_config(fx.port))
    events.append(port, "omni-advance", pin_before=old, pin_after=new, report="")
    write(fx.port, "tools/omni.py", f"OMNI_BEFORE = '{old}'\nOMNI = '{new[:12]}'\n")
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 7, r.out + r.err
    assert r.out.splitlines()[:2] == [
        f"tools/omni.py:1: stale copy of a superseded omni pin {old} — read the omni oracle's "
        "file (.agents/oracles/*.md) instead",
        f"warning: tools/omni.py:2: literal copy of the vllm-omni pin {new[:12]} — read "
        ".agents/oracles/vllm-omni.md instead of copying it"]
