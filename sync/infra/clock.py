"""The one place this tool reads the time of day.

A result that depends on it (a cycle's frozen time, a gate result's age) is not the same
on a re-run over the same files: reading it tells `infra.memo` not to keep the run.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sync.infra import memo


def now() -> datetime:
    """The current time, in UTC."""
    memo.unrepeatable("it read the clock")
    return datetime.now(UTC)
