"""Set-up: find a port's records by content (what `init` writes into the configuration).

`init` reads what the port states rather than guessing: a record at its default path is
that record (other files that look like one are listed, not counted against it); the
build mode is the pin block's distribution suffix; gates are the golden dumpers the
port's docs tell you to run (`tools/parity/dump_ops.py --out tests/parity/goldens`); the
port's own preferences conventions (a `developer-preferences.example.md`, `.env` names)
are mapped, not duplicated; projects the headers cite by name are listed with their
citation counts.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sync.headers import citations as headers
from sync.headers import oracles
from sync.infra import atomic, globs
from sync.infra.errors import MalformedRecord, SyncError
from sync.records import blocks, config, ledger, modes, pins

_SKIP = {".git", ".nox", "node_modules", "build", ".venv", "__pycache__", "third_party"}
# Where ported files are looked for: the default header globs' suffixes and the other
# sources and build files ports carry (`.cuh`, `CMakeLists.txt`); a ported file the default
# globs miss has its glob written (`header_globs`).
_SOURCE_EXT = {".h", ".hpp", ".cc", ".cpp", ".cu", ".py", ".cuh", ".c", ".cxx", ".hh", ".hxx",
               ".inl", ".ipp", ".pyi", ".cmake", "CMakeLists.txt"}


def _wanted(name: str, suffixes: set[str]) -> bool:
    return Path(name).suffix in suffixes or name in suffixes


def _files(root: Path, suffixes: set[str]) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if ((d not in _SKIP and not d.startswith("."))
                                                     or d == ".agents")
                             and not _nested_repo(Path(dirpath, d)))
        out += [Path(dirpath, f) for f in sorted(filenames) if _wanted(f, suffixes)]
    return out


def _nested_repo(path: Path) -> bool:
    """A folder that is a git repository of its own (a submodule, a vendored clone): not the
    port's files, whatever their comments say."""
    return (path / ".git").exists()


def header_glob(rel: str) -> str:
    """The header glob that reads the file at `rel`: its suffix, or its name (`CMakeLists.txt`)."""
    name = rel.rsplit("/", 1)[-1]
    suffix = Path(name).suffix
    return f"**/*{suffix}" if suffix and suffix in _SOURCE_EXT else f"**/{name}"


def _text(path: Path, bad: list[str] | None = None, rel: str = "") -> str:
    """A file's exact text. One that is not UTF-8 is read with replacement characters, as
    the scan reads port files (read as empty, its header and records were missed in
    silence), and located at its first bad byte in `bad` ("rel:LINE: is not UTF-8 (...)")."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text, where = atomic.decode_lenient(data)
    if where is not None and bad is not None:
        bad.append(f"{rel}:{where[0]}: {where[1]}")
    return text


def _count(text: str, info: str, rel: str) -> int:
    """Fenced blocks the record parsers would see (a prose mention of the fence is not one)."""
    if f"```{info}" not in text:
        return 0
    try:
        return len(blocks.find(text, info, path=rel))
    except MalformedRecord:
        return 1  # a broken block is still the record's home; `check` reports what is wrong


DEFAULTS = {"ledger": config.Config().ledger, "inventory": config.Config().inventory}


def discover(root: Path) -> dict[str, Any]:
    """Find the records by content, not by name: a record at its default path is that record;
    elsewhere a record must be unique or it is left default."""
    bad: list[str] = []  # every .md and source file is read by one of the two walks
    found = _candidates(root, bad)
    paths = {key: found[key][0] for key in ("protocol", "ledger", "inventory")
             if len(found[key]) == 1}
    for key, default in DEFAULTS.items():
        if default in found[key]:
            paths[key] = default  # the port states it: the default path holds it
    dirs = sorted({str(Path(p).parent.as_posix()) for p in found["oracles"]})
    if len(dirs) == 1:
        paths["oracles"] = f"{dirs[0]}/*.md"
    registry = _registry(root, found["oracles"])
    ported = _port_roots(root, registry, bad)
    return {"paths": paths, "found": found, "port_roots": ported.roots,
            "mirrored": [f"{top}/" for top in MIRRORABLE
                         if top == "vllm" or top in ported.sources],
            "header_globs": _missed_globs(ported.files),
            "cited_projects": dict(ported.projects.most_common()),
            "registered": sorted(p for p in ported.projects if registry.registered(p)),
            "not_utf8": sorted(bad)}


def _missed_globs(files: list[str]) -> dict[str, list[str]]:
    """The ported files the default header globs do not read, by the glob that would."""
    default = globs.any_of(config.Config().header_globs)
    out: dict[str, list[str]] = {}
    for rel in files:
        if default.match(rel) is None:
            out.setdefault(header_glob(rel), []).append(rel)
    return out


def _registry(root: Path, files: list[str]) -> oracles.Upstreams:
    """The oracles the found oracle files name (their id and upstream), for attribution."""
    known = []
    for rel in files:
        try:
            block = blocks.find(_text(root / rel), "oracle-pin", path=rel)[0]
        except (MalformedRecord, IndexError):
            continue
        values = block.as_dict()
        oid = values.get("id") or Path(rel).stem
        known.append(oracles.Oracle(oid, oracles.names_of(oid, values.get("upstream", ""))))
    return oracles.Upstreams(tuple(known))


def _candidates(root: Path, bad: list[str]) -> dict[str, list[str]]:
    """Markdown files that hold each record, by what they contain (those not UTF-8 in `bad`)."""
    found: dict[str, list[str]] = {"protocol": [], "ledger": [], "inventory": [], "oracles": []}
    for path in _files(root, {".md"}):
        rel = path.relative_to(root).as_posix()
        text = _text(path, bad, rel)
        # One entry per block: two blocks in one file are as ambiguous as two files.
        found["protocol"] += [rel] * _count(text, "parity-pin", rel)
        if _count(text, "oracle-pin", rel):
            found["oracles"].append(rel)
        if _has_ledger_header(text):
            found["ledger"].append(rel)
        if path.name == "porting-inventory.md" or ("## 9" in text and "T0" in text):
            found["inventory"].append(rel)
        if path.name.lower() == "readme.md":
            found["oracles"] = [o for o in found["oracles"] if o != rel]
    return found


def unread_pin_fences(root: Path) -> list[str]:
    """Where a pin block is fenced so that it is not read (`~~~`, indented): "rel:LINE opens
    one with '~~~parity-pin'", for the refusal that found none."""
    out = []
    for path in _files(root, {".md"}):
        rel = path.relative_to(root).as_posix()
        out += [f"{rel}:{no} opens one with {fence!r}"
                for no, fence in blocks.near_misses(_text(path), "parity-pin")]
    return out


def _has_ledger_header(text: str) -> bool:
    return any(line.lstrip().startswith("|") and tuple(ledger.split_row(line)) == ledger.COLUMNS
               for line in text.splitlines())


# vLLM's source trees a port can mirror: `vllm/` always, `csrc/` (the kernels) when the
# port's headers cite it. Tests, docs and tooling are not mirrored by default.
MIRRORABLE = ("csrc", "vllm")


@dataclass
class _Ported:
    """What the ported files' headers say: where they are, what else they cite."""

    files: list[str] = field(default_factory=list)  # every file with a ported-from header
    projects: Counter[str] = field(default_factory=Counter)  # oracles other than vLLM cited
    sources: set[str] = field(default_factory=set)  # top-level upstream dirs vLLM cites

    @property
    def roots(self) -> list[str]:
        return sorted({rel.split("/", 1)[0] for rel in self.files})


def _port_roots(root: Path, ups: oracles.Upstreams, bad: list[str]) -> _Ported:
    """The files with a ported-from header, the oracles other than vLLM their citation
    statements name (with citation counts), and the top-level upstream directories their
    vLLM citations cite (the files not UTF-8 in `bad`)."""
    out = _Ported()
    for path in _files(root, _SOURCE_EXT):
        rel = path.relative_to(root).as_posix()
        raw = headers.parse_header(_text(path, bad, rel)[:16384], rel)
        header = oracles.attribute(raw, ups, rel)
        if raw.kind == "PORTED":
            out.files.append(rel)
            out.sources.update(c.upstream_path.split("/", 1)[0] for c in header.citations
                               if c.oracle == ups.core)
        out.projects.update(c.oracle for c in header.citations if c.oracle != ups.core)
    return out


# -- what init reads beyond the record paths ------------------------------------------------------


def build_mode(root: Path, protocol: str) -> tuple[str, str] | None:
    """(build mode, the distribution version it comes from): the pin block's suffix
    (`...+g555967922.precompiled` is a precompiled build); None without one."""
    try:
        pin = pins.load(root / protocol, rel=protocol).pin
    except SyncError:
        return None
    mode = modes.from_suffix(pin.build_suffix) if pin.build_suffix is not None else None
    return (mode, pin.distribution_version) if mode is not None else None


_DUMPER = re.compile(r"(?P<script>(?:[\w.-]+/)*dump_[\w-]*\.py)\b(?P<args>[^'\n`]*)")


@dataclass(frozen=True)
class GoldenScript:
    argv: tuple[str, ...]  # with {python} and {out}, as [golden] scripts holds them
    out: str  # the goldens directory the docs name
    source: str  # "file:line" where the port says to run it


@dataclass(frozen=True)
class Gates:
    scripts: tuple[GoldenScript, ...] = ()
    suites: tuple[str, ...] = ()  # parity suites the port has (not configured: they need a build)
    hosts: tuple[str, ...] = ()  # gate hosts the docs name


def _joined_lines(text: str) -> list[tuple[int, str]]:
    """Lines with shell continuations (`\\` at the end) joined, each with its first line."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for no, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = no
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        out.append((start, pending + raw))
        pending = ""
    return out


def _golden_commands(root: Path, rel: str, text: str) -> list[GoldenScript]:
    out = []
    for no, line in _joined_lines(text):
        for m in _DUMPER.finditer(line):
            script = m["script"]
            try:
                args = shlex.split(m["args"].split(";")[0].split("&&")[0])
            except ValueError:
                continue
            if "--out" not in args or args.index("--out") + 1 >= len(args):
                continue
            if not (root / script).is_file() or any(a[:1] in "$<" for a in args):
                continue  # a placeholder (`$MODEL`, `<dir>`) needs a person, not init
            i = args.index("--out")
            outdir = args[i + 1]
            argv = ("{python}", script, *args[:i], "--out", "{out}", *args[i + 2:])
            out.append(GoldenScript(argv, outdir, f"{rel}:{no}"))
    return out


_HOST = re.compile(r"\bssh\s+([\w-]+\.[\w.-]*\w)\s")
# Where a port tells how to run its gates: READMEs, its gates record and the protocol (not
# its logs and plans, whose commands carry one day's placeholders).
_GATE_DOCS = ("readme.md", "gates.md", "upstream-sync.md")


def gates(root: Path) -> Gates:
    """The golden dumpers the port's docs say to run, its parity suites, its gate hosts."""
    scripts: dict[tuple[str, ...], GoldenScript] = {}
    hosts: list[str] = []
    for path in _files(root, {".md"}):
        if path.name.lower() not in _GATE_DOCS:
            continue
        text = _text(path)
        if "dump_" not in text and "ssh " not in text:
            continue
        rel = path.relative_to(root).as_posix()
        for g in _golden_commands(root, rel, text):
            scripts.setdefault(g.argv, g)
        hosts += _HOST.findall(text)
    suites = sorted(p.relative_to(root).as_posix() for p in root.glob("tests/parity/test_*")
                    if p.is_file())
    return Gates(tuple(scripts.values()), tuple(suites), tuple(dict.fromkeys(hosts)))


# The port's own names for the values the preferences hold.
_SYNONYMS = {
    "VLLM_SOURCE": "reference_checkout", "VLLM_REFERENCE": "reference_checkout",
    "GATE_HOST": "gate_hosts", "GATE_HOSTS": "gate_hosts", "VLLM_OMNI_SOURCE": "omni_source",
    "ORACLE_HOME": "oracle_home", "VLLM_ORACLE_HOME": "oracle_home",
}
_ENV_NAME = re.compile(r"(?m)^\s*(?:export\s+)?([A-Z][A-Z0-9_]{2,})\s*=|`([A-Z][A-Z0-9_]{2,})`")


@dataclass(frozen=True)
class Conventions:
    example: str | None  # the port's own preferences example, if it has one
    env_files: tuple[str, ...]  # .env, .env.example
    names: tuple[str, ...]  # the variable names they use
    mapped: dict[str, str] = field(default_factory=dict)  # preference key -> the port's name
    unmapped: tuple[str, ...] = ()  # names no preference holds


def conventions(root: Path) -> Conventions:
    """The port's own preferences conventions: its example file and `.env` names."""
    example = next((p.relative_to(root).as_posix() for p in
                    (root / ".agents/developer-preferences.example.md",
                     root / "developer-preferences.example.md",
                     root / "docs/developer-preferences.example.md") if p.is_file()), None)
    env_files = tuple(n for n in (".env", ".env.example") if (root / n).is_file())
    names: list[str] = []
    for rel in ([example] if example else []) + list(env_files):
        for a, b in _ENV_NAME.findall(_text(root / rel)):
            names.append(a or b)
    names = list(dict.fromkeys(names))
    ours = _pref_vars()
    mapped = {_SYNONYMS[n]: n for n in names if n in _SYNONYMS and n not in ours}
    unmapped = tuple(n for n in names if n not in _SYNONYMS and n not in ours)
    return Conventions(example, env_files, tuple(names), mapped, unmapped)


def _pref_vars() -> set[str]:
    from sync.records import prefs

    return {k.variable for k in prefs.KEYS.values()}

