"""What a port file says it has not ported: its DEFERRED / "not ported" comment paragraphs.

The words of those paragraphs are the deferred-feature vocabulary of that file (the
classifier checks whether a changed upstream line sits under an `if` that names one
of them). A word counts only when the file never uses it outside those paragraphs:
a word the file also uses for what it does port (`cache`, `block`) says nothing about
a feature being absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARK = re.compile(
    r"\b(?:deferred|not\s+(?:yet\s+)?ported|omitted|does\s+not\s+exist\s+in\s+this\s+tree"
    r"|not\s+implemented\s+here|no\s+c\+\+\s+(?:runtime\s+)?analogue)\b", re.I)
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
    out: set[str] = set()
    for token in set(_TOKEN.findall(text)):
        out.add(token.lower())
        out.update(w.lower() for w in _SPLIT.findall(token))
        out.update(part.lower() for part in token.split("_") if part)
    return {w for w in out if len(w) >= MIN_WORD and w not in _STOP and not w.isdigit()}


def _comments(text: str, path: str) -> list[str | None]:
    """Each line's comment text (None for a line that is not a comment)."""
    pattern = _HASH_COMMENT if path.lower().endswith(_HASH_SUFFIXES) else _C_COMMENT
    out: list[str | None] = []
    for line in text.splitlines():
        m = pattern.match(line)
        out.append(None if m is None else m.group("text").strip())
    return out


def _lead(comments: list[str | None], i: int) -> list[str]:
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
    lines = _comments(text, path)
    out: list[tuple[int, str, list[str]]] = []
    i = 0
    while i < len(lines):
        body = lines[i]
        if body is None or _MARK.search(body) is None:
            i += 1
            continue
        para = [*_lead(lines, i), body]
        j = i + 1
        while j < len(lines) and len(para) < PARAGRAPH_LINES:
            nxt = lines[j]
            if not nxt or _RULE.search(nxt) or _MARK.search(nxt):
                break
            para.append(nxt)
            j += 1
        out.append((i + 1, body, para))
        i = j
    return out


def deferred(text: str, path: str = "") -> tuple[Deferred, ...]:
    """The file's deferred paragraphs, each with the words only it uses."""
    found = paragraphs(text, path)
    if not found:
        return ()
    inside = {no for start, _t, para in found
              for no in range(start - LEAD_LINES, start + len(para))}
    outside = _words(" ".join(line for no, line in enumerate(text.splitlines(), start=1)
                              if no not in inside))
    return tuple(Deferred(start, body, frozenset(_words(" ".join(para)) - outside))
                 for start, body, para in found)
