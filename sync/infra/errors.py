"""The one error hierarchy. Each class carries the exit code the CLI boundary returns.

Messages are one line: what is wrong, then (after " — ") what to do about it.

`EXIT_CODES` is the one table of exit codes: each class declares its code and, in its
docstring, what the code means; the tables in README.md and docs/adopting.md §8 are
rendered from it (`exit_table`, written by `python -m sync.dev.docs`, checked by a test),
and the CLI returns `exc.exit_code`. It is kept rather than removed because CI scripts and
the docs need the codes as data, and a second hand-written table is what drifted before.
"""

from __future__ import annotations

import inspect


class SyncError(Exception):
    """An internal error (a bug): rerun with `--debug` for the traceback and report it."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        text = self.message if self.fix is None else f"{self.message} — {self.fix}"
        # One line, always: a multi-line message breaks CI log greps.
        return " ".join(text.split())


class UsageError(SyncError):
    """Bad command line or configuration (unknown key, path escaping the port, existing file
    without `--force`, an input file the command line names that cannot be read)."""

    exit_code = 2


class EnvironmentUnresolved(SyncError):
    """A machine-specific input is missing or unusable: reference checkout unset, missing or
    shallow; oracle environment missing; oracle home inside a checkout; oracle home or
    environment not a directory or closed to this user; the port not writable (a read-only
    mount)."""

    exit_code = 3


class MalformedRecord(SyncError):
    """A record in the port does not parse or validate, reported as `path:line:`; a header
    `bump-headers` cannot rewrite (no SHA, a SHA split across lines, no header) is one."""

    exit_code = 4

    def __init__(
        self, message: str, fix: str | None = None, *, path: str | None = None,
        line: int | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message, fix)
        self.path = path
        self.line = line


class IdentityMismatch(SyncError):
    """An oracle or a pin copy disagrees with the authority (`oracle verify`)."""

    exit_code = 5


class BlockedCycle(SyncError):
    """The cycle cannot proceed: advance preconditions unmet, a PENDING gate under
    `--strict`, files `bump-headers` cannot bump safely (a changed upstream file, a SHA
    off the upstream line or ahead of the target, a path the target lacks; `--check` too,
    as a dry run), another run holds the lock."""

    exit_code = 6


class CheckFailed(SyncError):
    """`check`, `check-commit` or a gate found violations (already printed, one per line)."""

    exit_code = 7


SUCCESS = 0
SUCCESS_MEANING = ("success; `check` found nothing worse than warnings, or there was nothing "
                   "to sync")
# In exit-code order; a new error class goes here, with its code and its docstring.
EXIT_CODES: tuple[type[SyncError], ...] = (
    SyncError, UsageError, EnvironmentUnresolved, MalformedRecord, IdentityMismatch,
    BlockedCycle, CheckFailed,
)


def meaning(cls: type[SyncError]) -> str:
    """What the class's exit code means: its docstring, as one line."""
    text = " ".join(inspect.cleandoc(cls.__doc__ or "").split()).rstrip(".")
    return text[:1].lower() + text[1:]


def exit_table() -> str:
    """The exit codes as the markdown table of README.md and docs/adopting.md §8."""
    rows = [(str(SUCCESS), "—", SUCCESS_MEANING)]
    rows += [(str(c.exit_code), f"`{c.__name__}`", meaning(c)) for c in EXIT_CODES]
    lines = ["| exit | class | meaning |", "|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
