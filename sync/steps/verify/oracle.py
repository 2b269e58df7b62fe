"""Oracles: where they live, which commit they are built at, and their build record.

An oracle is a non-editable install of upstream in its own virtualenv,
`<oracle_home>/<id>-<commit10>`, outside every checkout. Goldens dumped by the
wrong oracle are worthless, so every step fails closed; each step is a module of
its own in `sync.steps.verify`: `build`, `probe`, `identity` (verify) and `watch`
(the isolation watch of omni oracles). This module is what they share: ids, places, the commit an
oracle is pinned to, and the build record `<env>/upstream-sync-oracle.json`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from sync.infra.atomic import write_text
from sync.infra.errors import EnvironmentUnresolved, IdentityMismatch, MalformedRecord, UsageError
from sync.port import Port
from sync.records import cycle, modes, oraclefile, schema
from sync.records.config import CONFIG_PATH, OracleConfig
from sync.records.prefs import KEYS as PREF_KEYS
from sync.records.prefs import Preferences
from sync.upstream import gitio
from sync.upstream.gitio import short

CORE_ID = oraclefile.CORE_ID
MARKER = "upstream-sync-oracle.json"
FREEZE = "upstream-sync-freeze.txt"  # `pip freeze --all` of the env after the install
SCHEMA = 2
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
# The PATH a build or a probe starts from; nothing of ours (nox's venv) is on it.
BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin")

Note = Callable[[str], None]


def is_core(oracle_id: str) -> bool:
    return oracle_id == CORE_ID


def check_id(oracle_id: str) -> str:
    if not _ID.fullmatch(oracle_id):
        raise UsageError(f"oracle id {oracle_id!r} is not a plain name",
                         "use the id of an oracle file, e.g. vllm or vllm-omni")
    return oracle_id


# -- places -----------------------------------------------------------------------------------


def under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def source_path(prefs: Preferences, cfg: OracleConfig) -> Path | None:
    """The configured source checkout of `cfg` (None when unset): prefs key or variable."""
    for key, k in PREF_KEYS.items():
        if k.variable == cfg.source_variable:
            value = prefs.get(key)
            return Path(value).expanduser() if value else None
    value = os.environ.get(cfg.source_variable)
    return Path(value).expanduser() if value else None


def checkouts(port: Port, prefs: Preferences) -> list[tuple[str, Path]]:
    """Every checkout an oracle must stay out of: the port (and its repository), sources."""
    out: list[tuple[str, Path]] = [("the port", port.root.resolve())]
    top = gitio.run(port.root, ["rev-parse", "--show-toplevel"], check=False)
    if top.returncode == 0 and top.stdout.strip():
        out.append(("the port's repository", Path(top.stdout.decode().strip()).resolve()))
    ids = {CORE_ID, "vllm-omni", *(oc.id for oc in port.config.oracle_configs)}
    seen: set[Path] = set()
    for oid in sorted(ids):
        cfg = port.config.oracle(oid)
        p = source_path(prefs, cfg)
        if p is not None and p.resolve() not in seen:
            seen.add(p.resolve())
            out.append((f"${cfg.source_variable} ({oid} source checkout)", p.resolve()))
    return out


def oracle_home(port: Port, prefs: Preferences) -> Path:
    home = prefs.path("oracle_home").resolve()
    for label, root in checkouts(port, prefs):
        if under(home, root):
            source, where = _set_by(prefs)
            raise EnvironmentUnresolved(
                f"oracle_home {home} (from {source}) lies inside {label} at {root}",
                f"{where} to a directory outside every checkout")
    _check_usable(home, prefs)
    return home


def _check_usable(home: Path, prefs: Preferences) -> None:
    """Refuses a home that exists but is no directory, or that this user cannot look into:
    every step would otherwise fail inside it with an OSError, reported as a bug (walk N3:
    `oracle build` on a file said 'internal error: NotADirectoryError', status and probe
    looked past it, and EACCES crashed them all). A home that does not exist yet is fine:
    `oracle build` makes it, and nothing is found in it before."""
    problem = _folder_problem(home)
    if problem is not None:
        why, denied = problem
        if why == _NOT_A_DIRECTORY:
            why = "exists but is not a directory"
        raise _unusable(home, prefs, why, denied=denied)


_NOT_A_DIRECTORY = "is not a directory"
_FILE_IN_PATH = "cannot be a directory: a file stands in its path"


def _folder_problem(path: Path) -> tuple[str, bool] | None:
    """Why what stands at `path` is no folder this user can look into, and whether access is
    what is denied; None when it is one, or when nothing is there (a dangling link too)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return _FILE_IN_PATH, False
    except OSError as exc:  # EACCES: a folder above it is closed to this user; ELOOP
        return f"cannot be looked up ({exc.strerror})", isinstance(exc, PermissionError)
    if not stat.S_ISDIR(st.st_mode):
        return _NOT_A_DIRECTORY, False
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be listed (Permission denied)", True
    return None


def _unusable(home: Path, prefs: Preferences, why: str, *, denied: bool
              ) -> EnvironmentUnresolved:
    """The refusal names where the value came from, and the variable or line to change."""
    source, where = _set_by(prefs)
    fix = (f"give this user access to it, or {where} to a directory it can use" if denied else
           f"{where} to a directory outside every checkout, or move what is there away")
    return EnvironmentUnresolved(f"oracle_home {home} (from {source}) {why}", fix)


def _set_by(prefs: Preferences) -> tuple[str, str]:
    """Where oracle_home came from, and what to change: the variable when it set the value,
    else the preferences line (the variable still wins over it)."""
    source = prefs.source_of("oracle_home")
    from_env = source.startswith("env ")
    var = source.removeprefix("env ") if from_env else PREF_KEYS["oracle_home"].variable
    return source, f"set {var}" if from_env else f"change oracle_home in {source} (or set {var})"


def env_path(home: Path, oracle_id: str, commit: str) -> Path:
    return home / f"{oracle_id}-{short(commit)}"


def usable_env(env: Path) -> Path:
    """`env`, refused when what stands there cannot be looked into: a file where the
    environment's directory belongs, or a folder closed to this user. Status, probe, build,
    gc, verify and adopt otherwise failed inside it with 'internal error: PermissionError',
    or took a file for an environment with no build record. Nothing there (a dangling link
    too) is no environment, which each caller says in its own words."""
    problem = _folder_problem(env)
    if problem is None:
        return env
    why, _denied = problem
    if why in (_NOT_A_DIRECTORY, _FILE_IN_PATH):
        raise EnvironmentUnresolved(f"oracle environment {env} {why}",
                                    "move it away, then build the oracle again")
    raise _closed_env(env, why)


# Not "remove it": an adopted environment is the port's own virtualenv, not ours.
_ACCESS = "give this user access to it, or run as the user who made it"


def _closed_env(env: Path, why: str) -> EnvironmentUnresolved:
    return EnvironmentUnresolved(f"oracle environment {env} {why}", _ACCESS)


def unreadable(env: Path, exc: OSError) -> EnvironmentUnresolved:
    """The refusal of an environment that can be listed but holds something this user cannot
    read (a mode-0 build record, bin/ or RECORD): `usable_env` looks only at the folder, and
    each reader inside it crashed with 'internal error: PermissionError'."""
    where = exc.filename if exc.filename is not None else env
    fix = _ACCESS if isinstance(exc, PermissionError) else \
        "check the file system it lies on, or rebuild the oracle"
    return EnvironmentUnresolved(
        f"oracle environment {env} cannot be read: {where} ({exc.strerror or exc})", fix)


def python_of(env: Path) -> Path | None:
    """`<env>/bin/python`, None when there is none; refused when a closed bin/ hides it
    (Path.exists let the PermissionError through: 'internal error' in probe and adopt)."""
    python = usable_env(env) / "bin" / "python"
    try:
        os.stat(python)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise unreadable(env, exc) from None
    return python


def remove_env(env: Path) -> None:
    """Remove the environment `env` (a link: only the link), or refuse with nothing removed.

    rmtree stopped at the first folder this user may not change, with 'internal error:
    PermissionError' and the environment half removed (gc, build --rebuild); so every folder
    is checked first. What the check cannot foresee (another user's file in a sticky folder,
    an immutable file, a race) still stops it part way, but after the build record, removed
    first: what is left never verifies."""
    refused = removal_refusal(env)
    if refused is not None:
        raise refused
    try:
        if env.is_symlink():
            env.unlink()
            return
        (env / MARKER).unlink(missing_ok=True)
    except OSError as exc:
        raise _not_removed(env, exc.filename or str(env),
                           f"cannot be removed ({exc.strerror})") from None
    try:
        _rmtree(env)
    except OSError as exc:
        raise EnvironmentUnresolved(
            f"oracle environment {env} was only partly removed: {exc.filename or env} cannot be "
            f"removed ({exc.strerror}); its build record is gone, so what is left is never "
            "taken for an oracle", "remove what is left of it as a user who may, then run "
            "the command again") from None


def removal_refusal(env: Path) -> EnvironmentUnresolved | None:
    """The refusal `remove_env` raises before it removes anything, None when it would go on.
    `oracle gc --dry-run` asks this too, so that it says what the run would refuse."""
    blocked = _unremovable(env)
    return None if blocked is None else _not_removed(env, *blocked)


def _unremovable(env: Path) -> tuple[str, str] | None:
    """The first folder whose entries this user may not remove (the home, for `env` itself),
    and why; None when rmtree can remove it all."""
    if not os.access(env.parent, os.W_OK | os.X_OK):
        return str(env.parent), "is not writable by this user"
    if env.is_symlink():
        return None
    try:
        for top, _, _ in os.walk(env, onerror=_reraise):
            if not os.access(top, os.R_OK | os.W_OK | os.X_OK):
                return top, "is closed to this user (removing it needs read, write and search)"
    except OSError as exc:
        return exc.filename or str(env), f"cannot be listed ({exc.strerror})"
    return None


def _reraise(exc: OSError) -> None:
    raise exc


def _not_removed(env: Path, path: str, why: str) -> EnvironmentUnresolved:
    return EnvironmentUnresolved(f"oracle environment {env} cannot be removed: {path} {why}; "
                                 "nothing was removed", "give this user access to it, or "
                                 "remove the environment as the user who made it")


def _rmtree(path: Path) -> None:
    """shutil.rmtree, stopped at the first failure by an OSError naming the full path (its
    own names the entry relative to the folder it was in: 'pkg')."""
    def fail(where: str, exc: BaseException) -> NoReturn:
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, where) from exc
        raise exc

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, where, exc: fail(where, exc))
    else:
        shutil.rmtree(path, onerror=lambda _f, where, info: fail(where, info[1]))


def env_label(env: Path | str, home: Path | None) -> str:
    """An oracle environment as a committed record (an event) names it: by its place under
    the oracle home, never by an absolute path, which is one maintainer's machine."""
    env = Path(env)
    if home is not None and env.parent == home:
        return f"<oracle_home>/{env.name}"
    return f"{env.name} (outside the oracle home)"


@contextmanager
def scratch(port: Port, prefs: Preferences, home: Path) -> Iterator[Path]:
    """A temporary directory outside every checkout (under oracle_home if TMPDIR is not)."""
    base = Path(tempfile.gettempdir()).resolve()
    inside = any(under(base, root) for _, root in checkouts(port, prefs))
    if inside:
        home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="upstream-sync-",
                                     dir=str(home) if inside else None) as tmp:
        yield Path(tmp)


# -- which commit -----------------------------------------------------------------------------


def oracle_file(port: Port, oracle_id: str) -> oraclefile.OracleFile:
    for of in oraclefile.load_all(port.oracle_files(), port.root):
        if of.id == oracle_id:
            return of
    raise UsageError(f"no oracle file declares id {oracle_id!r} ({port.config.oracles})",
                     f"add .agents/oracles/{oracle_id}.md or pass a known --oracle")


def recorded_commit(port: Port, oracle_id: str) -> str:
    """The commit the records pin this oracle to: the pin block (core) or its oracle file."""
    if is_core(oracle_id):
        return port.pin_record().pin.commit
    of = oracle_file(port, oracle_id)
    if of.unpinned:
        raise IdentityMismatch(f"oracle {oracle_id} is UNPINNED in {port.rel(of.path)}",
                               "pin it to a commit before building or verifying it")
    if not _FULL_SHA.fullmatch(of.pin):
        raise UsageError(f"oracle {oracle_id} is pinned to the release {of.pin}, not a commit",
                         "pin its oracle file to the commit it is built from")
    return of.pin


def resolve_commit(port: Port, prefs: Preferences, oracle_id: str, spec: str | None) -> str:
    """`pin` (default), `target` (the cycle's frozen target, core only) or a commit."""
    if spec in (None, "pin"):
        return recorded_commit(port, oracle_id)
    if spec == "target":
        if not is_core(oracle_id):
            raise UsageError(f"oracle {oracle_id} follows its own pin, not the cycle target",
                             "pass --commit SHA")
        return cycle.require(port).target
    assert spec is not None
    if _FULL_SHA.fullmatch(spec):
        return spec
    src = source_path(prefs, port.config.oracle(oracle_id))
    if src is None:
        raise EnvironmentUnresolved(
            f"cannot resolve {spec!r} without the {oracle_id} source checkout",
            f"give the full 40-hex commit or set ${port.config.oracle(oracle_id).source_variable}")
    ref = gitio.open_repo(src, variable=port.config.oracle(oracle_id).source_variable)
    sha = gitio.resolve(ref, spec)
    if sha is None:
        raise UsageError(f"{spec!r} is not a commit in {src}", "give a commit of the upstream")
    return sha


Role = Literal["pin", "target", "shape only"]


def verify_commit(port: Port, prefs: Preferences, oracle_id: str, spec: str | None, *,
                  shape_only: bool = False) -> tuple[str, Role]:
    """The commit an identity is checked at, and what it is to the records.

    Only the pin and the cycle's frozen target are compared with anything; any other
    commit is refused, or with `shape_only` checked for its shape alone (labelled so).
    """
    commit = resolve_commit(port, prefs, oracle_id, spec)
    # An UNPINNED omni oracle has no pin to compare with: a commit given is not the pin
    # (its advance-omni measures it as a candidate); only the pin itself is refused.
    unpinned = not is_core(oracle_id) and oracle_file(port, oracle_id).unpinned
    if not unpinned and commit == recorded_commit(port, oracle_id):
        return commit, "pin"
    c = port.cycle() if is_core(oracle_id) else None
    if c is not None and c.target == commit:
        return commit, "target"
    if shape_only:
        return commit, "shape only"
    raise UsageError(
        f"{short(commit)} is neither the pin of {oracle_id} nor the cycle's target: an "
        "oracle's identity is checked against the records only there",
        "verify --commit pin or --commit target, or pass --shape-only to check only the "
        "shape of its identity (labelled so, never a gate)")


# -- the build mode -------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """How an oracle is built and what its probe must find, resolved from config and pin."""

    mode: modes.BuildMode
    said_by: str  # where the mode came from, for messages
    require_flashinfer: bool


def settings(port: Port, oracle_id: str) -> Settings:
    """The oracle's build mode; refused when the config and the pin block's suffix disagree."""
    cfg = port.config.oracle(oracle_id)
    where = f"[oracles.{oracle_id}] build_mode in {CONFIG_PATH}"
    mode, said_by = cfg.build_mode, where
    if is_core(oracle_id):
        pin = port.pin_record().pin
        implied = modes.from_suffix(pin.build_suffix)
        shown = f".{pin.build_suffix}" if pin.build_suffix else "no suffix"
        said = f"the pin block's distribution version ({shown})"
        if mode is None:
            if implied is None:
                raise UsageError(f"{said} names no build mode this tool knows "
                                 f"({', '.join(modes.MODES)})", f"set {where}")
            mode, said_by = implied, said
        elif not modes.fits(mode, pin.build_suffix):
            raise UsageError(
                f"{where} is {mode!r} but {said} says build mode {implied or 'unknown'}: "
                "building would measure an oracle the pin does not describe",
                f"set build_mode = \"{implied}\"" if implied else "re-measure the pin")
    final = mode or "source"
    flashinfer = cfg.require_flashinfer
    return Settings(final, said_by if mode else "the default",
                    modes.mode(final).flashinfer if flashinfer is None else flashinfer)


# -- the build record -------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildRecord:
    """`<env>/upstream-sync-oracle.json`: `schema`, then these fields in this order.

    The fields are the schema (`sync.records.schema`). The record is bound to the
    installed files: `record_sha256` is the digest of the distribution's RECORD as pip or
    uv wrote it at the install, and `not_in_tree` the installed files of the module that
    the commit's tree does not hold (setuptools-scm's `_version.py`, binaries); `verify`
    re-derives both from the environment and the source checkout.
    """

    oracle: str
    commit: str
    build_mode: str
    build_env: dict[str, str]
    installer: str
    python: str
    source: str
    host: str
    built_at: str
    origin: Literal["built", "adopted"]
    log: str | None  # the full build log (None for an adopted environment)
    record_sha256: str
    not_in_tree: list[str]
    binaries: dict[str, str | None] | None  # where precompiled binaries came from
    wheel: str | None
    wheel_sha256: str | None
    constraints: str | None  # the port's constraints file, as configured
    constraints_sha256: str | None
    freeze_sha256: str | None  # of FREEZE: the resolved dependency set
    inputs: dict[str, str]  # installer settings passed from the environment (PIP_*, UV_*)

    def as_doc(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **schema.as_doc(self)}


_REBUILD = "rebuild the oracle, or measure and record it with 'upstream-sync oracle adopt ENV'"


def read_marker(env: Path) -> BuildRecord | None:
    """The build record, None when absent; MalformedRecord when it does not parse,
    EnvironmentUnresolved when this user may not read it."""
    p = env / MARKER
    try:
        if not p.is_file():
            return None
        raw = p.read_bytes()
    except OSError as exc:
        raise unreadable(env, exc) from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too
        raise MalformedRecord("not valid JSON", _REBUILD, path=str(p)) from None
    if isinstance(doc, dict) and doc.get("schema") == 1:
        raise MalformedRecord("a build record of an older upstream-sync (schema 1), not bound "
                              "to the installed files", _REBUILD, path=str(p))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA \
            or set(doc) != {"schema", *schema.keys(BuildRecord)}:
        raise MalformedRecord("not an upstream-sync build record of this schema", _REBUILD,
                              path=str(p))
    problem = schema.mistyped(doc, BuildRecord)
    if problem is not None:
        raise MalformedRecord(f"build record: {problem.text}", _REBUILD, path=str(p))
    return BuildRecord(**schema.values(doc, BuildRecord))


def write_marker(env: Path, record: BuildRecord) -> None:
    write_text(env / MARKER, json.dumps(record.as_doc(), indent=2) + "\n")
