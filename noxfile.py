"""Sessions of upstream-sync, in cycle order. Each installs the package and calls one command.

With no port configured (no --port, no $SYNC_PORT, not inside a port) the commands
run on the bundled example and say so. Arguments after `--` go to the command.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

PYPROJECT = nox.project.load_toml("pyproject.toml")


def _cli(session: nox.Session, *args: str) -> None:
    session.install(".")
    _run(session, *args)


def _run(session: nox.Session, *args: str) -> None:
    # nox runs sessions from the noxfile's folder; the command looks for the port where
    # nox was invoked (`nox -f .../noxfile.py` from inside a port).
    env = {"SYNC_INVOKED_FROM": str(session.invoked_from)}
    session.run("upstream-sync", *args, *session.posargs, env=env)


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
    session.install(".")
    _run(session, "queue")
    _run(session, "audit")


@nox.session(default=False, tags=["gate"])
def oracle(session: nox.Session) -> None:
    """Step 6: build the oracle virtualenv at the pin (or --commit) if missing, and verify it."""
    session.install(".")
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
    """Step 7: advance the parity pin from the measured oracle, or stall with what is left."""
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
    """Run the test suite."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff and strict mypy."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", "sync", "tests", "noxfile.py", "examples")
    session.run("mypy", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Measure the speed and memory bars (10,000-commit synthetic upstream, 2,000-file port)."""
    session.install(".")
    session.run("python", "-m", "sync.dev.bench", *session.posargs)
