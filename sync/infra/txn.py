"""All-or-nothing multi-file writes: stage every file, commit with one journal, then replace.

An intent file names the targets first; each new content is then written to a
temp file beside its target (a file the transaction removes gets an empty marker
instead); the journal (temp -> target pairs) is written atomically last: that is
the commit point. A process killed before the journal
exists leaves the records entirely old (recovery removes the temps); killed after,
`recover` finishes the replacements (entirely new). Every command calls `recover`
before it reads a record.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from sync.infra.atomic import orphans as atomic_orphans
from sync.infra.atomic import port_lock, read_text, write_bytes, writing
from sync.infra.errors import BlockedCycle, MalformedRecord
from sync.infra.paths import inside

JOURNAL = ".txn-journal.json"
INTENT = ".txn-intent.json"
LOCK = ".lock"  # the port lock every writer of the records holds
# Tests set this to simulate a kill between two writes.
FAULT: Callable[[str], None] | None = None


def _fault(point: str) -> None:
    if FAULT is not None:
        FAULT(point)


def _tmp(target: Path) -> Path:
    return target.with_name(f".{target.name}.txn")


def _gone(target: Path) -> Path:
    """The marker that stages the removal of `target`."""
    return target.with_name(f".{target.name}.txn-gone")


def commit(state_dir: Path, writes: Mapping[Path, bytes | None]) -> None:
    """Write every file of `writes` (`None`: remove it), all or nothing."""
    pairs = [[str(_tmp(t) if d is not None else _gone(t)), str(t)] for t, d in writes.items()]
    write_bytes(state_dir / INTENT, json.dumps(pairs).encode())
    for target, data in writes.items():
        write_bytes(_tmp(target) if data is not None else _gone(target), data or b"")
        _fault(f"staged {target.name}")
    write_bytes(state_dir / JOURNAL, json.dumps(pairs).encode())
    _fault("journal written")
    _apply(state_dir)


def _pairs(path: Path, root: Path | None) -> list[tuple[Path, Path]]:
    """The (staged temp, target) pairs a journal or intent file lists, each checked: a
    record that names paths must name only this transaction's (a target inside the port,
    its temp the `.<name>.txn` or removal marker `.<name>.txn-gone` beside it), never any
    file the tool was not writing."""
    fix = ("inspect it, then delete it (and the .txn files beside the records it names) to "
           "discard the transaction")
    try:
        raw = json.loads(read_text(path))
    except (OSError, ValueError, RecursionError):
        raise MalformedRecord("not a transaction journal (JSON list of [temp, target])", fix,
                              path=str(path)) from None
    if not isinstance(raw, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in raw):
        raise MalformedRecord("not a transaction journal (JSON list of [temp, target])", fix,
                              path=str(path))
    pairs = [(Path(tmp), Path(target)) for tmp, target in raw]
    for tmp, target in pairs:
        if (not target.is_absolute() or tmp not in (_tmp(target), _gone(target))
                or (root is not None and not inside(root, target.parent))):
            raise MalformedRecord(f"names a file outside this port's records: {target}", fix,
                                  path=str(path))
    return pairs


def _apply(state_dir: Path, root: Path | None = None,
           pairs: list[tuple[Path, Path]] | None = None) -> int:
    """Replace (or remove) each target the journal names; `pairs`: the journal as read."""
    journal = state_dir / JOURNAL
    done = 0
    for tmp, target in _pairs(journal, root) if pairs is None else pairs:
        if tmp.exists():
            # A file system that refuses one (read-only, full of permissions) is said as
            # any refused write is; the journal stays, and the next run finishes it.
            with writing(target):
                if tmp == _gone(target):
                    # The target first: killed between the two, the marker makes a rerun of
                    # the journal remove it again (a no-op) before the marker goes.
                    target.unlink(missing_ok=True)
                    tmp.unlink()
                else:
                    os.replace(tmp, target)
            done += 1
            _fault(f"replaced {target.name}")
    journal.unlink()
    with contextlib.suppress(FileNotFoundError):
        (state_dir / INTENT).unlink()
    return done


def recover(state_dir: Path, root: Path | None = None) -> str | None:
    """Finish a committed transaction or discard an uncommitted one; say which.

    Only under the lock: a transaction whose writer still holds it is in progress, not
    interrupted, and discarding its staged files would let it replace only the rest.
    While its journal is there, that writer is replacing the records one by one: what a
    command would read is part old, part new, so it is refused (`BlockedCycle`) until the
    writer is done. `root` (the port) confines the paths the journal may name.
    """
    if not ((state_dir / JOURNAL).exists() or (state_dir / INTENT).exists()):
        return None
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(port_lock(state_dir / LOCK))
        except BlockedCycle as exc:
            if (state_dir / JOURNAL).exists():
                raise BlockedCycle(f"{exc.message}, and is replacing the records of its "
                                   "transaction: read now, they are part old, part new",
                                   "wait for it to finish, then run again") from None
            return None
        return _recover(state_dir, root)


def _recover(state_dir: Path, root: Path | None) -> str | None:
    committed = (state_dir / JOURNAL).exists()
    listed = state_dir / (JOURNAL if committed else INTENT)
    if not listed.exists():
        return None
    pairs = _pairs(listed, root)  # read once: finished or discarded, then swept beside
    said = _finish(state_dir, pairs) if committed else _discard(state_dir, pairs)
    _sweep_beside(pairs)
    return said


def _sweep_beside(pairs: list[tuple[Path, Path]]) -> None:
    """The temp files a kill inside one of the transaction's own writes left beside its
    targets (`..x.h.txn.us<pid>-*.tmp`): outside the records' folders (a header under
    include/), no other sweep finds them (walk-s11 U3)."""
    names = {(target.parent, f".{n}.") for tmp, target in pairs for n in (tmp.name, target.name)}
    for folder in {f for f, _ in names}:
        for path in atomic_orphans(folder):
            if any(path.name.startswith(n) for f, n in names if f == folder):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _finish(state_dir: Path, pairs: list[tuple[Path, Path]]) -> str:
    n = _apply(state_dir, pairs=pairs)
    return f"finished an interrupted transaction ({n} file(s) replaced or removed)"


def _discard(state_dir: Path, pairs: list[tuple[Path, Path]]) -> str:
    intent = state_dir / INTENT
    staged = 0
    for tmp, _ in pairs:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            staged += 1
    intent.unlink()
    if not staged:
        # Killed before staging anything, or after the last replacement: either way the
        # records are whole (all old or all new) and only the intent was left.
        return "removed the intent of an interrupted transaction (no staged file was left)"
    return "discarded the staged files of an interrupted transaction (records unchanged)"
