"""Literal copies of a pin outside its authority (`UPSTREAM_PIN = "..."` in a script).

The pin block is the one place the pin lives, and an omni oracle's file the one place its
pin lives; a copy drifts (one harness refused the right oracle for 17 days). `check` lists
every copy in the configured scan roots: a copy of a current pin is a warning (read its
authority instead), a copy of a pin the state events show as superseded is an error (it is
stale). Each is said in the words of its authority: an omni pin is no parity pin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sync.infra.errors import SyncError
from sync.port import Port
from sync.records import events, oraclefile
from sync.records.pins import Pin

_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{9,40}(?![0-9A-Za-z])")
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_SKIP = {".git", ".nox", "node_modules", "__pycache__"}
_OMNI = "omni-advance"  # the one kind of event whose pins are an omni oracle's


@dataclass(frozen=True)
class Known:
    """A pin a copy may be of: what a finding says before and after the copy (after
    `<file>:<line>: `), and how severe it is."""

    commit: str
    head: str
    tail: str
    severity: str


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not any(part in _SKIP for part in p.parts):
            out.append(p)
    return out


def scan(port: Port, known: list[Known]) -> list[tuple[str, str]]:
    """(text, severity) per copy of a `known` pin in the scan roots; the first that a copy
    prefixes is the one it is of."""
    found = []
    for rel_root in port.config.pin_copy_roots:
        for path in _files(port.root / rel_root):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), start=1):
                for m in _HEX.finditer(line):
                    token = m.group(0)
                    pin = next((k for k in known if k.commit.startswith(token)), None)
                    if pin is not None:
                        found.append((f"{port.rel(path)}:{n}: {pin.head}{token}{pin.tail}",
                                      pin.severity))
    return found


def findings(port: Port, pin: Pin) -> list[tuple[str, str]]:
    """(text, severity) for every copy in the scan roots; old pins come from the state events."""
    if not port.config.pin_copy_roots:
        return []
    try:
        evs = events.load_all(port)
    except SyncError:
        evs = []
    return scan(port, _known(port, pin, evs))


def _known(port: Port, pin: Pin, evs: list[events.Event]) -> list[Known]:
    """The current pins (the core one, each omni oracle's), then the superseded ones: an
    event's `pin_before`, of the core pin or (an omni advance's) an omni one."""
    omni = _omni_pins(port)
    current = {pin.commit, *omni}
    old = _superseded(evs, omni=False) - current
    old_omni = _superseded(evs, omni=True) - current - old
    return [
        Known(pin.commit, "literal copy of the pin ", " — read the parity-pin block instead "
              "of copying it", "warning"),
        *(Known(c, "stale copy of a superseded pin ", " — read the parity-pin block instead",
                "error") for c in sorted(old)),
        *(Known(c, f"literal copy of the {oid} pin ", f" — read {rel} instead of copying it",
                "warning") for c, (oid, rel) in omni.items()),
        *(Known(c, "stale copy of a superseded omni pin ", " — read the omni oracle's file "
                f"({port.config.oracles}) instead", "error") for c in sorted(old_omni))]


def _superseded(evs: list[events.Event], *, omni: bool) -> set[str]:
    """The pins events moved off: the core pin's (`omni` False) or an omni oracle's."""
    return {e.pin_before for e in evs if e.pin_before and (e.kind == _OMNI) == omni}


def _omni_pins(port: Port) -> dict[str, tuple[str, str]]:
    """Each omni oracle's pin commit: (its id, its file); an oracle file that does not load
    is `check`'s finding already."""
    out: dict[str, tuple[str, str]] = {}
    for path in port.oracle_files():
        of = port.oracle_record(path)
        if not isinstance(of, SyncError) and of.id != oraclefile.CORE_ID \
                and _FULL_SHA.fullmatch(of.pin):
            out.setdefault(of.pin, (of.id, port.rel(of.path)))
    return out
