"""What a record module needs of the port: where the port keeps its files.

Records sit below `sync.port` (infra < upstream < records < headers < port), so they
take this protocol rather than the `Port` class; a `Port` is one, and so is any object
with these members (a test's stand-in, a port's checkout at another commit).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from sync.records.config import Config
from sync.records.pins import PinRecord


class Layout(Protocol):
    @property
    def root(self) -> Path: ...

    @property
    def config(self) -> Config: ...

    @property
    def sync_dir(self) -> Path: ...

    def rel(self, path: Path) -> str:
        """`path` relative to the root (as errors name it), or as given when outside."""
        ...

    def pin_record(self) -> PinRecord:
        """The pin block of the protocol file, loaded once."""
        ...

    def forget(self, key: str) -> None:
        """Drop what the port holds for record `key` after a record module rewrote it."""
        ...

    def lock(self, wait_s: float = 0.0) -> AbstractContextManager[None]:
        """The port lock (re-entrant), around every read-modify-write of a record."""
        ...
