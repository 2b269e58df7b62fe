"""The journaled multi-file write: files written and files removed, all or nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sync.infra import txn
from sync.infra.errors import BlockedCycle, MalformedRecord


class Killed(BaseException):
    """A kill between two steps: no handler of ours may catch it."""


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / ".agents" / "sync"
    state.mkdir(parents=True)
    yield tmp_path
    txn.FAULT = None


def _seed(root: Path) -> dict[Path, bytes | None]:
    state = root / ".agents" / "sync"
    (state / "kept.toml").write_text("old kept\n")
    (state / "gone.toml").write_text("old gone\n")
    return {state / "kept.toml": b"new kept\n", state / "gone.toml": None,
            state / "new.toml": b"new file\n"}


def _state(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((root / ".agents" / "sync").iterdir())
            if p.name != txn.LOCK}


OLD = {"gone.toml": "old gone\n", "kept.toml": "old kept\n"}
NEW = {"kept.toml": "new kept\n", "new.toml": "new file\n"}


def test_a_transaction_writes_and_removes(tree: Path) -> None:
    writes = _seed(tree)
    txn.commit(tree / ".agents" / "sync", writes)
    assert _state(tree) == NEW


def test_removing_a_file_that_is_not_there_is_no_error(tree: Path) -> None:
    state = tree / ".agents" / "sync"
    txn.commit(state, {state / "absent.toml": None})
    assert _state(tree) == {}


def test_a_kill_at_any_point_recovers_to_all_old_or_all_new(tree: Path) -> None:
    state = tree / ".agents" / "sync"
    points: list[str] = []
    txn.FAULT = points.append
    txn.commit(state, _seed(tree))
    txn.FAULT = None
    assert "replaced gone.toml" in points and "staged gone.toml" in points
    journal = points.index("journal written")
    for i, point in enumerate(points):
        for p in state.iterdir():
            p.unlink()
        writes = _seed(tree)

        def kill(at: str, point: str = point) -> None:
            if at == point:
                raise Killed(at)

        txn.FAULT = kill
        with pytest.raises(Killed):
            txn.commit(state, writes)
        txn.FAULT = None
        said = txn.recover(state, tree)
        assert said is not None, point
        assert _state(tree) == (OLD if i < journal else NEW), point


def test_a_journal_may_name_only_its_own_markers(tree: Path) -> None:
    state = tree / ".agents" / "sync"
    target = state / "record.toml"
    target.write_text("kept\n")
    # A marker beside another file than its target would remove a file the tool never wrote.
    (state / txn.JOURNAL).write_text(json.dumps([[str(state / ".other.toml.txn-gone"),
                                                  str(target)]]))
    with pytest.raises(MalformedRecord, match="outside this port's records"):
        txn.recover(state, tree)
    assert target.read_text() == "kept\n"


def test_recovery_removes_the_temp_files_of_its_own_killed_writes(tree: Path) -> None:
    """walk-s11 U3: a kill inside the write of a staged header left `..x.h.txn.us<pid>-*.tmp`
    in include/, which no sweep of the records' folders reaches."""
    state = tree / ".agents" / "sync"
    header = tree / "include" / "x.h"
    header.parent.mkdir()
    header.write_text("old\n")
    dead = 4194303  # above any pid this machine hands out
    stray = header.parent / f"..x.h.txn.us{dead}-abc123.tmp"
    other = header.parent / f".y.h.us{dead}-abc123.tmp"  # another file's: not this journal's

    def kill(at: str) -> None:
        if at == "staged x.h":
            stray.write_text("half")
            raise Killed(at)

    txn.FAULT = kill
    with pytest.raises(Killed):
        txn.commit(state, {header: b"new\n", state / "r.toml": b"r\n"})
    txn.FAULT = None
    other.write_text("half")
    assert txn.recover(state, tree) is not None
    assert header.read_text() == "old\n" and not stray.exists() and other.exists()


def test_a_command_is_refused_while_another_run_replaces_the_records(tree: Path) -> None:
    """A reader (`status`, `check`) started while a writer held the lock with its journal
    written read the records half replaced: `check` failed on an ADVANCED report no event
    recorded yet ('a hand edit?'), `status` showed the new pin with the cycle ACTIVE. A run
    that holds the lock with its journal there is replacing them: it is waited for."""
    state = tree / ".agents" / "sync"
    writes = _seed(tree)

    def kill(at: str) -> None:
        if at == "replaced kept.toml":
            raise Killed(at)

    txn.FAULT = kill
    with pytest.raises(Killed):
        txn.commit(state, writes)
    txn.FAULT = None
    assert (state / txn.JOURNAL).exists()
    script = ("import sys\nfrom pathlib import Path\nfrom sync.infra.atomic import port_lock\n"
              "with port_lock(Path(sys.argv[1])):\n    print('locked', flush=True)\n"
              "    sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", script, str(state / txn.LOCK)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        with pytest.raises(BlockedCycle) as refused:
            txn.recover(state, tree)
        assert "is replacing the records of its transaction" in str(refused.value)
        assert refused.value.fix == "wait for it to finish, then run again"
        assert (state / txn.JOURNAL).exists()  # its writer's to finish, not this run's
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert txn.recover(state, tree) is not None and _state(tree) == NEW


REFUSER = """
import errno, sys
from pathlib import Path
from sync.infra import txn
from sync.infra.errors import SyncError
renames = [0]
def hook(event, args):
    if event == "os.rename" and str(args[0]).endswith(".txn"):
        renames[0] += 1
        if renames[0] == 2:
            raise OSError(errno.EROFS, "Read-only file system", str(args[1]))
sys.addaudithook(hook)
root = Path(sys.argv[1])
state = root / ".agents" / "sync"
try:
    txn.commit(state, {state / "a.toml": b"new a\\n", state / "b.toml": b"new b\\n"})
except SyncError as exc:
    print(type(exc).__name__, exc.exit_code, exc)
"""


def test_a_replacement_the_file_system_refuses_is_a_typed_error(tree: Path) -> None:
    """A read-only (or full) file system that refused a replacement after the journal was
    written escaped as 'internal error: OSError ... report it' (exit 1). It is the refused
    write every other is (exit 3, naming the record); the next run finishes the journal."""
    state = tree / ".agents" / "sync"
    for name in ("a.toml", "b.toml"):
        (state / name).write_text(f"old {name[0]}\n")
    ran = subprocess.run([sys.executable, "-c", REFUSER, str(tree)], capture_output=True,
                         text=True, check=False, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Unwritable 3 cannot write "), ran.stdout
    assert f"{state / 'b.toml'} (Read-only file system)" in ran.stdout
    assert (state / txn.JOURNAL).exists()
    assert txn.recover(state, tree) is not None
    assert _state(tree) == {"a.toml": "new a\n", "b.toml": "new b\n"}
