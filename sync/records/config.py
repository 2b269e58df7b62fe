"""Port configuration: optional TOML at `.agents/upstream-sync.toml`.

Every key has a default that matches the real layout, so a port without the file
works. Unknown keys and paths that escape the port are refused: a typo in a path
must not silently fall back to a default.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypedDict

from sync.infra.errors import UsageError

CONFIG_PATH = ".agents/upstream-sync.toml"
SCHEMA = 1
Disposition = Literal["PORT-NOW", "INVENTORY", "IGNORE"]
DISPOSITIONS: tuple[Disposition, ...] = ("PORT-NOW", "INVENTORY", "IGNORE")


class ConfigDoc(TypedDict, total=False):
    schema: int
    paths: dict[str, str]
    surface: dict[str, Any]
    rules: list[dict[str, Any]]
    check: dict[str, Any]
    oracles: dict[str, dict[str, Any]]
    golden: dict[str, Any]
    parity: dict[str, Any]


@dataclass(frozen=True)
class Rule:
    """A classification rule: matches by subject tag and/or path globs."""

    id: str
    disposition: Disposition
    reason: str
    tags: tuple[str, ...] = ()
    paths_any: tuple[str, ...] = ()
    paths_all: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mapping:
    """`port` glob (e.g. src/vllm/**/*.cpp) mirrored from `upstream` template ({stem} path)."""

    port: str
    upstream: str


@dataclass(frozen=True)
class OracleConfig:
    id: str
    build_env: tuple[tuple[str, str], ...] = ()
    build_mode: str = "source"
    require_flashinfer: bool = True
    require_torch: bool = False
    source_variable: str = "VLLM_SOURCE"
    distribution: str = "vllm"
    module: str = "vllm"
    # Absolute site directories of a gate host's image (its CUDA torch, say) appended to the
    # oracle's path by a .pth file: the oracle's own packages still come first, and verify
    # still requires exactly one distribution of the oracle, inside its environment.
    image_site_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    name: str
    command: tuple[str, ...]
    needs_gpu: bool = False


@dataclass(frozen=True)
class Config:
    protocol: str = ".agents/upstream-sync.md"
    oracles: str = ".agents/oracles/*.md"
    sync_dir: str = ".agents/sync"
    ledger: str = ".agents/parity-ledger.md"
    inventory: str = ".agents/porting-inventory.md"
    preferences: str = ".agents/developer-preferences.md"
    port_roots: tuple[str, ...] = ("src",)
    mirrored: tuple[str, ...] = ("vllm/",)
    header_globs: tuple[str, ...] = ("**/*.h", "**/*.hpp", "**/*.cc", "**/*.cpp", "**/*.cu",
                                     "**/*.py")
    mappings: tuple[Mapping, ...] = ()
    rules: tuple[Rule, ...] = ()
    behind_without_note: Literal["warning", "error"] = "warning"
    pin_copy_roots: tuple[str, ...] = ()
    feature_globs: tuple[str, ...] = ("src/**", "tests/**")
    oracle_configs: tuple[OracleConfig, ...] = ()
    golden_dir: str = "goldens"
    golden_scripts: tuple[tuple[str, ...], ...] = ()
    golden_oracle: str = "vllm"
    golden_needs_gpu: bool = True
    suites: tuple[Suite, ...] = ()
    span_globs: tuple[str, ...] = ("**/*.md",)
    source: str | None = None  # the TOML file this came from, None for defaults
    raw: ConfigDoc = field(default_factory=lambda: ConfigDoc())

    def oracle(self, oracle_id: str) -> OracleConfig:
        for oc in self.oracle_configs:
            if oc.id == oracle_id:
                return oc
        if oracle_id == "vllm-omni":
            return OracleConfig(id=oracle_id, source_variable="VLLM_OMNI_SOURCE",
                                distribution="vllm-omni", module="vllm_omni",
                                require_flashinfer=False)
        return OracleConfig(id=oracle_id)


_PATH_KEYS = ("protocol", "oracles", "sync_dir", "ledger", "inventory", "preferences")


def _safe_rel(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} must be a non-empty string", f"fix {CONFIG_PATH}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        # A NUL would only fail later, inside os calls, as a ValueError.
        raise UsageError(f"{where} = {value!r} contains a control character",
                         f"fix {CONFIG_PATH}")
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or "\\" in value:
        raise UsageError(f"{where} = {value!r} escapes the port",
                         f"use a path relative to the port root in {CONFIG_PATH}")
    return value


def _strs(value: object, where: str, *, paths: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of strings", f"fix {CONFIG_PATH}")
    return tuple(_safe_rel(v, where) if paths else v for v in value)


def _absolute(value: object, where: str) -> tuple[str, ...]:
    dirs = _strs(value, where)
    for d in dirs:
        if not PurePosixPath(d).is_absolute() or "\n" in d or "\0" in d:
            raise UsageError(f"{where}: {d!r} is not an absolute directory",
                             f"give absolute site-packages paths in {CONFIG_PATH}")
    return dirs


def _only(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise UsageError(f"unknown key {where}{unknown[0]} in {CONFIG_PATH}",
                         f"remove it; known keys: {', '.join(sorted(allowed))}")


def _table(doc: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"[{where}{key}] must be a table", f"fix {CONFIG_PATH}")
    return value


def _bool(table: dict[str, Any], key: str, default: bool, where: str) -> bool:
    # bool("no") is True: a quoted flag must be refused, not read as its truthiness.
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise UsageError(f"{where}{key} must be true or false, not {value!r}",
                         f"fix {CONFIG_PATH}")
    return value


def _str(table: dict[str, Any], key: str, default: str, where: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}{key} must be a non-empty string", f"fix {CONFIG_PATH}")
    return value


def parse(text: str) -> Config:
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{CONFIG_PATH} is not valid TOML: {exc}", "fix the syntax") from None
    except RecursionError:
        # tomllib recurses per nested array/inline table; deep nesting is not a config.
        raise UsageError(f"{CONFIG_PATH} nests too deeply", "fix the syntax") from None
    _only(doc, {"schema", "paths", "surface", "rules", "check", "oracles", "golden", "parity"}, "")
    schema = doc.get("schema", SCHEMA)
    if type(schema) is not int or schema != SCHEMA:  # True == 1, but is not a schema number
        raise UsageError(f"{CONFIG_PATH} has schema {doc.get('schema')!r}, expected {SCHEMA}",
                         "upgrade upstream-sync or fix the schema number")
    kw: dict[str, Any] = {"raw": doc}
    paths = _table(doc, "paths")
    _only(paths, set(_PATH_KEYS), "paths.")
    for key in _PATH_KEYS:
        if key in paths:
            kw[key] = _safe_rel(paths[key], f"paths.{key}")
    surface = _table(doc, "surface")
    _only(surface, {"port_roots", "mirrored", "header_globs", "mappings", "span_globs"},
          "surface.")
    for key in ("port_roots", "mirrored", "header_globs", "span_globs"):
        if key in surface:
            kw[key] = _strs(surface[key], f"surface.{key}", paths=True)
    if "mappings" in surface:
        maps = surface["mappings"]
        if not isinstance(maps, list):
            raise UsageError("surface.mappings must be an array of tables", f"fix {CONFIG_PATH}")
        out = []
        for m in maps:
            if not isinstance(m, dict):
                raise UsageError("surface.mappings entries must be tables", f"fix {CONFIG_PATH}")
            _only(m, {"port", "upstream"}, "surface.mappings.")
            out.append(Mapping(_safe_rel(m.get("port"), "surface.mappings.port"),
                               _safe_rel(m.get("upstream"), "surface.mappings.upstream")))
        kw["mappings"] = tuple(out)
    rules = doc.get("rules", [])
    if not isinstance(rules, list):
        raise UsageError("rules must be an array of tables ([[rules]])", f"fix {CONFIG_PATH}")
    parsed_rules = []
    seen: set[str] = set()
    for r in rules:
        if not isinstance(r, dict):
            raise UsageError("each [[rules]] entry must be a table", f"fix {CONFIG_PATH}")
        _only(r, {"id", "disposition", "reason", "tags", "paths_any", "paths_all"}, "rules.")
        rid, disp, reason = r.get("id"), r.get("disposition"), r.get("reason")
        if not isinstance(rid, str) or not rid or rid in seen:
            raise UsageError(f"rule id {rid!r} is missing or repeated", f"fix {CONFIG_PATH}")
        seen.add(rid)
        if disp not in DISPOSITIONS:
            raise UsageError(f"rule {rid}: disposition {disp!r} is not one of "
                             f"{', '.join(DISPOSITIONS)}", f"fix {CONFIG_PATH}")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"rule {rid}: reason is required", f"fix {CONFIG_PATH}")
        tags = _strs(r.get("tags", []), f"rules.{rid}.tags")
        pa = _strs(r.get("paths_any", []), f"rules.{rid}.paths_any")
        pl = _strs(r.get("paths_all", []), f"rules.{rid}.paths_all")
        if not (tags or pa or pl):
            raise UsageError(f"rule {rid} matches nothing (no tags, paths_any or paths_all)",
                             f"fix {CONFIG_PATH}")
        parsed_rules.append(Rule(rid, disp, reason.strip(), tags, pa, pl))
    kw["rules"] = tuple(parsed_rules)
    check = _table(doc, "check")
    _only(check, {"behind_without_note", "pin_copy_roots", "feature_globs"}, "check.")
    if "behind_without_note" in check:
        if check["behind_without_note"] not in ("warning", "error"):
            raise UsageError("check.behind_without_note must be 'warning' or 'error'",
                             f"fix {CONFIG_PATH}")
        kw["behind_without_note"] = check["behind_without_note"]
    for key in ("pin_copy_roots", "feature_globs"):
        if key in check:
            kw[key] = _strs(check[key], f"check.{key}", paths=True)
    oracles = _table(doc, "oracles")
    ocs = []
    for oid, table in sorted(oracles.items()):
        if not isinstance(table, dict):
            raise UsageError(f"[oracles.{oid}] must be a table", f"fix {CONFIG_PATH}")
        _only(table, {"build_env", "build_mode", "require_flashinfer", "require_torch",
                      "source_variable", "distribution", "module", "image_site_dirs"},
              f"oracles.{oid}.")
        base = Config().oracle(oid)
        env = table.get("build_env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UsageError(f"oracles.{oid}.build_env must be a table of strings",
                             f"fix {CONFIG_PATH}")
        where = f"oracles.{oid}."
        ocs.append(OracleConfig(
            id=oid, build_env=tuple(sorted(env.items())),
            build_mode=_str(table, "build_mode", base.build_mode, where),
            require_flashinfer=_bool(table, "require_flashinfer", base.require_flashinfer, where),
            require_torch=_bool(table, "require_torch", base.require_torch, where),
            source_variable=_str(table, "source_variable", base.source_variable, where),
            distribution=_str(table, "distribution", base.distribution, where),
            module=_str(table, "module", base.module, where),
            image_site_dirs=_absolute(table.get("image_site_dirs", []), where + "image_site_dirs"),
        ))
    kw["oracle_configs"] = tuple(ocs)
    golden = _table(doc, "golden")
    _only(golden, {"dir", "scripts", "oracle", "needs_gpu"}, "golden.")
    if "dir" in golden:
        kw["golden_dir"] = _safe_rel(golden["dir"], "golden.dir")
    if "scripts" in golden:
        scripts = golden["scripts"]
        if not isinstance(scripts, list) or not all(
            isinstance(s, list) and s and all(isinstance(a, str) for a in s) for s in scripts
        ):
            raise UsageError("golden.scripts must be a list of argument lists",
                             f"fix {CONFIG_PATH}")
        kw["golden_scripts"] = tuple(tuple(s) for s in scripts)
    if "oracle" in golden:
        kw["golden_oracle"] = _str(golden, "oracle", "", "golden.")
    if "needs_gpu" in golden:
        kw["golden_needs_gpu"] = _bool(golden, "needs_gpu", True, "golden.")
    parity = _table(doc, "parity")
    _only(parity, {"suites"}, "parity.")
    suites = []
    for name, s in sorted(_table(parity, "suites", "parity.").items()):
        if not isinstance(s, dict):
            raise UsageError(f"[parity.suites.{name}] must be a table", f"fix {CONFIG_PATH}")
        _only(s, {"command", "needs_gpu"}, f"parity.suites.{name}.")
        suites.append(Suite(name, _strs(s.get("command", []), f"parity.suites.{name}.command"),
                            _bool(s, "needs_gpu", False, f"parity.suites.{name}.")))
        if not suites[-1].command:
            raise UsageError(f"parity suite {name} has no command", f"fix {CONFIG_PATH}")
    kw["suites"] = tuple(suites)
    return Config(**kw)


def load(root: Path) -> Config:
    path = root / CONFIG_PATH
    if not path.exists():
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{CONFIG_PATH} is not UTF-8", "re-save it as UTF-8") from None
    except OSError as exc:
        raise UsageError(f"cannot read {CONFIG_PATH}: {exc.strerror}",
                         "make it a readable file") from None
    cfg = parse(text)
    return Config(**{**cfg.__dict__, "source": str(path)})
