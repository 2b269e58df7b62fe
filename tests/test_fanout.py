"""Work split across cores (`infra/fanout.py`): the parts' results in order, whatever each
child does; a failed child's part redone here; no child left behind; SYNC_JOBS refused
when it is not a number; the parts balanced."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from portfixture import build, run

from sync.infra import fanout
from sync.infra.errors import UsageError

forks = pytest.mark.skipif(not fanout._can_fork(), reason="this platform does not fork")


def _square_with_pid(part: list[int]) -> list[tuple[int, int]]:
    return [(x * x, os.getpid()) for x in part]


@forks
def test_each_part_after_the_first_is_done_in_a_child_and_results_keep_their_order() -> None:
    parts = [[1, 2], [3], [4, 5, 6]]
    got = fanout.map_parts(_square_with_pid, parts)
    assert [[v for v, _ in p] for p in got] == [[1, 4], [9], [16, 25, 36]]
    pids = [{pid for _, pid in p} for p in got]
    assert pids[0] == {os.getpid()}
    assert all(len(p) == 1 and os.getpid() not in p for p in pids[1:])
    assert len(set.union(*pids[1:])) == 2


def _fails_in_a_child(how: str, parent: int) -> Callable[[list[int]], list[int]]:
    def work(part: list[int]) -> list[int]:
        if os.getpid() != parent:
            if how == "raise":
                raise RuntimeError("child only")
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "silent":
                os._exit(0)  # a clean exit with nothing on the pipe
        return [x + 1 for x in part]
    return work


@forks
@pytest.mark.parametrize("how", ["raise", "kill", "silent"])
def test_a_failed_child_has_its_part_done_here_with_the_same_results(how: str) -> None:
    work = _fails_in_a_child(how, os.getpid())
    assert fanout.map_parts(work, [[1], [2, 3], [4]]) == [[2], [3, 4], [5]]


def test_an_error_of_the_work_itself_is_raised_here() -> None:
    def work(part: list[int]) -> list[int]:
        if 0 in part:
            raise ZeroDivisionError("part with 0")
        return part
    with pytest.raises(ZeroDivisionError, match="part with 0"):
        fanout.map_parts(work, [[1], [0], [2]])


@forks
def test_no_child_is_left_running_when_this_process_fails(tmp_path: Path) -> None:
    parent = os.getpid()
    pids = tmp_path / "pids"

    def work(part: list[int]) -> list[int]:
        if os.getpid() != parent:
            with open(pids, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            time.sleep(60)
            return part
        deadline = time.monotonic() + 10  # both children started: they are mid-part
        while _lines(pids) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        fanout.map_parts(work, [[1], [2], [3]])
    assert time.monotonic() - started < 30
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    for pid in children:
        with pytest.raises((ProcessLookupError, ChildProcessError)):
            os.waitpid(pid, os.WNOHANG)  # reaped already: not a child of ours any more
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _lines(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5", " "])
def test_sync_jobs_that_is_not_a_number_of_processes_is_refused(raw: str) -> None:
    if not raw.strip():
        assert fanout.jobs(0, environ={fanout.ENV: raw}) == 1  # blank: as unset
        return
    with pytest.raises(UsageError, match=r"SYNC_JOBS=.* is not a number of processes"):
        fanout.jobs(0, environ={fanout.ENV: raw})


def test_how_many_parts() -> None:
    assert fanout.jobs(fanout.WORTH - 1, environ={}) == 1  # too little work to fork for
    assert fanout.jobs(0, environ={fanout.ENV: "1"}) == 1
    if fanout._can_fork():
        assert fanout.jobs(0, environ={fanout.ENV: "3"}) == 3  # asked: whatever the work
        assert fanout.jobs(0, environ={fanout.ENV: "999"}) == fanout.MAX_JOBS
        assert 1 <= fanout.jobs(fanout.WORTH, environ={}) <= fanout.MAX_JOBS
    else:
        assert fanout.jobs(0, environ={fanout.ENV: "3"}) == 1


def test_macos_and_windows_never_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert fanout.jobs(0, environ={fanout.ENV: "4"}) == 1


@given(st.lists(st.integers(0, 1000), max_size=40), st.integers(1, 9))
def test_parts_cover_every_item_once_in_order_and_are_balanced(weights: list[int],
                                                               n: int) -> None:
    items = list(enumerate(weights))
    parts = fanout.split(items, lambda it: it[1], n)
    assert sorted(i for p in parts for i in p) == items
    assert all(p and p == sorted(p) for p in parts)
    assert len(parts) <= n
    if items:
        loads = [sum(w for _, w in p) for p in parts]
        assert max(loads) - min(loads) <= max(weights)


_FORKS: list[int] = []
os.register_at_fork(before=lambda: _FORKS.append(1))  # counts this process's forks


@forks
def test_a_sync_split_across_processes_writes_the_report_a_serial_one_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = build(tmp_path, monkeypatch)
    monkeypatch.setenv("SYNC_CACHE_DIR", "off")
    reports = []
    for jobs, forked in (("1", False), ("3", True)):
        monkeypatch.setenv(fanout.ENV, jobs)
        before = len(_FORKS)
        assert run(fx.port, "sync").rc == 0
        # The port files' scan and the symbol pass each forked (two children apiece).
        assert (len(_FORKS) - before >= 4) is forked
        md = fx.report()
        reports.append((md.read_bytes(), md.with_suffix(".json").read_bytes()))
        md.unlink()
        md.with_suffix(".json").unlink()
    assert reports[0] == reports[1]
    assert b"PORT-NOW" in reports[0][0]


def test_a_bad_sync_jobs_is_a_usage_error_of_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = build(tmp_path, monkeypatch)
    monkeypatch.setenv(fanout.ENV, "many")
    got = run(fx.port, "sync")
    assert got.rc == 2
    assert "SYNC_JOBS='many' is not a number of processes" in got.err
    assert "Traceback" not in got.err


@forks
def test_nothing_is_forked_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        got = fanout.map_parts(_square_with_pid, [[1], [2], [3]])
    finally:
        stop.set()
        other.join()
    assert {pid for p in got for _, pid in p} == {os.getpid()}
