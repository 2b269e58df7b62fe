"""The parity pin: the one ```parity-pin block in the protocol file, the pin authority.

Every other copy (the PARITY PIN line, the core oracle file, pin spans) is checked
against this block. The runtime version must carry `+g<sha>` naming the commit,
because that segment is what a runtime identity check compares. A released version
(`0.25.0`, what a build at a release tag reports) names no commit, so it is a pin only
with the optional key `vllm_commit_id`: the runtime's `__commit_id__` (`g<sha>`, the
second measurement setuptools-scm writes), asserted against `vllm_commit` like the
version's segment. Once a block has that key an advance keeps it; it is never dropped.
A shallow clone's version (`0.1.devN+g<sha>`: setuptools-scm saw no tag) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord, UsageError
from sync.records import blocks, mdscan

INFO = "parity-pin"
KEYS = ("vllm_commit", "vllm_runtime_version", "vllm_distribution_version", "flashinfer_version")
COMMIT_ID = "vllm_commit_id"
OPTIONAL = (COMMIT_ID,)
DEFAULT_PATH = ".agents/upstream-sync.md"

_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_LOCAL_SHA = re.compile(r"g([0-9a-f]{7,40})")
_SHORT_LOCAL_SHA = re.compile(r"g([0-9a-f]{1,6})")
_SUFFIX = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")
MAX_VERSION = 128  # a measured version is a few dozen characters
_MEASURE = "take it from a measured oracle (upstream-sync oracle probe), never transcribe it"


@dataclass(frozen=True)
class Pin:
    commit: str
    runtime_version: str
    distribution_version: str
    flashinfer_version: str
    build_suffix: str | None  # e.g. "precompiled": what the distribution adds to the local segment
    commit_id: str | None = None  # vllm_commit_id: the runtime's __commit_id__ (g<hex>)

    @property
    def public_version(self) -> str:
        """The runtime version without its local segment (0.23.1rc1.dev1511)."""
        return self.runtime_version.partition("+")[0]

    @property
    def short_sha(self) -> str:
        """The hex the runtime names: its `+g<hex>` segment, else (a release) its commit id."""
        local = self.runtime_version.partition("+")[2]
        return (local or self.commit_id or "")[1:]

    @property
    def released(self) -> bool:
        """A released version: only vllm_commit_id names the commit."""
        return "+" not in self.runtime_version

    def fields(self) -> dict[str, str]:
        out = {
            "vllm_commit": self.commit,
            "vllm_runtime_version": self.runtime_version,
            "vllm_distribution_version": self.distribution_version,
            "flashinfer_version": self.flashinfer_version,
        }
        if self.commit_id is not None:
            out[COMMIT_ID] = self.commit_id
        return out


@dataclass(frozen=True)
class PinRecord:
    pin: Pin
    path: Path
    text: str
    block: blocks.Block


def _version(value: str, key: str, *, path: str, line: int | None) -> Version:
    if len(value) > MAX_VERSION:
        # packaging would turn each digit run into an int (5 million digits: ValueError).
        raise MalformedRecord(f"{key} is {len(value)} characters long, not a version",
                              _MEASURE, path=path, line=line)
    try:
        return Version(value)
    except (InvalidVersion, ValueError):
        raise MalformedRecord(f"{key} = {value!r} is not a version packaging can parse",
                              _MEASURE, path=path, line=line) from None


def _canonical(parsed: Version, value: str, key: str, *, path: str, line: int | None) -> None:
    # Identity checks compare strings exactly; a non-canonical spelling can never
    # equal what a runtime reports, so it is a transcription, not a measurement.
    if str(parsed) != value:
        raise MalformedRecord(f"{key} = {value!r} is not in canonical form ({parsed})",
                              _MEASURE, path=path, line=line)


def validate_commit(commit: str, *, path: str = DEFAULT_PATH, line: int | None = None) -> str:
    if not _FULL_SHA.fullmatch(commit):
        raise MalformedRecord(f"vllm_commit = {commit!r} is not 40 lowercase hex characters",
                              "write the full upstream commit SHA in lowercase",
                              path=path, line=line)
    return commit


def is_shallow_shape(version: Version) -> bool:
    """`0.1.devN`: what setuptools-scm computes when it sees no tag (a shallow clone)."""
    return version.release == (0, 1) and version.dev is not None and version.pre is None


def validate_commit_id(commit_id: str, commit: str, *, path: str = DEFAULT_PATH,
                       line: int | None = None) -> str:
    """The hex of `vllm_commit_id = g<hex>`; refused unless it names `commit`."""
    match = _LOCAL_SHA.fullmatch(commit_id)
    if not match:
        raise MalformedRecord(
            f"{COMMIT_ID} = {commit_id!r} is not g<7..40 lowercase hex> (the runtime's "
            "__commit_id__)", _MEASURE, path=path, line=line)
    if not commit.startswith(match.group(1)):
        raise MalformedRecord(
            f"{COMMIT_ID} names {commit_id}, which is not a prefix of vllm_commit {commit}",
            "the block must describe one oracle: re-measure it at vllm_commit",
            path=path, line=line)
    return match.group(1)


def validate_runtime(runtime: str, commit: str, *, path: str = DEFAULT_PATH,
                     line: int | None = None, commit_id: str | None = None) -> str:
    """The sha prefix the runtime version names (`+g<sha>`, or for a released version the
    validated `commit_id`); refused unless it names `commit`."""
    parsed = _version(runtime, "vllm_runtime_version", path=path, line=line)
    if is_shallow_shape(parsed):
        raise MalformedRecord(
            f"vllm_runtime_version = {runtime!r} has the shape of a shallow-clone build "
            "(0.1.devN: setuptools-scm saw no tag), so it names no release and cannot be a pin",
            "measure an oracle built from a full clone", path=path, line=line)
    if parsed.local is None:
        return _released(parsed, runtime, commit, path=path, line=line, commit_id=commit_id)
    local = runtime.partition("+")[2]
    short = _SHORT_LOCAL_SHA.fullmatch(local)
    if short:
        raise MalformedRecord(
            f"vllm_runtime_version sha prefix {short.group(1)!r} is shorter than 7 characters",
            _MEASURE, path=path, line=line)
    match = _LOCAL_SHA.fullmatch(local)
    if not match:
        raise MalformedRecord(
            f"vllm_runtime_version local segment {local!r} is not exactly g<7..40 lowercase hex>",
            _MEASURE, path=path, line=line)
    _canonical(parsed, runtime, "vllm_runtime_version", path=path, line=line)
    sha = match.group(1)
    if commit_id is not None and not commit_id[1:].startswith(sha) \
            and not sha.startswith(commit_id[1:]):
        raise MalformedRecord(
            f"vllm_runtime_version names g{sha} but {COMMIT_ID} names {commit_id}",
            "both must come from the same measured oracle", path=path, line=line)
    if not commit.startswith(sha):
        raise MalformedRecord(
            f"vllm_runtime_version names g{sha}, which is not a prefix of vllm_commit {commit}",
            "the block must describe one oracle: re-measure it at vllm_commit",
            path=path, line=line)
    return sha


def _released(parsed: Version, runtime: str, commit: str, *, path: str, line: int | None,
              commit_id: str | None) -> str:
    if commit_id is None:
        raise MalformedRecord(
            f"vllm_runtime_version = {runtime!r} has no local segment: a released version names "
            f"no commit, so it is a pin only with {COMMIT_ID} (the runtime's __commit_id__)",
            "measure the oracle (upstream-sync oracle probe) and add "
            f"'{COMMIT_ID} = g<sha>' to the block, or pin a source build whose "
            "vllm.__version__ carries +g<sha>", path=path, line=line)
    _canonical(parsed, runtime, "vllm_runtime_version", path=path, line=line)
    return commit_id[1:]


def split_distribution(dist: str, runtime: str, *, path: str = DEFAULT_PATH,
                       line: int | None = None) -> str | None:
    """The build-mode suffix the distribution version adds (`precompiled`), or None."""
    parsed = _version(dist, "vllm_distribution_version", path=path, line=line)
    runtime_public, _, runtime_local = runtime.partition("+")
    public, _, local = dist.partition("+")
    if public != runtime_public:
        raise MalformedRecord(
            f"vllm_distribution_version public part {public!r} differs from the runtime "
            f"version's {runtime_public!r}",
            "both must come from the same measured oracle", path=path, line=line)
    if local == runtime_local:
        _canonical(parsed, dist, "vllm_distribution_version", path=path, line=line)
        return None
    # At a release the build's suffix is the whole local segment (`0.25.0+empty`).
    suffix = local[len(runtime_local) + 1:] if runtime_local else local
    if not ((not runtime_local or local.startswith(runtime_local + "."))
            and _SUFFIX.fullmatch(suffix)):
        raise MalformedRecord(
            f"vllm_distribution_version local segment {local!r} is not the runtime's "
            f"{runtime_local!r} optionally followed by .<build suffix>",
            "both must come from the same measured oracle", path=path, line=line)
    _canonical(parsed, dist, "vllm_distribution_version", path=path, line=line)
    return suffix


def _lines_of(block: blocks.Block) -> dict[str, int]:
    return {e.key: e.line for e in block.entries}


def from_values(commit: str, runtime_version: str, distribution_version: str,
                flashinfer_version: str, *, path: str = DEFAULT_PATH,
                commit_id: str | None = None) -> Pin:
    """A validated Pin (also how an advance builds one from a measured oracle)."""
    values = {"vllm_commit": commit, "vllm_runtime_version": runtime_version,
              "vllm_distribution_version": distribution_version,
              "flashinfer_version": flashinfer_version}
    if commit_id is not None:
        values[COMMIT_ID] = commit_id
    return _validated(values, path=path, lines={})


def _validated(values: Mapping[str, str], *, path: str, lines: Mapping[str, int]) -> Pin:
    """The Pin of a block's `values` (every key of KEYS, optionally COMMIT_ID)."""
    at = dict(lines)
    commit, runtime = values["vllm_commit"], values["vllm_runtime_version"]
    distribution, flashinfer = values["vllm_distribution_version"], values["flashinfer_version"]
    commit_id = values.get(COMMIT_ID)
    validate_commit(commit, path=path, line=at.get("vllm_commit"))
    if commit_id is not None:
        validate_commit_id(commit_id, commit, path=path, line=at.get(COMMIT_ID))
    validate_runtime(runtime, commit, path=path, line=at.get("vllm_runtime_version"),
                     commit_id=commit_id)
    suffix = split_distribution(distribution, runtime, path=path,
                                line=at.get("vllm_distribution_version"))
    line = at.get("flashinfer_version")
    parsed = _version(flashinfer, "flashinfer_version", path=path, line=line)
    _canonical(parsed, flashinfer, "flashinfer_version", path=path, line=line)
    return Pin(commit, runtime, distribution, flashinfer, suffix, commit_id)


def parse(text: str, *, path: str) -> tuple[Pin, blocks.Block]:
    block = blocks.exactly_one(text, INFO, path=path)
    values = blocks.check_keys(block, KEYS, path=path, optional=OPTIONAL)
    return _validated(values, path=path, lines=_lines_of(block)), block


def load(path: Path, *, rel: str | None = None) -> PinRecord:
    """The pin block of the protocol file at `path`; errors name it as `rel` when given."""
    where = rel if rel is not None else str(path)
    if not path.exists():
        raise MalformedRecord("the protocol file holding the ```parity-pin block is missing",
                              "restore it, or set paths.protocol in .agents/upstream-sync.toml",
                              path=where)
    text = read_record(path, rel=where)
    pin, block = parse(text, path=where)
    return PinRecord(pin, path, text, block)


def set_values(text: str, block: blocks.Block, changes: Mapping[str, str], *,
               path: str) -> str:
    """`text` with only the changed entries' values replaced inside their own lines.

    Rewriting just the value span (not the whole body) keeps comments, blank lines,
    spacing and the newline style of the block exactly as the author left them.
    """
    for key, value in changes.items():
        if value != value.strip() or len(f"{value}x".splitlines()) != 1:
            raise UsageError(f"new value for {key} is {value!r}: it must be one line "
                             "without surrounding whitespace", f"fix the value for {path}")
    by_key = {e.key: e for e in block.entries}
    missing = sorted(set(changes) - set(by_key))
    if missing:
        raise UsageError(f"```{block.info} in {path} has no key {missing[0]!r} to change",
                         "change only keys the block already has")
    wanted = {by_key[k].line: v for k, v in changes.items()}
    return "".join(_with_value(raw, wanted[number]) if number in wanted else raw
                   for number, raw in enumerate(text.splitlines(keepends=True), start=1))


def _with_value(raw: str, value: str) -> str:
    """`key = old` line `raw` with only the old value's span replaced by `value`."""
    body = raw.rstrip("\r\n")
    eq = body.index("=")
    rest = body[eq + 1:]
    lead = len(rest) - len(rest.lstrip())
    begin = eq + 1 + lead
    tail = begin + len(rest.strip())
    if not value:
        return raw[: eq + 1] + raw[tail:]
    if begin == tail and lead == 0:
        return raw[:begin] + " " + value + raw[tail:]
    return raw[:begin] + value + raw[tail:]


def _add_line(text: str, block: blocks.Block, key: str, value: str, *, path: str) -> str:
    """`text` with `key = value` added to the block after its last entry, as the ledger and
    inventory editors add a line: every old byte kept, the new line ending in the file's
    dominant line ending (`mdscan.newline`). The block's reader (`str.splitlines`) ends a
    line at a lone CR, git and those editors do not: copying that CR left the new line, the
    entry's and the fence's one line to git, so there only the LF that makes it CRLF goes
    before the new line (`mdscan.line_break`), a line end to both."""
    last = max(e.line for e in block.entries)
    at = sum(len(raw) for raw in text.splitlines(keepends=True)[:last])
    nl = mdscan.newline(mdscan.split_lines(text))
    brk = mdscan.line_break(text[:at], nl, rel=path)
    return text[:at] + brk + f"{key} = {value}{nl}" + text[at:]


def render(record: PinRecord, pin: Pin, *, restore: bool = False) -> str:
    """The protocol file with only the pin block's values changed (key order kept).

    `vllm_commit_id` is added when the new pin has one and never dropped, except by a
    rollback (`restore`) to a pin that had none.
    """
    path = str(record.path)
    current = record.block.as_dict()
    if COMMIT_ID in current and pin.commit_id is None and not restore:
        raise UsageError(f"refusing to drop {COMMIT_ID} from the pin block of {path}: the "
                         "assertion of the runtime's commit id is kept once made",
                         "build the Pin from a measured oracle (it reports __commit_id__)")
    wanted = pin.fields()
    changes = {k: v for k, v in wanted.items() if k in current and current[k] != v}
    text = set_values(record.text, record.block, changes, path=path)
    if COMMIT_ID in wanted and COMMIT_ID not in current:
        text = _add_line(text, record.block, COMMIT_ID, wanted[COMMIT_ID], path=path)
    elif COMMIT_ID in current and COMMIT_ID not in wanted:
        at = next(e.line for e in record.block.entries if e.key == COMMIT_ID)
        text = "".join(raw for n, raw in enumerate(text.splitlines(keepends=True), start=1)
                       if n != at)
    # Fail closed: the new text must read back as exactly this pin.
    try:
        again, _ = parse(text, path=path)
    except MalformedRecord as exc:
        raise UsageError(f"refusing to write an invalid pin: {exc.message}", exc.fix) from None
    if again != pin:
        raise UsageError(f"refusing to write pin {pin.commit}: it reads back as {again}",
                         "build the Pin with pins.from_values")
    return text
