"""Counting the files a command opens for reading: an audit hook on the `open` event (what
`open()`, `Path.read_text` and `os.open` raise), in process, around one `cli.main` call."""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

from portfixture import Fixture, run

# Audit hooks cannot be removed, so one is installed per test session and counts only
# while a test holds this counter.
_counting: collections.Counter[str] | None = None
_installed = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _counting is None or event != "open":
        return
    path, mode, flags = args
    if not isinstance(path, str | bytes | os.PathLike):
        return  # an open file descriptor
    if isinstance(mode, str):
        if any(c in mode for c in "wax+"):
            return
    elif not isinstance(flags, int) or flags & os.O_ACCMODE != os.O_RDONLY:
        return
    _counting[os.path.abspath(os.fsdecode(path))] += 1


def install() -> None:
    """Install the hook (once per test session: audit hooks cannot be removed)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def counted(fx: Fixture, *argv: str, rc: int = 0) -> dict[str, int]:
    """Reads per port-relative path under .agents/ during one command exiting with `rc`."""
    return under(fx, reads_during(fx, *argv, rc=rc), ".agents")


def under(fx: Fixture, reads: collections.Counter[str], folder: str) -> dict[str, int]:
    """The reads of files under the port's `folder`, by port-relative path."""
    top = str(fx.port / folder) + os.sep
    return {Path(p).relative_to(fx.port).as_posix(): n for p, n in reads.items()
            if p.startswith(top)}


def reads_during(fx: Fixture, *argv: str, rc: int = 0) -> collections.Counter[str]:
    """Every file read during one command exiting with `rc`, by absolute path."""
    global _counting
    install()
    reads: collections.Counter[str] = collections.Counter()
    _counting = reads
    try:
        r = run(fx.port, *argv)
    finally:
        _counting = None
    assert r.rc == rc, r.err
    return reads


