"""Sessions of upstream-sync. Each installs the package and calls one command; logic is in sync/."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

PYPROJECT = nox.project.load_toml("pyproject.toml")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff and strict mypy."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", "sync", "tests", "noxfile.py")
    session.run("mypy", *session.posargs)


@nox.session(default=False)
def status(session: nox.Session) -> None:
    """How far behind upstream the port is and what blocks the advance."""
    session.install(".")
    session.run("upstream-sync", "status", *session.posargs)


@nox.session(default=False)
def check(session: nox.Session) -> None:
    """Every record invariant (what a port's CI runs on each change)."""
    session.install(".")
    session.run("upstream-sync", "check", *session.posargs)
