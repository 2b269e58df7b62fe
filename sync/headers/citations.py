"""The citation grammar of per-file pin headers: the upstream path(s) and commit a port cites.

Real headers wrap over lines (even mid-path or mid-SHA), use several verbs and
citation shapes, and sometimes sit under a licence block, so line greps
undercount them. The leading comment blocks (`comments` finds them, per comment
style) are therefore normalised first (lines joined, wrapped tokens re-joined)
and matched as one text, keeping a map back to the original offsets so
`bump-headers` can rewrite a SHA in place. A SHA in a header is a claim, not a
fact: `verify.classify_shas` checks each one against the reference checkout.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Literal

from sync.headers import comments

Kind = Literal["PORTED", "ORIGINAL", "NONE"]


@dataclass(frozen=True)
class Citation:
    path: str  # upstream path as cited, e.g. vllm/v1/core/sched/scheduler.py
    lines: str | None  # "12" or "10-20"
    symbol: str | None
    sha: str | None  # as written, 7..40 lowercase hex
    sha_start: int | None  # offsets of the SHA in the original text; None when it was split
    sha_end: int | None
    line: int  # 1-based line of the path

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol the citation is anchored to (`path::A`, `path (A, B)`); () = none."""
        return (self.symbol,) if self.symbol else ()


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


def _normalise(segs: list[comments.Seg]) -> _Norm:
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
    """URLs, then paths (with their line/symbol suffixes), then SHAs, in text order.

    Each character is read once: what a URL or a path took is no path or SHA of its own.
    """
    taken = bytearray(len(norm.text))
    events = _url_events(norm, taken)
    events += _path_events(norm.text, taken)
    events += _sha_events(norm, taken, events)
    events.sort(key=lambda ev: ev.pos)
    return events


def _take(taken: bytearray, a: int, b: int) -> None:
    taken[a:b] = b"\x01" * (b - a)


def _url_events(norm: _Norm, taken: bytearray) -> list[_Event]:
    """A GitHub blob/tree URL of a file or directory cites it, at the URL's own revision."""
    events = []
    for m in _URL.finditer(norm.text):
        _take(taken, *m.span())
        gh = _GITHUB.match(m.group().rstrip(".,;:"))
        if gh is None or not (_is_file(gh["path"]) or _is_dir(gh["path"] + "/")):
            continue
        rev = gh["rev"]
        sha, span = None, None
        if _looks_like_sha(rev):
            s = m.start() + gh.start("rev")
            sha, span = rev, _orig_span(norm, s, s + len(rev))
        lines = gh["a"] if gh["b"] is None or gh["a"] is None else f"{gh['a']}-{gh['b']}"
        events.append(_Event(m.start(), gh["path"], lines=lines, sha=sha, span=span, url=True))
    return events


def _path_events(text: str, taken: bytearray) -> list[_Event]:
    events = []
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
        _take(taken, s, e)
        lines, symbol = _suffix(text, end, taken)
        events.append(_Event(s + lead, path, bare="/" not in path, lines=lines, symbol=symbol))
    return events


def _suffix(text: str, end: int, taken: bytearray) -> tuple[str | None, str | None]:
    """(lines, symbol) a path ending at `end` carries: `:12`, `#L3-L9`, `::sym`, `(lines 2-4)`."""
    suffix = _SUFFIX.match(text, end)
    if suffix is None or suffix.end() <= end:
        return None, None
    lines = suffix["l"] or suffix["pl"] or (
        suffix["la"] if suffix["lb"] is None else f"{suffix['la']}-{suffix['lb']}")
    symbol = suffix["sym"] or suffix["psym"]
    stop = suffix.end()
    if suffix["psym"] and _looks_like_sha(suffix["psym"]):
        symbol, stop = None, suffix.start("psym")  # `path (e24d1b24)` cites a SHA
    _take(taken, end, stop)
    return (None if lines is None else "".join(lines.split())), symbol


def _sha_events(norm: _Norm, taken: bytearray, events: list[_Event]) -> list[_Event]:
    text = norm.text
    path_ends = sorted(ev.pos + len(ev.path) for ev in events if ev.path is not None)
    out = []
    for m in _SHA.finditer(text):
        s, e = m.span()
        word = m.group()
        if any(taken[s:e]) or not any(ch.isdigit() for ch in word):
            continue
        if word.isdigit() and not _cued(text, s, path_ends):
            continue
        out.append(_Event(s, sha=word, span=_orig_span(norm, s, e)))
    return out


def _cued(text: str, s: int, path_ends: list[int]) -> bool:
    """All digits (5559679 is a real pin prefix) only counts where something says "SHA":
    a cue word, or a position right after a cited path."""
    if _SHA_CUE.search(text, max(0, s - 40), s) is not None:
        return True
    i = bisect_right(path_ends, s) - 1
    return i >= 0 and text[path_ends[i]: s].strip(" \t(:—–-") == ""


def _original_at(norm: _Norm, path_starts: list[int]) -> int | None:
    """Where the block declares itself original (no upstream mirror), if it does."""
    marker = _ORIGINAL.search(norm.text)
    found = [marker.start()] if marker is not None else []
    lead = _original_lead(norm, path_starts)
    if lead is not None:
        found.append(lead)
    return min(found) if found else None


def _original_lead(norm: _Norm, path_starts: list[int]) -> int | None:
    """The first "Original ..." opening a sentence that names no path: "Original: vllm/x.py"
    names the upstream original, so it declares a port."""
    text = norm.text
    for m in _ORIGINAL_LEAD.finditer(text):
        if not _opens_sentence(norm, m.start()):
            continue
        end = _SENTENCE_END.search(text, m.end())
        k = bisect_left(path_starts, m.start())
        if k < len(path_starts) and path_starts[k] < (end.start() if end else len(text)):
            continue
        return m.start()
    return None


def _opens_sentence(norm: _Norm, pos: int) -> bool:
    text = norm.text
    i = pos
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i == 0 or text[i - 1] in ".!?;:(—-" or pos in norm.paras


@dataclass
class _Draft:
    ev: _Event
    sha: str | None = None
    span: tuple[int, int] | None = None


@dataclass
class _Group:
    """Citations being assembled in text order: a SHA given once covers the paths before it."""

    text: str
    verb_end: int | None
    drafts: list[_Draft] = field(default_factory=list)
    pending: list[_Draft] = field(default_factory=list)  # paths still waiting for a SHA
    seen: set[str] = field(default_factory=set)
    lead: _Event | None = None  # "Ported @ sha from: a, b": a SHA that came first

    def path(self, ev: _Event) -> None:
        if ev.bare and (self.verb_end is None or self.drafts
                        or not _adjacent(self.text, self.verb_end, ev.pos)):
            return
        if ev.lines is None and ev.symbol is None and ev.sha is None and ev.path in self.seen:
            return  # a later mention of a path already cited
        assert ev.path is not None
        self.seen.add(ev.path)
        draft = _Draft(ev, ev.sha, ev.span)
        self.drafts.append(draft)
        if not ev.url:
            self.pending.append(draft)

    def sha(self, ev: _Event) -> None:
        if self.pending:
            for d in self.pending:
                d.sha, d.span = ev.sha, ev.span
            self.pending = []
        elif not self.drafts and self.lead is None:
            self.lead = ev

    def finish(self) -> list[_Draft]:
        if self.lead is not None:
            for d in self.pending:  # only paths that never got a SHA remain pending
                d.sha, d.span = self.lead.sha, self.lead.span
        return self.drafts


def _citations(norm: _Norm, events: list[_Event], start: int, verb_end: int | None,
               line_of: list[int]) -> list[Citation]:
    group = _Group(norm.text, verb_end)
    for ev in events:
        if ev.pos < start:
            continue
        if ev.path is not None:
            group.path(ev)
        elif ev.sha is not None:
            group.sha(ev)
    return [_citation(norm, d, line_of) for d in group.finish()]


def _citation(norm: _Norm, d: _Draft, line_of: list[int]) -> Citation:
    line = bisect_right(line_of, norm.offs[d.ev.pos])
    start, end = d.span if d.span else (None, None)
    return Citation(d.ev.path or "", d.ev.lines, d.ev.symbol, d.sha, start, end, line)


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


@dataclass(frozen=True)
class _Anchor:
    """What a header block declares first: a citing verb (a port) or originality."""

    kind: Kind
    at: int
    verb: str | None
    verb_end: int | None


def _anchor(verb: re.Match[str] | None, original: int | None) -> _Anchor | None:
    if original is not None and (verb is None or original < verb.start()):
        return _Anchor("ORIGINAL", original, None, None)
    if verb is None:
        return None
    return _Anchor("PORTED", verb.start(), " ".join(verb.group().split()), verb.end())


def _header(block: comments.Block, line_of: list[int]) -> Header | None:
    norm = _normalise(block.segs)
    if not norm.text:
        return None
    events = _events(norm)
    anchor = _anchor(_first_citing_verb(norm, events),
                     _original_at(norm, [ev.pos for ev in events if ev.path is not None]))
    if anchor is None:
        return None
    start = max(p for p in norm.paras if p <= anchor.at)
    cites = _citations(norm, events, start, anchor.verb_end, line_of)
    if anchor.kind == "PORTED" and not cites:
        return None
    first = bisect_right(line_of, norm.offs[start])  # the first text line of the header
    return Header(anchor.kind, tuple(cites), anchor.verb, first, block.segs[-1].line)


def parse_header(text: str, path: str = "<text>") -> Header:
    """The file's per-file pin header (kind NONE when it has none). Never raises on any text."""
    line_of: list[int] = []
    lines = comments.lines(text, comments.SCAN_LINES + comments.MAX_BLOCK_LINES, line_of)
    for block in comments.style_for(path).blocks(lines):
        header = _header(block, line_of)
        if header is not None:
            return header
    return NO_HEADER


# -- inline citations -------------------------------------------------------------------------

_NEXT_LINE = re.compile(
    rf"[ \t]*\r?\n[ \t]*(?:{comments.continuation_markers()})?[ \t]*")


@functools.lru_cache(maxsize=16)
def _mirrored_pattern(mirrored: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(p) for p in sorted(set(mirrored), key=len, reverse=True))
    return re.compile(rf"(?:{alt})[\w./-]*", re.A)


def inline_citations(text: str, mirrored: tuple[str, ...] = ("vllm/",)) -> set[str]:
    """Upstream *.py paths under the mirrored subtrees cited anywhere in `text` (wraps joined)."""
    prefixes = tuple(p for p in mirrored if p)
    if not prefixes or not any(p in text for p in prefixes):
        return set()
    found = _mirrored_paths(text, prefixes)
    if "://" in text:
        found |= _github_paths(text, prefixes)
    return found


def _mirrored_paths(text: str, prefixes: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for m in _mirrored_pattern(prefixes).finditer(text):
        s = m.start()
        if s > 0 and (text[s - 1].isalnum() or text[s - 1] in "_./-"):
            continue  # inside a longer path (src/vllm/...) or an identifier
        if m.group() in found:
            continue  # already counted, and a complete path is never joined with the next line
        path = _unwrapped(text, m.group(), m.end()).rstrip(".")
        if path.endswith(".py") and _is_file(path):
            found.add(path)
    return found


def _unwrapped(text: str, word: str, end: int) -> str:
    """`word` (ending at `end`) joined with its continuation over up to three more lines."""
    for _ in range(3):
        nl = _NEXT_LINE.match(text, end)
        head = None if nl is None else _HEAD.match(text, nl.end())
        if head is None or not _path_joins(word, head.group()):
            break
        word, end = word + head.group(), head.end()
    return word


def _github_paths(text: str, prefixes: tuple[str, ...]) -> set[str]:
    found = set()
    for m in _URL.finditer(text):
        gh = _GITHUB.match(m.group().rstrip(".,;:"))
        if gh is not None and gh["path"].startswith(prefixes) and gh["path"].endswith(".py"):
            found.add(gh["path"])
    return found
