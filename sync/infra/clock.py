"""The one place this tool reads the time of day."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)
