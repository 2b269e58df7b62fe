"""Oracle build: a fresh virtualenv with upstream installed from a pinned commit.

The wheel comes from a throwaway `git clone --shared` of the source checkout at
the commit (the checkout's work tree is never touched) and is installed with
`uv` when it is available (copy link mode: no file of the env is shared with
another env through the uv cache) and `python -m venv` + pip otherwise; the build
environment is built from scratch plus the configured `build_env`;
`SETUPTOOLS_SCM_PRETEND_VERSION*` is refused because it forges the identity.
The build is recorded in `<env>/upstream-sync-oracle.json`, written last, so an
interrupted build never verifies. Other `<id>-*` environments are kept for
rollback. Omni oracles are watched by `sync.steps.verify.isolation` while they
build. Every build step runs through `sync.infra.proc`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from sync.infra import proc
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.port import Port
from sync.records import gates
from sync.records.config import OracleConfig
from sync.records.prefs import Preferences
from sync.steps.verify.oracle import (
    BASE_PATH,
    MARKER,
    BuildRecord,
    Note,
    check_id,
    env_path,
    oracle_home,
    resolve_commit,
    scratch,
    source_path,
)
from sync.steps.verify.watch import omni_watch
from sync.upstream import gitio

PRETEND = "SETUPTOOLS_SCM_PRETEND_VERSION"
# Passed from our environment into a build: installer settings (indexes, caches,
# proxies, certificates) and toolchain locations. Anything else a build needs
# belongs in the oracle's build_env in the port's config, where it is recorded.
_BUILD_PASS = ("HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "http_proxy", "https_proxy",
               "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE",
               "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CUDA_HOME", "CUDA_PATH", "CC", "CXX",
               "MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST")
_BUILD_PASS_PREFIX = ("UV_", "PIP_")


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
    env["PATH"] = os.pathsep.join([*dirs, *(d for d in BASE_PATH if d not in dirs)])
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
    proc.Command(tuple(argv), cwd=cwd, env=env, what=what,
                 fix="fix the build (see the message) and run oracle build again").run().check()


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
        record = _install(Job(port, prefs, cfg, ref, commit, home, env), note)
    problems = tuple(watch.problems) if watch is not None else ()
    return Built(env, record, kept, problems)


@dataclass(frozen=True)
class Job:
    """One oracle build: which oracle at which commit, from which checkout, into which env."""

    port: Port
    prefs: Preferences
    cfg: OracleConfig
    source: gitio.Reference
    commit: str
    home: Path
    env: Path


@dataclass(frozen=True)
class _Scratch:
    """The build's throwaway directory and what every build step there runs with."""

    tmp: Path
    environ: dict[str, str]
    python: Path  # the interpreter the env is created from
    uv: Path | None

    def step(self, argv: list[str], what: str) -> None:
        _run_step(argv, self.environ, self.tmp, what)


def _install(job: Job, note: Note) -> BuildRecord:
    uv = find_uv()
    python = base_python()
    git = shutil.which("git")
    tools = [t for t in (uv, Path(git) if git else None) if t is not None]
    environ = build_environ(job.cfg, tools)
    job.home.mkdir(parents=True, exist_ok=True)
    try:
        with scratch(job.port, job.prefs, job.home) as tmp:
            work = _Scratch(tmp, environ, python, uv)
            clone = _clone(job, tmp, note)
            install, installer = _venv_and_wheel(job, work, clone, note)
            wheel = _one_wheel(job.cfg, tmp / "dist")
            note(f"installing {wheel.name}")
            work.step([*install, str(wheel)], f"{installer} install")
            if job.cfg.image_site_dirs:
                _add_image_sites(job.env, job.cfg.image_site_dirs, note)
    except BaseException:
        # A half-built environment must never be probed as an oracle.
        shutil.rmtree(job.env, ignore_errors=True)
        raise
    cfg = job.cfg
    record = BuildRecord(cfg.id, job.commit, cfg.build_mode, cfg.build_env, installer,
                         str(python), str(job.source.path), gates.hostname(), gates.now())
    (job.env / MARKER).write_text(json.dumps(record.as_doc(), indent=2) + "\n", encoding="utf-8")
    return record


def _clone(job: Job, tmp: Path, note: Note) -> Path:
    """A throwaway checkout of the source at the commit (the source's work tree is untouched)."""
    clone = tmp / "src"
    note(f"cloning {job.source.path} at {job.commit[:10]} into a throwaway checkout")
    gitio.run(tmp, ["clone", "--quiet", "--shared", "--no-checkout", "--",
                    str(job.source.path), str(clone)])
    gitio.run(clone, ["checkout", "--quiet", "--detach", job.commit])
    return clone


def _venv_and_wheel(job: Job, work: _Scratch, clone: Path, note: Note
                    ) -> tuple[list[str], str]:
    """Create the env and build the wheel into `<tmp>/dist`: (install command, installer)."""
    dist = str(work.tmp / "dist")
    py = str(job.env / "bin" / "python")
    building = f"building {job.cfg.distribution} (build mode {job.cfg.build_mode})"
    if work.uv is not None:
        uv = str(work.uv)
        note(f"creating {job.env} with uv")
        work.step([uv, "venv", "--quiet", "--python", str(work.python), str(job.env)], "uv venv")
        note(building)
        work.step([uv, "build", "--quiet", "--wheel", "--python", py, "-o", dist, str(clone)],
                  "uv build")
        return [uv, "pip", "install", "--quiet", "--link-mode", "copy", "--python", py], "uv"
    note(f"creating {job.env} with python -m venv")
    work.step([str(work.python), "-m", "venv", str(job.env)], "python -m venv")
    note(building)
    work.step([py, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, str(clone)],
              "pip wheel")
    return [py, "-m", "pip", "install", "--quiet"], "pip"


def _one_wheel(cfg: OracleConfig, dist: Path) -> Path:
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise EnvironmentUnresolved(
            f"the build of {cfg.distribution} produced {len(wheels)} wheels, expected one",
            "check the upstream's build configuration")
    return wheels[0]


def _add_image_sites(env: Path, dirs: tuple[str, ...], note: Note) -> None:
    """Append a gate host image's site directories after the oracle's own (a .pth file)."""
    sites = sorted(env.glob("lib/python*/site-packages"))
    if len(sites) != 1:
        raise EnvironmentUnresolved(f"cannot find the site-packages of {env}",
                                    "rebuild the oracle")
    note(f"appending the image's site directories: {', '.join(dirs)}")
    (sites[0] / "upstream-sync-image-sites.pth").write_text("".join(d + "\n" for d in dirs),
                                                           encoding="utf-8")

