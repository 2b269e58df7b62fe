"""Parse a patch listing: `git diff-tree --stdin -p` output for many commits, in one pass.

Each commit's record starts with its SHA on a line of its own (what `--stdin`
prints before the commit's patch); each file starts at `diff --git`. A hunk's
body is read by its counts, so a `diff --git` inside a changed line can never
start a file. The parser never raises: a line it cannot place is skipped, a
truncated hunk keeps the lines it has. Per hunk it keeps the exact changed line
numbers of both sides (deleted lines of the old blob, added lines of the new),
where each run of changed lines sits in the old blob, and the raw text (for `queue`).
The listing has git's default context lines, so a hunk's header is not where its
changes are: every line number comes from the body.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["A", "M", "D", "R", "C", "T"]

_COMMIT = re.compile(rb"([0-9a-f]{40,64})(?: \([^\n]*\))?\n?")
_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(rb"index ([0-9a-f]{7,64})\.\.([0-9a-f]{7,64})(?: ([0-7]{6}))?\n?")
# `new file mode 120000`, `old mode 100644`, ...: the mode of one side of a file patch.
_MODE = re.compile(rb"(new file mode|deleted file mode|old mode|new mode) ([0-7]{6})\n?")
LINK = "120000"  # git's mode of a symbolic link: its blob is the link's target, not code
_NULL_OID = re.compile(r"0+")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f",
            "r": "\r", "v": "\v"}
_MAX_COUNT = 10_000_000  # no real hunk is longer; bounds int() on hostile digits


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    deleted: tuple[int, ...]  # line numbers in the old blob that this hunk removes
    added: tuple[int, ...]  # line numbers in the new blob that this hunk adds
    text: bytes  # the hunk as git printed it, header line included
    # Each run of changed lines between context lines, in the old blob: the first and last
    # line it deletes, or for a run that only adds, the old lines around the insertion
    # (n, n + 1: it inserts after old line n; 0 at the top).
    old_spans: tuple[tuple[int, int], ...] = ()

    def old_range(self) -> str:
        return _range(self.old_start, self.old_count)

    def new_range(self) -> str:
        return _range(self.new_start, self.new_count)


def _range(start: int, count: int) -> str:
    if count == 0:
        return f"{start}+0"
    return str(start) if count == 1 else f"{start}-{start + count - 1}"


@dataclass(frozen=True)
class FilePatch:
    status: Status
    old_path: str | None  # None when the file is added
    new_path: str | None  # None when the file is deleted
    old_blob: str | None  # full object ids (git --full-index); None for /dev/null
    new_blob: str | None
    binary: bool
    hunks: tuple[Hunk, ...]
    header: bytes  # `diff --git` and the extended header lines, as printed
    old_mode: str | None = None  # `100644`, `120000` (a symbolic link), ...; None: absent
    new_mode: str | None = None
    # A type change (status T): the deletion and the addition git prints it as, in order.
    halves: tuple[FilePatch, ...] = ()

    @property
    def symlink(self) -> bool:
        """Either side is a symbolic link (mode 120000): that blob holds the link's target,
        which is no module to read definitions from."""
        return LINK in (self.old_mode, self.new_mode)

    @property
    def path(self) -> str:
        """The path after the commit (before it, for a deletion)."""
        return self.new_path or self.old_path or ""

    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))

    def text(self) -> bytes:
        if self.halves:
            return b"".join(h.text() for h in self.halves)
        return self.header + b"".join(h.text for h in self.hunks)


@dataclass(frozen=True)
class CommitPatch:
    sha: str
    files: tuple[FilePatch, ...]

    def for_path(self, path: str) -> FilePatch | None:
        """The file patch that touches `path` on either side."""
        return next((f for f in self.files if path in (f.old_path, f.new_path)), None)


def unquote(raw: bytes) -> str:
    """A path as git prints it: C-quoted in double quotes when it has special bytes."""
    if len(raw) < 2 or not (raw.startswith(b'"') and raw.endswith(b'"')):
        return raw.decode("utf-8", "replace")
    body = raw[1:-1].decode("latin-1")
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out += ch.encode("latin-1")
            i += 1
            continue
        nxt = body[i + 1]
        octal = body[i + 1:i + 4]
        if len(octal) == 3 and all(c in "01234567" for c in octal) and int(octal, 8) < 256:
            out.append(int(octal, 8))
            i += 4
        else:
            out += _ESCAPES.get(nxt, nxt).encode("latin-1")
            i += 2
    return out.decode("utf-8", "replace")


def _side(raw: bytes, prefix: bytes) -> str | None:
    """The path of a `--- a/P` / `+++ b/P` / `rename from P` value; None for /dev/null."""
    raw = raw.rstrip(b"\n")
    if raw.endswith(b"\t"):  # git adds a tab after a name with a space in it
        raw = raw[:-1]
    if raw == b"/dev/null":
        return None
    path = unquote(raw)
    return path[len(prefix):] if prefix and path.startswith(prefix.decode()) else path


def _symmetric(line: bytes) -> str | None:
    """The path of a `diff --git a/P b/P` line whose two sides name the same path."""
    rest = line[len(b"diff --git "):].rstrip(b"\n")
    if rest.startswith(b'"'):
        parts = rest.split(b'" "', 1)
        if len(parts) != 2:
            return None
        qa, qb = unquote(parts[0] + b'"'), unquote(b'"' + parts[1])
        return qa[2:] if qa[2:] == qb[2:] and qa.startswith("a/") else None
    half = (len(rest) - 1) // 2
    a, sep, b = rest[:half], rest[half:half + 1], rest[half + 1:]
    if sep != b" " or not a.startswith(b"a/") or not b.startswith(b"b/") or a[2:] != b[2:]:
        return None
    return a[2:].decode("utf-8", "replace")


@dataclass
class _File:
    """A file patch being read."""

    header: list[bytes]
    old_path: str | None = None
    new_path: str | None = None
    guess: str | None = None
    status: Status = "M"
    old_blob: str | None = None
    new_blob: str | None = None
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    sides_seen: bool = False
    old_mode: str | None = None
    new_mode: str | None = None

    def extended(self, line: bytes) -> None:
        """One extended header line (`rename from`, `index`, `new file mode`, ...)."""
        self.header.append(line)
        for key, status in ((b"rename from ", "R"), (b"copy from ", "C")):
            if line.startswith(key):
                self.status, self.old_path = status, _side(line[len(key):], b"")  # type: ignore[assignment]
        for key in (b"rename to ", b"copy to "):
            if line.startswith(key):
                self.new_path = _side(line[len(key):], b"")
        if line.startswith(b"new file mode"):
            self.status = "A"
        elif line.startswith(b"deleted file mode"):
            self.status = "D"
        elif line.startswith(b"Binary files ") or line.startswith(b"GIT binary patch"):
            self.binary = True
        index = _INDEX.fullmatch(line)
        if index is not None:
            self.old_blob, self.new_blob = (_oid(index.group(1)), _oid(index.group(2)))
            if index.group(3):  # the mode of both sides (it did not change)
                self.old_mode = self.new_mode = index.group(3).decode()
        self._mode(line)

    def _mode(self, line: bytes) -> None:
        m = _MODE.fullmatch(line)
        if m is None:
            return
        if m.group(1) in (b"new file mode", b"new mode"):
            self.new_mode = m.group(2).decode()
        else:
            self.old_mode = m.group(2).decode()

    def finish(self) -> FilePatch:
        old, new = self.old_path, self.new_path
        if not self.sides_seen and self.status not in ("R", "C"):
            old = new = self.guess
        if self.status == "A":
            old = None
        elif self.status == "D":
            new = None
        return FilePatch(self.status, old, new,
                         None if self.status == "A" else self.old_blob,
                         None if self.status == "D" else self.new_blob,
                         self.binary, tuple(self.hunks), b"".join(self.header),
                         None if self.status == "A" else self.old_mode,
                         None if self.status == "D" else self.new_mode)


def _oid(raw: bytes) -> str | None:
    text = raw.decode("ascii")
    return None if _NULL_OID.fullmatch(text) else text


def _count(group: bytes | None) -> int:
    if group is None:
        return 1  # `@@ -5 +5 @@`: one line
    return int(group) if len(group) <= 8 else _MAX_COUNT


@dataclass
class _Body:
    """A hunk body being read: the line numbers it is at, and how many lines are left."""

    old: int
    new: int
    left_old: int
    left_new: int
    deleted: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    run: tuple[int, int] | None = None  # open run: old line it starts at, deletions before it
    empty_old: bool = False  # `-N,0`: git names the line it inserts after, not the next one

    def take(self, line: bytes) -> bool:
        """Read one body line; False when it cannot be one (a truncated hunk ends there)."""
        kind = line[:1]
        if kind == b"\\":  # "\ No newline at end of file", on either side
            return True
        if kind == b"-" and self.left_old > 0:
            self.open_run()
            self.deleted.append(self.old)
            self.old, self.left_old = self.old + 1, self.left_old - 1
        elif kind == b"+" and self.left_new > 0:
            self.open_run()
            self.added.append(self.new)
            self.new, self.left_new = self.new + 1, self.left_new - 1
        elif kind in (b" ", b"\n", b"") and self.left_old > 0 and self.left_new > 0:
            self.close()
            self.old, self.new = self.old + 1, self.new + 1
            self.left_old, self.left_new = self.left_old - 1, self.left_new - 1
        else:
            return False
        return True

    def open_run(self) -> None:
        if self.run is None:
            self.run = (self.old, len(self.deleted))

    def close(self) -> None:
        """End the open run of changed lines (at a context line, or the hunk's end)."""
        if self.run is None:
            return
        first, before = self.run
        self.run = None
        gone = self.deleted[before:]
        if gone:
            self.spans.append((gone[0], gone[-1]))
            return
        after = first if self.empty_old else first - 1
        self.spans.append((after, after + 1))

    @property
    def open(self) -> bool:
        return self.left_old > 0 or self.left_new > 0


def _hunk(lines: list[bytes], i: int) -> tuple[Hunk | None, int]:
    """The hunk whose `@@` line is lines[i], and the index of the line after its body."""
    m = _HUNK.match(lines[i])
    if m is None:
        return None, i + 1
    old_start, new_start = _count(m.group(1)), _count(m.group(3))
    old_count, new_count = _count(m.group(2)), _count(m.group(4))
    body = _Body(old_start, new_start, old_count, new_count, empty_old=old_count == 0)
    start = i
    i += 1
    while i < len(lines) and body.open and body.take(lines[i]):
        i += 1  # a line that cannot be a body line ends a truncated hunk: what was read stays
    while i < len(lines) and lines[i].startswith(b"\\"):  # "\ No newline at end of file"
        i += 1
    body.close()
    hunk = Hunk(old_start, old_count, new_start, new_count, tuple(body.deleted),
                tuple(body.added), b"".join(lines[start:i]), tuple(body.spans))
    return hunk, i


@dataclass
class _Commit:
    sha: str
    files: list[FilePatch] = field(default_factory=list)


def split_lines(data: bytes) -> list[bytes]:
    """A listing's lines, each with its LF: git ends them at LF only (`bytes.splitlines`
    also splits at a lone CR inside a line, and the hunk's counts would be read off)."""
    return io.BytesIO(data).readlines()


def parse(data: bytes) -> list[CommitPatch]:
    """Every commit record of a `git diff-tree --stdin -p --full-index` listing, in order."""
    lines = split_lines(data)
    commits: list[_Commit] = []
    cur: _File | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"@@ ") and cur is not None:
            hunk, i = _hunk(lines, i)
            if hunk is not None:
                cur.hunks.append(hunk)
            continue
        head = _COMMIT.fullmatch(line)
        if head is not None or line.startswith(b"diff --git "):
            if cur is not None and commits:
                commits[-1].files.append(cur.finish())
            cur = None
            if head is not None:
                commits.append(_Commit(head.group(1).decode()))
            elif commits:
                cur = _File([line], guess=_symmetric(line))
        elif cur is not None and not cur.hunks:
            _header_line(cur, line)
        i += 1
    if cur is not None and commits:
        commits[-1].files.append(cur.finish())
    return [CommitPatch(c.sha, _typechanges(c.files)) for c in commits]


def _typechanges(files: list[FilePatch]) -> tuple[FilePatch, ...]:
    """`files` with each type change as one patch. git prints a path that turns from a
    regular file into a symbolic link (or back) as its deletion followed by its addition;
    read alone, the first would say the path was deleted."""
    out: list[FilePatch] = []
    for fp in files:
        gone = out[-1] if out else None
        if (gone is not None and gone.status == "D" and fp.status == "A"
                and gone.old_path == fp.new_path):
            out[-1] = FilePatch("T", gone.old_path, fp.new_path, gone.old_blob, fp.new_blob,
                                gone.binary or fp.binary, gone.hunks + fp.hunks, gone.header,
                                gone.old_mode, fp.new_mode, (gone, fp))
        else:
            out.append(fp)
    return tuple(out)


def _header_line(cur: _File, line: bytes) -> None:
    if line.startswith(b"--- "):
        cur.header.append(line)
        cur.old_path, cur.sides_seen = _side(line[4:], b"a/"), True
    elif line.startswith(b"+++ "):
        cur.header.append(line)
        cur.new_path, cur.sides_seen = _side(line[4:], b"b/"), True
    else:
        cur.extended(line)
