"""Per-file pin headers: the upstream path(s) and commit a ported file cites up front.

Real headers wrap over lines (even mid-path or mid-SHA), use several verbs and
citation shapes, and sometimes sit under a licence block, so line greps
undercount them. The leading comment region is therefore normalised first
(markers stripped, lines joined, wrapped tokens re-joined) and matched as one
text, keeping a map back to the original offsets so `bump-headers` can rewrite a
SHA in place. A SHA in a header is a claim, not a fact: `classify_shas` checks
each one against the reference checkout with a constant number of git processes.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from sync.infra.errors import EnvironmentUnresolved
from sync.upstream import gitio

Kind = Literal["PORTED", "ORIGINAL", "NONE"]
ShaStatus = Literal["at-pin", "behind", "ahead", "not-upstream"]

SCAN_LINES = 40  # a header comment block must start within the first 40 lines
MAX_BLOCK_LINES = 200  # ...and a block that started there is followed at most this far
HASH_SUFFIXES = (".py", ".pyi", ".sh", ".bash", ".cmake", ".toml", ".yaml", ".yml")


@dataclass(frozen=True)
class Citation:
    path: str  # upstream path as cited, e.g. vllm/v1/core/sched/scheduler.py
    lines: str | None  # "12" or "10-20"
    symbol: str | None
    sha: str | None  # as written, 7..40 lowercase hex
    sha_start: int | None  # offsets of the SHA in the original text; None when it was split
    sha_end: int | None
    line: int  # 1-based line of the path


@dataclass(frozen=True)
class Header:
    kind: Kind
    citations: tuple[Citation, ...]
    verb: str | None
    start_line: int
    end_line: int

    @property
    def shas(self) -> tuple[str, ...]:
        """Distinct SHAs cited, in order of first appearance."""
        return tuple(dict.fromkeys(c.sha for c in self.citations if c.sha is not None))


NO_HEADER = Header("NONE", (), None, 0, 0)

# -- lines, comment blocks --------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    no: int
    start: int
    body: str  # without terminator (a trailing \r of CRLF removed)


@dataclass(frozen=True)
class _Seg:
    """The text of one comment line, markers and surrounding blanks stripped."""

    text: str
    start: int  # offset of text[0] in the original file
    line: int


@dataclass
class _Block:
    segs: list[_Seg] = field(default_factory=list)


def _lines(text: str, limit: int, starts: list[int]) -> Iterator[_Line]:
    """Lines on demand (the scan stops at the first code line); records each line's offset."""
    pos = 1 if text.startswith("\ufeff") else 0  # a BOM is not code; offsets stay the file's
    while pos < len(text) and len(starts) < limit:
        end = text.find("\n", pos)
        stop = len(text) if end < 0 else end
        body = text[pos:stop]
        starts.append(pos)
        yield _Line(len(starts), pos, body[:-1] if body.endswith("\r") else body)
        if end < 0:
            break
        pos = end + 1


def _seg(ln: _Line, a: int, b: int) -> _Seg:
    body = ln.body
    while a < b and body[a].isspace():
        a += 1
    while b > a and body[b - 1].isspace():
        b -= 1
    return _Seg(body[a:b], ln.start + a, ln.no)


_C_LINE = re.compile(r"\s*//+[!<]?")
_STARS = re.compile(r"[*!]*")
_C_PREAMBLE = re.compile(r"#\s*(?:pragma\s+once|ifndef\s+\w+|define\s+\w+)\s*$")
_DOC_OPEN = re.compile(r"[rRuU]?(\"\"\"|''')")


def _is_hash_style(path: str) -> bool:
    low = path.lower()
    return low.endswith(HASH_SUFFIXES) or low.endswith("cmakelists.txt")


def _c_blocks(lines: Iterable[_Line]) -> list[_Block]:
    """Leading `//` runs and `/* */` comments, split at blank lines; stop at the first code."""
    blocks: list[_Block] = []
    cur = _Block()
    style = ""  # "//" while in a line-comment run, "/*" while inside a block comment

    def close() -> None:
        nonlocal cur, style
        if cur.segs:
            blocks.append(cur)
        cur, style = _Block(), ""

    for ln in lines:
        body = ln.body
        if style == "/*":
            end = body.find("*/")
            stop = len(body) if end < 0 else end
            a = len(body) - len(body.lstrip())
            star = _STARS.match(body, a)
            if star is not None and (end < 0 or star.end() <= end):
                a = star.end()
            cur.segs.append(_seg(ln, min(a, stop), stop))
            if end >= 0:
                rest = body[end + 2:].strip()
                close()
                if rest:
                    break
            continue
        if ln.no > SCAN_LINES and not cur.segs:
            break
        stripped = body.strip()
        if not stripped:
            close()
            continue
        if ln.no == 1 and stripped.startswith("#!"):
            continue
        line_comment = _C_LINE.match(body)
        if line_comment is not None:
            if style != "//":
                close()
                style = "//"
            cur.segs.append(_seg(ln, line_comment.end(), len(body)))
            continue
        if stripped.startswith("/*"):
            close()
            a = body.index("/*") + 2
            end = body.find("*/", a)
            star = _STARS.match(body, a)
            if star is not None and (end < 0 or star.end() <= end):
                a = star.end()
            if end >= 0:
                cur.segs.append(_seg(ln, a, end))
                rest = body[end + 2:].strip()
                close()
                if rest:
                    break
            else:
                style = "/*"
                cur.segs.append(_seg(ln, a, len(body)))
            continue
        if _C_PREAMBLE.match(stripped):
            close()
            continue
        break
    if cur.segs:
        blocks.append(cur)
    return blocks


def _hash_blocks(lines: Iterable[_Line]) -> list[_Block]:
    """Leading `#` runs and a module docstring, split at blank lines; stop at the first code."""
    blocks: list[_Block] = []
    cur = _Block()
    quote = ""  # the open docstring quote, if inside one

    def close() -> None:
        nonlocal cur
        if cur.segs:
            blocks.append(cur)
        cur = _Block()

    for ln in lines:
        body = ln.body
        if quote:
            end = body.find(quote)
            cur.segs.append(_seg(ln, 0, len(body) if end < 0 else end))
            if end >= 0:
                quote = ""
                rest = body[end + 3:].strip()
                close()
                if rest:
                    break
            continue
        if ln.no > SCAN_LINES and not cur.segs:
            break
        stripped = body.strip()
        if not stripped:
            close()
            continue
        if ln.no == 1 and stripped.startswith("#!"):
            continue
        lead = len(body) - len(body.lstrip())
        if stripped.startswith("#"):
            a = lead
            while a < len(body) and body[a] == "#":
                a += 1
            cur.segs.append(_seg(ln, a, len(body)))
            continue
        doc = _DOC_OPEN.match(body, lead)
        if doc is not None:
            close()
            q = doc.group(1)
            end = body.find(q, doc.end())
            if end >= 0:
                cur.segs.append(_seg(ln, doc.end(), end))
                rest = body[end + 3:].strip()
                close()
                if rest:
                    break
            else:
                quote = q
                cur.segs.append(_seg(ln, doc.end(), len(body)))
            continue
        break
    if cur.segs:
        blocks.append(cur)
    return blocks


# -- normalisation ----------------------------------------------------------------------------

_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
_HEAD = re.compile(r"[\w./-]+", re.A)
_HEX = re.compile(r"[0-9a-f]+")
_SHA_CUE = re.compile(
    r"(?:@|`|\b(?:commit|pin|pinned|sha1?|rev|revision|at|upstream|hash))\s*[:=]?\s*`?\s*\Z",
    re.I | re.A,
)


@functools.lru_cache(maxsize=4096)
def _is_file(p: str) -> bool:
    """A file path (dir/name.ext, or a bare name.py); linear, no backtracking."""
    parts = p.split("/")
    if any(not part or part in (".", "..") for part in parts):
        return False
    stem, dot, ext = parts[-1].rpartition(".")
    if not dot or not stem.strip(".-") or not ext[:1].isalpha() or not ext.isalnum():
        return False
    return len(parts) > 1 or ext == "py"


def _is_dir(p: str) -> bool:
    parts = p.split("/")
    return len(parts) > 2 and parts[-1] == "" and all(
        part and part not in (".", "..") and part[0] not in ".-" for part in parts[:-1])


def _path_joins(t: str, u: str) -> bool:
    """Whether a path wrapped as `t` / `u` over two lines reads as one path."""
    if _is_file(t.rstrip(".")):
        return False
    if (u[0] in "/._" or t[-1] in "/_-") and _is_file((t + u).rstrip(".")):
        return True
    return len(t) > 1 and t.endswith("/") and "/" in u and not u.startswith("/")


def _joins(prev: str, nxt: str) -> bool:
    """Whether the next comment line continues a token the previous one broke."""
    cut = len(prev)
    while cut > 0 and prev[cut - 1] in _PATH_CHARS:
        cut -= 1
    um = _HEAD.match(nxt)
    if cut == len(prev) or um is None:
        return False
    t, u = prev[cut:], um.group()
    if _path_joins(t, u):
        return True
    if _HEX.fullmatch(t) and _HEX.fullmatch(u):
        n = len(t) + len(u)
        # A split SHA: a full one split anywhere, or a stub too short to be one after a SHA cue.
        return n == 40 or (len(t) < 7 and n <= 40
                           and _SHA_CUE.search(prev, max(0, cut - 40), cut) is not None)
    return False


@dataclass(frozen=True)
class _Norm:
    text: str
    offs: tuple[int, ...]  # original offset of each character; -1 for inserted separators
    paras: tuple[int, ...]  # indices where a paragraph (after a blank comment line) starts


def _normalise(segs: list[_Seg]) -> _Norm:
    text = ""
    offs: list[int] = []
    paras = [0]
    gap = False
    for seg in segs:
        if not seg.text:
            gap = bool(text)
            continue
        if text:
            if gap or not _joins(text, seg.text):
                text += " "
                offs.append(-1)
            if gap:
                paras.append(len(text))
                gap = False
        text += seg.text
        offs.extend(range(seg.start, seg.start + len(seg.text)))
    return _Norm(text, tuple(offs), tuple(paras))


def _orig_span(norm: _Norm, s: int, e: int) -> tuple[int, int] | None:
    """The original offsets of norm.text[s:e], or None when it crosses a line join."""
    a, b = norm.offs[s], norm.offs[e - 1]
    if a < 0 or b < 0 or b - a != e - 1 - s:
        return None
    return a, b + 1


# -- matching ---------------------------------------------------------------------------------

_VERB = re.compile(
    r"""(?<![\w-])
    (?: ported\s+(?:from|of) | port\s+of | mirrors | mirrored\s+(?:from|after) | mirror\s+of
      | re-?implement(?:ed|ation)\s+(?:from|of|after) | adapted\s+from | derived\s+from
      | translated\s+from | converted\s+from | based\s+on
      | upstream(?:\s+(?:source|file|path|reference))?(?=\s*:) | original(?=\s*:) )
    (?:\s+the\s+(?:[\w-]+\s+){0,4}?of(?![\w-]))?""",
    re.I | re.X | re.A,
)
_ORIGINAL = re.compile(
    r"""\bno\s+(?:direct\s+)?upstream\b
      | \bwithout\s+(?:an?\s+)?upstream\s+(?:mirror|counterpart|equivalent|source)\b
      | \bnot\s+(?:a\s+)?(?:port(?:ed)?|mirror(?:ed)?)\s+(?:from|of)\b
      | \bnot\s+ported\b
      | \bport[-\s]original\b
      | \boriginal\s+(?:to|for)\s+(?:this|the)\s+port\b""",
    re.I | re.X | re.A,
)
_ORIGINAL_LEAD = re.compile(r"original\b", re.I)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|\Z)")
_URL = re.compile(r"(?<![\w+.-])[A-Za-z][\w+.-]{0,15}://[^\s`<>()\[\]\"']+", re.A)
_GITHUB = re.compile(
    r"https?://(?:github\.com/[\w.-]+/[\w.-]+/(?:blob|tree)|raw\.githubusercontent\.com/[\w.-]+/"
    r"[\w.-]+)/(?P<rev>[\w.-]+)/(?P<path>[\w./-]+?)\.?(?:#L(?P<a>\d+)(?:-L(?P<b>\d+))?)?\Z",
    re.A,
)
_RUN = re.compile(r"[\w./-]+", re.A)
_SUFFIX = re.compile(
    r"""(?: :(?P<l>\d+(?:-\d+)?)(?!\w) | \#L(?P<la>\d+)(?:-L?(?P<lb>\d+))? )?
    (?: ::?(?P<sym>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(\))?
      | [ \t]*\([ \t]*(?: (?:lines?|L)[ \t]*(?P<pl>\d+(?:[ \t]*-[ \t]*\d+)?)
                      | (?P<psym>[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*)(?:\(\))? )[ \t]*\) )?""",
    re.X | re.A,
)
_SHA = re.compile(r"(?<![\w./#-])[0-9a-f]{7,40}(?![\w/]|[.-]\w)", re.A)
_SHA_WORD = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class _Event:
    pos: int
    path: str | None = None  # set for a path event
    bare: bool = False  # a bare name.py: a citation only right after the verb
    lines: str | None = None
    symbol: str | None = None
    sha: str | None = None  # a SHA event, or a URL's own revision
    span: tuple[int, int] | None = None  # the SHA's original offsets
    url: bool = False  # a URL names its own revision: a group SHA never applies to it


def _looks_like_sha(word: str) -> bool:
    return _SHA_WORD.fullmatch(word) is not None and any(ch.isdigit() for ch in word)


def _events(norm: _Norm) -> list[_Event]:
    text = norm.text
    taken = bytearray(len(text))  # characters already read as part of a URL, path or suffix

    def take(a: int, b: int) -> None:
        taken[a:b] = b"\x01" * (b - a)

    events: list[_Event] = []
    for m in _URL.finditer(text):
        take(*m.span())
        url = m.group().rstrip(".,;:")
        gh = _GITHUB.match(url)
        if gh is None or not (_is_file(gh["path"]) or _is_dir(gh["path"] + "/")):
            continue
        rev = gh["rev"]
        sha, span = None, None
        if _looks_like_sha(rev):
            s = m.start() + gh.start("rev")
            sha, span = rev, _orig_span(norm, s, s + len(rev))
        lines = gh["a"] if gh["b"] is None or gh["a"] is None else f"{gh['a']}-{gh['b']}"
        events.append(_Event(m.start(), gh["path"], lines=lines, sha=sha, span=span, url=True))
    for m in _RUN.finditer(text):
        s, e = m.span()
        if taken[s]:
            continue
        word = m.group()
        lead = 2 if word.startswith("./") else 0
        path = word[lead:].rstrip(".")
        if not _is_file(path) and not _is_dir(path):
            continue
        end = s + lead + len(path)
        take(s, e)
        lines = symbol = None
        suffix = _SUFFIX.match(text, end)
        if suffix is not None and suffix.end() > end:
            lines = suffix["l"] or suffix["pl"] or (
                suffix["la"] if suffix["lb"] is None else f"{suffix['la']}-{suffix['lb']}")
            symbol = suffix["sym"] or suffix["psym"]
            stop = suffix.end()
            if suffix["psym"] and _looks_like_sha(suffix["psym"]):
                symbol, stop = None, suffix.start("psym")  # `path (e24d1b24)` cites a SHA
            take(end, stop)
            if lines is not None:
                lines = "".join(lines.split())
        events.append(_Event(s + lead, path, bare="/" not in path, lines=lines, symbol=symbol))
    path_ends = sorted(ev.pos + len(ev.path) for ev in events if ev.path is not None)
    for m in _SHA.finditer(text):
        s, e = m.span()
        word = m.group()
        if any(taken[s:e]) or not any(ch.isdigit() for ch in word):
            continue
        # All digits (5559679 is a real pin prefix) only counts where something says "SHA":
        # a cue word, or a position right after a cited path.
        if word.isdigit() and _SHA_CUE.search(text, max(0, s - 40), s) is None:
            i = bisect_right(path_ends, s) - 1
            if i < 0 or text[path_ends[i]: s].strip(" \t(:—–-") != "":
                continue
        events.append(_Event(s, sha=word, span=_orig_span(norm, s, e)))
    events.sort(key=lambda ev: ev.pos)
    return events


def _original_at(norm: _Norm, path_starts: list[int]) -> int | None:
    """Where the block declares itself original (no upstream mirror), if it does."""
    text = norm.text
    marker = _ORIGINAL.search(text)
    found = [marker.start()] if marker is not None else []
    for m in _ORIGINAL_LEAD.finditer(text):
        i = m.start()
        while i > 0 and text[i - 1].isspace():
            i -= 1
        if i > 0 and text[i - 1] not in ".!?;:(—-" and m.start() not in norm.paras:
            continue  # only "Original ..." opening a sentence declares anything
        end = _SENTENCE_END.search(text, m.end())
        k = bisect_left(path_starts, m.start())
        if k < len(path_starts) and path_starts[k] < (end.start() if end else len(text)):
            continue  # "Original: vllm/x.py" names the upstream original: a port
        found.append(m.start())
        break
    return min(found) if found else None


@dataclass
class _Draft:
    ev: _Event
    sha: str | None = None
    span: tuple[int, int] | None = None


def _citations(norm: _Norm, events: list[_Event], start: int, verb_end: int | None,
               line_of: list[int]) -> list[Citation]:
    drafts: list[_Draft] = []
    pending: list[_Draft] = []
    seen: set[str] = set()
    carry: _Event | None = None
    for ev in events:
        if ev.pos < start:
            continue
        if ev.path is not None:
            if ev.bare and (verb_end is None or drafts
                            or not _adjacent(norm.text, verb_end, ev.pos)):
                continue
            if ev.lines is None and ev.symbol is None and ev.sha is None and ev.path in seen:
                continue  # a later mention of a path already cited
            seen.add(ev.path)
            draft = _Draft(ev, ev.sha, ev.span)
            drafts.append(draft)
            if not ev.url:
                pending.append(draft)
        elif ev.sha is not None:
            if pending:
                for d in pending:  # a SHA given once for a group covers the paths before it
                    d.sha, d.span = ev.sha, ev.span
                pending = []
            elif not drafts and carry is None:
                carry = ev  # "Ported @ sha from: a, b": the SHA came first
    if carry is not None:
        for d in pending:  # only paths that never got a SHA remain pending
            d.sha, d.span = carry.sha, carry.span
    out = []
    for d in drafts:
        line = bisect_right(line_of, norm.offs[d.ev.pos])
        out.append(Citation(d.ev.path or "", d.ev.lines, d.ev.symbol, d.sha,
                            d.span[0] if d.span else None, d.span[1] if d.span else None, line))
    return out


def _first_citing_verb(norm: _Norm, events: list[_Event]) -> re.Match[str] | None:
    """The first verb followed by a path (a bare name.py only right after the verb)."""
    paths = [ev for ev in events if ev.path is not None]
    last_full = max((ev.pos for ev in paths if not ev.bare), default=-1)
    starts = [ev.pos for ev in paths]
    for m in _VERB.finditer(norm.text):
        # "Original: vllm/x.py" names the upstream original; "Original: no upstream ..." does not.
        if last_full >= m.end() and not m.group().lower().startswith("original"):
            return m
        i = bisect_left(starts, m.end())
        if i < len(paths) and _adjacent(norm.text, m.end(), paths[i].pos):
            return m
    return None


def _adjacent(text: str, a: int, b: int) -> bool:
    return text[a:b].strip(" :`'\"*-") == ""


def _header(block: _Block, line_of: list[int]) -> Header | None:
    norm = _normalise(block.segs)
    if not norm.text:
        return None
    events = _events(norm)
    verb = _first_citing_verb(norm, events)
    original = _original_at(norm, [ev.pos for ev in events if ev.path is not None])
    if verb is None and original is None:
        return None
    kind: Kind
    if original is not None and (verb is None or original < verb.start()):
        kind, anchor, verb_text, verb_end = "ORIGINAL", original, None, None
    else:
        assert verb is not None
        kind, anchor = "PORTED", verb.start()
        verb_text, verb_end = " ".join(verb.group().split()), verb.end()
    start = max(p for p in norm.paras if p <= anchor)
    cites = _citations(norm, events, start, verb_end, line_of)
    if kind == "PORTED" and not cites:
        return None
    first = bisect_right(line_of, norm.offs[start])  # the first text line of the header
    last = block.segs[-1].line
    return Header(kind, tuple(cites), verb_text, first, last)


def parse_header(text: str, path: str = "<text>") -> Header:
    """The file's per-file pin header (kind NONE when it has none). Never raises on any text."""
    line_of: list[int] = []
    lines = _lines(text, SCAN_LINES + MAX_BLOCK_LINES, line_of)
    blocks = _hash_blocks(lines) if _is_hash_style(path) else _c_blocks(lines)
    for block in blocks:
        header = _header(block, line_of)
        if header is not None:
            return header
    return NO_HEADER


# -- inline citations -------------------------------------------------------------------------

_NEXT_LINE = re.compile(r"[ \t]*\r?\n[ \t]*(?://+!?|#+|\*+(?!/))?[ \t]*")


@functools.lru_cache(maxsize=16)
def _mirrored_pattern(mirrored: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(p) for p in sorted(set(mirrored), key=len, reverse=True))
    return re.compile(rf"(?:{alt})[\w./-]*", re.A)


def inline_citations(text: str, mirrored: tuple[str, ...] = ("vllm/",)) -> set[str]:
    """Upstream *.py paths under the mirrored subtrees cited anywhere in `text` (wraps joined)."""
    prefixes = tuple(p for p in mirrored if p)
    if not prefixes or not any(p in text for p in prefixes):
        return set()
    found: set[str] = set()
    for m in _mirrored_pattern(prefixes).finditer(text):
        s = m.start()
        if s > 0 and (text[s - 1].isalnum() or text[s - 1] in "_./-"):
            continue  # inside a longer path (src/vllm/...) or an identifier
        word, end = m.group(), m.end()
        if word in found:
            continue  # already counted, and a complete path is never joined with the next line
        for _ in range(3):  # a path wrapped over up to four comment lines
            nl = _NEXT_LINE.match(text, end)
            if nl is None:
                break
            head = _HEAD.match(text, nl.end())
            if head is None or not _path_joins(word, head.group()):
                break
            word, end = word + head.group(), head.end()
        path = word.rstrip(".")
        if path.endswith(".py") and _is_file(path):
            found.add(path)
    for m in _URL.finditer(text) if "://" in text else ():
        gh = _GITHUB.match(m.group().rstrip(".,;:"))
        if gh is not None and gh["path"].startswith(prefixes) and gh["path"].endswith(".py"):
            found.add(gh["path"])
    return found


# -- SHA verification -------------------------------------------------------------------------


def classify_shas(ref: gitio.Reference, pin: str, shas: Iterable[str],
                  upstream_ref: str) -> dict[str, ShaStatus]:
    """Where each cited SHA (as written) stands against `pin` on the upstream line.

    Three git processes whatever the number of SHAs: one cat-file to resolve
    them all, one rev-list for the pin's ancestry, one for `pin..upstream_ref`.
    """
    gitio.check_rev(pin)
    gitio.check_rev(upstream_ref)
    wanted = list(dict.fromkeys(shas))
    probe = [s for s in wanted if _SHA_WORD.fullmatch(s)]
    names = [f"{pin}^{{commit}}", f"{upstream_ref}^{{commit}}"]
    for s in probe:
        names += [s, f"{s}^{{commit}}"]  # plain: is it a commit at all; peeled: which commit
    found = gitio.batch_check(ref, names)
    if found[0] is None:
        raise EnvironmentUnresolved(f"the pin {pin} is not a commit in {ref.path}",
                                    "fetch the reference checkout, or fix the pin")
    if found[1] is None:
        raise EnvironmentUnresolved(f"{upstream_ref} does not resolve in {ref.path}",
                                    "run the fetch step first")
    pin_sha, up_sha = found[0][0], found[1][0]
    behind = set(ref.git("rev-list", "--end-of-options", pin_sha).decode().split())
    ahead = set(ref.git("rev-list", "--end-of-options", up_sha, f"^{pin_sha}").decode().split())
    out: dict[str, ShaStatus] = {s: "not-upstream" for s in wanted}
    for i, s in enumerate(probe):
        plain, peeled = found[2 + 2 * i], found[3 + 2 * i]
        if peeled is None or (plain is not None and plain[1] != "commit"):
            continue  # missing, ambiguous, or a tag/tree/blob
        commit = peeled[0]
        if commit == pin_sha:
            out[s] = "at-pin"
        elif commit in behind:
            out[s] = "behind"
        elif commit in ahead:
            out[s] = "ahead"
    return out
