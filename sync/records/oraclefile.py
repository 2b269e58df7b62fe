"""Oracle files: `.agents/oracles/<id>.md`, one per oracle, each with one ```oracle-pin block.

One file per oracle, read by glob, keeps a second oracle (vllm-omni) from growing
a second pin block in the protocol file. The core oracle's copy (`vllm.md`) is a
restatement of the pin block and must agree with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord, UsageError
from sync.records import blocks
from sync.records.pins import Pin, set_values

INFO = "oracle-pin"
KEYS = ("id", "role", "upstream", "scope", "pin", "pin_label", "pinned_on", "gateable",
        "evidence")
UNPINNED = "UNPINNED"
CORE_ID = "vllm"

_FULL_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class OracleFile:
    id: str
    role: str
    upstream: str
    scope: str
    pin: str
    pin_label: str
    pinned_on: str
    gateable: bool
    evidence: str
    path: Path
    text: str
    block: blocks.Block

    @property
    def unpinned(self) -> bool:
        return self.pin == UNPINNED


def _is_version(value: str) -> bool:
    try:
        Version(value)
    except InvalidVersion:
        return False
    return True


def _evidence_exists(evidence: str, port_root: Path) -> bool:
    try:
        return (port_root / evidence).exists()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class _Fields:
    """An oracle-pin block's values, with the lines that refusals point at."""

    values: dict[str, str]
    lines: dict[str, int]
    path: Path

    def bad(self, key: str, message: str, fix: str) -> MalformedRecord:
        return MalformedRecord(message, fix, path=str(self.path), line=self.lines.get(key))


def _validate(values: dict[str, str], lines: dict[str, int], *, path: Path,
              port_root: Path | None) -> None:
    """Field rules; `port_root` None skips the evidence-exists check (nothing to resolve it)."""
    f = _Fields(values, lines, path)
    for key in KEYS:
        if key != "evidence" and not values[key]:
            raise f.bad(key, f"{key} is empty", "give it a value")
    if values["id"] != path.stem:
        raise f.bad("id", f"id = {values['id']!r} does not match the file name {path.name}",
                    f"rename the file to {values['id']}.md or fix the id")
    _pin(f)
    if values["gateable"] not in ("yes", "no"):
        raise f.bad("gateable", f"gateable = {values['gateable']!r} is not yes or no",
                    "write yes or no")
    if values["gateable"] == "yes":
        _evidence(f, port_root)


def _pin(f: _Fields) -> None:
    pin, pinned_on = f.values["pin"], f.values["pinned_on"]
    if pin != UNPINNED and not _FULL_SHA.fullmatch(pin) and not _is_version(pin):
        raise f.bad("pin", f"pin = {pin!r} is neither 40 lowercase hex, a version, nor "
                    f"{UNPINNED}", "write the full commit SHA, a version, or UNPINNED")
    if not blocks.is_date(pinned_on) and not (pinned_on == "-" and pin == UNPINNED):
        allowed = "YYYY-MM-DD or '-' (UNPINNED only)" if pin == UNPINNED else "YYYY-MM-DD"
        raise f.bad("pinned_on", f"pinned_on = {pinned_on!r} is not {allowed}",
                    "write the date the pin was measured")


def _evidence(f: _Fields, port_root: Path | None) -> None:
    """A gateable oracle names a file, inside the port, that shows the gate works."""
    evidence = f.values["evidence"]
    if evidence in ("", "-"):
        raise f.bad("evidence", "gateable = yes but no evidence path is given",
                    "name the file (relative to the port root) that shows the gate works")
    rel = PurePosixPath(evidence)
    if rel.is_absolute() or ".." in rel.parts or "\\" in evidence or "\0" in evidence:
        raise f.bad("evidence", f"evidence = {evidence!r} escapes the port",
                    "use a path relative to the port root")
    if port_root is not None and not _evidence_exists(evidence, port_root):
        raise f.bad("evidence", f"evidence {evidence!r} does not exist under {port_root}",
                    "commit the evidence file or set gateable = no")


def _build(text: str, *, path: Path, port_root: Path | None) -> OracleFile:
    where = str(path)
    block = blocks.exactly_one(text, INFO, path=where)
    values = blocks.check_keys(block, KEYS, path=where)
    _validate(values, {e.key: e.line for e in block.entries}, path=path, port_root=port_root)
    return OracleFile(values["id"], values["role"], values["upstream"], values["scope"],
                      values["pin"], values["pin_label"], values["pinned_on"],
                      values["gateable"] == "yes", values["evidence"], path, text, block)


def parse(text: str, *, path: Path, port_root: Path) -> OracleFile:
    return _build(text, path=path, port_root=port_root)


def load(path: Path, port_root: Path) -> OracleFile:
    if not path.exists():
        raise MalformedRecord("oracle file is missing", "restore it or fix the oracles glob",
                              path=str(path))
    text = read_record(path, rel=str(path))
    return parse(text, path=path, port_root=port_root)


def load_all(paths: list[Path], port_root: Path) -> list[OracleFile]:
    out: list[OracleFile] = []
    seen: dict[str, Path] = {}
    for path in paths:
        of = load(path, port_root)
        if of.id in seen:
            raise MalformedRecord(f"oracle id {of.id!r} is also declared in {seen[of.id]}",
                                  "keep one file per oracle", path=str(path),
                                  line=of.block.open_line)
        seen[of.id] = path
        out.append(of)
    return out


def core(files: list[OracleFile], oracle_id: str = CORE_ID) -> OracleFile | None:
    """The oracle file whose pin restates the pin block (`vllm.md`), if present."""
    return next((f for f in files if f.id == oracle_id), None)


def agreement(core: OracleFile, pin: Pin) -> list[str]:
    """Problems with the core oracle file as a copy of the pin block (empty when it agrees)."""
    lines = {e.key: e.line for e in core.block.entries}
    problems = []
    if core.pin != pin.commit:
        problems.append(f"{core.path}:{lines['pin']}: pin = {core.pin} but the pin block's "
                        f"vllm_commit is {pin.commit}")
    if core.pin_label != pin.public_version:
        problems.append(f"{core.path}:{lines['pin_label']}: pin_label = {core.pin_label} but "
                        f"the pin block's runtime version is {pin.public_version}")
    return problems


def render(of: OracleFile, **changes: str) -> str:
    """The oracle file with only the changed values rewritten; every other byte kept."""
    unknown = sorted(set(changes) - set(KEYS))
    if unknown:
        raise UsageError(f"oracle-pin has no key {unknown[0]!r}",
                         f"change one of: {', '.join(KEYS)}")
    current = of.block.as_dict()
    text = set_values(of.text, of.block,
                      {k: v for k, v in changes.items() if current.get(k) != v},
                      path=str(of.path))
    # Fail closed: the result must read back with the changes applied. The evidence
    # path cannot be resolved here (no port root); `load` checks it on the next read.
    try:
        again = _build(text, path=of.path, port_root=None)
    except MalformedRecord as exc:
        raise UsageError(f"refusing to write an invalid oracle file: {exc.message}",
                         exc.fix) from None
    got = again.block.as_dict()
    if any(got[k] != v for k, v in changes.items()):
        raise UsageError(f"refusing to write {of.path}: the changes do not read back",
                         "pass single-line values")
    return text
