"""Atomic writes and the port-wide lock.

Every record write goes through `write_text`/`write_bytes` (temp file in the same
directory + fsync + `os.replace`), so a reader or a killed process sees the old
file or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sync.infra.errors import BlockedCycle


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            # mkstemp creates 0600; a new record gets the mode open() would give it.
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: Path, text: str) -> None:
    """Write `text` exactly (no newline translation: callers keep the file's own style)."""
    write_bytes(path, text.encode("utf-8"))


def read_text(path: Path) -> str:
    """Read exactly (newline=''): renders must give back every byte, CRLF included."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


@contextlib.contextmanager
def port_lock(lock_path: Path) -> Iterator[None]:
    """Exclusive, non-blocking lock: a second concurrent writer refuses instead of waiting."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise BlockedCycle(
                    f"another upstream-sync run holds the lock {lock_path}",
                    "wait for it to finish, then run again",
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)
