"""Oracle build: a fresh virtualenv with upstream installed from a pinned commit.

Before anything is built: the build mode is resolved (config, else the pin block's
suffix; a disagreement between them, or with an existing environment, is refused),
and every variable that forges a version is refused in the environment and in the
oracle's `build_env` (setuptools-scm's and vcs-versioning's settings, the upstream's
own `VLLM_VERSION_OVERRIDE`, and, for a Python-only build, the variables that make
vLLM extract precompiled binaries while its version still says `.empty`).

The wheel comes from a throwaway `git clone --shared` of the source checkout at the
commit (the checkout's work tree is never touched), verified complete (every blob of
the tree present: `git checkout` exits 0 over a missing object) and clean (`git status`
empty, ignored files included) before it is built. The build sets the variables its
mode needs (`VLLM_TARGET_DEVICE` always: vLLM otherwise guesses the device from
whichever torch the build environment got), and `SOURCE_DATE_EPOCH` from the commit.
It installs with `uv` where it is found (or configured), `python -m venv` + pip
otherwise, honouring the port's constraints file at the install (never the build: a
runtime lock breaks the build requirements). Every step streams into one log under
`<oracle_home>/logs/`, named in every failure with its first error line quoted, and
reports progress (phase, elapsed time, the log's last line) while it runs.

The build is recorded in `<env>/upstream-sync-oracle.json`, written last (an
interrupted build never verifies) and bound to the installed files: the digest of
the distribution's RECORD, the installed files the commit's tree does not hold, where
precompiled binaries came from, the dependency set (`<env>/upstream-sync-freeze.txt`)
and the constraints applied. Other `<id>-*` environments are kept for rollback (`oracle
gc` drops the old ones). Omni oracles are watched by `sync.steps.verify.isolation`
while they build. Every build step runs through `sync.infra.proc`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sync.infra import proc
from sync.infra.atomic import write_text
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.infra.hashing import file_sha256
from sync.port import Port
from sync.records import gates, modes
from sync.records.config import OracleConfig
from sync.records.prefs import Preferences
from sync.steps.verify import binaries, installed
from sync.steps.verify.oracle import (
    BASE_PATH,
    FREEZE,
    BuildRecord,
    Note,
    Settings,
    check_id,
    env_path,
    oracle_home,
    read_marker,
    remove_env,
    resolve_commit,
    scratch,
    settings,
    source_path,
    usable_env,
    write_marker,
)
from sync.steps.verify.watch import omni_watch
from sync.upstream import gitio
from sync.upstream.gitio import short

# Passed from our environment into a build: installer settings (indexes, caches,
# proxies, certificates) and toolchain locations. Anything else a build needs
# belongs in the oracle's build_env in the port's config, where it is recorded.
_BUILD_PASS = ("HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "http_proxy", "https_proxy",
               "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE",
               "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CUDA_HOME", "CUDA_PATH", "CC", "CXX",
               "MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST")
_BUILD_PASS_PREFIX = ("UV_", "PIP_")  # recorded in the build record as its inputs

# setuptools-scm 10 reads every setting under both prefixes (through vcs-versioning):
# PRETEND_VERSION, PRETEND_METADATA (which forges __commit_id__ too), OVERRIDES, each
# also _FOR_<DIST>; the upstream's own build maps these onto them.
_FORGER_PREFIXES = ("SETUPTOOLS_SCM_", "VCS_VERSIONING_")
_FORGERS = {
    "VLLM_VERSION_OVERRIDE": "vLLM's setup.py turns it into SETUPTOOLS_SCM_PRETEND_VERSION",
    "VLLM_SKIP_PRECOMPILED_VERSION_SUFFIX": "it drops the .precompiled suffix, and the version "
                                            "would no longer say how the oracle was built",
}
_BINARY_VARS = ("VLLM_USE_PRECOMPILED", "VLLM_USE_PRECOMPILED_RUST")
_BINARY_PREFIX = "VLLM_PRECOMPILED_WHEEL_"
_LOCATION = "VLLM_PRECOMPILED_WHEEL_LOCATION"
LOGS = "logs"
Runner = Callable[[list[str], str], bytes]  # (argv, what) -> stdout


def _forges(key: str) -> str | None:
    if key.startswith(_FORGER_PREFIXES):
        return "setuptools-scm takes the version (or the commit id) from it"
    return _FORGERS.get(key)


def refuse_forgers(cfg: OracleConfig, mode: modes.BuildMode,
                   environ: dict[str, str] | None = None) -> None:
    """Refuse every variable that forges the version, and build_env that fights the mode."""
    env = dict(os.environ) if environ is None else environ
    table = f"oracles.{cfg.id}.build_env"
    for where, keys in (("the environment", env), (table, dict(cfg.build_env))):
        for key in sorted(keys):
            why = _forges(key)
            if why is not None:
                drop = f"unset {key}" if keys is env else f"remove {key} from {table}"
                raise UsageError(
                    f"{key} is set in {where}: {why}, so the oracle's identity would no longer "
                    "be measured from its commit",
                    f"{drop}; the version must come from the git checkout")
    _refuse_conflicts(cfg, modes.mode(mode))


def _refuse_conflicts(cfg: OracleConfig, mode: modes.Mode) -> None:
    where = f"oracles.{cfg.id}.build_env"
    owned = dict(mode.environ)
    for key, value in cfg.build_env:
        if key in owned and value != owned[key]:
            raise UsageError(f"{where} sets {key}={value}, but build mode {mode.name!r} sets "
                             f"it to {owned[key]!r}", f"remove {key} from {where}")
        binary = key in _BINARY_VARS or key.startswith(_BINARY_PREFIX)
        if binary and mode.name != "precompiled":
            why = (" while its version still says .empty" if mode.python_only
                   else ", and the version would not say so")
            raise UsageError(
                f"{where} sets {key} in build mode {mode.name!r}: vLLM would extract "
                f"precompiled binaries{why}",
                f"remove {key}, or use build mode 'precompiled'")


def build_environ(cfg: OracleConfig, tools: list[Path], commit: str, epoch: str,
                  mode: modes.BuildMode) -> dict[str, str]:
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
    env.update(dict(modes.mode(mode).environ))
    if mode == "precompiled" and _LOCATION not in env:
        # Without it vLLM asks GitHub for a merge base, and on any failure (a detached
        # throwaway checkout always fails) takes the newest nightly wheel's binaries.
        env["VLLM_PRECOMPILED_WHEEL_COMMIT"] = commit
    env["SOURCE_DATE_EPOCH"] = epoch
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


def _installer(cfg: OracleConfig) -> Path | None:
    """The uv to use, None for pip (`installer` in the config: auto, pip or uv)."""
    if cfg.installer == "pip":
        return None
    uv = find_uv()
    if uv is None and cfg.installer == "uv":
        raise EnvironmentUnresolved(f"[oracles.{cfg.id}] installer is 'uv', but uv is not "
                                    "installed here", "install uv, or set installer = \"pip\"")
    return uv


def base_python() -> Path:
    # The interpreter under a venv (nox's, say): a venv of a venv would chain them.
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


def log_path(home: Path, oracle_id: str, commit: str) -> Path:
    return home / LOGS / f"{env_path(home, oracle_id, commit).name}.log"


@dataclass(frozen=True)
class Built:
    env: Path
    record: BuildRecord
    kept: tuple[Path, ...]  # other environments of this oracle, kept for rollback
    isolation: tuple[str, ...] = ()  # omni only: isolation problems seen during the build
    warnings: tuple[str, ...] = ()  # e.g. precompiled binaries not from the commit


def _constraints(port: Port, cfg: OracleConfig) -> Path | None:
    if cfg.constraints is None:
        return None
    path = port.root / cfg.constraints
    if not path.is_file():
        raise UsageError(f"[oracles.{cfg.id}] constraints names {cfg.constraints}, which is not "
                         "a file in the port", "add the constraints file or remove the key")
    return path


def existing(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None
             ) -> Path | None:
    """The environment already at the commit, None when there is none; refused when it was
    built in another mode than the one the config and the pin say (before any build)."""
    st = settings(port, check_id(oracle_id))
    commit = resolve_commit(port, prefs, oracle_id, commit_spec)
    env = usable_env(env_path(oracle_home(port, prefs), oracle_id, commit))
    if not (env.exists() or env.is_symlink()):
        return None
    record = read_marker(env)
    if record is not None and record.build_mode != st.mode:
        raise UsageError(f"{env} was built in mode {record.build_mode!r}, but {st.said_by} says "
                         f"{st.mode!r}", "rebuild it ('upstream-sync oracle build --rebuild')")
    return env


def build(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None, *,
          rebuild: bool = False, note: Note = lambda _: None) -> Built:
    cfg = port.config.oracle(check_id(oracle_id))
    st = settings(port, oracle_id)
    refuse_forgers(cfg, st.mode)
    constraints = _constraints(port, cfg)
    home = oracle_home(port, prefs)
    src_path = source_path(prefs, cfg)
    if src_path is None:
        raise EnvironmentUnresolved(f"the {oracle_id} source checkout is not configured",
                                    f"set ${cfg.source_variable} or the developer preferences")
    ref = gitio.open_repo(src_path, what=f"{oracle_id} source checkout",
                          variable=cfg.source_variable)
    commit = resolve_commit(port, prefs, oracle_id, commit_spec)
    if not gitio.has_commit(ref, commit):
        raise EnvironmentUnresolved(f"commit {short(commit)} is not in {ref.path}",
                                    "run 'upstream-sync fetch' (or fetch the source checkout)")
    env = usable_env(env_path(home, oracle_id, commit))
    _clear(env, rebuild=rebuild, note=note)
    kept = tuple(sorted(p for p in home.glob(f"{oracle_id}-*") if p.is_dir() and p != env))
    job = Job(port, prefs, cfg, st, ref, commit, home, env, constraints)
    guard = omni_watch(port, prefs, home, oracle_id, commit, "build")
    with guard as watch:
        record, warnings = _install(job, note)
    problems = tuple(watch.problems) if watch is not None else ()
    return Built(env, record, kept, problems, warnings)


def _clear(env: Path, *, rebuild: bool, note: Note) -> None:
    if not (env.exists() or env.is_symlink()):
        return
    if not rebuild:
        raise UsageError(f"{env} already exists",
                         "verify it with 'upstream-sync oracle verify', or pass --rebuild")
    if env.is_symlink():  # an adopted environment: the link goes, the venv it names stays
        note(f"replacing the link {env} -> {env.resolve()} (that environment is kept)")
    remove_env(env)


@dataclass(frozen=True)
class Job:
    """One oracle build: which oracle at which commit, from which checkout, into which env."""

    port: Port
    prefs: Preferences
    cfg: OracleConfig
    settings: Settings
    source: gitio.Reference
    commit: str
    home: Path
    env: Path
    constraints: Path | None


def progress_line(phase: str, note: Note) -> Callable[[float, str], None]:
    """What a build step says while it runs: its phase, the time, and the log's last line;
    while the log is silent, for how long (not the same line again and again: pip can be
    quiet for a minute while it resolves or unpacks)."""
    last: list[tuple[str, float]] = []

    def say(elapsed: float, tail: str) -> None:
        line = "".join(c for c in tail if c.isprintable())[:120]
        clock = f"  [{phase} {int(elapsed) // 60}:{int(elapsed) % 60:02d}]"
        if last and last[0][0] == line:
            note(f"{clock} no new log line for {int(elapsed - last[0][1])} s")
            return
        last[:] = [(line, elapsed)]
        note(f"{clock} {line}")

    return say


@dataclass(frozen=True)
class _Scratch:
    """The build's throwaway directory and what every build step there runs with."""

    tmp: Path
    environ: dict[str, str]
    python: Path  # the interpreter the env is created from
    uv: Path | None
    log: Path
    note: Note

    def _progress(self, phase: str) -> Callable[[float, str], None]:
        return progress_line(phase, self.note)

    def step(self, argv: list[str], phase: str) -> None:
        """Run one build step into the log; a failure names the log and its first error."""
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"\n== {phase}: {' '.join(argv)}\n")
        done = proc.Command(tuple(argv), cwd=self.tmp, env=self.environ, what=phase,
                            log=self.log, progress=self._progress(phase)).run()
        if not done.ok:
            said = proc.first_error(self.log) or (done.tail[-1] if done.tail else "")
            raise EnvironmentUnresolved(
                f"{phase} failed (exit {done.returncode}): {said or 'no message'} (full log: "
                f"{self.log})", "fix what the log says, then run 'upstream-sync oracle build' "
                "again")

    def output(self, argv: list[str], phase: str) -> bytes:
        return proc.Command(tuple(argv), cwd=self.tmp, env=self.environ, what=phase,
                            fix="rebuild the oracle").run().check().stdout


def _install(job: Job, note: Note) -> tuple[BuildRecord, tuple[str, ...]]:
    uv = _installer(job.cfg)
    python = base_python()
    git = shutil.which("git")
    tools = [t for t in (uv, Path(git) if git else None) if t is not None]
    epoch = gitio.run(job.source.path, ["log", "-1", "--format=%ct", "--end-of-options",
                                        job.commit]).stdout.decode().strip()
    environ = build_environ(job.cfg, tools, job.commit, epoch, job.settings.mode)
    log = log_path(job.home, job.cfg.id, job.commit)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"upstream-sync oracle build: {job.cfg.id} at {job.commit} "
                   f"(build mode {job.settings.mode})\n", encoding="utf-8")
    try:
        with scratch(job.port, job.prefs, job.home) as tmp:
            work = _Scratch(tmp, environ, python, uv, log, note)
            clone = _clone(job, tmp, note)
            install = _venv_and_wheel(job, work, clone, note)
            wheel = _one_wheel(job.cfg, tmp / "dist")
            note(f"[install] {wheel.name} ({'uv' if uv else 'pip'}"
                 f"{', constraints ' + job.cfg.constraints if job.cfg.constraints else ''})")
            work.step([*install, str(wheel)], "install")
            if job.cfg.image_site_dirs:
                _add_image_sites(job.env, job.cfg.image_site_dirs, note)
            note("[record] dependency set, installed files, provenance")
            return _record(job, work, clone, wheel)
    except BaseException:
        # A half-built environment must never be probed as an oracle.
        shutil.rmtree(job.env, ignore_errors=True)
        raise


def _clone(job: Job, tmp: Path, note: Note) -> Path:
    """A throwaway checkout of the source at the commit (the source's work tree is untouched)."""
    clone = tmp / "src"
    note(f"[checkout] {job.source.path} at {short(job.commit)} into a throwaway checkout")
    gitio.run(tmp, ["clone", "--quiet", "--shared", "--no-checkout", "--",
                    str(job.source.path), str(clone)])
    # A 40-hex commit (resolved above) cannot be read as an option; this git's checkout
    # takes no --end-of-options.
    gitio.run(clone, ["checkout", "--quiet", "--detach", gitio.check_rev(job.commit)])
    verify_checkout(clone, job.commit, job.source.path)
    return clone


def verify_checkout(clone: Path, commit: str, source: Path) -> None:
    """The checkout is the commit's tree: every object present, nothing else in the work tree.

    `git checkout` exits 0 when a blob is missing (it prints an error and leaves the
    file deleted), so its exit status proves nothing; the tree's blobs are checked in one
    `git cat-file --batch-check`, and `git status` must be empty, ignored files included.
    """
    head = gitio.run(clone, ["rev-parse", "HEAD"]).stdout.decode().strip()
    if head != commit or (clone / ".git" / "shallow").exists():
        raise EnvironmentUnresolved(f"the throwaway checkout is at {short(head)}, not a full "
                                    f"checkout of {short(commit)}", f"check {source}")
    blobs = [e for e in gitio.tree_entries(clone, commit) if e.kind == "blob"]
    gone = set(gitio.missing_objects(clone, [e.object_id for e in blobs]))
    if gone:
        named = [f"{e.path} ({e.object_id[:12]})" for e in blobs if e.object_id in gone]
        raise EnvironmentUnresolved(
            f"the checkout of {short(commit)} is incomplete: {len(named)} object"
            f"{'s are' if len(named) != 1 else ' is'} missing from {source}: "
            f"{', '.join(named[:5])}{' ...' if len(named) > 5 else ''}",
            f"repair the source checkout (git -C {source} fsck; fetch the commit again), then "
            "build again")
    dirty = gitio.porcelain_status(clone)
    if dirty:
        raise EnvironmentUnresolved(
            f"the checkout of {short(commit)} is not clean ({len(dirty)} entries: "
            f"{', '.join(repr(d) for d in dirty[:3])}): it would not build the commit's tree",
            f"check {source} with 'git fsck', then build again")


def _venv_and_wheel(job: Job, work: _Scratch, clone: Path, note: Note) -> list[str]:
    """Create the env and build the wheel into `<tmp>/dist`; the install command."""
    dist = str(work.tmp / "dist")
    py = str(job.env / "bin" / "python")
    building = f"[wheel] {job.cfg.distribution} in build mode {job.settings.mode}"
    cons = [] if job.constraints is None else [str(job.constraints)]
    if work.uv is not None:
        uv = str(work.uv)
        note(f"[venv] {job.env} with uv")
        work.step([uv, "venv", "--quiet", "--python", str(work.python), str(job.env)], "venv")
        note(building)
        work.step([uv, "build", "--wheel", "--python", py, "-o", dist, str(clone)], "wheel")
        return [uv, "pip", "install", "--link-mode", "copy", "--python", py,
                *(a for c in cons for a in ("--constraint", c))]
    note(f"[venv] {job.env} with python -m venv")
    work.step([str(work.python), "-m", "venv", str(job.env)], "venv")
    note(building)
    # -v: setup.py's own lines (where precompiled binaries came from) reach the log.
    work.step([py, "-m", "pip", "wheel", "-v", "--no-deps", "-w", dist, str(clone)], "wheel")
    return [py, "-m", "pip", "install", *(a for c in cons for a in ("-c", c))]


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


def freeze(env: Path, uv: Path | None, run: Runner) -> str:
    """Write the env's resolved dependency set to `<env>/FREEZE`; its sha256."""
    py = str(env / "bin" / "python")
    argv = ([str(uv), "pip", "freeze", "--python", py] if uv is not None and not
            (env / "bin" / "pip").exists() else [py, "-I", "-m", "pip", "freeze", "--all"])
    text = run(argv, "freeze").decode("utf-8", "replace")
    write_text(env / FREEZE, text)
    return hashlib.sha256(text.encode()).hexdigest()


def dist_info(env: Path, cfg: OracleConfig) -> Path:
    name = cfg.distribution.replace("-", "_").lower()
    found = [d for d in env.glob("lib/python*/site-packages/*.dist-info")
             if d.name.lower().startswith(name + "-")]
    if len(found) != 1:
        raise EnvironmentUnresolved(f"{len(found)} {cfg.distribution} distributions in {env}",
                                    "rebuild the oracle")
    return found[0]


def _record(job: Job, work: _Scratch, clone: Path, wheel: Path
            ) -> tuple[BuildRecord, tuple[str, ...]]:
    cfg = job.cfg
    inst = installed.read(dist_info(job.env, cfg), cfg.module)
    tree = installed.against_tree(inst, cfg.module, clone, job.commit)
    provenance = binaries.from_log(list(proc.lines(_log_bytes(work.log))))
    warn = binaries.warning(provenance, job.commit) if provenance is not None else None
    doc = None if provenance is None else {**provenance.as_doc(), "warning": warn}
    passed = {k: v for k, v in work.environ.items() if k.startswith(_BUILD_PASS_PREFIX)}
    record = BuildRecord(
        oracle=cfg.id, commit=job.commit, build_mode=job.settings.mode,
        build_env=dict(cfg.build_env), installer="uv" if work.uv else "pip",
        python=str(work.python), source=str(job.source.path), host=gates.hostname(),
        built_at=gates.now(), origin="built", log=str(work.log),
        record_sha256=inst.record_sha256, not_in_tree=list(tree.not_in_tree), binaries=doc,
        wheel=wheel.name, wheel_sha256=file_sha256(wheel), constraints=cfg.constraints,
        constraints_sha256=file_sha256(job.constraints) if job.constraints else None,
        freeze_sha256=freeze(job.env, work.uv, work.output), inputs=passed)
    write_marker(job.env, record)
    return record, (warn,) if warn else ()


def _log_bytes(log: Path) -> bytes:
    return log.read_bytes() if log.is_file() else b""
