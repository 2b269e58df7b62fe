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
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from sync.infra import memo
from sync.infra.errors import BlockedCycle, EnvironmentUnresolved, MalformedRecord

# Tests set this to simulate a kill at a point of a write ("created", "written", "synced",
# "moded", "replaced"), as `infra.txn.FAULT` does between the writes of a transaction.
FAULT: Callable[[str, Path], None] | None = None
# A temp file names its writer: `.<name>.us<pid>-<random>.tmp`. A writer killed mid-write
# leaves it behind; the next run removes those whose writer is gone (`sweep`).
TEMP = re.compile(r"^\..+\.us([0-9]{1,10})-[A-Za-z0-9_]+\.tmp$")
# What mkstemp named them before they named their writer: reported, never removed.
LEGACY_TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")


def _fault(point: str, path: Path) -> None:
    if FAULT is not None:
        FAULT(point, path)


# What the file system answers when the place cannot be written at all (a read-only mount,
# another user's checkout, a file where a folder must be): the machine's fault, not a bug.
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR})


class Unwritable(EnvironmentUnresolved):
    """A write the file system refused (`_UNWRITABLE`); `reason` is its own words."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write {path} ({reason})",
                         "run where the port is writable, or make that path writable")
        self.path = path
        self.reason = reason


class Unreadable(MalformedRecord):
    """A record file that cannot be read at all: missing, not a regular file, or refused
    by the file system. A record of the port's is malformed so; a file the command line
    names is a usage error, which its command raises instead (`gates merge`)."""


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """The write boundary: an unwritable place becomes `Unwritable` naming `path` (what the
    tool meant to write, not its temp file); any other OSError stays what it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _UNWRITABLE:
            raise
        raise Unwritable(path, exc.strerror or type(exc).__name__) from None


def write_bytes(path: Path, data: bytes) -> None:
    with writing(path):
        _write_bytes(path, data)


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.us{os.getpid()}-", suffix=".tmp",
                               dir=path.parent)
    try:
        _fault("created", path)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            _fault("written", path)
            os.fsync(fh.fileno())
        _fault("synced", path)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            # mkstemp creates 0600; a new record gets the mode open() would give it.
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        _fault("moded", path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fault("replaced", path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or not ours to ask): leave its file alone
    return True


def is_orphan(name: str) -> bool:
    """A temp file's name whose writer is gone (a kill inside `write_bytes`)."""
    m = TEMP.match(name)
    return m is not None and not _alive(int(m.group(1)))


def orphans(directory: Path, *, recursive: bool = False) -> list[Path]:
    """The orphan temp files under `directory`."""
    if not directory.is_dir():
        return []
    walk = os.walk(directory) if recursive else [(str(directory), [], os.listdir(directory))]
    return sorted(Path(dirpath) / name for dirpath, _dirs, names in walk for name in names
                  if is_orphan(name))


def sweep(directories: list[tuple[Path, bool]]) -> list[Path]:
    """Remove the orphan temp files in each (directory, recursive); return what went."""
    gone = []
    for directory, recursive in directories:
        for path in orphans(directory, recursive=recursive):
            # Gone already, or not ours to remove (a read-only port): left, and `check`
            # still reports it.
            with contextlib.suppress(OSError):
                path.unlink()
                gone.append(path)
    return gone


def write_text(path: Path, text: str) -> None:
    """Write `text` exactly (no newline translation: callers keep the file's own style)."""
    write_bytes(path, text.encode("utf-8"))


def read_text(path: Path) -> str:
    """Read exactly (newline=''): renders must give back every byte, CRLF included."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


# No record comes near this (a 10,000-commit report is a few MB); it bounds what a
# hostile or broken file can make a run read into memory.
MAX_RECORD_BYTES = 64 * 1024 * 1024
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
RESAVE = "re-save it as UTF-8"


def read_record_bytes(path: Path, *, rel: str) -> bytes:
    """A record file's bytes; MalformedRecord (one line naming `rel`) when it is not a
    regular file, is larger than any record, or cannot be read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise Unreadable(f"cannot read it: it is {kind}, not a record file",
                             "make it a text file", path=rel)
        if info.st_size > MAX_RECORD_BYTES:
            raise MalformedRecord(f"is {info.st_size} bytes, larger than any record "
                                  f"({MAX_RECORD_BYTES} bytes)", "restore the record from git",
                                  path=rel)
        with open(path, "rb") as fh:
            return fh.read(MAX_RECORD_BYTES + 1)[:MAX_RECORD_BYTES]
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or type(exc).__name__}",
                         "make it a readable file", path=rel) from None


def refuse_wide(data: bytes, *, rel: str) -> None:
    """A UTF-16/32 file (its byte-order mark says so) is refused: it is no UTF-8 text with
    a stray byte, every character of it reads wrong."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise MalformedRecord(f"is {name} (it starts with a byte-order mark), not UTF-8",
                                  RESAVE, path=rel)


def decode_record(data: bytes, *, rel: str) -> str:
    """UTF-8 text exactly as stored; a UTF-16/32 file or undecodable bytes are refused."""
    refuse_wide(data, rel=rel)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, said = not_utf8(data, exc)
        raise MalformedRecord(said, RESAVE, path=rel, line=line) from None


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> tuple[int, str]:
    """The line of the first byte of `data` that does not decode, and what it says of it
    ("is not UTF-8 (byte 0xff at column 3, offset 2)"): one wording for every file."""
    # Located as an editor shows it: the line, and the column in characters (what comes
    # before the first bad byte decodes).
    start = data.rfind(b"\n", 0, exc.start) + 1
    column = len(data[start:exc.start].decode("utf-8")) + 1
    return data.count(b"\n", 0, start) + 1, (f"is not UTF-8 (byte 0x{data[exc.start]:02x} at "
                                             f"column {column}, offset {exc.start})")


def not_utf8_on(data: bytes, first: int, last: int) -> tuple[int, str] | None:
    """`not_utf8` of the first byte on lines `first`..`last` (1-based) of `data` that does
    not decode; None when every byte there does. A line ends at an LF, which no multi-byte
    sequence holds, so the lines decode apart from the rest."""
    start = 0
    for _ in range(first - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return None
    end = start
    for _ in range(last - first + 1):
        end = data.find(b"\n", end) + 1
        if end == 0:
            end = len(data)
            break
    try:
        data[start:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        return not_utf8(data, UnicodeDecodeError("utf-8", data, start + exc.start,
                                                 start + exc.end, exc.reason))
    return None


# Bytes that are not UTF-8 decoded with surrogateescape are U+DC80..U+DCFF, one each.
_KEPT = re.compile("[\udc80-\udcff]")
_SHOWN = dict.fromkeys(range(0xDC80, 0xDD00), "\ufffd")


def decode_kept(data: bytes) -> str:
    """`data` as text, each byte that is not UTF-8 kept as one lone surrogate, so that
    `encode_kept` gives every byte back (a rewrite of a Latin-1 port file changes only what
    it rewrites)."""
    return data.decode("utf-8", "surrogateescape")


def encode_kept(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def has_kept(text: str) -> bool:
    """Whether `text` (from `decode_kept`) holds a byte that is not UTF-8."""
    return _KEPT.search(text) is not None


def shown(text: str) -> str:
    """`text` from `decode_kept` with each kept byte as U+FFFD: what a parser may read and
    print, one character for each of the bytes, so an offset into one is one into the other."""
    return text.translate(_SHOWN) if has_kept(text) else text


def decode_lenient(data: bytes) -> tuple[str, tuple[int, str] | None]:
    """`data` as text, each byte that is not UTF-8 a replacement character (`shown`: offsets
    are those of `decode_kept`, which `bump-headers` rewrites), and where the first of them is
    (`not_utf8`); None there when every byte decodes: how port files are read."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return shown(decode_kept(data)), not_utf8(data, exc)


def read_record(path: Path, *, rel: str) -> str:
    """A record's text (as `read_text`: every byte, CRLF kept), or a MalformedRecord."""
    return decode_record(read_record_bytes(path, rel=rel), rel=rel)


def _holder(fd: int) -> str:
    """" (pid N)" of the run holding the lock, as it wrote it; "" when unreadable."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def port_lock(lock_path: Path) -> Iterator[None]:
    """Exclusive, non-blocking lock: a second concurrent writer refuses instead of waiting."""
    memo.transient(str(lock_path))  # its content is the holder's pid: not a record
    with writing(lock_path):
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                memo.unrepeatable("another run held the port lock")
                raise BlockedCycle(
                    f"another upstream-sync run{_holder(fd)} holds the lock {lock_path}",
                    "wait for it to finish, then run again",
                ) from None
            raise
        with writing(lock_path):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)
