"""Citation anchors: the symbols and line ranges a citation names besides its path.

Real headers anchor a citation in many ways (DESIGN §3, §8): `path::Class.method`,
`path:A-B,C-D`, `path (SymA, SymB)`, `path (Class.m + n + o)` (bare names are
methods of the first class), `(Class: a / b — the T0 slice)`, `(Sym:22-121;
A/B/C:11-13)`, `:134-229 (class Platform)`, `` path `Sym` ``, and after the SHA
`@ sha - SymA, SymB`. A parenthetical is an anchor only when it reads as code
from its first clause on: `(NVFP4 W4A16 dequant)`, `(the route shapes)` and
`(FlashAttentionImpl.forward SEMANTICS: ...)` are prose, and the citation stays
whole-file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = r"[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*(?:\(\))?"
_TOKEN = re.compile(
    rf"""(?P<ws>\s+)
    | (?P<rng>(?::\s*|\#?L|lines?\s+)\d+(?:\s*-\s*L?\d+)?)
    | (?P<num>\d+(?:\s*-\s*\d+)?)
    | (?P<kw>(?:class|def|fn)\s+)
    | (?P<id>{_IDENT})
    | (?P<sep>[,+/;:&]|\band\b|\bor\b)""",
    re.X | re.A,
)
# Where a parenthetical's anchors stop and its prose begins.
_TAIL = re.compile(r"\s+(?:—|–|--|-)\s+|\s*—\s*")
_SHA_LIKE = re.compile(r"[0-9a-f]{7,40}")
_FILE_LIKE = re.compile(r"\.(?:py|pyi|h|hh|hpp|c|cc|cpp|cu|cuh|md|json|txt|ya?ml|toml|rs)\b")
_RANGES = re.compile(r"(?::|\#L)(\d+(?:-L?\d+)?(?:,\s?\d+(?:-\d+)?)*)(?![\w-])", re.A)
_BACKTICK = re.compile(rf"\s*`(?P<id>{_IDENT})`", re.A)
_DASH = re.compile(r"\s+[-—–]\s+")
MAX_PAREN = 400  # a parenthetical longer than this is prose


@dataclass(frozen=True)
class Anchor:
    symbols: tuple[str, ...] = ()
    ranges: tuple[str, ...] = ()
    end: int = 0  # where the anchor ends in the text it was read from

    def __bool__(self) -> bool:
        return bool(self.symbols or self.ranges)


def _code_shaped(name: str) -> bool:
    """An identifier that cannot be an English word: `a_b`, `A.b`, `CamelCase`, `f()`."""
    return any(ch in name for ch in "_.:()") or any(ch.isupper() for ch in name)


def _norm_range(raw: str) -> str:
    digits = raw.lstrip(":#Llines \t")
    return "".join(digits.split()).replace("L", "")


@dataclass
class _Clause:
    symbols: list[str]
    ranges: list[str]
    owner: str | None  # `Class:` opening the clause: its bare names are Class's


def _tokens(clause: str) -> list[tuple[str, str]] | None:
    """The clause as (kind, text) tokens, or None when some of it is not anchor syntax."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(clause):
        m = _TOKEN.match(clause, pos)
        if m is None or m.end() == pos:
            return None
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group()))
        pos = m.end()
    return out


def _clause(clause: str) -> _Clause | None:
    """The symbols and ranges of one `;`-clause, or None when it is prose."""
    toks = _tokens(clause)
    if not toks:
        return None
    got = _Clause([], [], None)
    prev = ""
    for i, (kind, text) in enumerate(toks):
        if kind == "id":
            if prev in ("id", "rngfree") or _SHA_LIKE.fullmatch(text):
                return None  # two words in a row: prose
            got.symbols.append(text.removesuffix("()"))
            if i == 0 and len(toks) > 2 and toks[1] == ("sep", ":") and toks[2][0] == "id":
                got.owner = text
        elif kind == "rng":
            got.ranges.append(_norm_range(text))
        elif kind == "num":
            if prev not in ("sep-after-rng",):
                return None  # a bare number only continues a range list (`:1-2,3-4`)
            got.ranges.append(_norm_range(text))
        prev = _prev_kind(kind, text, prev)
    return got


def _leading_items(clause: str) -> _Clause | None:
    """The longest run of leading comma items of a clause that reads as anchors, when a
    later item is prose: `_ModelInfo:746-796, resolve_model_cls:1244-1296, global
    registry:1396-1404` names two symbols and their lines, not nothing."""
    items = clause.split(",")
    for k in range(len(items) - 1, 0, -1):
        c = _clause(",".join(items[:k]).strip())
        if c is not None:
            return c
    return None


def _prev_kind(kind: str, text: str, prev: str) -> str:
    if kind == "sep":
        return "sep-after-rng" if prev in ("rng", "num") and text == "," else "sep"
    if kind == "kw":
        return "kw"
    return kind


def _qualified(c: _Clause) -> list[str]:
    """`Class: a / b` and `Class.m + n` name methods of Class: qualify the bare names."""
    syms = c.symbols
    if c.owner is not None:
        return [f"{c.owner}.{s}" if "." not in s and s[:1].islower() else s for s in syms[1:]]
    if syms and "." in syms[0]:
        owner = syms[0].rsplit(".", 1)[0]
        if all("." not in s and s[:1].islower() for s in syms[1:]):
            return [syms[0], *(f"{owner}.{s}" for s in syms[1:])]
    return syms


def symbol_list(content: str) -> Anchor | None:
    """The anchors a parenthetical's content names, or None when it is prose."""
    if _FILE_LIKE.search(content):
        return None  # a path inside: a citation of its own, not an anchor
    tail = _TAIL.search(content)
    body = content[: tail.start()] if tail else content
    symbols: list[str] = []
    ranges: list[str] = []
    for i, raw in enumerate(body.split(";")):
        c = _clause(raw.strip())
        whole = c is not None
        if c is None:
            c = _leading_items(raw.strip())
        if c is None:
            if i == 0:
                return None
            break
        symbols += _qualified(c)
        ranges += c.ranges
        if not whole:
            break  # the prose after the items ends the anchors
    if not symbols and not ranges:
        return None
    if not ranges and len(symbols) == 1 and not _code_shaped(symbols[0]):
        return None  # `(deprecated)`: one plain word is prose
    if not ranges and not any(_code_shaped(s) for s in symbols):
        return None
    return Anchor(tuple(dict.fromkeys(symbols)), tuple(dict.fromkeys(ranges)))


def _closing(text: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, min(len(text), open_at + MAX_PAREN)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def paren(text: str, pos: int) -> Anchor | None:
    """A symbol-list parenthetical starting at `pos` (after optional blanks)."""
    i = pos
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "(":
        return None
    close = _closing(text, i)
    if close is None:
        return None
    content = text[i + 1: close].strip()
    if content.startswith("+"):
        content = content[1:]  # `(+ _update_states, ...)`: more symbols of the same file
    # `(`yarn_find_correction_range`, `yarn_linear_ramp_mask`)`: code spans of names.
    got = symbol_list(content.replace("`", "") if "`" in content else content)
    return None if got is None else Anchor(got.symbols, got.ranges, close + 1)


def prose_paren_end(text: str, pos: int) -> int | None:
    """Where a parenthetical at `pos` (after blanks) ends, when it is not an anchor."""
    i = pos
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if i >= len(text) or text[i] != "(" or paren(text, i) is not None:
        return None
    close = _closing(text, i)
    return None if close is None else close + 1


def ranges_at(text: str, pos: int) -> Anchor | None:
    """`:A-B,C-D,E` or `#L3-L9` directly at `pos`."""
    m = _RANGES.match(text, pos)
    if m is None:
        return None
    parts = [p.strip().replace("L", "") for p in m.group(1).split(",")]
    return Anchor((), tuple(p for p in parts if p), m.end())


def backtick(text: str, pos: int) -> Anchor | None:
    """`` `Sym` `` right after a citation (the `<-` tables write symbols so)."""
    m = _BACKTICK.match(text, pos)
    if m is None or _SHA_LIKE.fullmatch(m["id"]) or not _code_shaped(m["id"]):
        return None
    return Anchor((m["id"].removesuffix("()"),), (), m.end())


def dash_list(text: str, pos: int) -> Anchor | None:
    """`@ sha - SymA, SymB, ...`: the symbols after a SHA, up to `)` or a sentence end."""
    m = _DASH.match(text, pos)
    if m is None:
        return None
    stop = len(text)
    for ch in ").;":
        k = text.find(ch, m.end())
        if 0 <= k < stop and (ch != "." or k + 1 >= len(text) or text[k + 1].isspace()):
            stop = k
    if stop - m.end() > MAX_PAREN:
        return None
    got = symbol_list(text[m.end(): stop].strip())
    return None if got is None else Anchor(got.symbols, got.ranges, stop)
