"""Comment styles: where a file's leading comment blocks are, as text segments with offsets.

A style is chosen by the file's name (its suffix, lower-cased) from `STYLES`; a file
no style claims is read C-like. Each style turns the file's first lines into comment
blocks (runs of comment lines, split at blank lines, ending at the first code), so
the citation grammar never sees a comment marker. A new comment syntax is one
`Style` entry in `STYLES`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

SCAN_LINES = 40  # a header comment block must start within the first 40 lines
MAX_BLOCK_LINES = 200  # ...and a block that started there is followed at most this far


@dataclass(frozen=True)
class Line:
    no: int
    start: int
    body: str  # without terminator (a trailing \r of CRLF removed)


@dataclass(frozen=True)
class Seg:
    """The text of one comment line, markers and surrounding blanks stripped."""

    text: str
    start: int  # offset of text[0] in the original file
    line: int


@dataclass
class Block:
    segs: list[Seg] = field(default_factory=list)


def lines(text: str, limit: int, starts: list[int]) -> Iterator[Line]:
    """Lines on demand (the scan stops at the first code line); records each line's offset."""
    pos = 1 if text.startswith("\ufeff") else 0  # a BOM is not code; offsets stay the file's
    while pos < len(text) and len(starts) < limit:
        end = text.find("\n", pos)
        stop = len(text) if end < 0 else end
        body = text[pos:stop]
        starts.append(pos)
        yield Line(len(starts), pos, body[:-1] if body.endswith("\r") else body)
        if end < 0:
            break
        pos = end + 1


def seg(ln: Line, a: int, b: int) -> Seg:
    body = ln.body
    while a < b and body[a].isspace():
        a += 1
    while b > a and body[b - 1].isspace():
        b -= 1
    return Seg(body[a:b], ln.start + a, ln.no)


class _Blocks:
    """The blocks found so far, the one being filled, and the open comment (if any)."""

    def __init__(self) -> None:
        self.done: list[Block] = []
        self.cur = Block()
        # What closes the multi-line comment the scan is inside: "*/" or a docstring's quote.
        self.open = ""

    def add(self, s: Seg) -> None:
        self.cur.segs.append(s)

    def close(self) -> None:
        if self.cur.segs:
            self.done.append(self.cur)
        self.cur, self.open = Block(), ""

    def close_before(self, rest: str) -> bool:
        """Close the block a comment ended; go on only when no code follows it on the line."""
        self.close()
        return not rest.strip()

    def finish(self) -> list[Block]:
        self.close()
        return self.done


def _preamble(acc: _Blocks, ln: Line) -> bool | None:
    """What every style does before reading a line's comment: stop, skip, or None (read it)."""
    if ln.no > SCAN_LINES and not acc.cur.segs:
        return False
    stripped = ln.body.strip()
    if not stripped:
        acc.close()
        return True
    if ln.no == 1 and stripped.startswith("#!"):
        return True
    return None


Step = Callable[[_Blocks, Line], bool]  # read one line; False: the comments ended


def _scan(lines: Iterable[Line], inside: Step, outside: Step) -> list[Block]:
    """Blocks from `inside` (lines of an open multi-line comment) and `outside` (the rest)."""
    acc = _Blocks()
    for ln in lines:
        if acc.open:
            go = inside(acc, ln)
        else:
            verdict = _preamble(acc, ln)
            go = outside(acc, ln) if verdict is None else verdict
        if not go:
            break
    return acc.finish()


# -- C-like: `//` runs and `/* */` comments ----------------------------------------------------

_C_LINE = re.compile(r"\s*//+[!<]?")
_STARS = re.compile(r"[*!]*")
_C_PREAMBLE = re.compile(r"#\s*(?:pragma\s+once|ifndef\s+\w+|define\s+\w+)\s*$")


def _after_stars(body: str, a: int, end: int) -> int:
    """Past the decoration stars at `a` (` * text`), unless they run into the comment's end."""
    star = _STARS.match(body, a)
    if star is not None and (end < 0 or star.end() <= end):
        return star.end()
    return a


def _c_inside(acc: _Blocks, ln: Line) -> bool:
    body = ln.body
    end = body.find("*/")
    stop = len(body) if end < 0 else end
    a = _after_stars(body, len(body) - len(body.lstrip()), end)
    acc.add(seg(ln, min(a, stop), stop))
    return end < 0 or acc.close_before(body[end + 2:])


def _c_open(acc: _Blocks, ln: Line) -> bool:
    body = ln.body
    acc.close()
    a = body.index("/*") + 2
    end = body.find("*/", a)
    a = _after_stars(body, a, end)
    if end < 0:
        acc.open = "*/"
        acc.add(seg(ln, a, len(body)))
        return True
    acc.add(seg(ln, a, end))
    return acc.close_before(body[end + 2:])


def _c_line(acc: _Blocks, ln: Line) -> bool:
    body = ln.body
    stripped = body.strip()
    line_comment = _C_LINE.match(body)
    if line_comment is not None:
        acc.add(seg(ln, line_comment.end(), len(body)))
        return True
    if stripped.startswith("/*"):
        return _c_open(acc, ln)
    if _C_PREAMBLE.match(stripped):
        acc.close()
        return True
    return False


def c_blocks(lines: Iterable[Line]) -> list[Block]:
    """Leading `//` runs and `/* */` comments, split at blank lines; stop at the first code."""
    return _scan(lines, _c_inside, _c_line)


# -- hash: `#` runs and a module docstring ------------------------------------------------------

_DOC_OPEN = re.compile(r"[rRuU]?(\"\"\"|''')")


def _doc_inside(acc: _Blocks, ln: Line) -> bool:
    body = ln.body
    end = body.find(acc.open)
    acc.add(seg(ln, 0, len(body) if end < 0 else end))
    return end < 0 or acc.close_before(body[end + 3:])


def _doc_open(acc: _Blocks, ln: Line, doc: re.Match[str]) -> bool:
    body = ln.body
    acc.close()
    quote = doc.group(1)
    end = body.find(quote, doc.end())
    if end < 0:
        acc.open = quote
        acc.add(seg(ln, doc.end(), len(body)))
        return True
    acc.add(seg(ln, doc.end(), end))
    return acc.close_before(body[end + 3:])


def _hash_line(acc: _Blocks, ln: Line) -> bool:
    body = ln.body
    rest = body.lstrip()
    lead = len(body) - len(rest)
    if rest.startswith("#"):
        acc.add(seg(ln, len(body) - len(rest.lstrip("#")), len(body)))
        return True
    doc = _DOC_OPEN.match(body, lead)
    return doc is not None and _doc_open(acc, ln, doc)


def hash_blocks(lines: Iterable[Line]) -> list[Block]:
    """Leading `#` runs and a module docstring, split at blank lines; stop at the first code."""
    return _scan(lines, _doc_inside, _hash_line)


# -- the registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    name: str
    suffixes: tuple[str, ...]  # lower-case endings of the file names it claims
    blocks: Callable[[Iterable[Line]], list[Block]]
    # What may lead a comment line that continues a wrapped path (for inline citations).
    continuation: str


C_LIKE = Style("c-like", (), c_blocks, r"//+!?|\*+(?!/)")
STYLES: tuple[Style, ...] = (
    Style("hash", (".py", ".pyi", ".sh", ".bash", ".cmake", ".toml", ".yaml", ".yml",
                   "cmakelists.txt"), hash_blocks, r"#+"),
)


def style_for(path: str) -> Style:
    """The style of the file at `path` (C-like unless a style in `STYLES` claims its name)."""
    low = path.lower()
    return next((s for s in STYLES if low.endswith(s.suffixes)), C_LIKE)


def continuation_markers() -> str:
    """Every style's continuation marker, as one regex alternation."""
    return "|".join(s.continuation for s in (C_LIKE, *STYLES))
