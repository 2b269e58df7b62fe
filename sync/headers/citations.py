"""The citation grammar of per-file pin headers: the upstream path(s) and commit a port cites.

Real headers wrap over lines (even mid-path or mid-SHA), use many verbs and
citation shapes, and sometimes sit under a licence block, so line greps
undercount them. The leading comment blocks (`comments` finds them, per comment
style) are therefore normalised first (lines joined, wrapped tokens re-joined)
and matched as one text, keeping a map back to the original offsets so
`bump-headers` can rewrite a SHA in place.

Only a *citation statement* makes per-file pins (DESIGN §3): a porting verb
(`Ported from`, `Mirrors`, `Reimplemented from`, `port of`, `Ports`, ...) and the
paths and SHA that follow it, up to the end of its sentence. Every other path in
the comment is a *mention* (`See include/x.h`, `.agents/specs/x.md`, a path deep
in a list of deviations): kept as a reference, never a pin. A statement may name
the project it cites (`from llama.cpp @`, `@ LMCache 8570aad`): `oracles`
attributes it. A SHA in a header is a claim, not a fact: `verify` checks it.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace
from typing import Literal

from sync.headers import anchors, comments

Kind = Literal["PORTED", "ORIGINAL", "NONE"]
MentionWhy = Literal["prose", "port-local", "record"]
CORE = "vllm"  # the oracle a citation belongs to unless attributed elsewhere


@dataclass(frozen=True)
class Citation:
    path: str  # the path as cited, e.g. vllm/v1/core/sched/scheduler.py
    lines: str | None  # the cited line ranges, comma-joined: "12", "10-20", "1-5,9-12"
    symbol: str | None  # the first of `symbols` (kept for callers that want one)
    sha: str | None  # as written, 7..40 lowercase hex
    sha_start: int | None  # offsets of the SHA in the original text; None when it was split
    sha_end: int | None
    line: int  # 1-based line of the path
    symbols: tuple[str, ...] = ()  # every symbol anchor: `::A`, `(A, B)`, `Class: a / b`
    project: str | None = None  # the project the statement names ("llama.cpp"), as written
    near: str | None = None  # the full path cited before it in its statement (for a relative one)
    oracle: str = CORE  # the oracle it belongs to (`oracles.attribute` sets it)
    upstream: str | None = None  # the path in the oracle's tree, when it differs from `path`

    def __post_init__(self) -> None:
        if not self.symbols and self.symbol:
            object.__setattr__(self, "symbols", (self.symbol,))
        elif self.symbols and self.symbol is None:
            object.__setattr__(self, "symbol", self.symbols[0])

    @property
    def upstream_path(self) -> str:
        """The path to look up in the oracle's tree (after prefix rewrites and resolution)."""
        return self.upstream or self.path


@dataclass(frozen=True)
class Mention:
    """A path a comment names without citing it: a reference, never a per-file pin."""

    path: str
    line: int
    why: MentionWhy = "prose"


@dataclass(frozen=True)
class Header:
    kind: Kind
    citations: tuple[Citation, ...]  # PORTED: the per-file pins; ORIGINAL: the watched paths
    verb: str | None
    start_line: int
    end_line: int
    mentions: tuple[Mention, ...] = ()

    @property
    def shas(self) -> tuple[str, ...]:
        """Distinct SHAs cited, in order of first appearance."""
        return tuple(dict.fromkeys(c.sha for c in self.citations if c.sha is not None))

    @property
    def pins(self) -> tuple[Citation, ...]:
        """The per-file pins: a PORTED header's citations (an original file has none)."""
        return self.citations if self.kind == "PORTED" else ()

    @property
    def watched(self) -> tuple[Citation, ...]:
        """Paths an original file says its semantics mirror: watched, never bumped."""
        return self.citations if self.kind == "ORIGINAL" else ()


NO_HEADER = Header("NONE", (), None, 0, 0)


# -- normalisation ----------------------------------------------------------------------------

_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
_HEAD = re.compile(r"[\w./-]+", re.A)
_HEX = re.compile(r"[0-9a-f]+")
_SHA_CUE = re.compile(
    r"(?:@|`|\b(?:commit|pin|pinned|sha1?|rev|revision|at|upstream|hash))\s*[:=]?\s*`?\s*\Z",
    re.I | re.A,
)
# Files a Hugging Face model id ends in (`zai-org/GLM-4-9B-0414/config.json`): not code.
_HF_FILES = frozenset({"config.json", "tokenizer.json", "tokenizer_config.json",
                       "generation_config.json", "special_tokens_map.json",
                       "preprocessor_config.json"})


@functools.lru_cache(maxsize=4096)
def _is_file(p: str) -> bool:
    """A file path (dir/name.ext, or a bare name.py); linear, no backtracking."""
    parts = p.split("/")
    if any(not part or part in (".", "..") for part in parts):
        return False
    stem, dot, ext = parts[-1].rpartition(".")
    if not dot or not stem.strip(".-") or not ext[:1].isalpha() or not ext.isalnum():
        return False
    if parts[-1] in _HF_FILES and any(any(c.isupper() or c == "-" for c in part)
                                      for part in parts[:-1]):
        return False
    return len(parts) > 1 or ext == "py"


def _is_dir(p: str) -> bool:
    """A directory (`ggml/src/ggml-metal/`): three or more lower-case segments, so that
    slash-separated words (`FP16/BF16/`, `worker/gpu/`, `AttentionBackend/Impl/`) are not."""
    parts = p.split("/")
    return len(parts) > 3 and parts[-1] == "" and all(
        part and part not in (".", "..") and part[0] not in ".-" and part == part.lower()
        for part in parts[:-1])


def _path_joins(t: str, u: str) -> bool:
    """Whether a path wrapped as `t` / `u` over two lines reads as one path."""
    if _is_file(t.rstrip(".")):
        return False
    if u[0] == "." and ("/" in u or not any(ch in t for ch in "/_0123456789")):
        return False  # `See` / `.agents/x.md` are two words, `foo_parser` / `.py` one path
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
    line_starts: frozenset[int]  # indices where a comment line starts (not a joined wrap)


def _normalise(segs: list[comments.Seg]) -> _Norm:
    text = ""
    offs: list[int] = []
    paras = [0]
    starts = {0}
    gap = False
    for seg in segs:
        if not seg.text:
            gap = bool(text)
            continue
        if text:
            if gap or not _joins(text, seg.text):
                text += " "
                offs.append(-1)
                starts.add(len(text))
            if gap:
                paras.append(len(text))
                gap = False
        text += seg.text
        offs.extend(range(seg.start, seg.start + len(seg.text)))
    return _Norm(text, tuple(offs), tuple(paras), frozenset(starts))


def _orig_span(norm: _Norm, s: int, e: int) -> tuple[int, int] | None:
    """The original offsets of norm.text[s:e], or None when it crosses a line join."""
    a, b = norm.offs[s], norm.offs[e - 1]
    if a < 0 or b < 0 or b - a != e - 1 - s:
        return None
    return a, b + 1


# -- events: URLs, paths (with their anchors) and SHAs, in text order ---------------------------

_URL = re.compile(r"(?<![\w+.-])[A-Za-z][\w+.-]{0,15}://[^\s`<>()\[\]\"']+", re.A)
_GITHUB = re.compile(
    r"https?://(?:github\.com/(?P<repo>[\w.-]+/[\w.-]+)/(?:blob|tree)|raw\.githubusercontent\.com/"
    r"(?P<raw>[\w.-]+/[\w.-]+))/(?P<rev>[\w.-]+)/(?P<path>[\w./-]+?)\.?"
    r"(?:#L(?P<a>\d+)(?:-L(?P<b>\d+))?)?\Z",
    re.A,
)
# A maximal run of path characters that holds a `.` or a `/` (a run without either is no
# path: neither a file nor a directory); anchored at the run's start, so it stays linear.
_RUN = re.compile(r"(?<![\w./-])[\w-]*[./][\w./-]*", re.A)
_SYM = re.compile(r"::?(?P<sym>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(\))?", re.A)
_SHA = re.compile(r"(?<![\w./#-])[0-9a-f]{7,40}(?![\w/]|[.-]\w)", re.A)
_SHA_WORD = re.compile(r"[0-9a-f]{7,40}")
# A cue that makes a SHA a revision claim wherever it stands (not "at", which prose uses).
_STRONG_CUE = re.compile(r"(?:@|\b(?:commit|pin|pinned|sha1?|rev|revision))\s*[:=]?\s*[`(]*\s*"
                         r"(?:[A-Za-z][\w.+-]*\s+)?\Z", re.I | re.A)
_NAME = r"[A-Za-z][\w.+-]*(?:/[A-Za-z][\w.+-]*)?"
_NAMED_SHA = re.compile(rf"(?:(?P<before>{_NAME})\s*@\s*(?:pin\s+)?|@\s*(?P<after>{_NAME})\s+)"
                        r"`?\Z", re.A)
_STOP_WORDS = frozenset({
    "the", "a", "an", "our", "this", "that", "these", "its", "their", "upstream", "local",
    "fork", "installed", "pinned", "pin", "commit", "and", "from", "of", "in", "at", "see",
    "revision", "rev", "sha", "head", "tip", "target", "vllm.cpp", "here", "it"})
_CORE_NAMES = frozenset({"vllm", "vllm-project/vllm", "upstream"})


@dataclass(frozen=True)
class _Event:
    pos: int
    end: int
    path: str | None = None  # set for a path event
    ranges: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    sha: str | None = None  # a SHA event, or a URL's own revision
    span: tuple[int, int] | None = None  # the SHA's original offsets
    url: bool = False  # a URL names its own revision: a group SHA never applies to it
    project: str | None = None  # a URL's owner/repo; a SHA's `X @ sha` / `@ X sha`
    cued: bool = False  # a SHA after `@`, "commit", "pin": a revision claim on its own
    after: anchors.Anchor | None = None  # a SHA's trailing anchors: `@ sha (A + B)`

    @property
    def bare(self) -> bool:
        return self.path is not None and "/" not in self.path


def _looks_like_sha(word: str) -> bool:
    return _SHA_WORD.fullmatch(word) is not None and any(ch.isdigit() for ch in word)


def _project(name: str | None) -> str | None:
    """A project name as a statement writes it, or None (not a name, or vLLM itself)."""
    if not name:
        return None
    name = name.removesuffix("'s").rstrip(".,:;")
    if (not name or name.lower() in _STOP_WORDS or _is_file(name) or _looks_like_sha(name)
            or name.lower() in _CORE_NAMES):
        return None
    if name.isupper() and name.isalpha():
        return None  # `Ports ALL 49 cases`: an emphasised word
    shaped = any(ch in name for ch in "./-") or any(ch.isupper() for ch in name[1:])
    return name if shaped or name[:1].isupper() else None


def _events(norm: _Norm) -> list[_Event]:
    """URLs, then paths (with their anchors), then SHAs, in text order.

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
        repo = gh["repo"] or gh["raw"]
        events.append(_Event(m.start(), m.end(), gh["path"], ranges=(lines,) if lines else (),
                             sha=sha, span=span, url=True,
                             project=None if repo.lower() in _CORE_NAMES else repo))
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
        listed = _brace_list(text, path, end)
        if listed:  # `policies/{base,lru,arc}.py`: one citation per file
            _take(taken, end, listed[0])
            events += [_Event(s + lead, listed[0], f) for f in listed[1]]
            continue
        anchor = _suffix(text, end)
        _take(taken, end, max(end, anchor.end))
        events.append(_Event(s + lead, max(end, anchor.end), path, anchor.ranges, anchor.symbols))
    return events


def _brace_list(text: str, folder: str, end: int) -> tuple[int, list[str]] | None:
    """(where it ends, the paths) of a brace list right after `folder`, when every path it
    makes is a file or a folder."""
    brace = _BRACE.match(text, end) if folder.endswith("/") else None
    if brace is None:
        return None
    paths = [f"{folder}{name.strip()}{brace['tail'] or ''}" for name in brace["names"].split(",")]
    return (brace.end(), paths) if all(_is_file(p) or _is_dir(p) for p in paths) else None


# A folder's files listed in braces after it: `cpu/policies/{base,lru,arc}.py`, and
# `openai/{engine,completion}/protocol.py` (the list names folders of the same file).
_BRACE = re.compile(r"\{(?P<names>[\w./-]+(?:,\s?[\w./-]+)+)\}"
                    r"(?P<tail>\.[A-Za-z]\w*|/[\w./-]*\w)?", re.A)


# After a path's first anchor, more of the same file: `, :142-154 (sym)`, `+ :624-874`,
# `, ::other`, `, (Other)`. Only an anchor's own syntax follows the separator.
_MORE = re.compile(r"\s*(?:,|\+|&|\band\b)\s*(?=::[A-Za-z_]|:\d|\()", re.A)
# An anchor wrapped onto the next comment line: `deepseek_v2.py` / `:952-1075 ...`.
_WRAPPED = re.compile(r"\s+(?=:\d)", re.A)
_MAX_MORE = 32


def _suffix(text: str, end: int) -> anchors.Anchor:
    """The anchors a path ending at `end` carries: `:12`, `:1-5,9`, `#L3-L9`, `::sym`,
    `(Sym, ...)`, `` `Sym` ``, in that order; then each further anchor of the same file that a
    `,` or `+` joins on (`:61-122 (a), :142-154 (b)`)."""
    wrapped = _WRAPPED.match(text, end)
    first = _one_suffix(text, wrapped.end() if wrapped else end)
    if not first:
        return anchors.Anchor((), (), end)
    symbols, ranges, pos = first.symbols, first.ranges, first.end
    for _ in range(_MAX_MORE):
        more = _more(text, pos)
        if more is None:
            break
        symbols, ranges, pos = symbols + more.symbols, ranges + more.ranges, more.end
    return anchors.Anchor(symbols, ranges, pos)


def _more(text: str, pos: int) -> anchors.Anchor | None:
    """The next anchor group of the same file at `pos`, if a separator joins one on; a
    parenthetical of prose may stand between (`` `MLAAttention.forward` (the update
    ORDER) + :624-874 ``), and then only a line range or `::sym` continues."""
    sep = _MORE.match(text, pos)
    if sep is None:
        aside = anchors.prose_paren_end(text, pos)
        sep = _MORE.match(text, aside) if aside is not None else None
        if sep is None or text.startswith("(", sep.end()):
            return None
    more = _one_suffix(text, sep.end())
    return more if more else None


def _one_suffix(text: str, end: int) -> anchors.Anchor:
    """One anchor group at `end`: ranges, then `::sym` (and its ranges), then a
    parenthetical or a backticked symbol."""
    ranges: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    pos = end
    got = anchors.ranges_at(text, pos)
    if got is not None:
        ranges, pos = got.ranges, got.end
    sym = _SYM.match(text, pos)
    if sym is not None and not _looks_like_sha(sym["sym"]):
        symbols, pos = (sym["sym"],), sym.end()
        more = anchors.ranges_at(text, pos)
        if more is not None:
            ranges, pos = ranges + more.ranges, more.end
    for reader in (anchors.paren, anchors.backtick):
        extra = reader(text, pos)
        if extra is not None:
            symbols, ranges, pos = symbols + extra.symbols, ranges + extra.ranges, extra.end
            break
    return anchors.Anchor(symbols, ranges, pos)


def _sha_events(norm: _Norm, taken: bytearray, events: list[_Event]) -> list[_Event]:
    text = norm.text
    path_ends = sorted(ev.end for ev in events if ev.path is not None)
    out = []
    for m in _SHA.finditer(text):
        s, e = m.span()
        word = m.group()
        if any(taken[s:e]) or not any(ch.isdigit() for ch in word):
            continue
        if word.isdigit() and not _cued(text, s, path_ends):
            continue
        begin = max(0, s - 60)
        window = text[begin:s]
        named = _NAMED_SHA.search(window)
        project = None
        if named is not None:
            key = "before" if named["before"] else "after"
            if not taken[begin + named.start(key)]:  # `x.py::Sym @ sha`: Sym is no project
                project = _project(named[key])
        after = anchors.paren(text, e) or anchors.dash_list(text, e)
        out.append(_Event(s, e, sha=word, span=_orig_span(norm, s, e), project=project,
                          cued=_STRONG_CUE.search(window) is not None, after=after))
    return out


def _cued(text: str, s: int, path_ends: list[int]) -> bool:
    """All digits (5559679 is a real pin prefix) only counts where something says "SHA":
    a cue word, or a position right after a cited path."""
    if _SHA_CUE.search(text, max(0, s - 40), s) is not None:
        return True
    i = bisect_right(path_ends, s) - 1
    return i >= 0 and text[path_ends[i]: s].strip(" \t(:—–-") == ""


# -- statements -------------------------------------------------------------------------------

_VERB = re.compile(
    r"""(?<![\w-])
    (?: ported(?:\s+[\w:-]+)?\s+(?:from|of)(?![\w-]) | ported\s+oracle(?=\s*:)
      | port\s+of | ports(?=\s) | port(?=\s*\() | mirrors | mirror\s+of
      | mirror(?=\s+[\w.+/-]+\s+@) | mirrored\s+(?:1:1\s+)?(?:from|after)
      | re-?implement(?:ed|ation)\s+(?:from|of|after) | adapted\s+from | derived\s+from
      | translated\s+from | converted\s+from | based\s+on | grounded\s+in
      | upstream(?:\s+(?:source|file|path|reference|test\s+mirrored))?(?=\s*:)
      | grounding(?=\s*:) | semantics(?=\s*:) | original(?=\s*:) )
    (?:\s+the\s+(?:[\w-]+\s+){0,4}?of(?![\w-]))?""",
    re.I | re.X | re.A,
)
_ORIGINAL = re.compile(
    r"""\bno\s+(?:direct\s+|1:1\s+)?(?:upstream|vllm)\b
      | \bwithout\s+(?:an?\s+)?upstream\s+(?:mirror|counterpart|equivalent|source)\b
      | \bnot\s+(?:a\s+)?(?:1:1\s+)?(?:upstream\s+)?(?:port(?:ed)?|mirror(?:ed)?)\b
      | \bport[-\s]original\b | \bvllm\.cpp\s+original\b | \bnewly\s+authored\b
      | \boriginal\s+(?:to|for)\s+(?:this|the)\s+port\b | \bvllm\s+has\s+no\b""",
    re.I | re.X | re.A,
)
_ORIGINAL_WORD = re.compile(r"\bORIGINAL\b")  # the port writes its declarations in capitals
_ORIGINAL_LEAD = re.compile(r"original\b", re.I)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|\Z)")
_ABBREV = re.compile(r"(?:\be\.g|\bi\.e|\betc|\bvs|\bcf|\bapprox|\bincl|\bNo)\.\Z", re.I)
_SEE = re.compile(r"\b(?:see|cf\.)\s", re.I)
_RELATIVE = re.compile(r"(?:whose|which|where)\b", re.I)
_NEGATED = re.compile(r"\b(?:not|never|no)\s+(?:an?\s+|the\s+)?\Z", re.I)
# A comment line that opens new prose: a capitalised word (`See`, `The`) or a heading in
# capitals (`DEVIATIONS, recorded:`), not an identifier (`DeepseekV2Params <- ...`).
_PROSE_LINE = re.compile(r"(?:[A-Z][a-z]+|[A-Z]{2,})(?=[\s,:]|\.\s|\Z)(?!\s*<-)", re.A)
_VERB_PROJECT = re.compile(
    rf"\s*[:(]?\s*(?:the\s+)?(?:installed\s+|pinned\s+)?(?P<name>{_NAME})"
    r"(?=\s*@|\s*\(local|'s|\s*`[\w.-]+/|\s+[\w.-]+/|\s+v?\d)", re.A)


def _verb_project(text: str, body: int) -> str | None:
    """`Ported from llama.cpp (local fork) ...`, `mirror of llama.cpp's ...`: the project
    named right after the verb. A possessive names a project only in a project's shape
    (`QKVParallelLinear's loader` is a class of the cited file)."""
    m = _VERB_PROJECT.match(text, body)
    if m is None:
        return None
    name = m["name"]
    if text.startswith("'s", m.end()) and not any(ch in name for ch in "./-"):
        return None
    return _project(name)


@dataclass(frozen=True)
class _Statement:
    start: int  # the verb
    body: int  # just after the verb
    end: int
    verb: str
    project: str | None


@dataclass
class _Scan:
    """Where a statement's end is being looked for."""

    norm: _Norm
    paths: dict[int, _Event]  # path events by start
    depth: int = 0
    seen_path: bool = False


# A verb line that is a heading, its paths in the paragraph after it: `... PORT OF (@ pin
# x) ───────` over a blank comment line and an `OURS <- UPSTREAM` table.
_RULE_END = re.compile(r"(?:[─━═]{3,}|-{3,}|={3,})\s*\Z")


def _opens(before: str) -> bool:
    """Whether the text before a paragraph break ends a verb line that opens a list."""
    tail = before.rstrip()
    return tail.endswith(":") or _RULE_END.search(tail[-80:]) is not None


def _statement_end(norm: _Norm, body: int, paths: dict[int, _Event]) -> int:
    """Where the statement whose verb ends at `body` ends: its sentence's end, a paragraph
    break, a `see`, a closing parenthesis it opened in, or a new prose line after a path."""
    s = _Scan(norm, paths)
    text = norm.text
    i = body
    while i < len(text):
        ev = paths.get(i)
        if ev is not None:
            s.seen_path, i = True, ev.end
            continue
        stop = _stops(s, i, body)
        if stop:
            return i
        i += 1
    return len(text)


def _stops(s: _Scan, i: int, body: int) -> bool:
    text = s.norm.text
    if i > body and i in s.norm.paras and (s.seen_path or not _opens(text[:i])):
        return True
    if i > body and s.seen_path and i in s.norm.line_starts and _PROSE_LINE.match(text, i):
        return True
    ch = text[i]
    if ch == "(":
        s.depth += 1
    elif ch == ")":
        if s.depth == 0:
            # `UPSTREAM (ported FROM, ...):` is a label: the paths come after it.
            return s.seen_path or not text[i + 1: i + 3].lstrip().startswith(":")
        s.depth -= 1
    elif s.depth == 0 and _SENTENCE_END.match(text, i):
        return ch != "." or _ABBREV.search(text, max(0, i - 8), i + 1) is None
    if i > 0 and text[i - 1].isalnum():
        return False  # inside a word
    return _describes(s, i) or (ch in "sScC" and _SEE.match(text, i) is not None)


def _describes(s: _Scan, i: int) -> bool:
    """`Ported from: x.py @ sha, whose parser is ... (y.py)`, `x.py (which drives y.py)`:
    what follows describes the cited file; the paths it names are mentions."""
    text = s.norm.text
    return (text[i] in "wW" and s.seen_path and (s.depth == 0 or text[i - 1] == "(")
            and _RELATIVE.match(text, i) is not None)


def _statements(norm: _Norm, events: list[_Event]) -> list[_Statement]:
    paths = {ev.pos: ev for ev in events if ev.path is not None and not ev.url}
    out: list[_Statement] = []
    end = -1
    for m in _VERB.finditer(norm.text):
        if m.start() < end:
            continue  # a verb inside a statement belongs to it
        if _NEGATED.search(norm.text[max(0, m.start() - 16): m.start()]):
            continue  # `This is NOT a port of that engine: ...` cites nothing
        e = _statement_end(norm, m.end(), paths)
        project = _verb_project(norm.text, m.end())
        out.append(_Statement(m.start(), m.end(), e, " ".join(m.group().split()), project))
        end = e
    return out


# -- citations from statements ------------------------------------------------------------------


@dataclass
class _Draft:
    ev: _Event
    stmt: _Statement
    near: str | None = None
    ranges: list[str] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    sha_ev: _Event | None = None

    def anchor(self, symbols: tuple[str, ...], ranges: tuple[str, ...]) -> None:
        self.symbols += [s for s in symbols if s not in self.symbols]
        self.ranges += [r for r in ranges if r not in self.ranges]


@dataclass
class _Group:
    """One statement's citations, in text order: a SHA given once covers the paths before it,
    a SHA before every path covers those after it, and paths after the last SHA share it."""

    stmt: _Statement
    drafts: list[_Draft] = field(default_factory=list)
    pending: list[_Draft] = field(default_factory=list)  # paths still waiting for a SHA
    stmt_text: str = ""
    names: frozenset[str] = frozenset()  # bare names a later statement may still cite
    lead: _Event | None = None
    last: _Event | None = None
    prev_end: int = 0  # where the last path or SHA of the statement ended
    prev_end_before: int = 0

    def path(self, ev: _Event) -> None:
        assert ev.path is not None
        prev, self.prev_end = self.prev_end, ev.end
        self.prev_end_before = prev
        base = self._same(ev.path)
        if base is not None:
            base.anchor(ev.symbols, ev.ranges)  # `basename.py:A-B` after the full path
            return
        if ev.bare and not self.drafts and not _adjacent_after_verb(ev, self.stmt):
            return
        if ev.bare and ev.path not in self.names:
            return  # `(mirrors core.py:497)` deep in a header that cites no such file
        if ev.bare and self.drafts and not _listed(self.stmt_text, self.prev_end_before,
                                                    ev.pos):
            return  # a bare name in the statement's prose is no citation
        near = next((d.ev.path for d in self.drafts if not d.ev.bare), None)
        draft = _Draft(ev, self.stmt, near)
        draft.anchor(ev.symbols, ev.ranges)
        self.drafts.append(draft)
        if ev.url:
            draft.sha_ev = ev if ev.sha else None
        else:
            self.pending.append(draft)

    def _same(self, path: str) -> _Draft | None:
        for d in self.drafts:
            p = d.ev.path or ""
            if p == path or ("/" not in path and p.rsplit("/", 1)[-1] == path):
                return d
        return None

    def sha(self, ev: _Event) -> None:
        self.prev_end = ev.end if ev.after is None else ev.after.end
        if self.pending:
            for d in self.pending:
                d.sha_ev = ev
            self.pending = []
            self.last = ev
        elif not self.drafts and self.lead is None:
            self.lead = ev
        elif self.drafts:
            self.last = ev
        if ev.after and self.drafts:
            target = next((d for d in reversed(self.drafts) if d.sha_ev is ev), self.drafts[-1])
            target.anchor(ev.after.symbols, ev.after.ranges)

    def finish(self) -> list[_Draft]:
        fill = self.lead or self.last
        for d in self.pending:  # only paths that never got a SHA remain pending
            d.sha_ev = fill
        return self.drafts


def _adjacent_after_verb(ev: _Event, stmt: _Statement) -> bool:
    return stmt.body <= ev.pos and ev.pos - stmt.body <= 4


_LIST_SEP = re.compile(r"[\s()`*:-]*(?:[+,&]|\band\b|\s-\s|^\s*-)?[\s()`*:-]*\Z", re.A)


def _listed(text: str, a: int, b: int) -> bool:
    """Whether only a list separator (`+`, `,`, `and`, a bullet) stands between a..b."""
    return _LIST_SEP.match(text[a:b]) is not None


def _lead_sha(norm: _Norm, events: list[_Event], stmt: _Statement) -> _Event | None:
    """`At commit e24d1b24, ported from: ...`: a SHA earlier in the verb's sentence."""
    text = norm.text
    begin = max(0, stmt.start - 80)
    for m in _SENTENCE_END.finditer(text, begin, stmt.start):
        begin = m.end()
    para = max(p for p in norm.paras if p <= stmt.start)
    begin = max(begin, para)
    found = [ev for ev in events if ev.sha is not None and not ev.url
             and begin <= ev.pos < stmt.start]
    return found[-1] if found else None


def _grouped(norm: _Norm, events: list[_Event], stmts: list[_Statement]) -> list[_Draft]:
    """Each statement's citations. A bare `name.py` cites a file only in the header's first
    citing statement, or when it names a file the header cites in full elsewhere."""
    full = frozenset(ev.path.rsplit("/", 1)[-1] for ev in events
                     if ev.path is not None and not ev.bare)
    drafts: list[_Draft] = []
    k = 0
    for stmt in stmts:
        first = not drafts
        names = frozenset(ev.path for ev in events if ev.bare and ev.path) if first else full
        group = _Group(stmt, stmt_text=norm.text, names=names, prev_end=stmt.body)
        lead = _lead_sha(norm, events, stmt)
        if lead is not None:
            group.sha(lead)
        while k < len(events) and events[k].pos < stmt.body:
            k += 1
        j = k
        while j < len(events) and events[j].pos < stmt.end:
            ev = events[j]
            if ev.path is not None:
                group.path(ev)
            elif ev.sha is not None:
                group.sha(ev)
            j += 1
        drafts += group.finish()
    return drafts


def _stray_sha(events: list[_Event], stmts: list[_Statement]) -> _Event | None:
    """The one revision the header states outside its statements (`Upstream commit: X`,
    `at executable-oracle commit X`), for statements that give none; None when several."""
    def inside(ev: _Event) -> bool:
        return any(s.start <= ev.pos < s.end for s in stmts)
    stray = [ev for ev in events if ev.sha is not None and ev.cued and not ev.url
             and not inside(ev)]
    distinct = {ev.sha for ev in stray}
    return stray[0] if len(distinct) == 1 else None


def _merged(cites: list[Citation]) -> list[Citation]:
    """`core.py:479-508` in a header that cites `vllm/v1/engine/core.py`: the same file, so its
    anchors join that citation."""
    full = {c.path.rsplit("/", 1)[-1]: i for i, c in reversed(list(enumerate(cites)))
            if "/" in c.path}
    out = list(cites)
    drop: set[int] = set()
    for i, c in enumerate(cites):
        j = full.get(c.path) if "/" not in c.path else None
        if j is None:
            continue
        into = out[j]
        symbols = tuple(dict.fromkeys(into.symbols + c.symbols))
        ranges = ",".join(dict.fromkeys(x for x in (into.lines, c.lines) if x)) or None
        out[j] = replace(into, symbols=symbols, symbol=symbols[0] if symbols else None,
                         lines=ranges)
        drop.add(i)
    return [c for i, c in enumerate(out) if i not in drop]


def _filled(cites: list[Citation]) -> list[Citation]:
    """A header that gives one revision for its citations (`Ported from: a.py @ X` and, lines
    later, `UPSTREAM CHAIN (ported FROM ...): b.py, c.py`) gives it to those that name none."""
    given = [c for c in cites if c.sha]
    if not given:
        return cites
    donor = given[0]
    assert donor.sha is not None
    same = all((c.sha or "").startswith(donor.sha) or donor.sha.startswith(c.sha or "")
               for c in given)
    if not same or len({c.project for c in given}) != 1:
        return cites
    return [c if c.sha or c.project not in (None, donor.project) else
            replace(c, sha=donor.sha, sha_start=donor.sha_start, sha_end=donor.sha_end,
                    project=donor.project) for c in cites]


def _citation(norm: _Norm, d: _Draft, line_of: list[int]) -> Citation:
    line = bisect_right(line_of, norm.offs[d.ev.pos])
    sha_ev = d.sha_ev
    span = sha_ev.span if sha_ev is not None else None
    start, end = span if span else (None, None)
    symbols = tuple(d.symbols)
    project = d.ev.project if d.ev.url else (
        (sha_ev.project if sha_ev is not None else None) or d.stmt.project)
    return Citation(d.ev.path or "", ",".join(d.ranges) or None,
                    symbols[0] if symbols else None, sha_ev.sha if sha_ev else None,
                    start, end, line, symbols, project, d.near)


# -- the header ---------------------------------------------------------------------------------


def _original_at(norm: _Norm, path_starts: list[int]) -> int | None:
    """Where the block declares itself original (no upstream mirror), if it does."""
    found = [m.start() for m in (_ORIGINAL.search(norm.text), _ORIGINAL_WORD.search(norm.text))
             if m is not None]
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


@dataclass(frozen=True)
class _Read:
    """What one comment block says: its citing statements and the citations they make."""

    norm: _Norm
    events: list[_Event]
    stmts: list[_Statement]  # statements that cite at least one path
    drafts: list[_Draft]


def _read(block: comments.Block) -> _Read | None:
    norm = _normalise(block.segs)
    if not norm.text:
        return None
    events = _events(norm)
    stmts = _statements(norm, events)
    drafts = _grouped(norm, events, stmts)
    citing = {id(d.stmt) for d in drafts}
    return _Read(norm, events, [s for s in stmts if id(s) in citing], drafts)


def _kind(r: _Read) -> tuple[Kind, int] | None:
    """(PORTED or ORIGINAL, where the header's anchor is), or None: no header here."""
    first = r.stmts[0].start if r.stmts else None
    original = _original_at(r.norm, [ev.pos for ev in r.events if ev.path is not None])
    if original is not None and (first is None or original < first):
        return "ORIGINAL", original
    if first is None:
        return None
    return "PORTED", first


def _header(block: comments.Block, line_of: list[int]) -> Header | None:
    r = _read(block)
    if r is None:
        return None
    kind = _kind(r)
    if kind is None:
        return None
    start = max(p for p in r.norm.paras if p <= kind[1])
    cites = _filled(_merged([_citation(r.norm, d, line_of) for d in r.drafts
                             if d.ev.pos >= start]))
    if kind[0] == "PORTED":
        stray = _stray_sha(r.events, r.stmts)
        if stray is not None:
            a, b = stray.span if stray.span else (None, None)
            cites = [c if c.sha else replace(c, sha=stray.sha, sha_start=a, sha_end=b)
                     for c in cites]
    verb = r.stmts[0].verb if kind[0] == "PORTED" and r.stmts else None
    first = bisect_right(line_of, r.norm.offs[start])  # the first text line of the header
    return Header(kind[0], tuple(cites), verb, first, block.segs[-1].line,
                  _mentions(r, start, line_of))


def _mentions(r: _Read, start: int, line_of: list[int]) -> tuple[Mention, ...]:
    """Every path of the header's text that no statement cites (bare names are not paths)."""
    cited = {d.ev.path for d in r.drafts}
    inside = [(s.body, s.end) for s in r.stmts]
    out: dict[str, Mention] = {}
    for ev in r.events:
        if (ev.path is None or ev.pos < start or ev.bare or ev.path in cited
                or any(a <= ev.pos < b for a, b in inside)):
            continue
        out.setdefault(ev.path, Mention(ev.path, bisect_right(line_of, r.norm.offs[ev.pos])))
    return tuple(out.values())


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
_LOOKBACK = 240  # how far before an inline path its citing verb may stand
# A comment line's marker: a body citation's anchors may go on after it.
_MARKER = re.compile(rf"[ \t]*(?:{comments.continuation_markers()})[ \t]*")
_TAIL = 400  # how much after a body citation's path its anchors may take


def _comment_tail(text: str, end: int) -> str:
    """What follows a path in a file's body, the next lines of its comment joined as a
    header's are (`...protocol.py:165` / `// (ChatCompletionToolsParam).`), up to a line
    that is not a comment."""
    first, *rest = text[end: end + _TAIL].split("\n")
    out = [first.rstrip("\r")]
    for line in rest:
        m = _MARKER.match(line)
        if m is None or m.end() == 0:
            break
        out.append(line[m.end():].rstrip("\r"))
    return " ".join(out)


@functools.lru_cache(maxsize=16)
def _mirrored_pattern(mirrored: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(p) for p in sorted(set(mirrored), key=len, reverse=True))
    return re.compile(rf"(?:{alt})[\w./-]*", re.A)


@dataclass(frozen=True)
class Inline:
    """Upstream paths a file names anywhere: cited by a statement, or only mentioned."""

    cited: frozenset[str]
    mentioned: frozenset[str]
    # Each citing statement that anchors its path, as (path, offset of the path, anchors):
    # `// Ported from: .../protocol.py:165 (ChatCompletionToolsParam)` over a struct.
    anchored: tuple[tuple[str, int, anchors.Anchor], ...] = ()


def inline_paths(text: str, mirrored: tuple[str, ...] = ("vllm/",)) -> Inline:
    """Upstream *.py paths under the mirrored subtrees named anywhere in `text` (wraps
    joined): a path a porting verb cites in the same sentence is cited, any other mentioned."""
    prefixes = tuple(p for p in mirrored if p)
    if not prefixes or not any(p in text for p in prefixes):
        return Inline(frozenset(), frozenset())
    cited: set[str] = set()
    mentioned: set[str] = set()
    found = _mirrored_paths(text, prefixes)
    if "://" in text:
        found += _github_paths(text, prefixes)
    anchored: list[tuple[str, int, anchors.Anchor]] = []
    for path, start in found:
        if not _verb_before(text, start):
            mentioned.add(path)
            continue
        cited.add(path)
        if text.startswith(path, start):  # a path wrapped over lines carries none here
            got = _suffix(_comment_tail(text, start + len(path)), 0)
            if got:
                anchored.append((path, start, got))
    return Inline(frozenset(cited), frozenset(mentioned - cited), tuple(anchored))


def inline_citations(text: str, mirrored: tuple[str, ...] = ("vllm/",)) -> set[str]:
    """The inline paths a citation statement cites (see `inline_paths`)."""
    return set(inline_paths(text, mirrored).cited)


_COMMENT_OPEN = re.compile(r"//+!?|/\*+|#+|\*+(?!/)")


def _comment_run(text: str, start: int) -> str:
    """The comment text before `start` that belongs to its comment: the part of its own line
    after the marker, then whole comment lines above it, up to a code line or a `/*`."""
    begin = max(0, start - _LOOKBACK)
    lines = text[begin:start].split("\n")
    out: list[str] = []
    for i, raw in enumerate(reversed(lines)):
        m = _COMMENT_OPEN.search(raw)
        if m is None:
            break  # a code line (or text outside any comment)
        own = i == 0
        if not own and raw[: m.start()].strip():
            out.append(raw[m.end():])
            break  # a comment after code on the line above: its sentence, but no further
        out.append(raw[m.end():])
        if m.group().startswith("/*") or (own and raw[: m.start()].strip()):
            break
    return " ".join(" ".join(reversed(out)).split()) + " "


def _verb_before(text: str, start: int) -> bool:
    """Whether a porting verb opens the comment sentence `start` stands in."""
    window = _comment_run(text, start)
    cut = 0
    for m in _SENTENCE_END.finditer(window):
        cut = m.end()
    for m in _SEE.finditer(window):
        cut = max(cut, m.end())
    return _VERB.search(window, cut) is not None


def _mirrored_paths(text: str, prefixes: tuple[str, ...]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    seen: set[str] = set()
    for m in _mirrored_pattern(prefixes).finditer(text):
        s = m.start()
        if s > 0 and (text[s - 1].isalnum() or text[s - 1] in "_./-"):
            continue  # inside a longer path (src/vllm/...) or an identifier
        path = m.group() if m.group() in seen else _unwrapped(text, m.group(), m.end())
        path = path.rstrip(".")
        if path.endswith(".py") and _is_file(path):
            seen.add(path)
            found.append((path, s))
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


def _github_paths(text: str, prefixes: tuple[str, ...]) -> list[tuple[str, int]]:
    found = []
    for m in _URL.finditer(text):
        gh = _GITHUB.match(m.group().rstrip(".,;:"))
        if gh is not None and gh["path"].startswith(prefixes) and gh["path"].endswith(".py"):
            found.append((gh["path"], m.start()))
    return found
