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
