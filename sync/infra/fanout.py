"""Pure work over content, split across the machine's cores by forking.

`sync` spends most of its time in two passes that are pure functions of bytes it already
holds: each port file's scan (its header, inline paths, DEFERRED paragraphs) and each cited
upstream file's symbol-level changes (`ast.parse` of both sides). Their parts are
independent, so on a machine with N cores the work is cut into N parts of about equal
weight: the first is done here, each other one in a forked child, which shares this
process's memory (the blobs, the surface) without copying it and sends back only its
results, pickled, through a pipe.

Fail-safe by construction: the function is pure, so a part done here gives what its child
would have. Where `fork` is not offered (Windows; macOS, where a forked process may not use
system frameworks), while other threads run, with `SYNC_JOBS=1`, for too little work to pay
for a fork, or when a child fails in any way (an exception, a signal, a result that does not
unpickle), that part is done here instead, and any error it raises is raised here, as the
serial run would.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sync.infra.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

ENV = "SYNC_JOBS"
MAX_JOBS = 8  # past this, the results' pickling and the parts' imbalance eat the gain
# Bytes of content worth a fork: about a tenth of a second of either pass, some ten times
# what forking and pickling the results cost.
WORTH = 1 << 20


def jobs(work: int, worth: int = WORTH, environ: Mapping[str, str] | None = None) -> int:
    """How many parts to cut `work` (its weight: bytes of content) into: `SYNC_JOBS` when
    set, else the usable cores, but one when `work` is under `worth` (a fork would cost
    more than it saves) or the platform cannot fork safely."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise UsageError(f"{ENV}={raw!r} is not a number of processes",
                             f"set {ENV} to a whole number of 1 or more (1: no worker "
                             "processes), or unset it to use every core")
        wanted = min(int(raw), MAX_JOBS)
    else:
        wanted = min(_cores(), MAX_JOBS) if work >= worth else 1
    return wanted if _can_fork() else 1


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (a CI quota)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform != "darwin"


def split(items: Sequence[T], weight: Callable[[T], int], parts: int) -> list[list[T]]:
    """`items` in at most `parts` non-empty parts of about equal total weight (heaviest first,
    each to the lightest part, of those the one with fewest items), each part in the
    items' order."""
    bins: list[list[int]] = [[] for _ in range(max(1, min(parts, len(items))))]
    loads = [0] * len(bins)
    for i in sorted(range(len(items)), key=lambda i: (-weight(items[i]), i)):
        lightest = min(range(len(bins)), key=lambda b: (loads[b], len(bins[b])))
        bins[lightest].append(i)
        loads[lightest] += weight(items[i])
    return [[items[i] for i in sorted(b)] for b in bins if b]


def map_parts(fn: Callable[[list[T]], list[R]], parts: Sequence[list[T]]) -> list[list[R]]:
    """`fn` of each part, in order: the first here, the others in forked children."""
    # A fork copies only the calling thread: a lock another thread holds stays held in the
    # child for ever. With other threads running, every part is done here.
    if len(parts) <= 1 or threading.active_count() > 1:
        return [fn(p) for p in parts]
    # Objects that exist now are never collected in a child: its collector would otherwise
    # touch (and so copy) every page of this process's memory.
    gc.freeze()
    children: list[_Child | None] = []
    try:
        children.extend(_fork(fn, p) for p in parts[1:])
        first = fn(parts[0])
        rest: list[list[R]] = []
        while children:
            rest.append(_collect(children.pop(0), fn, parts[len(rest) + 1]))
        return [first, *rest]
    finally:
        gc.unfreeze()
        for c in children:  # only when this process failed: no child is left behind
            _reap(c)


@dataclass(frozen=True)
class _Child:
    pid: int
    fd: int  # the read end of its pipe


def _fork(fn: Callable[[list[T]], list[R]], part: list[T]) -> _Child | None:
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns, never runs this process's exit handlers
        code = 1
        try:
            os.close(r)
            data = pickle.dumps(fn(part), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return _Child(pid, r)


def _reap(child: _Child | None) -> None:
    """End a child whose results are no longer wanted, and wait for it."""
    if child is not None:
        os.close(child.fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)


def _collect(child: _Child | None, fn: Callable[[list[T]], list[R]],
             part: list[T]) -> list[R]:
    """The child's results; the part done here when it has none to give."""
    if child is None:
        return fn(part)
    with os.fdopen(child.fd, "rb") as fh:
        data = fh.read()  # before waiting: a child blocks on a full pipe until it is read
    _pid, status = os.waitpid(child.pid, 0)
    if os.waitstatus_to_exitcode(status) == 0 and data:
        try:
            got: list[R] = pickle.loads(data)  # noqa: S301 - our own child's bytes
            return got
        except Exception:  # noqa: S110 - any failure: the part is redone below
            pass
    return fn(part)
