"""The markdown outline the inventory and its §9 deviations are read from.

Lines keep their offsets and terminators so edits can be surgical; headings know
their section's extent and the tier they name; fenced code is masked so a `## 9.`
inside a fence is not a heading. It sits below both readers: `inventory` imports
`deviations` to fill its record, so `deviations` reads the file through this module
rather than through `inventory`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\Z")
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
LIST = re.compile(r"([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+|\Z)")
_HEADING_TIER = re.compile(
    r"(?:§?\s*\d+(?:\.\d+)*\.?\s+)?(?:T([0-3])|[Tt]ier[ \t]*([0-3]))(?![\w.])")
_SECTION9 = re.compile(r"(?:§\s*)?9(?:\.(?!\d)|(?=[\s:)—–-])|\Z)|.*§\s*9(?![.\d])")
PR_REF = re.compile(r"vllm#([0-9]{1,12})\b")


@dataclass(frozen=True)
class Line:
    no: int  # 1-based
    start: int  # offset of the first character
    body: str  # without its terminator
    nl: str  # "\n", "\r\n", "\r" or "" at end of file


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int
    start: int  # offset of the heading line
    end_line: int  # last line of its section (before the next heading of the same or a
    # higher level)
    tier: str | None


def split_lines(text: str) -> list[Line]:
    """Lines as markdown and editors count them: split at LF only, a CR before it kept as
    part of the terminator (str.splitlines would also split at form feeds and U+2028). A
    BOM is not part of the first line (a heading or table header there is one); offsets
    stay the file's."""
    out: list[Line] = []
    pos = 1 if text.startswith("\ufeff") else 0
    while pos < len(text):
        end = text.find("\n", pos)
        stop = len(text) if end < 0 else end + 1
        raw = text[pos:stop]
        body = raw[:-1] if raw.endswith("\n") else raw
        body = body[:-1] if body.endswith("\r") and raw.endswith("\n") else body
        out.append(Line(len(out) + 1, pos, body, raw[len(body):]))
        pos = stop
    return out


def newline(lines: Sequence[Line]) -> str:
    """The file's dominant line ending, what a line the tool adds ends with: CRLF or LF,
    whichever ends more lines (the first one's on a tie), LF when no line has one."""
    crlf = sum(ln.nl == "\r\n" for ln in lines)
    lf = sum(ln.nl == "\n" for ln in lines)
    if crlf != lf:
        return "\r\n" if crlf > lf else "\n"
    return next((ln.nl for ln in lines if ln.nl), "\n")


def line_break(before: str, nl: str, *, rel: str) -> str:
    """What goes between `before` and a line the tool adds after it: nothing after a line
    break; after a lone CR (an old-Mac line end, which `split_lines` keeps in the line's
    body) only the LF that makes it CRLF, since `nl` there would leave CR CR LF, an empty
    line to an editor (it splits a table there); else `nl`. After two lone CRs (a line and
    an empty one, to such an editor) no line break keeps the new line next to the line it
    follows, so the file (`rel`) is refused."""
    if not before or before.endswith("\n"):
        return ""
    if before.endswith("\r\r"):
        raise MalformedRecord(
            "ends a line in two carriage returns, an empty line after it to an editor that "
            "reads a lone CR as a line end: a line added after it would be cut off from it",
            "save the file with LF or CRLF line endings", path=rel)
    return "\n" if before.endswith("\r") else nl


def _heading_tier(text: str) -> str | None:
    m = _HEADING_TIER.match(text)
    return None if m is None else f"T{m.group(1) or m.group(2)}"


def scan(lines: list[Line]) -> tuple[list[bool], list[Heading]]:
    """(code, headings): code[n] is True for line n inside a fence (fence lines included);
    headings outside fences, each with the extent of its section."""
    code = [False] * (len(lines) + 2)
    raw_heads: list[tuple[int, str, Line]] = []  # (level, title, line)
    fence: str | None = None
    for ln in lines:
        f = FENCE.match(ln.body)
        if fence is not None or f is not None:
            code[ln.no] = True
            fence = _fence_after(fence, f, ln)
        else:
            head = _heading(ln)
            if head is not None:
                raw_heads.append(head)
    return code, _with_extents(raw_heads, len(lines))


def _fence_after(fence: str | None, f: re.Match[str] | None, ln: Line) -> str | None:
    """The open fence after fenced line `ln` (`f`: its fence marker, if it has one)."""
    if fence is None:
        return f.group(1) if f is not None else None
    closes = (f is not None and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence)
              and not ln.body[f.end():].strip())
    return None if closes else fence


def _heading(ln: Line) -> tuple[int, str, Line] | None:
    h = _HEADING.match(ln.body)
    if h is None:
        return None
    title = re.sub(r"(?:^|[ \t]+)#+\Z", "", (h.group(2) or "").strip()).strip()
    return len(h.group(1)), title, ln


def _with_extents(raw_heads: list[tuple[int, str, Line]], n: int) -> list[Heading]:
    """Each heading's section ends before the next heading of its level or higher."""
    headings: list[Heading] = []
    for i, (level, title, ln) in enumerate(raw_heads):
        end = next((ln2.no - 1 for level2, _, ln2 in raw_heads[i + 1:] if level2 <= level), n)
        headings.append(Heading(level, title, ln.no, ln.start, end, _heading_tier(title)))
    return headings


def section9(headings: Sequence[Heading]) -> Heading | None:
    """The deviations section: the first heading that reads as §9."""
    return next((h for h in headings if _SECTION9.match(h.text) is not None), None)


def read(file: Path, *, rel: str) -> str:
    return read_record(file, rel=rel)
