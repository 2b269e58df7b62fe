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


ROLES = ("primary", "secondary")
_ISSUE = re.compile(r"(?<![\w&])#[0-9]+\b")


def problems(values: dict[str, str], lines: dict[str, int], *, path: Path,
             port_root: Path | None, strict: bool = True) -> list[MalformedRecord]:
    """Every way the block breaks the port's record rules (DESIGN §3), in key order.

    The rules the real port's own checker enforces: every key present and non-empty,
    `id` is the file stem, `role` primary or secondary, `pinned_on` an ISO date, `gateable`
    yes or no; a gateable oracle has a pin (not UNPINNED) and an evidence file that exists
    (an issue reference is not evidence); a non-gateable one names the issue that owes the
    gate as `#N`. `pin_label` is the human name of the revision: it is never compared with
    anything. `port_root` None skips the evidence-exists check (nothing to resolve it).

    Not `strict` (loading a record to use it: a build, a probe, an advance) checks only what
    using it needs; `check` (`lint`) checks every rule.
    """
    f = _Fields(values, lines, path)
    out = [f.bad(key, f"{key} is empty", "give it a value") for key in KEYS
           if not values[key] and (strict or key != "evidence")]
    if values["id"] and values["id"] != path.stem:
        out.append(f.bad("id", f"id = {values['id']!r} does not match the file name "
                         f"{path.name}", f"rename the file to {values['id']}.md or fix the id"))
    if strict and values["role"] and values["role"] not in ROLES:
        out.append(f.bad("role", f"role = {values['role']!r} is not primary or secondary",
                         "write primary (the oracle the port is gated on) or secondary"))
    out += _pin(f, strict)
    gateable = values["gateable"]
    if gateable and gateable not in ("yes", "no"):
        out.append(f.bad("gateable", f"gateable = {gateable!r} is not yes or no",
                         "write yes or no"))
    elif gateable == "yes":
        out += _evidence(f, port_root, strict)
    elif (strict and gateable == "no" and values["evidence"]
          and not _ISSUE.search(values["evidence"])):
        out.append(f.bad("evidence", f"gateable = no but evidence = {values['evidence']!r} "
                         "names no issue", "name the issue that owes the gate, as #N"))
    return out


def _validate(values: dict[str, str], lines: dict[str, int], *, path: Path,
              port_root: Path | None) -> None:
    found = problems(values, lines, path=path, port_root=port_root, strict=False)
    if found:
        raise found[0]


def _pin(f: _Fields, strict: bool) -> list[MalformedRecord]:
    pin, pinned_on = f.values["pin"], f.values["pinned_on"]
    out = []
    if pin and pin != UNPINNED and not _FULL_SHA.fullmatch(pin) and not _is_version(pin):
        out.append(f.bad("pin", f"pin = {pin!r} is neither 40 lowercase hex, a version, nor "
                         f"{UNPINNED}", "write the full commit SHA, a version, or UNPINNED"))
    lenient = not strict and pinned_on == "-" and pin == UNPINNED
    if pinned_on and not blocks.is_date(pinned_on) and not lenient:
        out.append(f.bad("pinned_on", f"pinned_on = {pinned_on!r} is not an ISO date",
                         "write the date the pin was recorded, as YYYY-MM-DD"))
    return out


def _evidence(f: _Fields, port_root: Path | None, strict: bool) -> list[MalformedRecord]:
    """A gateable oracle has a pin and names a file, inside the port, that shows the gate
    works (an issue reference is not evidence)."""
    evidence = f.values["evidence"]
    out = []
    if strict and f.values["pin"] == UNPINNED:
        out.append(f.bad("pin", "gateable = yes but pin = UNPINNED",
                         "pin the oracle before gating on it, or set gateable = no"))
    if evidence in ("", "-") or _ISSUE.fullmatch(evidence.strip()):
        out.append(f.bad("evidence", "gateable = yes but no evidence path is given",
                         "name the file (relative to the port root) that shows the gate works"))
        return out
    rel = PurePosixPath(evidence)
    if rel.is_absolute() or ".." in rel.parts or "\\" in evidence or "\0" in evidence:
        out.append(f.bad("evidence", f"evidence = {evidence!r} escapes the port",
                         "use a path relative to the port root"))
    elif port_root is not None and not _evidence_exists(evidence, port_root):
        out.append(f.bad("evidence", f"evidence {evidence!r} does not exist in the port",
                         "commit the evidence file or set gateable = no"))
    return out


def _build(text: str, *, path: Path, port_root: Path | None) -> OracleFile:
    where = str(path)
    block = blocks.exactly_one(text, INFO, path=where)
    values = blocks.check_keys(block, KEYS, path=where)
    _validate(values, {e.key: e.line for e in block.entries}, path=path, port_root=port_root)
    return OracleFile(values["id"], values["role"], values["upstream"], values["scope"],
                      values["pin"], values["pin_label"], values["pinned_on"],
                      values["gateable"] == "yes", values["evidence"], path, text, block)


def lint(path: Path, port_root: Path) -> list[MalformedRecord]:
    """Every problem of one oracle file (an unreadable file or block is one problem)."""
    try:
        text = read_record(path, rel=str(path))
    except MalformedRecord as exc:
        return [exc]
    try:
        block = blocks.exactly_one(text, INFO, path=str(path))
        values = blocks.check_keys(block, KEYS, path=str(path))
    except MalformedRecord as exc:
        return [exc]
    return problems(values, {e.key: e.line for e in block.entries}, path=path,
                    port_root=port_root)


def parse(text: str, *, path: Path, port_root: Path) -> OracleFile:
    return _build(text, path=path, port_root=port_root)


def load(path: Path, port_root: Path) -> OracleFile:
    if not path.exists():
        raise MalformedRecord("oracle file is missing", "restore it or fix the oracles glob",
                              path=str(path))
    text = read_record(path, rel=str(path))
    return parse(text, path=path, port_root=port_root)


def load_all(paths: list[Path], port_root: Path) -> list[OracleFile]:
    return unique([load(path, port_root) for path in paths])


def unique(files: list[OracleFile]) -> list[OracleFile]:
    """`files`, refused when two declare the same oracle id."""
    seen: dict[str, Path] = {}
    for of in files:
        if of.id in seen:
            raise MalformedRecord(f"oracle id {of.id!r} is also declared in {seen[of.id]}",
                                  "keep one file per oracle", path=str(of.path),
                                  line=of.block.open_line)
        seen[of.id] = of.path
    return files


def core(files: list[OracleFile], oracle_id: str = CORE_ID) -> OracleFile | None:
    """The oracle file whose pin restates the pin block (`vllm.md`), if present."""
    return next((f for f in files if f.id == oracle_id), None)


def agreement(core: OracleFile, pin: Pin) -> list[str]:
    """Problems with the core oracle file as a copy of the pin block (empty when it agrees)."""
    lines = {e.key: e.line for e in core.block.entries}
    out: list[str] = []
    if core.pin != pin.commit:
        out.append(f"{core.path}:{lines['pin']}: pin = {core.pin} but the pin block's "
                        f"vllm_commit is {pin.commit}")
    # pin_label is the revision's human name (0.26.0.dev0): never the runtime version.
    return out


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
