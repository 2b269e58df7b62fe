"""Port configuration: optional TOML at `.agents/upstream-sync.toml`.

Every key has a default that matches the real layout, so a port without the file
works. Unknown keys and paths that escape the port are refused: a typo in a path
must not silently fall back to a default.

Each key is declared once, as a field of `Config` (or of the record a table holds:
`Mapping`, `Rule`, `OracleConfig`, `Suite`) whose metadata is a `Key`: the TOML table
it sits in, how its value is read and what it means. The parser, the set of known
keys and the docs' key table (`keys_table`, rendered into docs/adopting.md by
`python -m sync.dev.docs`) all come from those fields.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal, cast

from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord, UsageError
from sync.infra.paths import confined
from sync.records.decisions import RULED, Disposition
from sync.records.modes import MODES, BuildMode
from sync.records.schema import TOML_BOM

CONFIG_PATH = ".agents/upstream-sync.toml"
SCHEMA = 1
_RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# How a key's value is read: (the TOML value, where it sits as "table.key") -> the field's value.
Reader = Callable[[object, str], Any]


@dataclass(frozen=True)
class Key:
    """One configuration key: where it sits, how it is read, what it means (a field's metadata)."""

    doc: str
    read: Reader | None  # None: read by its table's own function (a rule's id, say)
    table: str = ""  # the TOML table of a `Config` field ("" for the top level)
    name: str | None = None  # the TOML key, when it is not the field's name
    shown: str | None = None  # the default as the docs show it, when not the value itself
    item: type | None = None  # the record each entry of an array or table of tables holds
    each: str | None = None  # "<id>" for a table of named tables; None: an array of tables
    variants: tuple[tuple[str, Any], ...] = ()  # named entries whose defaults differ


_KEY = "upstream_sync.key"


def _key(default: Any, read: Reader | None, doc: str, **kw: Any) -> Any:
    return field(default=default, metadata={_KEY: Key(doc, read, **kw)})


def _doc(doc: str) -> dict[str, Key]:
    """Metadata for a key its table's function reads itself (a required key)."""
    return {_KEY: Key(doc, None)}


# -- readers: each refuses a wrong value with one line naming the key -------------------------


def _bad(message: str) -> UsageError:
    return UsageError(message, f"fix {CONFIG_PATH}")


def _path(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(f"{where} must be a non-empty string")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        # A NUL would only fail later, inside os calls, as a ValueError.
        raise _bad(f"{where} = {value!r} contains a control character")
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or "\\" in value:
        raise UsageError(f"{where} = {value!r} escapes the port",
                         f"use a path relative to the port root in {CONFIG_PATH}")
    return value


def _strs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{where} must be a list of strings")
    return tuple(value)


def _paths(value: object, where: str) -> tuple[str, ...]:
    return tuple(_path(v, where) for v in _strs(value, where))


def _words(value: object, where: str) -> tuple[str, ...]:
    words = _strs(value, where)
    for w in words:
        if re.fullmatch(r"[a-z][a-z0-9]*", w) is None:
            raise _bad(f"{where}: {w!r} is not a lowercase word (letters and digits)")
    return words


def _absolute(value: object, where: str) -> tuple[str, ...]:
    dirs = _strs(value, where)
    for d in dirs:
        if not PurePosixPath(d).is_absolute() or "\n" in d or "\0" in d:
            raise UsageError(f"{where}: {d!r} is not an absolute directory",
                             f"give absolute site-packages paths in {CONFIG_PATH}")
    return dirs


def _bool(value: object, where: str) -> bool:
    # bool("no") is True: a quoted flag must be refused, not read as its truthiness.
    if not isinstance(value, bool):
        raise _bad(f"{where} must be true or false, not {value!r}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(f"{where} must be a non-empty string")
    return value


def _one_of(*choices: str) -> Reader:
    def read(value: object, where: str) -> str:
        if value not in choices:
            raise _bad(f"{where} must be " + " or ".join(repr(c) for c in choices))
        return value

    return read


def _env(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _bad(f"{where} must be a table of strings")
    return tuple(sorted(value.items()))


def _rewrites(value: object, where: str) -> tuple[tuple[str, str], ...]:
    """A table of cited prefix -> upstream prefix, longest first (so the most specific wins)."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _bad(f"{where} must be a table of strings")
    for k, v in value.items():
        if not k or any(ord(c) < 32 for c in k + v) or k.startswith("/") or ".." in k + v:
            raise _bad(f"{where}: {k!r} = {v!r} is not a relative path prefix")
    return tuple(sorted(value.items(), key=lambda kv: (-len(kv[0]), kv[0])))


def _argv_lists(value: object, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list) or not all(
            isinstance(s, list) and s and all(isinstance(a, str) for a in s) for s in value):
        raise _bad(f"{where} must be a list of argument lists")
    return tuple(tuple(s) for s in value)


def _schema(value: object, where: str) -> int:
    if type(value) is not int or value != SCHEMA:  # True == 1, but is not a schema number
        raise UsageError(f"{CONFIG_PATH} has schema {value!r}, expected {SCHEMA}",
                         "upgrade upstream-sync or fix the schema number")
    return value


# -- the records the tables of tables hold ----------------------------------------------------


@dataclass(frozen=True)
class Mapping:
    """`port` glob (e.g. src/vllm/**/*.cpp) mirrored from `upstream` template ({stem} path)."""

    port: str = field(metadata={_KEY: Key("the port glob, e.g. `\"src/vllm/**/*.cpp\"`",
                                          _path)})
    upstream: str = field(metadata={_KEY: Key("the upstream path template, e.g. "
                                              "`\"vllm/{stem}.py\"`", _path)})


@dataclass(frozen=True)
class Rule:
    """A classification rule: matches by subject tag and/or path globs."""

    id: str = field(metadata=_doc("the rule's name, unique; reports cite it as `rule <id>`"))
    disposition: Disposition = field(metadata=_doc(
        "what a matching commit is: " + ", ".join(RULED)))
    reason: str = field(metadata=_doc("why, written into the report entry"))
    tags: tuple[str, ...] = _key((), _strs, "matches a commit with one of these subject tags "
                                 "(`[ROCm]`, case-insensitive)")
    paths_any: tuple[str, ...] = _key((), _strs, "matches a commit changing a path that one "
                                      "of these upstream globs matches")
    paths_all: tuple[str, ...] = _key((), _strs, "matches a commit when each path it changes "
                                      "matches one of these upstream globs")
    paths_none: tuple[str, ...] = _key((), _strs, "matches a commit changing no path that one "
                                       "of these upstream globs matches (`[CI]` → IGNORE, "
                                       "unless it edits `vllm/`)")


@dataclass(frozen=True)
class OracleConfig:
    id: str
    build_env: tuple[tuple[str, str], ...] = _key(
        (), _env, "environment for the build, e.g. `{ VLLM_USE_PRECOMPILED = \"1\" }`",
        shown="`{}`")
    build_mode: BuildMode | None = _key(  # noqa: RUF009 - BuildMode is a Literal (immutable)
        None, _one_of(*MODES), "how the oracle is built, as vLLM builds: `\"source\"`, "
        "`\"precompiled\"`, `\"empty\"` (Python only, no compiler) or `\"cpu\"`; the tool sets "
        "the variables each needs. Unset: the pin block's suffix says (core oracle), "
        "`\"source\"` otherwise", shown="the pin's suffix")
    require_flashinfer: bool | None = _key(
        None, _bool, "the probe must find FlashInfer (unset: yes for `source` and "
        "`precompiled`, no for `empty` and `cpu`, which never install it)",
        shown="by build mode")
    require_torch: bool = _key(False, _bool, "the probe must find torch")
    source_variable: str = _key("VLLM_SOURCE", _str, "the environment variable naming the "
                                "oracle's source checkout")
    distribution: str = _key("vllm", _str, "the distribution the oracle installs")
    module: str = _key("vllm", _str, "the module the probe imports")
    image_site_dirs: tuple[str, ...] = _key(
        (), _absolute, "absolute site directories of a gate host's image (its CUDA torch, "
        "say) appended to the oracle's path by a .pth file: the oracle's own packages still "
        "come first, and verify still requires exactly one distribution of the oracle")
    names: tuple[str, ...] = _key(
        (), _strs, "other names the port's headers call this oracle's upstream by (a citation "
        "naming one, `from ggml @ <sha>`, is attributed to this oracle), e.g. `[\"ggml\"]`")
    paths: tuple[str, ...] = _key(
        (), _strs, "cited path prefixes that belong to this oracle's upstream (a citation of "
        "`ggml/src/x.c` is attributed to it), e.g. `[\"ggml/\"]`")
    torch_version: str | None = _key(
        None, _str, "the Torch release the oracle must have, compared without its local "
        "part (`\"2.13.0\"` matches `2.13.0+cpu`)", shown="none")
    constraints: str | None = _key(
        None, _path, "a constraints file in the port (`pip -c`) applied to the oracle's "
        "install, not its build: a lock of the dependency set", shown="none")
    installer: Literal["auto", "pip", "uv"] = _key(
        "auto", _one_of("auto", "pip", "uv"), "what builds and installs the oracle: "
        "`\"auto\"` takes uv where it is found, pip otherwise")


@dataclass(frozen=True)
class Suite:
    name: str
    command: tuple[str, ...] = _key((), _strs, "the suite's argument list, run without a shell "
                                    "from the port root. Placeholders: `{port} {target} "
                                    "{target7}`", shown="required")
    needs_gpu: bool = _key(False, _bool, "the suite needs a GPU")


# Oracles whose defaults are not the core oracle's.
_KNOWN_ORACLES: tuple[tuple[str, OracleConfig], ...] = (
    ("vllm-omni", OracleConfig(id="vllm-omni", source_variable="VLLM_OMNI_SOURCE",
                               distribution="vllm-omni", module="vllm_omni",
                               require_flashinfer=False)),
)


def _default_oracle(oracle_id: str) -> OracleConfig:
    known = dict(_KNOWN_ORACLES).get(oracle_id)
    return OracleConfig(id=oracle_id) if known is None else known


# -- the functions for tables of tables -------------------------------------------------------


def _keyed(cls: type) -> Iterator[tuple[Field[Any], Key]]:
    for f in fields(cls):
        key = f.metadata.get(_KEY)
        if key is not None:
            yield f, key


def _toml_name(f: Field[Any], key: Key) -> str:
    return key.name or f.name


# An unknown key: (where it sits, "table." or "", the key, the keys known there).
Unknown = tuple[str, str, set[str]]


def _only(table: dict[str, Any], allowed: set[str], where: str) -> None:
    _refuse_unknown([(where, k, allowed) for k in table if k not in allowed])


def _guess(where: str, key: str, allowed: set[str]) -> str:
    """' (did you mean `x`?)' when a known key is close to `key`: one of its own table's,
    else, for a key at the top level, one of a table's (`[surface] port_roots`)."""
    near = difflib.get_close_matches(key, sorted(allowed), n=1)
    if near:
        return f" (did you mean `{near[0]}`?)"
    if where:
        return ""
    elsewhere = {_toml_name(f, k): k.table for f, k in _keyed(Config) if k.table}
    near = difflib.get_close_matches(key, sorted(elsewhere), n=1)
    return f" (did you mean `[{elsewhere[near[0]]}] {near[0]}`?)" if near else ""


def _refuse_unknown(unknown: list[Unknown]) -> None:
    """Every unknown key in one line, each with the known key it is close to, if any."""
    if not unknown:
        return
    named = [f"{where}{key}{_guess(where, key, allowed)}" for where, key, allowed in unknown]
    if len(named) == 1:
        where, _key_name, allowed = unknown[0]
        raise UsageError(f"unknown key {named[0]} in {CONFIG_PATH}",
                         f"remove it; known keys{' in [' + where[:-1] + ']' if where else ''}: "
                         f"{', '.join(sorted(allowed))}")
    raise UsageError(f"{len(named)} unknown keys in {CONFIG_PATH}: {', '.join(named)}",
                     "remove them, or rename each to the key suggested")


def _item_tables(value: object, key: Key, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """("where.", entry) of each table an array of tables holds, ("where.<name>.", entry) of
    each a table of named tables holds; what is not a table is left to its reader."""
    if key.each is None:
        for entry in value if isinstance(value, list) else ():
            if isinstance(entry, dict):
                yield f"{where}.", entry
    elif isinstance(value, dict):
        for name, entry in value.items():
            if isinstance(entry, dict):
                yield f"{where}.{name}.", entry


def _unknown_keys(doc: dict[str, Any]) -> list[Unknown]:
    """Every unknown key of the document in its order, those of nested tables included."""
    out: list[Unknown] = []
    for top, value in doc.items():
        if top not in _top_level():
            out.append(("", top, _top_level()))
            continue
        own = [(f, k) for f, k in _keyed(Config) if k.table == top]
        if own and isinstance(value, dict):
            allowed = {_toml_name(f, k) for f, k in own}
            out += [(f"{top}.", k, allowed) for k in value if k not in allowed]
            items = [(f"{top}.{_toml_name(f, k)}", value.get(_toml_name(f, k)), k) for f, k in own]
        else:
            items = [(top, value, k) for f, k in _keyed(Config)
                     if not k.table and _toml_name(f, k) == top]
        for at, held, key in items:
            if key.item is not None:
                allowed = {_toml_name(f, k) for f, k in _keyed(key.item)}
                out += [(where, k, allowed) for where, entry in _item_tables(held, key, at)
                        for k in entry if k not in allowed]
    return out


def _fields(cls: type, table: dict[str, Any], where: str) -> dict[str, Any]:
    """The keys of `table` that `cls` declares, read; a required key is read even when absent
    (its reader refuses the absence), the others keep their defaults."""
    _only(table, {_toml_name(f, k) for f, k in _keyed(cls)}, where + ".")
    out: dict[str, Any] = {}
    for f, key in _keyed(cls):
        name = _toml_name(f, key)
        if key.read is not None and (name in table or f.default is MISSING):
            out[f.name] = key.read(table.get(name), f"{where}.{name}")
    return out


def _named_tables(value: object, where: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(name, "where.name", table) of each `[where.<name>]`, in name order."""
    if not isinstance(value, dict):
        raise _bad(f"[{where}] must be a table")
    for name, table in sorted(value.items()):
        if not isinstance(table, dict):
            raise _bad(f"[{where}.{name}] must be a table")
        yield name, f"{where}.{name}", table


def _mappings(value: object, where: str) -> tuple[Mapping, ...]:
    if not isinstance(value, list):
        raise _bad(f"{where} must be an array of tables")
    return tuple(_mapping(m, where) for m in value)


def _mapping(m: object, where: str) -> Mapping:
    if not isinstance(m, dict):
        raise _bad(f"{where} entries must be tables")
    return Mapping(**_fields(Mapping, m, where))


def _rules(value: object, where: str) -> tuple[Rule, ...]:
    if not isinstance(value, list):
        raise _bad(f"{where} must be an array of tables ([[{where}]])")
    seen: set[str] = set()
    return tuple(_rule(r, seen) for r in value)


def _rule(r: object, seen: set[str]) -> Rule:
    if not isinstance(r, dict):
        raise _bad("each [[rules]] entry must be a table")
    _only(r, {_toml_name(f, k) for f, k in _keyed(Rule)}, "rules.")
    rid, disp, reason = r.get("id"), r.get("disposition"), r.get("reason")
    if not isinstance(rid, str) or not rid or rid in seen:
        raise _bad(f"rule id {rid!r} is missing or repeated")
    if not _RULE_ID.fullmatch(rid):
        # Reports cite it in an entry's `_(auto: rule <id>)_` tail, which is read back.
        raise _bad(f"rule id {rid[:40]!r} is not a name (letters, digits, '.', '_', '-')")
    seen.add(rid)
    if disp not in RULED:
        raise _bad(f"rule {rid}: disposition {disp!r} is not one of {', '.join(RULED)}")
    if not isinstance(reason, str) or not reason.strip():
        raise _bad(f"rule {rid}: reason is required")
    matchers = _fields(Rule, r, f"rules.{rid}")
    if not any(matchers.values()):
        raise _bad(f"rule {rid} matches nothing (no tags, paths_any, paths_all or paths_none)")
    return Rule(rid, cast(Disposition, disp), reason.strip(), **matchers)


def _oracles(value: object, where: str) -> tuple[OracleConfig, ...]:
    named = list(_named_tables(value, where))
    for oid, _at, _table in named:
        if not _RULE_ID.fullmatch(oid):
            # It names the oracle's environment and its isolation record: a name, not a path.
            raise _bad(f"oracle id {oid[:40]!r} is not a name (letters, digits, '.', '_', '-')")
    return tuple(replace(_default_oracle(oid), **_fields(OracleConfig, table, at))
                 for oid, at, table in named)


def _suites(value: object, where: str) -> tuple[Suite, ...]:
    return tuple(_suite(name, table, at) for name, at, table in _named_tables(value, where))


def _suite(name: str, table: dict[str, Any], where: str) -> Suite:
    if not _RULE_ID.fullmatch(name):
        # Its gate is recorded and reported as `parity:<name>`.
        raise _bad(f"parity suite name {name[:40]!r} is not a name (letters, digits, '.', "
                   "'_', '-')")
    suite = Suite(name, **_fields(Suite, table, where))
    if not suite.command:
        raise _bad(f"parity suite {name} has no command")
    return suite


# -- the configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The port's configuration; fields in the order the file's keys are read and documented."""

    schema: int = _key(SCHEMA, _schema, "format version")
    protocol: str = _key(".agents/upstream-sync.md", _path,
                         "the protocol file with the pin block", table="paths")
    oracles: str = _key(".agents/oracles/*.md", _path, "glob of the oracle files",
                        table="paths")
    sync_dir: str = _key(".agents/sync", _path, "reports, decisions, cycle, gates, state events",
                         table="paths")
    ledger: str = _key(".agents/parity-ledger.md", _path, "the parity ledger", table="paths")
    inventory: str = _key(".agents/porting-inventory.md", _path, "the porting inventory",
                          table="paths")
    preferences: str = _key(".agents/developer-preferences.md", _path,
                            "the untracked preferences file", table="paths")
    preference_variables: tuple[tuple[str, str], ...] = _key(
        (), _env, "the port's own environment variable for a preference, read as well as "
        "upstream-sync's (`init` maps them), e.g. `{ gate_hosts = \"GATE_HOST\" }`",
        table="preferences", name="variables", shown="`{}`")
    port_roots: tuple[str, ...] = _key(("src",), _paths, "where ported files live",
                                       table="surface")
    mirrored: tuple[str, ...] = _key(("vllm/",), _paths,
                                     "upstream subtrees the port mirrors; commits touching only "
                                     "other paths are IGNORE", table="surface")
    header_globs: tuple[str, ...] = _key(
        ("**/*.h", "**/*.hpp", "**/*.cc", "**/*.cpp", "**/*.cu", "**/*.py"), _paths,
        "files whose leading comment is read for citations", table="surface")
    rewrite_prefixes: tuple[tuple[str, str], ...] = _key(
        (("vllm/csrc/", "csrc/"), ("vllm/tests/", "tests/"), ("vllm/docs/", "docs/")),
        _rewrites, "how the port writes upstream paths under another prefix: a cited "
        "`vllm/csrc/x.cu` is upstream `csrc/x.cu`", table="surface",
        shown='`{ "vllm/csrc/" = "csrc/", "vllm/tests/" = "tests/", "vllm/docs/" = "docs/" }`')


    model_globs: tuple[str, ...] = _key(
        ("vllm/model_executor/models/**", "vllm/models/**"), _paths,
        "upstream model files: a registry row naming a model changed in the same commit "
        "that no port file cites is an addition for a model the port lacks", table="surface")
    span_globs: tuple[str, ...] = _key(("**/*.md",), _paths, "files scanned for "
                                       "`<!--pin:commit-->` / `<!--pin:label-->` spans",
                                       table="surface")
    mappings: tuple[Mapping, ...] = _key((), _mappings, "a port glob mirrored from an upstream "
                                         "template", table="surface", item=Mapping)
    rules: tuple[Rule, ...] = _key((), _rules, "a classification rule. It needs at least one "
                                   "matcher (`tags`, `paths_any`, `paths_all`, `paths_none`) "
                                   "and matches a "
                                   "commit when each matcher it has matches. The first rule "
                                   "that matches classifies the commit; a decision outranks "
                                   "every rule", item=Rule)
    untargeted_platforms: tuple[str, ...] = _key(
        (), _words, "words naming platforms the port does not target (`rocm`, `xpu`): a "
        "changed definition named for one (`rocm_gemm`, `is_xpu`), or whose every changed "
        "line is under an `if` that requires one, is INVENTORY (`platform-not-targeted`) "
        "where it would hit; a word matches a name's part, with digits after it (`gfx` "
        "matches `gfx1250`)", table="classify", shown="`[]`")
    behind_without_note: Literal["warning", "error"] = _key(
        "warning", _one_of("warning", "error"), "`\"error\"` makes a per-file pin behind the "
        "parity pin without a ledger note fail `check`", table="check")
    pin_copy_roots: tuple[str, ...] = _key((), _paths, "where `check` looks for literal copies "
                                           "of the pin and of each omni oracle's pin (a stale "
                                           "copy is an error)", table="check")
    feature_globs: tuple[str, ...] = _key(("src/**", "tests/**"), _paths,
                                          "feature paths for `check-commit` (`init` writes each "
                                          "port root's files and `tests/**`)", table="check")
    oracle_configs: tuple[OracleConfig, ...] = _key(
        (), _oracles, "one oracle's build and probe; `<id>` names it (`vllm`, `vllm-omni`)",
        name="oracles", item=OracleConfig, each="<id>", variants=_KNOWN_ORACLES)
    golden_dir: str = _key("goldens", _path, "golden cases, `<dir>/<case>/…` plus "
                           "`manifest.json`", table="golden", name="dir")
    golden_scripts: tuple[tuple[str, ...], ...] = _key(
        (), _argv_lists, "argument lists run without a shell, each starting with `{python}`. "
        "Placeholders: `{python} {env} {out} {port} {oracle} {commit} {target} {shard} "
        "{shards}`", table="golden", name="scripts")
    golden_oracle: str = _key("vllm", _str, "default `--oracle`", table="golden",
                              name="oracle")
    golden_needs_gpu: bool = _key(True, _bool, "gate hosts must show a GPU", table="golden",
                                  name="needs_gpu")
    suites: tuple[Suite, ...] = _key((), _suites, "one parity suite", table="parity",
                                     item=Suite, each="<name>")
    gates_none: bool = _key(False, _bool, "`true` declares that the port has no gates: "
                            "without golden scripts or parity suites, an advance refuses "
                            "unless this says so", table="gates", name="none")
    source: str | None = None  # the TOML file this came from, None for defaults
    raw: dict[str, Any] = field(default_factory=dict)

    def sets(self, table: str, key: str) -> bool:
        """Whether the file sets `[table] key` itself, rather than leaving it to its default."""
        section = self.raw.get(table) if table else self.raw
        return isinstance(section, dict) and key in section

    def oracle(self, oracle_id: str) -> OracleConfig:
        for oc in self.oracle_configs:
            if oc.id == oracle_id:
                return oc
        return _default_oracle(oracle_id)


def _top_level() -> set[str]:
    return {k.table or _toml_name(f, k) for f, k in _keyed(Config)}


def _table(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise _bad(f"[{key}] must be a table")
    return value


def _toml(text: str) -> dict[str, Any]:
    if text.startswith("\ufeff"):
        raise UsageError(f"{CONFIG_PATH} is {TOML_BOM[0]}", TOML_BOM[1])
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{CONFIG_PATH} is not valid TOML: {exc}", "fix the syntax") from None
    except RecursionError:
        # tomllib recurses per nested array/inline table; deep nesting is not a config.
        raise UsageError(f"{CONFIG_PATH} nests too deeply", "fix the syntax") from None
    except ValueError:  # an integer of more than 4300 digits
        raise UsageError(f"{CONFIG_PATH} has a value out of bounds", "fix the syntax") from None


def parse(text: str) -> Config:
    """Refuse every unknown key at once (a file with several typos is fixed in one run), then
    read the keys in `Config`'s order: the first wrong value in that order is the one named."""
    doc = _toml(text)
    _refuse_unknown(_unknown_keys(doc))
    kw: dict[str, Any] = {"raw": doc}
    tables: dict[str, dict[str, Any]] = {"": doc}
    for f, key in _keyed(Config):
        table = tables.get(key.table)
        if table is None:
            table = tables[key.table] = _table(doc, key.table)
        name = _toml_name(f, key)
        if name in table and key.read is not None:
            kw[f.name] = key.read(table[name], f"{key.table}.{name}".lstrip("."))
    return Config(**kw)


def _sets_key(doc: dict[str, Any]) -> bool:
    """Whether the document sets any key (a table holding nothing sets none)."""
    return any(not isinstance(v, dict) or _sets_key(v) for v in doc.values())


def _nothing(text: str, doc: dict[str, Any]) -> UsageError:
    why = "empty" if not text.strip() else "only empty tables" if doc else "only comments"
    return UsageError(f"{CONFIG_PATH} sets nothing ({why})",
                      "restore it from git, or run 'upstream-sync init --force'")


def load(root: Path) -> Config:
    """The port's configuration; the defaults only when it has no file. A file that sets no
    key is refused: it is a truncated or emptied configuration far more often than a port
    choosing every default, and the defaults would reclassify its cycle in silence."""
    path = confined(root, CONFIG_PATH)
    if not path.exists():
        return Config()
    try:
        text = read_record(path, rel=CONFIG_PATH)
    except MalformedRecord as exc:  # configuration is a usage matter (exit 2)
        raise UsageError(exc.message, exc.fix) from None
    cfg = parse(text)
    if not _sets_key(cfg.raw):
        raise _nothing(text, cfg.raw)
    return replace(cfg, source=str(path))


# -- the docs' key table ----------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _shown(f: Field[Any], key: Key) -> str:
    if key.shown is not None:
        return key.shown
    if key.item is not None or f.default is MISSING:
        return "none" if key.item is not None else "required"
    return f"`{_toml_value(f.default)}`"


def _variants(f: Field[Any], variants: tuple[tuple[str, Any], ...]) -> str:
    differ = [(name, getattr(v, f.name)) for name, v in variants
              if getattr(v, f.name) != f.default]
    return "".join(f" (`{name}`: `{_toml_value(value)}`)" for name, value in differ)


def _rows() -> Iterator[tuple[str, str, str]]:
    for f, key in _keyed(Config):
        name = _toml_name(f, key)
        if key.item is None:
            yield (f"`[{key.table}] {name}`" if key.table else f"`{name}`"), _shown(f, key), key.doc
            continue
        where = f"{key.table}.{name}".lstrip(".")
        head = f"[[{where}]]" if key.each is None else f"[{where}.{key.each}]"
        yield f"`{head}`", _shown(f, key), key.doc
        for g, k in _keyed(key.item):
            yield (f"`{head} {_toml_name(g, k)}`", _shown(g, k) + _variants(g, key.variants),
                   k.doc)


def keys_table() -> str:
    """The configuration keys as the markdown table of docs/adopting.md §3."""
    lines = ["| table / key | default | meaning |", "|---|---|---|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _rows()]
    return "\n".join(lines) + "\n"
