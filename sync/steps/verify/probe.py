"""Oracle probe: what an oracle's own Python reports about the installed upstream.

The probe runs `<env>/bin/python -I -B` (isolated, no bytecode written) with an
environment we build (nox prepends its own venv to PATH; PYTHONPATH and
VIRTUAL_ENV would redirect imports), from a scratch directory outside every
checkout. What the installed files are (RECORD, `_version.py`, blob ids) is read from
outside the oracle by `sync.steps.verify.installed`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.infra import proc
from sync.infra.errors import EnvironmentUnresolved
from sync.port import Port
from sync.records.prefs import Preferences
from sync.steps.verify import installed
from sync.steps.verify.oracle import (
    BASE_PATH,
    BuildRecord,
    check_id,
    env_path,
    oracle_home,
    python_of,
    read_marker,
    resolve_commit,
    scratch,
    unreadable,
)
from sync.upstream.gitio import short

FLASHINFER_DISTS = ("flashinfer-python", "flashinfer")

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
    files: installed.Installed | None = None  # the one distribution's files (None: not one)

    @property
    def editable(self) -> bool:
        return any(d.editable for d in self.distributions)

    @property
    def version_file(self) -> installed.VersionFile | None:
        return self.files.version_file if self.files is not None else None

    @property
    def commit_id(self) -> str | None:
        """`<module>/_version.py`'s `__commit_id__`: the second measurement of the commit."""
        vf = self.version_file
        return vf.commit_id if vf is not None else None

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
            "commit_id": self.commit_id,
            "version_file": None if self.version_file is None else self.version_file.version,
            "record_sha256": self.files.record_sha256 if self.files is not None else None,
            "build": None if self.build is None else dict(self.build.as_doc()),
        }


def probe_environ(home: str | None = None) -> dict[str, str]:
    """What the oracle's Python runs with: nothing inherited that could redirect imports.

    `-I` already ignores PYTHON* variables; building the environment from scratch
    also keeps VIRTUAL_ENV, nox's PATH and the source variables away from the
    module's own import-time code.
    """
    env = {"PATH": os.pathsep.join(BASE_PATH), "LC_ALL": "C.UTF-8"}
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
    python = python_of(env)
    if python is None:
        raise EnvironmentUnresolved(
            f"no oracle environment for {oracle_id} at {short(commit)} ({env})",
            f"run 'upstream-sync oracle build --oracle {oracle_id} --commit {commit}'")
    build = read_marker(env)
    spec = json.dumps({"distribution": cfg.distribution, "module": cfg.module,
                       "flashinfer": list(FLASHINFER_DISTS)})
    with scratch(port, prefs, home) as tmp:
        doc = _run_probe(python, spec, tmp, oracle_id)
    dists = tuple(Dist(str(d.get("version")), str(d.get("path")), bool(d.get("editable")))
                  for d in doc.get("distributions") or [] if isinstance(d, dict))
    files = _installed(env, Path(dists[0].path), cfg.module) if len(dists) == 1 else None
    return Probe(
        oracle=oracle_id, commit=commit, env=str(env), python=str(python),
        distribution=cfg.distribution, runtime_version=_opt(doc, "runtime_version"),
        distribution_version=_opt(doc, "distribution_version"), distributions=dists,
        module_file=_opt(doc, "module_file"), import_error=_opt(doc, "import_error"),
        sys_prefix=_opt(doc, "sys_prefix") or "",
        sys_path=tuple(p for p in doc.get("sys_path") or [] if isinstance(p, str)),
        isolated=bool(doc.get("isolated")), flashinfer_version=_opt(doc, "flashinfer_version"),
        torch_version=_opt(doc, "torch_version"), vllm_version=_opt(doc, "vllm_version"),
        build=build, files=files)


def _installed(env: Path, dist_info: Path, module: str) -> installed.Installed | None:
    """The one distribution's installed files (None without a RECORD); refused when this user
    may not read them (a mode-0 RECORD or module file crashed probe, verify and adopt)."""
    try:
        return installed.read(dist_info, module) if (dist_info / "RECORD").is_file() else None
    except OSError as exc:
        raise unreadable(env, exc) from None


def _run_probe(python: Path, spec: str, tmp: Path, oracle_id: str) -> dict[str, Any]:
    """What the probe script reports when the oracle's Python runs it from `tmp`."""
    out = tmp / "probe.json"
    rebuild = (f"rebuild the oracle ('upstream-sync oracle build --oracle {oracle_id} "
               "--rebuild')")
    done = proc.Command((str(python), "-I", "-B", "-c", PROBE_SCRIPT, spec, str(out)),
                        cwd=tmp, env=probe_environ(), what=f"probing {python}",
                        fix=rebuild).run()
    if not done.ok or not out.is_file():
        text = proc.lines(done.stderr)
        raise EnvironmentUnresolved(
            f"probing {python} failed: {text[-1] if text else done.returncode}", rebuild)
    try:
        doc = json.loads(out.read_text(encoding="utf-8"))
    except ValueError:
        raise EnvironmentUnresolved(f"the probe of {python} wrote no JSON",
                                    "rebuild the oracle") from None
    if not isinstance(doc, dict):
        raise EnvironmentUnresolved(f"the probe of {python} wrote no object", "rebuild it")
    return doc


def probe(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None
          ) -> Probe:
    commit = resolve_commit(port, prefs, oracle_id, commit_spec)  # the id first, as verify
    home = oracle_home(port, prefs)
    return probe_env(port, prefs, oracle_id, commit, env_path(home, oracle_id, commit), home)

