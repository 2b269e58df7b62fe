"""What a step may say while it works: notices and progress, never on stdout.

The CLI's `Context` is the one implementation; steps take `Notes | None` so they
can run without a command line (tests, other steps).
"""

from __future__ import annotations

from typing import Protocol


def counted(n: int, noun: str, plural: str = "") -> str:
    """`n noun`, the noun in the plural unless n is 1 (`plural`: for a noun not made so by
    adding "s": `counted(2, "entry", "entries")`)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class Notes(Protocol):
    def note(self, message: str) -> None:
        """A notice the user should read (stderr)."""

    def progress(self, message: str) -> None:
        """Progress of a slow step (stderr, on a terminal only)."""
