"""Reading the port's files: each scanned file's header, inline paths and DEFERRED paragraphs,
worked out once per content.

A file's scan is a function of its bytes (and of its name and the mirrored subtrees), so
it is cached by a digest of them (`infra.cache`): a re-run parses only the files that
changed. A file whose size, modification time and inode are what they were when its scan
was cached is not even read again, unless it was modified within `RACY_S` of being
cached (its time stamp could then hide a second change, as git's index knows).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from sync.headers import citations as headers
from sync.headers import deferred as deferred_mod
from sync.infra import atomic, fanout
from sync.infra.cache import Store, digest

RACY_S = 2.0
_STORE = "scan"


@dataclass(frozen=True)
class FileScan:
    """What one port file says, before attribution (which depends on the port's oracles)."""

    header: headers.Header  # as parsed
    inline: headers.Inline  # upstream paths named in the file, cited or mentioned
    first_lines: tuple[tuple[str, int], ...]  # each inline path's first line (1-based)
    deferred: tuple[deferred_mod.Deferred, ...]
    # Not UTF-8: the first bad byte's line and what it is (`atomic.not_utf8`); the file was
    # read with replacement characters, one for each such byte.
    not_utf8: tuple[int, str] | None = None
    # The 1-based line of each of `inline.anchored`, in its order (not every line break:
    # they were half of what the cache stored).
    anchored_lines: tuple[int, ...] = ()
    # The first such byte on the header's lines (bump-headers refuses to rewrite a header it
    # cannot read as written); None when they are UTF-8 (it keeps the bytes elsewhere).
    header_not_utf8: tuple[int, str] | None = None


def scan_text(rel: str, text: str, mirrored: tuple[str, ...]) -> FileScan:
    inline = headers.inline_paths(text, mirrored)
    first = tuple((up, _line_of(text, up)) for up in sorted(inline.cited | inline.mentioned))
    return FileScan(headers.parse_header(text, rel), inline, first,
                    deferred_mod.deferred(text, rel), anchored_lines=_lines_at(
                        text, [at for _up, at, _a in inline.anchored]))


def header_not_utf8(data: bytes, header: headers.Header) -> tuple[int, str] | None:
    """The first byte of `data` that is not UTF-8 on the lines of `header` (`atomic.not_utf8`);
    with no header, the first of the file (one inside 'Ported from' may hide the header)."""
    if header.kind == "NONE":
        return atomic.not_utf8_on(data, 1, data.count(b"\n") + 1)
    return atomic.not_utf8_on(data, header.start_line, header.end_line)


def _lines_at(text: str, offsets: list[int]) -> tuple[int, ...]:
    """The 1-based line of each offset into `text`."""
    lines: dict[int, int] = {}
    pos, line = 0, 1
    for at in sorted(set(offsets)):  # counted on from the last: each newline once, in C
        line += text.count("\n", pos, at)
        lines[at], pos = line, at
    return tuple(lines[at] for at in offsets)


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return 0 if at < 0 else text.count("\n", 0, at) + 1


_Stat = tuple[int, int, int]  # size, mtime_ns, inode


@dataclass
class _Cached:
    stats: dict[str, tuple[_Stat, str]]  # rel -> (its stat when cached, its content key)
    scans: dict[str, FileScan]  # content key -> scan


def _load(store: Store) -> _Cached:
    raw = store.load()
    stats, scans = raw.get("stats"), raw.get("scans")
    if isinstance(stats, dict) and isinstance(scans, dict):
        return _Cached(stats, scans)
    return _Cached({}, {})


def scan_files(root: Path, files: Iterable[tuple[str, str]],
               mirrored: tuple[str, ...]) -> dict[str, FileScan]:
    """port file -> its scan, for every readable file of `files` ((port file, path) pairs,
    in their order)."""
    store = Store(root, _STORE)
    cached = _load(store)
    now = time.time()
    pairs = list(files)
    found: dict[str, tuple[str, _Stat | None, FileScan] | None] = {}
    todo: list[tuple[str, str, int]] = []  # (port file, path, size): not known by its stat
    for rel, path in pairs:
        known = _known(path, rel, cached, now)
        if isinstance(known, int):
            todo.append((rel, path, known))
        else:
            found[rel] = known
    parts = fanout.split(todo, lambda t: t[2], fanout.jobs(sum(t[2] for t in todo)))
    for part in fanout.map_parts(lambda p: [(rel, _scan(path, rel, mirrored, cached, now))
                                            for rel, path, _size in p], parts):
        found.update(part)
    out: dict[str, FileScan] = {}
    stats: dict[str, tuple[_Stat, str]] = {}
    scans: dict[str, FileScan] = {}
    for rel, _path in pairs:
        got = found.get(rel)
        if got is None:
            continue
        key, stat, scan = got
        out[rel] = scan
        scans[key] = scan
        if stat is not None:
            stats[rel] = (stat, key)
    if stats != cached.stats or scans.keys() != cached.scans.keys():
        store.save({"stats": stats, "scans": scans})
    return out


def _known(path: str, rel: str, cached: _Cached,
           now: float) -> tuple[str, _Stat, FileScan] | int | None:
    """The cached scan of a file whose stat is what it was when cached; else its size (it
    must be read), or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stat = (st.st_size, st.st_mtime_ns, st.st_ino)
    known = cached.stats.get(rel)
    if (known is not None and known[0] == stat and not _racy(st, now)
            and known[1] in cached.scans):
        return known[1], stat, cached.scans[known[1]]
    return st.st_size


def _racy(st: os.stat_result, now: float) -> bool:
    return now - st.st_mtime_ns / 1e9 < RACY_S


def _scan(path: str, rel: str, mirrored: tuple[str, ...], cached: _Cached,
          now: float) -> tuple[str, _Stat | None, FileScan] | None:
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except OSError:
        return None
    stat = (st.st_size, st.st_mtime_ns, st.st_ino)
    # The key covers what the scan depends on besides the bytes: the name (its comment
    # style) and the mirrored subtrees.
    key = digest(data + b"\0" + rel.encode() + b"\0" + "\0".join(mirrored).encode())
    scan = cached.scans.get(key)
    if scan is None:
        text, bad = atomic.decode_lenient(data)
        scan = scan_text(rel, text, mirrored)
        if bad is not None:
            scan = replace(scan, not_utf8=bad, header_not_utf8=header_not_utf8(data, scan.header))
    return key, None if _racy(st, now) else stat, scan
