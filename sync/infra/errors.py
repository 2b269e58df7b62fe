"""The one error hierarchy. Each class carries the exit code the CLI boundary returns.

Messages are one line: what is wrong, then (after " — ") what to do about it.
"""

from __future__ import annotations


class SyncError(Exception):
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
    """Bad command line or configuration."""

    exit_code = 2


class EnvironmentUnresolved(SyncError):
    """A machine-specific input (reference checkout, oracle home, ...) is missing or unusable."""

    exit_code = 3


class MalformedRecord(SyncError):
    """A record in the port (pin block, oracle file, report, ...) does not parse or validate."""

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
    """An oracle or a pin copy does not match the authority."""

    exit_code = 5


class BlockedCycle(SyncError):
    """The cycle cannot proceed (advance preconditions unmet, PENDING gate under --strict, ...)."""

    exit_code = 6


class CheckFailed(SyncError):
    """`check`-style commands found violations (already printed, one per line)."""

    exit_code = 7


EXIT_CODES = {
    "ok": 0,
    "internal": 1,
    "usage": UsageError.exit_code,
    "environment": EnvironmentUnresolved.exit_code,
    "malformed": MalformedRecord.exit_code,
    "identity": IdentityMismatch.exit_code,
    "blocked": BlockedCycle.exit_code,
    "check": CheckFailed.exit_code,
}
