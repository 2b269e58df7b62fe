"""Paths under the port: resolved, confined, never through a symbolic link.

Every file the tool reads or writes in the port sits under its root. A symbolic link on
the way (a linked `sync_dir`, a linked `gates/`, a linked ledger) would carry a write or
a read elsewhere; a value read from a record that becomes a path (a report name, a
journal entry) could name a parent (`../../`) or an absolute path. Both are refused here,
with the path named port-relative.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from sync.infra.errors import UsageError

_FIX = "replace the link with the real folder or file inside the port"


def _link_refusal(root: Path, at: Path, rel: str) -> UsageError:
    shown = at.relative_to(root).as_posix()
    what = rel if shown == rel else f"{rel} (at {shown})"
    return UsageError(f"{what} is a symbolic link: upstream-sync reads and writes only real "
                      f"paths inside the port {root}", _FIX)


def confined(root: Path, rel: str | PurePosixPath) -> Path:
    """`root/rel`, refused when `rel` leaves the root or a component on the way is a link.

    Components that do not exist yet are fine (the tool creates them); `root` itself is
    taken as given (it was resolved when the port was located).
    """
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in str(rel):
        raise UsageError(f"{str(rel)[:120]!r} is not a path inside the port {root}",
                         "use a port-relative path without '..'")
    at = root
    for part in parts:
        at = at / part
        if at.is_symlink():
            raise _link_refusal(root, at, PurePosixPath(rel).as_posix())
        if not at.exists():
            break
    return root.joinpath(*parts)


def no_links_below(root: Path, rel: str) -> None:
    """Refuse a link anywhere under the folder `root/rel` (the tool's own records)."""
    top = confined(root, rel)
    if not top.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(top):
        for name in (*dirnames, *filenames):
            entry = Path(dirpath) / name
            if entry.is_symlink():
                raise _link_refusal(root, entry, rel)


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, resolved, is `root` or under it."""
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True
