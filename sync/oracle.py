"""Oracles: build, probe and verify an installed upstream at a pinned commit.

An oracle is a non-editable install of upstream in its own virtualenv,
`<oracle_home>/<id>-<commit10>`, outside every checkout. Goldens dumped by the
wrong oracle are worthless, so every step fails closed:

- build: a wheel from a throwaway `git clone --shared` of the source checkout at
  the commit (the checkout's work tree is never touched), installed with `uv`
  when it is available (copy link mode: no file of the env is shared with
  another env through the uv cache) and `python -m venv` + pip otherwise; the build
  environment is built from scratch plus the configured `build_env`;
  `SETUPTOOLS_SCM_PRETEND_VERSION*` is refused because it forges the identity.
  The build is recorded in `<env>/upstream-sync-oracle.json`, written last, so an
  interrupted build never verifies. Other `<id>-*` environments are kept for
  rollback.
- probe: `<env>/bin/python -I -B` (isolated, no bytecode written) with an
  environment we build (nox prepends its own venv to PATH; PYTHONPATH and
  VIRTUAL_ENV would redirect imports), from a scratch directory outside every
  checkout.
- verify: the probe against the pin block (core) or the oracle file (omni), one
  mismatch per line. At a commit other than the recorded pin (a cycle target)
  the strings cannot be known in advance; the measurement must then obey the
  rules a pin block obeys (the runtime's `+g<sha>` names the commit, the
  distribution adds only the recorded build mode's suffix), and it is what an
  advance writes into the pin block.

Omni oracles (every oracle but the core one) are additionally watched by
`sync.isolation` around build, verify and golden.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from packaging.version import InvalidVersion, Version

from . import cycle, gates, gitio, isolation, oraclefile, pins
from .config import OracleConfig
from .errors import EnvironmentUnresolved, IdentityMismatch, MalformedRecord, UsageError
from .port import Port
from .prefs import KEYS as PREF_KEYS
from .prefs import Preferences
from .prefs import load as load_prefs

CORE_ID = oraclefile.CORE_ID
MARKER = "upstream-sync-oracle.json"
PRETEND = "SETUPTOOLS_SCM_PRETEND_VERSION"
SCHEMA = 1
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_LOCAL_SHA = re.compile(r"g([0-9a-f]{7,40})")
_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
FLASHINFER_DISTS = ("flashinfer-python", "flashinfer")
# Passed from our environment into a build: installer settings (indexes, caches,
# proxies, certificates) and toolchain locations. Anything else a build needs
# belongs in the oracle's build_env in the port's config, where it is recorded.
_BUILD_PASS = ("HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "http_proxy", "https_proxy",
               "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE",
               "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CUDA_HOME", "CUDA_PATH", "CC", "CXX",
               "MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST")
_BUILD_PASS_PREFIX = ("UV_", "PIP_")
_BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin")

Note = Callable[[str], None]


def preferences(port: Port) -> Preferences:
    return load_prefs(port.root / port.config.preferences)


def is_core(oracle_id: str) -> bool:
    return oracle_id == CORE_ID


def check_id(oracle_id: str) -> str:
    if not _ID.fullmatch(oracle_id):
        raise UsageError(f"oracle id {oracle_id!r} is not a plain name",
                         "use the id of an oracle file, e.g. vllm or vllm-omni")
    return oracle_id


# -- places -----------------------------------------------------------------------------------


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def source_path(prefs: Preferences, cfg: OracleConfig) -> Path | None:
    """The configured source checkout of `cfg` (None when unset): prefs key or variable."""
    for key, (var, _) in PREF_KEYS.items():
        if var == cfg.source_variable:
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
        if _under(home, root):
            raise EnvironmentUnresolved(
                f"oracle_home {home} lies inside {label} at {root}",
                "set SYNC_ORACLE_HOME (or oracle_home in the preferences) to a directory "
                "outside every checkout")
    return home


def env_path(home: Path, oracle_id: str, commit: str) -> Path:
    return home / f"{oracle_id}-{commit[:10]}"


@contextmanager
def scratch(port: Port, prefs: Preferences, home: Path) -> Iterator[Path]:
    """A temporary directory outside every checkout (under oracle_home if TMPDIR is not)."""
    base = Path(tempfile.gettempdir()).resolve()
    inside = any(_under(base, root) for _, root in checkouts(port, prefs))
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
        return pins.load(port.protocol).pin.commit
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


# -- build ------------------------------------------------------------------------------------


class BuildDoc(TypedDict):
    schema: int
    oracle: str
    commit: str
    build_mode: str
    build_env: dict[str, str]
    installer: str
    python: str
    source: str
    host: str
    built_at: str


@dataclass(frozen=True)
class BuildRecord:
    oracle: str
    commit: str
    build_mode: str
    build_env: tuple[tuple[str, str], ...]
    installer: str
    python: str
    source: str
    host: str
    built_at: str

    def as_doc(self) -> BuildDoc:
        return {"schema": SCHEMA, "oracle": self.oracle, "commit": self.commit,
                "build_mode": self.build_mode, "build_env": dict(self.build_env),
                "installer": self.installer, "python": self.python, "source": self.source,
                "host": self.host, "built_at": self.built_at}


def read_marker(env: Path) -> BuildRecord | None:
    """The build record, None when absent; MalformedRecord when unreadable."""
    p = env / MARKER
    if not p.is_file():
        return None
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise MalformedRecord("not valid JSON", "rebuild the oracle", path=str(p)) from None
    keys = set(BuildDoc.__annotations__)
    if not isinstance(doc, dict) or set(doc) != keys or doc["schema"] != SCHEMA:
        raise MalformedRecord("not an upstream-sync build record of this schema",
                              "rebuild the oracle", path=str(p))
    env_doc = doc["build_env"]
    strs = [doc[k] for k in sorted(keys - {"schema", "build_env"})]
    if not all(isinstance(v, str) for v in strs) or not (
            isinstance(env_doc, dict) and all(isinstance(v, str) for v in env_doc.values())):
        raise MalformedRecord("values have the wrong types", "rebuild the oracle", path=str(p))
    return BuildRecord(doc["oracle"], doc["commit"], doc["build_mode"],
                       tuple(sorted(env_doc.items())), doc["installer"], doc["python"],
                       doc["source"], doc["host"], doc["built_at"])


def refuse_pretend(cfg: OracleConfig, environ: dict[str, str] | None = None) -> None:
    env = dict(os.environ) if environ is None else environ
    for where, keys in (("the environment", env), (f"oracles.{cfg.id}.build_env",
                                                    dict(cfg.build_env))):
        for key in sorted(keys):
            if key.startswith(PRETEND):
                raise UsageError(
                    f"{key} is set in {where}: it forges the version, so the oracle's identity "
                    "would no longer name its commit",
                    f"unset {key}; the version must come from the git checkout")


def build_environ(cfg: OracleConfig, tools: list[Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k in _BUILD_PASS or k.startswith(_BUILD_PASS_PREFIX)}
    dirs: list[str] = []
    for tool in tools:
        if str(tool.parent) not in dirs:
            dirs.append(str(tool.parent))
    env["PATH"] = os.pathsep.join([*dirs, *(d for d in _BASE_PATH if d not in dirs)])
    env.setdefault("LC_ALL", "C.UTF-8")
    env["PYTHONNOUSERSITE"] = "1"
    env.update(dict(cfg.build_env))
    return env


def find_uv() -> Path | None:
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        found = Path(uv.find_uv_bin())
        if found.is_file():
            return found
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    which = shutil.which("uv")
    return Path(which).resolve() if which else None


def base_python() -> Path:
    # The interpreter under a venv (nox's, say): a venv of a venv would chain them.
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


def _run_step(argv: list[str], env: dict[str, str], cwd: Path, what: str) -> None:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        tail = " | ".join(line.strip() for line in text[-3:]) if text else f"exit {proc.returncode}"
        raise EnvironmentUnresolved(f"{what} failed: {tail}",
                                    "fix the build (see the message) and run oracle build again")


@dataclass(frozen=True)
class Built:
    env: Path
    record: BuildRecord
    kept: tuple[Path, ...]  # other environments of this oracle, kept for rollback
    isolation: tuple[str, ...] = ()  # omni only: isolation problems seen during the build


def build(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None, *,
          rebuild: bool = False, note: Note = lambda _: None) -> Built:
    cfg = port.config.oracle(check_id(oracle_id))
    refuse_pretend(cfg)
    home = oracle_home(port, prefs)
    src_path = source_path(prefs, cfg)
    if src_path is None:
        raise EnvironmentUnresolved(f"the {oracle_id} source checkout is not configured",
                                    f"set ${cfg.source_variable} or the developer preferences")
    ref = gitio.open_repo(src_path, what=f"{oracle_id} source checkout",
                          variable=cfg.source_variable)
    commit = resolve_commit(port, prefs, oracle_id, commit_spec)
    if not gitio.has_commit(ref, commit):
        raise EnvironmentUnresolved(f"commit {commit[:10]} is not in {ref.path}",
                                    "run 'upstream-sync fetch' (or fetch the source checkout)")
    env = env_path(home, oracle_id, commit)
    if env.exists():
        if not rebuild:
            raise UsageError(f"{env} already exists",
                             "verify it with 'upstream-sync oracle verify', or pass --rebuild")
        shutil.rmtree(env)
    kept = tuple(sorted(p for p in home.glob(f"{oracle_id}-*") if p.is_dir() and p != env))
    guard = omni_watch(port, prefs, home, oracle_id, commit, "build")
    with guard as watch:
        record = _install(port, prefs, cfg, ref, commit, home, env, note)
    problems = tuple(watch.problems) if watch is not None else ()
    return Built(env, record, kept, problems)


def _install(port: Port, prefs: Preferences, cfg: OracleConfig, ref: gitio.Reference,
             commit: str, home: Path, env: Path, note: Note) -> BuildRecord:
    uv = find_uv()
    python = base_python()
    git = shutil.which("git")
    tools = [t for t in (uv, Path(git) if git else None) if t is not None]
    environ = build_environ(cfg, tools)
    home.mkdir(parents=True, exist_ok=True)
    try:
        with scratch(port, prefs, home) as tmp:
            clone = tmp / "src"
            note(f"cloning {ref.path} at {commit[:10]} into a throwaway checkout")
            gitio.run(tmp, ["clone", "--quiet", "--shared", "--no-checkout", "--",
                            str(ref.path), str(clone)])
            gitio.run(clone, ["checkout", "--quiet", "--detach", commit])
            dist = tmp / "dist"
            py = str(env / "bin" / "python")
            if uv is not None:
                note(f"creating {env} with uv")
                _run_step([str(uv), "venv", "--quiet", "--python", str(python), str(env)],
                          environ, tmp, "uv venv")
                note(f"building {cfg.distribution} (build mode {cfg.build_mode})")
                _run_step([str(uv), "build", "--quiet", "--wheel", "--python", py, "-o",
                           str(dist), str(clone)], environ, tmp, "uv build")
                install = [str(uv), "pip", "install", "--quiet", "--link-mode", "copy",
                           "--python", py]
                installer = "uv"
            else:
                note(f"creating {env} with python -m venv")
                _run_step([str(python), "-m", "venv", str(env)], environ, tmp, "python -m venv")
                note(f"building {cfg.distribution} (build mode {cfg.build_mode})")
                _run_step([py, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist),
                           str(clone)], environ, tmp, "pip wheel")
                install = [py, "-m", "pip", "install", "--quiet"]
                installer = "pip"
            wheels = sorted(dist.glob("*.whl"))
            if len(wheels) != 1:
                raise EnvironmentUnresolved(
                    f"the build of {cfg.distribution} produced {len(wheels)} wheels, expected one",
                    "check the upstream's build configuration")
            note(f"installing {wheels[0].name}")
            _run_step([*install, str(wheels[0])], environ, tmp, f"{installer} install")
            if cfg.image_site_dirs:
                _add_image_sites(env, cfg.image_site_dirs, note)
    except BaseException:
        # A half-built environment must never be probed as an oracle.
        shutil.rmtree(env, ignore_errors=True)
        raise
    record = BuildRecord(cfg.id, commit, cfg.build_mode, cfg.build_env, installer,
                         str(python), str(ref.path), gates.hostname(), gates.now())
    (env / MARKER).write_text(json.dumps(record.as_doc(), indent=2) + "\n", encoding="utf-8")
    return record


def _add_image_sites(env: Path, dirs: tuple[str, ...], note: Note) -> None:
    """Append a gate host image's site directories after the oracle's own (a .pth file)."""
    sites = sorted(env.glob("lib/python*/site-packages"))
    if len(sites) != 1:
        raise EnvironmentUnresolved(f"cannot find the site-packages of {env}",
                                    "rebuild the oracle")
    note(f"appending the image's site directories: {', '.join(dirs)}")
    (sites[0] / "upstream-sync-image-sites.pth").write_text("".join(d + "\n" for d in dirs),
                                                           encoding="utf-8")


# -- omni isolation ---------------------------------------------------------------------------


def core_env(port: Port, home: Path) -> Path:
    """The environment the core pin measures itself from."""
    return env_path(home, CORE_ID, pins.load(port.protocol).pin.commit)


def forbidden_roots(port: Port, prefs: Preferences, home: Path) -> list[tuple[str, Path]]:
    out = [(f"the core environment {p.name}", p) for p in sorted(home.glob(f"{CORE_ID}-*"))
           if p.is_dir() and re.fullmatch(re.escape(CORE_ID) + "-[0-9a-f]{10}", p.name)]
    src = source_path(prefs, port.config.oracle(CORE_ID))
    if src is not None:
        out.append((f"${port.config.oracle(CORE_ID).source_variable}", src))
    return out


def omni_watch(port: Port, prefs: Preferences, home: Path, oracle_id: str, commit: str,
                op: str) -> AbstractContextManager[isolation.Watch | None]:
    """isolation.watch for omni oracles; a no-op context (yielding None) for the core one."""
    if is_core(oracle_id):
        return nullcontext(None)
    core = core_env(port, home)
    if not core.is_dir():
        raise EnvironmentUnresolved(
            f"the core environment {core} does not exist: isolation of {oracle_id} cannot be "
            "proven against it",
            f"build the core oracle first ('upstream-sync oracle build --oracle {CORE_ID}')")
    return isolation.watch(port, oracle_id, commit, op, core_env=core,
                           source=source_path(prefs, port.config.oracle(CORE_ID)))


# -- probe ------------------------------------------------------------------------------------

PROBE_SCRIPT = r"""
import importlib, importlib.metadata as md, json, os, re, sys
spec = json.loads(sys.argv[1])
def norm(n): return re.sub(r"[-_.]+", "-", n).lower()
def found(name):
    out = []
    for d in md.distributions():
        try:
            dn = d.metadata["Name"]
        except Exception:
            dn = None
        if dn and norm(dn) == norm(name):
            out.append(d)
    return out
def editable(d):
    try:
        info = json.loads(d.read_text("direct_url.json") or "{}")
        if (info.get("dir_info") or {}).get("editable"):
            return True
    except Exception:
        pass
    if any(str(f).startswith("__editable__") for f in (d.files or [])):
        return True
    return any(os.path.exists(os.path.join(p, d.metadata["Name"] + ".egg-link"))
               for p in sys.path if p)
def version_of(names):
    for n in names:
        ds = found(n)
        if ds:
            return ds[0].version
    return None
res = {"python": sys.executable, "sys_prefix": sys.prefix, "sys_path": list(sys.path),
       "isolated": bool(sys.flags.isolated), "cwd": os.getcwd()}
ds = found(spec["distribution"])
res["distributions"] = [{"version": d.version, "path": str(getattr(d, "_path", "") or ""),
                         "editable": editable(d)} for d in ds]
try:
    res["distribution_version"] = md.version(spec["distribution"])
except Exception:
    res["distribution_version"] = None
try:
    mod = importlib.import_module(spec["module"])
    v = getattr(mod, "__version__", None)
    res["runtime_version"] = v if isinstance(v, str) else None
    res["module_file"] = getattr(mod, "__file__", None)
    res["import_error"] = None
except BaseException as exc:
    res["runtime_version"] = None
    res["module_file"] = None
    res["import_error"] = (type(exc).__name__ + ": " + str(exc))[:300]
res["flashinfer_version"] = version_of(spec["flashinfer"])
res["torch_version"] = version_of(["torch"])
res["vllm_version"] = version_of(["vllm"])
with open(sys.argv[2], "w", encoding="utf-8") as fh:
    json.dump(res, fh)
"""


@dataclass(frozen=True)
class Dist:
    version: str
    path: str
    editable: bool


@dataclass(frozen=True)
class Probe:
    oracle: str
    commit: str
    env: str
    python: str
    distribution: str
    runtime_version: str | None  # <module>.__version__
    distribution_version: str | None  # importlib.metadata.version(<distribution>)
    distributions: tuple[Dist, ...]  # every distribution of that name on the path
    module_file: str | None
    import_error: str | None
    sys_prefix: str
    sys_path: tuple[str, ...]
    isolated: bool
    flashinfer_version: str | None
    torch_version: str | None
    vllm_version: str | None  # the vLLM distribution in this env (omni: what it runs against)
    build: BuildRecord | None

    @property
    def editable(self) -> bool:
        return any(d.editable for d in self.distributions)

    def as_doc(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle, "commit": self.commit, "env": self.env,
            "python": self.python, "distribution": self.distribution,
            "runtime_version": self.runtime_version,
            "distribution_version": self.distribution_version,
            "distribution_count": len(self.distributions),
            "distributions": [{"version": d.version, "path": d.path, "editable": d.editable}
                              for d in self.distributions],
            "module_file": self.module_file, "import_error": self.import_error,
            "sys_prefix": self.sys_prefix, "editable": self.editable,
            "flashinfer_version": self.flashinfer_version, "torch_version": self.torch_version,
            "vllm_version": self.vllm_version, "isolated": self.isolated,
            "sys_path": list(self.sys_path),
            "build": None if self.build is None else dict(self.build.as_doc()),
        }


def probe_environ(home: str | None = None) -> dict[str, str]:
    """What the oracle's Python runs with: nothing inherited that could redirect imports.

    `-I` already ignores PYTHON* variables; building the environment from scratch
    also keeps VIRTUAL_ENV, nox's PATH and the source variables away from the
    module's own import-time code.
    """
    env = {"PATH": os.pathsep.join(_BASE_PATH), "LC_ALL": "C.UTF-8"}
    home = home or os.environ.get("HOME")
    if home:
        env["HOME"] = home
    return env


def _opt(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) else None


def probe_env(port: Port, prefs: Preferences, oracle_id: str, commit: str, env: Path,
              home: Path) -> Probe:
    cfg = port.config.oracle(check_id(oracle_id))
    python = env / "bin" / "python"
    if not python.exists():
        raise EnvironmentUnresolved(
            f"no oracle environment for {oracle_id} at {commit[:10]} ({env})",
            f"run 'upstream-sync oracle build --oracle {oracle_id} --commit {commit}'")
    build = read_marker(env)
    spec = json.dumps({"distribution": cfg.distribution, "module": cfg.module,
                       "flashinfer": list(FLASHINFER_DISTS)})
    with scratch(port, prefs, home) as tmp:
        out = tmp / "probe.json"
        proc = subprocess.run([str(python), "-I", "-B", "-c", PROBE_SCRIPT, spec, str(out)],
                              cwd=tmp, env=probe_environ(), capture_output=True, check=False)
        if proc.returncode != 0 or not out.is_file():
            text = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise EnvironmentUnresolved(
                f"probing {python} failed: {text[-1] if text else proc.returncode}",
                f"rebuild the oracle ('upstream-sync oracle build --oracle {oracle_id} "
                "--rebuild')")
        try:
            doc = json.loads(out.read_text(encoding="utf-8"))
        except ValueError:
            raise EnvironmentUnresolved(f"the probe of {python} wrote no JSON",
                                        "rebuild the oracle") from None
    if not isinstance(doc, dict):
        raise EnvironmentUnresolved(f"the probe of {python} wrote no object", "rebuild it")
    dists = tuple(Dist(str(d.get("version")), str(d.get("path")), bool(d.get("editable")))
                  for d in doc.get("distributions") or [] if isinstance(d, dict))
    return Probe(
        oracle=oracle_id, commit=commit, env=str(env), python=str(python),
        distribution=cfg.distribution, runtime_version=_opt(doc, "runtime_version"),
        distribution_version=_opt(doc, "distribution_version"), distributions=dists,
        module_file=_opt(doc, "module_file"), import_error=_opt(doc, "import_error"),
        sys_prefix=_opt(doc, "sys_prefix") or "",
        sys_path=tuple(p for p in doc.get("sys_path") or [] if isinstance(p, str)),
        isolated=bool(doc.get("isolated")), flashinfer_version=_opt(doc, "flashinfer_version"),
        torch_version=_opt(doc, "torch_version"), vllm_version=_opt(doc, "vllm_version"),
        build=build)


def probe(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None
          ) -> Probe:
    home = oracle_home(port, prefs)
    commit = resolve_commit(port, prefs, oracle_id, commit_spec)
    return probe_env(port, prefs, oracle_id, commit, env_path(home, oracle_id, commit), home)


# -- verify -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class Identity(TypedDict):
    """The uniform oracle identity written into manifests and gate results."""

    oracle: str
    commit: str
    runtime_version: str | None
    distribution_version: str | None
    flashinfer_version: str | None
    torch_version: str | None
    build_mode: str | None
    vllm_commit: str | None  # the vLLM commit results ran against (omni: its env's vLLM)
    vllm_version: str | None
    host: str
    time: str


def identity_map(ident: Identity) -> dict[str, str | None]:
    return {k: (v if isinstance(v, str) else None) for k, v in ident.items()}


def local_commit(version: str | None) -> str | None:
    """The hex of a `+g<hex>` local segment (before any build suffix), if any."""
    if not version or "+" not in version:
        return None
    m = _LOCAL_SHA.match(version.partition("+")[2])
    return m.group(1) if m else None


def identity(p: Probe) -> Identity:
    core = is_core(p.oracle)
    return {
        "oracle": p.oracle, "commit": p.commit, "runtime_version": p.runtime_version,
        "distribution_version": p.distribution_version,
        "flashinfer_version": p.flashinfer_version, "torch_version": p.torch_version,
        "build_mode": p.build.build_mode if p.build else None,
        "vllm_commit": p.commit if core else local_commit(p.vllm_version),
        "vllm_version": p.distribution_version if core else p.vllm_version,
        "host": gates.hostname(), "time": gates.now(),
    }


def commit_rule(runtime: str, commit: str) -> str | None:
    """Why `runtime` does not name `commit` (None when it does)."""
    try:
        parsed = Version(runtime)
    except InvalidVersion:
        return f"runtime version {runtime!r} is not a valid version"
    if parsed.local is None:
        return (f"runtime version {runtime!r} has no +g<sha> local segment: a released wheel "
                f"cannot name commit {commit[:10]}")
    sha = local_commit(runtime)
    if sha is None:
        return f"runtime version {runtime!r} has a local segment that is not g<7..40 hex>"
    if not commit.startswith(sha):
        return (f"runtime version {runtime!r} names g{sha}, not a prefix of {commit[:10]} "
                "(built from another checkout? a shallow clone yields 0.1.devN+g<sha>)")
    return None


def expected_suffix(build_mode: str) -> str | None:
    return None if build_mode == "source" else build_mode


def _same(field: str, got: str | None, want: str, where: str) -> list[Mismatch]:
    if got == want:
        return []
    return [Mismatch(field, f"oracle reports {got!r}, {where} says {want!r}")]


def check(port: Port, prefs: Preferences, p: Probe) -> list[Mismatch]:
    """Every way the probed oracle differs from what the records require."""
    cfg = port.config.oracle(p.oracle)
    out: list[Mismatch] = []
    env = Path(p.env).resolve()
    b = p.build
    if b is None:
        out.append(Mismatch("build", f"{MARKER} is missing: not built by upstream-sync, or the "
                            "build did not finish"))
    else:
        if b.commit != p.commit:
            out.append(Mismatch("build", f"built at {b.commit[:10]}, expected {p.commit[:10]}"))
        if b.oracle != p.oracle:
            out.append(Mismatch("build", f"built for oracle {b.oracle!r}, not {p.oracle!r}"))
    if not p.isolated:
        out.append(Mismatch("probe", "the oracle's Python did not run in isolated mode (-I)"))
    if p.import_error:
        out.append(Mismatch("module", f"import {cfg.module} failed: {p.import_error}"))
    if not p.sys_prefix or Path(p.sys_prefix).resolve() != env:
        out.append(Mismatch("sys.prefix", f"{p.sys_prefix!r} is not the oracle env {env}"))
    n = len(p.distributions)
    if n != 1:
        where = "; ".join(f"{d.version} at {d.path}" for d in p.distributions)
        out.append(Mismatch("distributions", f"{n} distributions named {cfg.distribution} on "
                            f"the path, expected exactly one" + (f" ({where})" if where else "")))
    if p.module_file:
        mf = Path(p.module_file).resolve()
        if not _under(mf, env):
            out.append(Mismatch("module file", f"{p.module_file} is not under the env {env}"))
        for label, root in checkouts(port, prefs):
            if _under(mf, root):
                out.append(Mismatch("module file", f"{p.module_file} is under {label} ({root})"))
    elif not p.import_error:
        out.append(Mismatch("module file", f"{cfg.module} has no __file__"))
    if p.editable:
        out.append(Mismatch("editable", f"{cfg.distribution} is installed editable: the oracle "
                            "must be a non-editable install"))
    runtime, dist = p.runtime_version, p.distribution_version
    if runtime is None:
        if not p.import_error:
            out.append(Mismatch("runtime version", f"{cfg.module}.__version__ is missing"))
    else:
        why = commit_rule(runtime, p.commit)
        if why is not None:
            out.append(Mismatch("commit", why))
    if dist is None:
        out.append(Mismatch("distribution version", f"no {cfg.distribution} metadata"))
    elif runtime is not None:
        try:
            suffix = pins.split_distribution(dist, runtime, path="oracle")
        except MalformedRecord as exc:
            out.append(Mismatch("distribution version", exc.message.removeprefix("oracle: ")
                                .replace("vllm_distribution_version", "distribution version")))
        else:
            if b is not None and suffix != expected_suffix(b.build_mode):
                out.append(Mismatch("build mode", f"recorded build mode {b.build_mode!r} but "
                                    f"the distribution version adds "
                                    f"{'.' + suffix if suffix else 'no suffix'}"))
    if cfg.require_flashinfer and p.flashinfer_version is None:
        out.append(Mismatch("flashinfer", "FlashInfer is not installed (config requires it)"))
    if cfg.require_torch and p.torch_version is None:
        out.append(Mismatch("torch", "Torch is not installed (config requires it)"))
    if is_core(p.oracle):
        out += _against_pin(port, p)
    else:
        out += _against_oracle_file(port, p)
    return out


def _against_pin(port: Port, p: Probe) -> list[Mismatch]:
    pin = pins.load(port.protocol).pin
    where = f"the pin block ({port.rel(port.protocol)})"
    if p.commit != pin.commit:
        return []  # a cycle target: nothing recorded to compare strings with yet
    out = _same("runtime version", p.runtime_version, pin.runtime_version, where)
    out += _same("distribution version", p.distribution_version, pin.distribution_version,
                 where)
    if p.flashinfer_version is not None:  # absent: reported above when config requires it
        out += _same("flashinfer", p.flashinfer_version, pin.flashinfer_version, where)
    return out


def _against_oracle_file(port: Port, p: Probe) -> list[Mismatch]:
    of = oracle_file(port, p.oracle)
    if of.pin != p.commit or p.runtime_version is None:
        return []
    public = p.runtime_version.partition("+")[0]
    return _same("pin label", public, of.pin_label, f"{port.rel(of.path)} (pin_label)")


@dataclass(frozen=True)
class Verification:
    probe: Probe
    mismatches: tuple[Mismatch, ...]
    identity: Identity

    @property
    def ok(self) -> bool:
        return not self.mismatches


def verify(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None
           ) -> Verification:
    """Probe and check; omni oracles also prove isolation (recorded either way)."""
    home = oracle_home(port, prefs)
    commit = resolve_commit(port, prefs, check_id(oracle_id), commit_spec)
    env = env_path(home, oracle_id, commit)
    with omni_watch(port, prefs, home, oracle_id, commit, "verify") as watch:
        p = probe_env(port, prefs, oracle_id, commit, env, home)
        found = check(port, prefs, p)
        if watch is not None:
            watch.problems.extend(isolation.scan(env, forbidden_roots(port, prefs, home),
                                                 p.sys_path))
    if watch is not None:
        found += [Mismatch("isolation", x) for x in watch.problems]
    return Verification(p, tuple(found), identity(p))


def require(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None,
            *, say: Note = lambda _: None) -> Verification:
    """`verify`, raising IdentityMismatch after one `say` line per mismatch."""
    v = verify(port, prefs, oracle_id, commit_spec)
    if not v.ok:
        for m in v.mismatches:
            say(f"mismatch: {m}")
        raise IdentityMismatch(
            f"oracle {oracle_id} at {v.probe.commit[:10]} failed verification with "
            f"{len(v.mismatches)} mismatch{'es' if len(v.mismatches) != 1 else ''}",
            f"rebuild it ('upstream-sync oracle build --oracle {oracle_id} --commit "
            f"{v.probe.commit} --rebuild') or correct the records from a measured oracle")
    return v
