"""Fenced `key = value` blocks in markdown (```parity-pin, ```oracle-pin, ```sync-preferences).

The parser keeps offsets so a rewrite can replace exactly the block's lines and
leave every other byte of the file alone (newline style included).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from sync.infra.errors import MalformedRecord

_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_VALUE = 1024


def is_date(value: str) -> bool:
    """A real calendar date written YYYY-MM-DD (2026-02-30 is refused)."""
    if not _DATE.fullmatch(value):
        return False
    try:
        datetime.date(int(value[:4]), int(value[5:7]), int(value[8:]))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class KeyValue:
    """One `key = value` line of a block."""

    key: str
    value: str
    line: int  # 1-based line number in the file


@dataclass(frozen=True)
class Block:
    info: str
    entries: tuple[KeyValue, ...]
    start: int  # offset of the first body line
    end: int  # offset just past the last body line (the closing fence starts here)
    open_line: int  # 1-based line of the opening fence
    newline: str

    def as_dict(self) -> dict[str, str]:
        return {e.key: e.value for e in self.entries}


def _lines(text: str) -> list[tuple[int, str, str]]:
    """(offset, line without terminator, terminator) for each line; a BOM is not part of
    the first (a fence there opens a block), and offsets stay the file's."""
    out = []
    pos = 1 if text.startswith("\ufeff") else 0
    for raw in text[pos:].splitlines(keepends=True):
        body = raw.rstrip("\r\n")
        out.append((pos, body, raw[len(body):]))
        pos += len(raw)
    return out


def find(text: str, info: str, *, path: str) -> list[Block]:
    """Every fenced block whose info string is exactly `info` (unparsed bodies are errors)."""
    blocks: list[Block] = []
    lines = _lines(text)
    i = 0
    while i < len(lines):
        if _opens(lines[i][1], info):
            block, i = _block(lines, i, info, path)
            blocks.append(block)
        else:
            i += 1
    return blocks


def _opens(body: str, info: str) -> bool:
    """Whether `body` is an opening fence of an `info` block, at the start of its line."""
    stripped = body.strip()
    return body.startswith("```") and stripped[3:].strip() == info


def _block(lines: list[tuple[int, str, str]], i: int, info: str,
           path: str) -> tuple[Block, int]:
    """(the block opened on line index `i`, the index of the line after its closing fence)."""
    j = i + 1
    while j < len(lines) and lines[j][1].strip() != "```":
        j += 1
    if j >= len(lines):
        raise MalformedRecord(f"```{info} block is never closed", "add the closing ```",
                              path=path, line=i + 1)
    entries = tuple(_parse_line(body, path, k + 1) for k, (_, body, _) in
                    enumerate(lines[i + 1: j], start=i + 1)
                    if body.strip() and not body.lstrip().startswith("#"))
    return Block(info, entries, lines[i + 1][0], lines[j][0], i + 1, lines[i][2] or "\n"), j + 1


def _parse_line(body: str, path: str, line: int) -> KeyValue:
    if "=" not in body:
        raise MalformedRecord(f"malformed line {body.strip()[:60]!r} (expected 'key = value')",
                              "fix the block line", path=path, line=line)
    key, _, value = body.partition("=")
    key = key.strip()
    if len(value) > MAX_VALUE:
        # What is parsed is bounded: a version of 5 million digits is no value of a block.
        raise MalformedRecord(f"value of {key[:40]!r} is {len(value)} characters (at most "
                              f"{MAX_VALUE})", "fix the block line", path=path, line=line)
    if not _KEY.match(key):
        raise MalformedRecord(f"malformed key {key[:40]!r}", "keys are lowercase_with_underscores",
                              path=path, line=line)
    return KeyValue(key, value.strip(), line)


# An opening fence of a block that `find` does not read: indented (a list item, a quote),
# `~~~`, or more than three backticks.
_NEAR = re.compile(r"[ \t>]*(?:`{3,}|~{3,})[ \t]*(?P<info>[\w.-]+)[ \t]*\Z")


def near_misses(text: str, info: str) -> list[tuple[int, str]]:
    """(line, the fence as written) of every fence of an `info` block that is not read."""
    if info not in text:
        return []
    out = []
    for no, (_, body, _) in enumerate(_lines(text), start=1):
        m = _NEAR.match(body) if info in body else None
        if m and m["info"] == info and not _opens(body, info):
            out.append((no, body.strip()))
    return out


def _none_found(text: str, info: str, path: str) -> MalformedRecord:
    """No block: naming the fence that is there but not read, if one is."""
    near = near_misses(text, info)
    if not near:
        return MalformedRecord(f"expected exactly one ```{info} block, found 0",
                               f"keep exactly one ```{info} block", path=path)
    no, fence = near[0]
    return MalformedRecord(f"expected exactly one ```{info} block, found 0 (line {no} opens "
                           f"one with {fence!r}, which is not read)",
                           "fence the block with ``` at the start of its line", path=path,
                           line=no)


def exactly_one(text: str, info: str, *, path: str) -> Block:
    found = find(text, info, path=path)
    if not found:
        raise _none_found(text, info, path)
    if len(found) != 1:
        where = ", ".join(str(b.open_line) for b in found)
        raise MalformedRecord(
            f"expected exactly one ```{info} block, found {len(found)}"
            + (f" (lines {where})" if found else ""),
            f"keep exactly one ```{info} block", path=path,
            line=found[1].open_line if len(found) > 1 else None,
        )
    return found[0]


def check_keys(block: Block, required: tuple[str, ...], *, path: str,
               optional: tuple[str, ...] = ()) -> dict[str, str]:
    seen: dict[str, KeyValue] = {}
    for e in block.entries:
        if e.key in seen:
            raise MalformedRecord(f"duplicate key {e.key!r} (first on line {seen[e.key].line})",
                                  "keep one", path=path, line=e.line)
        if e.key not in required and e.key not in optional:
            raise MalformedRecord(f"unknown key {e.key!r} in ```{block.info}",
                                  f"allowed keys: {', '.join(required + optional)}",
                                  path=path, line=e.line)
        seen[e.key] = e
    for key in required:
        if key not in seen:
            raise MalformedRecord(f"missing key {key!r} in ```{block.info}", "add it",
                                  path=path, line=block.open_line)
    return {k: e.value for k, e in seen.items()}


def render_body(entries: list[tuple[str, str]], newline: str) -> str:
    return "".join(f"{k} = {v}{newline}" for k, v in entries)


def replace_body(text: str, block: Block, entries: list[tuple[str, str]]) -> str:
    """The file with only the block's body lines replaced."""
    return text[: block.start] + render_body(entries, block.newline) + text[block.end:]
