"""Literal copies of the pin outside the authority (`UPSTREAM_PIN = "..."` in a script).

The pin block is the one place the pin lives; a copy drifts (one harness refused
the right oracle for 17 days). `check` lists every copy in the configured scan
roots: a copy of the current pin is a warning (read the block instead), a copy of
a pin the state events show as superseded is an error (it is stale).
"""

from __future__ import annotations

import re
from pathlib import Path

from sync.infra.errors import SyncError
from sync.port import Port
from sync.records import events
from sync.records.pins import Pin

_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{9,40}(?![0-9A-Za-z])")
_SKIP = {".git", ".nox", "node_modules", "__pycache__"}


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not any(part in _SKIP for part in p.parts):
            out.append(p)
    return out


def scan(port: Port, current: str, old: set[str]) -> list[tuple[str, str]]:
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
                    where = f"{port.rel(path)}:{n}"
                    if current.startswith(token):
                        found.append((f"{where}: literal copy of the pin {token} — read the "
                                      "parity-pin block instead of copying it", "warning"))
                    elif any(o.startswith(token) for o in old):
                        found.append((f"{where}: stale copy of a superseded pin {token} — "
                                      "read the parity-pin block instead", "error"))
    return found


def findings(port: Port, pin: Pin) -> list[tuple[str, str]]:
    """(text, severity) for every copy in the scan roots; old pins come from the state events."""
    if not port.config.pin_copy_roots:
        return []
    try:
        old = {e.pin_before for e in events.load_all(port) if e.pin_before} - {pin.commit}
    except SyncError:
        old = set()
    return scan(port, pin.commit, old)
