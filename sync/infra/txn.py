"""All-or-nothing multi-file writes: stage every file, commit with one journal, then replace.

An intent file names the targets first; each new content is then written to a
temp file beside its target; the journal (temp -> target pairs) is written
atomically last: that is the commit point. A process killed before the journal
exists leaves the records entirely old (recovery removes the temps); killed after,
`recover` finishes the replacements (entirely new). Every command calls `recover`
before it reads a record.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from sync.infra.atomic import port_lock, write_bytes
from sync.infra.errors import BlockedCycle

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


def commit(state_dir: Path, writes: dict[Path, bytes]) -> None:
    pairs = [[str(_tmp(t)), str(t)] for t in writes]
    write_bytes(state_dir / INTENT, json.dumps(pairs).encode())
    for target, data in writes.items():
        write_bytes(_tmp(target), data)
        _fault(f"staged {target.name}")
    write_bytes(state_dir / JOURNAL, json.dumps(pairs).encode())
    _fault("journal written")
    _apply(state_dir)


def _apply(state_dir: Path) -> int:
    journal = state_dir / JOURNAL
    done = 0
    for tmp, target in json.loads(journal.read_text()):
        if Path(tmp).exists():
            os.replace(tmp, target)
            done += 1
            _fault(f"replaced {Path(target).name}")
    journal.unlink()
    with contextlib.suppress(FileNotFoundError):
        (state_dir / INTENT).unlink()
    return done


def recover(state_dir: Path) -> str | None:
    """Finish a committed transaction or discard an uncommitted one; say which.

    Only under the lock: a transaction whose writer still holds it is in progress, not
    interrupted, and discarding its staged files would let it replace only the rest.
    """
    if not ((state_dir / JOURNAL).exists() or (state_dir / INTENT).exists()):
        return None
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(port_lock(state_dir / LOCK))
        except BlockedCycle:
            return None
        return _recover(state_dir)


def _recover(state_dir: Path) -> str | None:
    if (state_dir / JOURNAL).exists():
        n = _apply(state_dir)
        return f"finished an interrupted transaction ({n} file(s) replaced)"
    intent = state_dir / INTENT
    if not intent.exists():
        return None
    for tmp, _ in json.loads(intent.read_text()):
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
    intent.unlink()
    return "discarded the staged files of an interrupted transaction (records unchanged)"
