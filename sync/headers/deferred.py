"""What a port file says it has not ported: its DEFERRED / "not ported" comment paragraphs.

The words of those paragraphs are the deferred-feature vocabulary of that file (the
classifier checks whether a changed upstream line sits under an `if` that names one
of them). A word counts only when the file never uses it outside those paragraphs:
a word the file also uses for what it does port (`cache`, `block`) says nothing about
a feature being absent.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import string
from dataclasses import dataclass

_MARK = re.compile(
    r"\b(?:deferred|not\s+(?:yet\s+)?ported|omitted|does\s+not\s+exist\s+in\s+this\s+tree"
    r"|not\s+implemented\s+here|no\s+c\+\+\s+(?:runtime\s+)?analogue)\b", re.I)
# Every marker contains one of these (lower-cased): a plain substring test rules out most
# files far faster than the case-insensitive regex, which tries each position.
_HINTS = ("deferred", "ported", "omitted", "exist", "implemented", "analogue")
_C_COMMENT = re.compile(r"\s*(?://+|/?\*+)(?P<text>.*?)(?:\*/)?\s*\Z")
_HASH_COMMENT = re.compile(r"\s*#+(?P<text>.*?)\s*\Z")
_HASH_SUFFIXES = (".py", ".pyi", ".sh", ".toml", ".cmake", ".txt", ".yml", ".yaml")
_RULE = re.compile(r"[─═=\-]{4,}")  # a `// ─── HEADING ───` line opens a new section
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_SPLIT = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
PARAGRAPH_LINES = 8
LEAD_LINES = 2  # lines of the same sentence before the marker (`needs the DSA indexer ... which
# does not exist in this tree`)
MIN_WORD = 4
# English and code words that name no feature.
_STOP_WORDS = """
about above after again against also always another because been before being below
between both call calls called cannot case code could data does done each either else
every exactly file files first from have here however into just keep kept later like
line lines made make marked more most must need needs never none note only other ours
over path port ported porting same shape should since slot some still stub stubs such
than that their them then there these they this those through under until upon upstream
used uses using very want were what when where which while will with without would
yet your deferred omitted omission omissions true false self none return value values
note notes exist exists tree here only not_ported interface reshaping additionally
"""
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Deferred:
    line: int  # 1-based line of the paragraph's marker
    text: str  # the marker line's comment text
    words: frozenset[str]  # the feature words it names (see the module docstring)


def _words(text: str) -> set[str]:
    """Each token, its camel-case parts and its `_` parts, lower-cased.

    Worked out on the tokens joined by spaces, not token by token: no part crosses a space
    (`_SPLIT`'s look-ahead sees the space as it would the token's end), and tokens are
    ASCII, so lowering the joined text lowers each."""
    joined = " ".join(set(_TOKEN.findall(text)))
    low = joined.lower()
    out = set(low.split(" "))
    out.update(low.replace("_", " ").split())
    out.update(" ".join(_SPLIT.findall(joined)).lower().split(" "))
    return {w for w in out if len(w) >= MIN_WORD and w not in _STOP and not w.isdigit()}


def _may_mark(low: str) -> bool:
    """Whether the lower-cased text holds a hint of a marker."""
    return any(h in low for h in _HINTS)


def _comment(line: str, pattern: re.Pattern[str]) -> str | None:
    m = pattern.match(line)
    return None if m is None else m.group("text").strip()


# Line breaks other than \n (and the \r of \r\n) that `str.splitlines` also splits at.
_OTHER_BREAKS = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BREAK_CHARS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _plain(text: str) -> bool:
    """Whether `\n` is the text's only line break (\r\n included). A substring test per
    character is far faster than the regex, which tries every position."""
    if any(c in text for c in _BREAK_CHARS):
        return False
    return "\r" not in text or _OTHER_BREAKS.search(text) is None


def _finds(text: str, needle: str) -> list[int]:
    """Every offset of `needle` in `text`."""
    out, at = [], text.find(needle)
    while at >= 0:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


class _Comments:
    """Each line's comment text (None for a line that is not a comment), read on demand:
    only the lines around a marker are ever looked at. Lines are `str.splitlines`'s."""

    def __init__(self, text: str, path: str, low: str) -> None:
        self.plain = _plain(text)
        self.text = text
        self.low = low  # text.lower(), computed once
        self.pattern = _HASH_COMMENT if path.lower().endswith(_HASH_SUFFIXES) else _C_COMMENT
        self.memo: dict[int, str | None] = {}

    @functools.cached_property
    def raw(self) -> list[str]:
        """The lines, split only once a marker was found (most files with a hint have none:
        `Ported from` is in every header)."""
        # split("\n") is several times faster; it agrees with splitlines but for rare breaks.
        raw = self.text.split("\n") if self.plain else self.text.splitlines()
        if self.plain and raw and not raw[-1]:
            raw.pop()  # a final newline ends the last line, it starts no new one
        return raw

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> str | None:
        if i not in self.memo:
            self.memo[i] = _comment(self.raw[i], self.pattern)
        return self.memo[i]

    def marked(self) -> list[int]:
        """0-based lines holding a marker: one regex pass over the whole text (C speed)."""
        low = self.low
        # The hints' offsets in the lower-cased text are the text's own only when lowering
        # changed no length ('İ' becomes two characters); else the plain regex pass.
        if not self.plain or len(low) != len(self.text):
            kept = self.text.splitlines(keepends=True)
            starts = list(itertools.accumulate((len(s) for s in kept), initial=0))
            return sorted({bisect.bisect_right(starts, m.start()) - 1
                           for m in _MARK.finditer(self.text)})
        starts = sorted({low.rfind("\n", 0, at) + 1 for h in _HINTS for at in _finds(low, h)})
        out: list[int] = []
        pos = line = 0
        for start in starts:
            line += self.text.count("\n", pos, start)
            pos = start
            end = self.text.find("\n", start)
            if _MARK.search(self.text, start, len(self.text) if end < 0 else end) is not None:
                out.append(line)
        return out

    def outside(self, spans: list[tuple[int, int]]) -> str:
        """The text of every line but those of `spans` (1-based, end excluded; sorted),
        joined by spaces."""
        kept, at = [], 0
        for start, end in spans:
            kept.append(self.raw[at:max(at, start - 1)])
            at = max(at, end - 1)
        kept.append(self.raw[at:])
        return " ".join(itertools.chain.from_iterable(kept))


def _lead(comments: _Comments, i: int) -> list[str]:
    """The comment lines before line i that belong to the marker's sentence."""
    lead: list[str] = []
    k = i - 1
    while k >= 0 and len(lead) < LEAD_LINES:
        prev = comments[k]
        if not prev or _RULE.search(prev) or prev.endswith((".", ":", ";")):
            break
        lead.insert(0, prev)
        k -= 1
    return lead


def paragraphs(text: str, path: str = "") -> list[tuple[int, str, list[str]]]:
    """(marker line, marker text, the paragraph's comment lines, the marker's sentence
    included) of each deferred paragraph."""
    low = text.lower()
    if not _may_mark(low):
        return []  # most files: no marker anywhere, nothing to split into lines
    return _paragraphs(_Comments(text, path, low))


def _paragraphs(lines: _Comments) -> list[tuple[int, str, list[str]]]:
    out: list[tuple[int, str, list[str]]] = []
    after = 0  # the first line a new paragraph may start on
    for i in lines.marked():
        body = lines[i] if i >= after else None
        if body is None or _MARK.search(body) is None:
            continue  # the marker is in code, or inside the paragraph before
        para = [*_lead(lines, i), body]
        j = i + 1
        while j < len(lines) and len(para) < PARAGRAPH_LINES:
            nxt = lines[j]
            if not nxt or _RULE.search(nxt) or _MARK.search(nxt):
                break
            para.append(nxt)
            j += 1
        out.append((i + 1, body, para))
        after = j
    return out


def deferred(text: str, path: str = "") -> tuple[Deferred, ...]:
    """The file's deferred paragraphs, each with the words only it uses."""
    low = text.lower()
    if not _may_mark(low):
        return ()
    lines = _Comments(text, path, low)
    found = _paragraphs(lines)
    if not found:
        return ()
    rest = lines.outside([(start - LEAD_LINES, start + len(para)) for start, _t, para in found])
    named = [(start, body, _words(" ".join(para))) for start, body, para in found]
    # Only the paragraphs' own words need looking up outside them, and only in the tokens
    # that hold one (a word of a token is a substring of it): the rest is never split into
    # tokens as a whole (that was half the scan of a long file).
    wanted = set().union(*(words for _s, _b, words in named))
    outside = _used(rest, wanted)
    if outside:
        named = [(s, b, words - outside) for s, b, words in named]
    return tuple(Deferred(start, body, frozenset(words)) for start, body, words in named)


_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")  # what `_TOKEN` spans


def _used(rest: str, wanted: set[str]) -> set[str]:
    """The words of `wanted` that are words of a token of `rest`.

    Each occurrence of a word in the lower-cased rest is looked up in the run of word
    characters around it, whose token (from its first letter: `_TOKEN`) is the only one
    that can hold it there. Tokens are ASCII, so their offsets are the lowered text's own
    whenever lowering kept the length (else every token is split, as `_words` does)."""
    low = rest.lower()
    if len(low) != len(rest):
        return wanted & _words(rest)
    known: dict[str, set[str]] = {}
    used: set[str] = set()
    for word in wanted:
        at = low.find(word)
        while at >= 0:
            token, end = _token_around(rest, at)
            if token and token not in known:
                known[token] = _words(token)
            if token and word in known[token]:
                used.add(word)
                break
            at = low.find(word, end)
    return used


def _token_around(text: str, at: int) -> tuple[str, int]:
    """The token of the run of word characters holding offset `at` ("" when there is
    none: the run is digits and `_` only), and the offset to search on from (the run's
    end, or just after `at`)."""
    start = end = at
    while start > 0 and text[start - 1] in _WORD_CHARS:
        start -= 1
    while end < len(text) and text[end] in _WORD_CHARS:
        end += 1
    token = _TOKEN.search(text, start, end)  # the run's one token: from its first letter
    return ("" if token is None else token.group()), max(end, at + 1)
