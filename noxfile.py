"""Sessions of upstream-sync, in cycle order. Each installs the package and calls one command.

With no port configured (no --port, no $SYNC_PORT, not inside a port) the commands
run on the bundled example and say so. Arguments after `--` go to the command.

A session reinstalls the package only when its sources changed: the install writes a
stamp (a hash of `pyproject.toml`, `sync/` and what was installed) into the session's
virtualenv, and a warm session whose stamp matches goes straight to its command.
A command's typed exit code (2-7, see the README) is nox's exit code too, so CI
sees "3: misconfigured runner" or "6: the cycle is not ready" through nox.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
STAMP = "upstream-sync.stamp"
TYPED_EXITS = range(2, 8)  # sync/infra/errors.py; 1 stays nox's own "something failed"


def _stamp(requirements: tuple[str, ...]) -> str:
    """What a session's install depends on: the requirements and every source byte."""
    h = hashlib.sha256("\0".join(requirements).encode())
    files = [ROOT / "pyproject.toml", *(ROOT / "sync").rglob("*")]
    for path in sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts):
        data = path.read_bytes()
        h.update(f"\0{path.relative_to(ROOT).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _install(session: nox.Session, *groups: str) -> None:
    """Install the package (and dependency groups) unless this venv already holds it."""
    if session.venv_backend == "none":
        return  # --no-venv: the upstream-sync already on PATH runs
    reqs = (".", *(r for g in groups for r in nox.project.dependency_groups(PYPROJECT, g)))
    stamp = Path(session.virtualenv.location) / STAMP
    want = _stamp((session.venv_backend, *reqs))
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want:
        session.log("upstream-sync is installed from these sources: nothing to install")
        return
    stamp.unlink(missing_ok=True)
    # uv keeps an installed local package of the same version unless told otherwise.
    cmd = (["uv", "pip", "install", "--reinstall-package", "upstream-sync"]
           if session.venv_backend == "uv" else ["python", "-m", "pip", "install"])
    # run_install is skipped (returns None) under --no-install: then nothing was installed.
    if session.run_install(*cmd, *reqs, silent=True, external="error") is not None:
        stamp.write_text(want, encoding="utf-8")


def _cli(session: nox.Session, *args: str) -> None:
    _install(session)
    _run(session, *args)


def _run(session: nox.Session, *args: str) -> None:
    # nox runs sessions from the noxfile's folder; the command looks for the port where
    # nox was invoked (`nox -f .../noxfile.py` from inside a port).
    env = {"SYNC_INVOKED_FROM": str(session.invoked_from)}
    try:
        session.run("upstream-sync", *args, *session.posargs, env=env)
    except nox.command.CommandFailed as exc:
        # nox >= 2026.07 carries the code; older ones (2025.02.09 on) only say it in words.
        code = getattr(exc, "return_code", None)
        if code is None:
            found = re.fullmatch(r"Returned code (\d+)", str(exc.reason))
            code = int(found.group(1)) if found else None
        if code in TYPED_EXITS:
            session.log(f"upstream-sync exited {code}: nox exits {code} too (README, Exit codes)")
            raise SystemExit(code) from None
        raise


@nox.session(default=False)
def status(session: nox.Session) -> None:
    """How far behind upstream the port is and what blocks the advance."""
    _cli(session, "status")


@nox.session(default=False)
def fetch(session: nox.Session) -> None:
    """Step 1: fetch the upstream and freeze the cycle's target SHA."""
    _cli(session, "fetch")


@nox.session(default=False)
def sync(session: nox.Session) -> None:
    """Steps 2-4: enumerate, classify and write the sync report (the main job)."""
    _cli(session, "sync")


@nox.session(default=False)
def port(session: nox.Session) -> None:
    """Step 5: the PORT-NOW queue and the per-file pin audit."""
    _install(session)
    _run(session, "queue")
    _run(session, "audit")


@nox.session(default=False, tags=["gate"])
def oracle(session: nox.Session) -> None:
    """Step 6: build the oracle virtualenv at the pin (or --commit) if missing, and verify it."""
    _install(session)
    _run(session, "oracle", "build", "--if-missing")
    _run(session, "oracle", "verify")


@nox.session(default=False, tags=["gate"])
def golden(session: nox.Session) -> None:
    """Step 6: regenerate goldens with the verified oracle (PENDING off gate hosts)."""
    _cli(session, "golden")


@nox.session(default=False, tags=["gate"])
def parity(session: nox.Session) -> None:
    """Step 6: run the parity suites and record the gates."""
    _cli(session, "parity")


@nox.session(default=False)
def advance(session: nox.Session) -> None:
    """Step 7: advance the parity pin from the measured oracle (`-- --stall`: stall the cycle)."""
    _cli(session, "advance")


@nox.session(default=False)
def check(session: nox.Session) -> None:
    """CI: every record invariant, one line per violation."""
    _cli(session, "check")


@nox.session(name="check-commit", default=False)
def check_commit(session: nox.Session) -> None:
    """CI: refuse commits that mix a sync cycle with feature work."""
    _cli(session, "check-commit")


@nox.session(default=False)
def cli(session: nox.Session) -> None:
    """Any upstream-sync command: nox -s cli -- decide <sha> IGNORE "reason"."""
    if not session.posargs:
        session.error("give the command after --, e.g. nox -s cli -- decide <sha> IGNORE why")
    _cli(session)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite, one test per core (`-- -n 0` runs them in this process)."""
    _install(session, "test")
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff, strict mypy, and the CI templates as GitHub lints them (zizmor, schema)."""
    _install(session, "lint")
    session.run("ruff", "check", "sync", "tests", "noxfile.py", "examples")
    session.run("mypy", *session.posargs)
    session.run("python", "-m", "sync.dev.complexity", "--max-share", "6")
    templates = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "ci" / "github").glob("*.yml"))
    session.run("zizmor", "--offline", "--no-progress", "--color", "never", *templates)
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *templates)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Measure the speed and memory bars against their floors: -- [--case DIR] [--runs N]."""
    _install(session)
    session.run("python", "-m", "sync.dev.bench", *session.posargs)


@nox.session(name="real-oracle", default=False)
def real_oracle(session: nox.Session) -> None:
    """Build a real vLLM oracle (Python-only) from a case and verify it: -- CASE [--at REF].

    CASE: shared/cases/late-july (prepared into --work) or a folder holding vllm/ and port/.
    Not in CI: minutes and about 3 GB per oracle (docs/adopting.md §9)."""
    _install(session)
    session.run("python", "-m", "sync.dev.realoracle", "run", *session.posargs)
