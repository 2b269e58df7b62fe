"""Set-up: find a port's records by content (what `init` writes into the configuration)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sync.headers import citations as headers
from sync.infra.atomic import read_text
from sync.infra.errors import MalformedRecord
from sync.records import blocks, ledger

_SKIP = {".git", ".nox", "node_modules", "build", ".venv", "__pycache__", "third_party"}
_SOURCE_EXT = {".h", ".hpp", ".cc", ".cpp", ".cu", ".py"}


def _files(root: Path, suffixes: set[str]) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if (d not in _SKIP and not d.startswith("."))
                             or d == ".agents")
        out += [Path(dirpath, f) for f in sorted(filenames) if Path(f).suffix in suffixes]
    return out


def _text(path: Path) -> str:
    try:
        return read_text(path)
    except (UnicodeDecodeError, OSError):
        return ""


def _count(text: str, info: str, rel: str) -> int:
    """Fenced blocks the record parsers would see (a prose mention of the fence is not one)."""
    if f"```{info}" not in text:
        return 0
    try:
        return len(blocks.find(text, info, path=rel))
    except MalformedRecord:
        return 1  # a broken block is still the record's home; `check` reports what is wrong


def discover(root: Path) -> dict[str, Any]:
    """Find the records by content, not by name: each must be unique or it is left default."""
    found = _candidates(root)
    paths = {key: found[key][0] for key in ("protocol", "ledger", "inventory")
             if len(found[key]) == 1}
    dirs = sorted({str(Path(p).parent.as_posix()) for p in found["oracles"]})
    if len(dirs) == 1:
        paths["oracles"] = f"{dirs[0]}/*.md"
    return {"paths": paths, "found": found, "port_roots": _port_roots(root)}


def _candidates(root: Path) -> dict[str, list[str]]:
    """Markdown files that hold each record, by what they contain."""
    found: dict[str, list[str]] = {"protocol": [], "ledger": [], "inventory": [], "oracles": []}
    for path in _files(root, {".md"}):
        text = _text(path)
        rel = path.relative_to(root).as_posix()
        # One entry per block: two blocks in one file are as ambiguous as two files.
        found["protocol"] += [rel] * _count(text, "parity-pin", rel)
        if _count(text, "oracle-pin", rel):
            found["oracles"].append(rel)
        if _has_ledger_header(text):
            found["ledger"].append(rel)
        if path.name == "porting-inventory.md" or ("## 9" in text and "T0" in text):
            found["inventory"].append(rel)
    return found


def _has_ledger_header(text: str) -> bool:
    return any(line.lstrip().startswith("|") and tuple(ledger.split_row(line)) == ledger.COLUMNS
               for line in text.splitlines())


def _port_roots(root: Path) -> list[str]:
    """The top-level directories holding files with a ported-from header."""
    roots: dict[str, int] = {}
    for path in _files(root, _SOURCE_EXT):
        if headers.parse_header(_text(path)[:8192], path.name).kind == "PORTED":
            top = path.relative_to(root).parts[0]
            roots[top] = roots.get(top, 0) + 1
    return sorted(roots)
