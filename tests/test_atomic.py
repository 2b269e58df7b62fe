from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sync.infra import atomic
from sync.infra.errors import BlockedCycle, MalformedRecord


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_write_text_exact_bytes(tmp: Path) -> None:
    path = tmp / "a/b/record.md"
    text = "line one\r\nline two\nünïcode\r\n"
    atomic.write_text(path, text)
    assert path.read_bytes() == text.encode()
    assert atomic.read_text(path) == text
    assert leftovers(path.parent) == []


def test_write_replaces_and_keeps_mode(tmp: Path) -> None:
    path = tmp / "run.sh"
    path.write_text("old\n")
    path.chmod(0o755)
    before = path.stat().st_ino
    atomic.write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert path.stat().st_mode & 0o777 == 0o755
    assert path.stat().st_ino != before  # replaced by rename, not rewritten in place
    assert leftovers(tmp) == []


def test_new_file_gets_umask_mode(tmp: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic.write_text(tmp / "new.md", "x\n")
    finally:
        os.umask(old)
    # mkstemp's 0600 would make a tracked record unreadable to others.
    assert (tmp / "new.md").stat().st_mode & 0o777 == 0o644


def test_encode_failure_keeps_original(tmp: Path) -> None:
    path = tmp / "record.md"
    path.write_bytes(b"original\r\n")
    with pytest.raises(UnicodeEncodeError):
        atomic.write_text(path, "half \ud800 written")
    assert path.read_bytes() == b"original\r\n"
    assert leftovers(tmp) == []


def test_replace_failure_keeps_original(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp / "record.md"
    path.write_bytes(b"original\n")

    def boom(src: object, dst: object) -> None:
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk went away"):
        atomic.write_text(path, "new content\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"original\n"
    assert leftovers(tmp) == []


def test_interrupt_during_write_keeps_original(tmp: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp / "record.md"
    path.write_bytes(b"original\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_bytes(path, b"new\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"original\n"
    assert leftovers(tmp) == []


HOLDER = """
import sys
from pathlib import Path
from sync.infra.atomic import port_lock
with port_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_port_lock_refuses_a_second_holder(tmp: Path) -> None:
    lock = tmp / ".agents/sync/.lock"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert lock.read_text() == f"{holder.pid}\n"
        with pytest.raises(BlockedCycle) as exc, atomic.port_lock(lock):
            pass
        assert exc.value.exit_code == 6
        assert str(exc.value) == (f"another upstream-sync run (pid {holder.pid}) holds the "
                                  f"lock {lock} — wait for it to finish, then run again")
        assert lock.read_text() == f"{holder.pid}\n"  # the refused run wrote nothing
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    # Released when the holder exits: the next run gets it.
    with atomic.port_lock(lock):
        assert lock.read_text() == f"{os.getpid()}\n"


def test_port_lock_released_after_an_error(tmp: Path) -> None:
    lock = tmp / "lock"
    with pytest.raises(ValueError), atomic.port_lock(lock):
        raise ValueError("inside")
    with atomic.port_lock(lock):
        pass


def test_an_unwritable_place_is_an_environment_refusal_naming_the_path(tmp: Path) -> None:
    """A file where a folder must be (ENOTDIR), like a read-only mount (EROFS) or another
    user's checkout (EACCES): the machine's fault, exit 3, one line naming what was to be
    written. Before: the OSError escaped and the CLI called it an internal error (exit 1)."""
    (tmp / "file").write_text("not a folder\n")
    record, lock = tmp / "file/sub/record.md", tmp / "file/sync/.lock"
    with pytest.raises(atomic.Unwritable) as written:
        atomic.write_text(record, "x\n")
    with pytest.raises(atomic.Unwritable) as locked, atomic.port_lock(lock):
        pass
    for exc, path in ((written, record), (locked, lock)):
        assert exc.value.exit_code == 3
        assert str(exc.value) == (f"cannot write {path} (Not a directory) — run where the port "
                                  "is writable, or make that path writable")
    assert (tmp / "file").read_text() == "not a folder\n"


def test_an_other_os_error_of_a_write_is_not_called_unwritable(tmp: Path) -> None:
    path = tmp / "folder"
    path.mkdir()
    with pytest.raises(IsADirectoryError):  # a record path that is a folder: not EROFS & co.
        atomic.write_text(path, "x\n")



@given(st.binary(max_size=64))
def test_a_record_that_is_not_utf8_is_refused_at_its_line_and_column(data: bytes) -> None:
    """decode_record keeps every byte of UTF-8 text, and locates the first bad byte of any
    other by line and character column (walk-s11's nit: a byte offset alone)."""
    assume(not any(data.startswith(bom) for bom, _name in atomic._BOMS))
    try:
        expected = data.decode("utf-8")
    except UnicodeDecodeError as err:
        first = err.start
    else:
        assert atomic.decode_record(data, rel="r.md") == expected
        return
    with pytest.raises(MalformedRecord) as exc:
        atomic.decode_record(data, rel="r.md")
    head = data[:first]
    line, column = head.count(b"\n") + 1, len(head.rsplit(b"\n", 1)[-1].decode("utf-8")) + 1
    assert exc.value.line == line and "\n" not in str(exc.value)
    assert str(exc.value).startswith(f"r.md:{line}: is not UTF-8 (byte 0x{data[first]:02x} at "
                                     f"column {column}, offset {first})")


@given(st.binary(max_size=200) | st.lists(st.sampled_from(
    [b"\n", b"a", b"\xe9", b"\xe2\x82", b"\xe2\x82\xac", b"\xf0\x9f", b"\xed\xa0\x80", b"\xff"]),
    max_size=40).map(b"".join))
def test_a_port_files_text_as_read_and_as_rewritten_line_up(data: bytes) -> None:
    """sync and check read a port file that is not UTF-8 with replacement characters, and
    bump-headers rewrote it at the offsets of that text: one U+FFFD stood for a cut sequence
    of several bytes (b'\\xe2\\x82'), so a header after it was refused or misplaced. The text
    read has one character for each bad byte, as the kept text that is written back does,
    which gives every byte back; the first bad byte on any lines is the one decoding finds."""
    kept = atomic.decode_kept(data)
    read, _bad = atomic.decode_lenient(data)
    assert atomic.encode_kept(kept) == data
    assert read == atomic.shown(kept) and len(read) == len(kept)
    assert all(r == k or (r == "\ufffd" and "\udc80" <= k <= "\udcff")
               for r, k in zip(read, kept, strict=True))
    lines = data.count(b"\n") + 1
    assert atomic.not_utf8_on(data, 1, lines) == _bad
    for no, line in enumerate(data.split(b"\n"), start=1):
        got = atomic.not_utf8_on(data, no, no)
        assert (got is None) == (atomic.decode_kept(line) == line.decode("utf-8", "replace"))
        assert got is None or got[0] == no
