"""The PARITY PIN line: the prose paragraph in the protocol file naming the active pin.

Its anchored head names the pin:

    Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0 ...

Real ports write it as markdown (`**Active pin (advanced 2026-07-26):** current parity pin
`555967922` (vLLM ...`), and before a first advance as `**Active cycle (2026-07-12):**
current parity pin `e24d1b24`; ...`: emphasis and backticks are read.

Exactly one line may match; two would make "the active pin" ambiguous. An advance
rewrites the whole paragraph from what it measured (`rewrite`): the date, the new pin
as the pin block holds it, the release label, the versions the oracle reported, the
prior pin and its label, and the golden gate's drift result. Every other sentence of
the old paragraph is kept only if it names no value the advance cannot check
(`records/claims`); otherwise the advance asks for it to be reworded and names the
phrases. Every byte outside the paragraph is kept. `render` (the head alone) is what
a rollback of an older advance uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sync.infra.errors import MalformedRecord, UsageError
from sync.records import blocks, claims
from sync.records.pins import Pin
from sync.upstream.gitio import short

_LEAD = re.compile(r"(?:[-*+>]\s+)?(?:\*\*|__)?Active (?:pin|cycle) \(")
_LABEL = r"[^\s(),`*]+"
_RULE = re.compile(
    r"(?:[-*+>]\s+)?(?:\*\*|__)?Active (?:pin \(advanced |cycle \()"
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})\):(?:\*\*|__)? "
    r"current parity pin `?(?P<sha>[0-9a-f]{7,40})(?![0-9A-Za-z])`?"
    rf"(?: \(vLLM `?(?P<label>{_LABEL}))?"
)
_SHA = re.compile(r"[0-9a-f]{7,40}")
_WRITABLE_LABEL = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")
_FIX = ("write it as one line 'Active pin (advanced YYYY-MM-DD): current parity pin <sha> "
        "(vLLM <release>)' (markdown bold and backticks are fine)")


@dataclass(frozen=True)
class Paragraph:
    date: str
    sha: str
    release_label: str | None
    line: int
    start: int  # offsets of the matched (machine-owned) portion
    end: int


def find(text: str, *, path: str) -> Paragraph:
    found: list[Paragraph] = []
    near: list[int] = []
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        m = _RULE.match(raw)
        if m:
            found.append(Paragraph(m["date"], m["sha"], m["label"], number,
                                   offset + m.start(), offset + m.end()))
        elif _LEAD.match(raw):
            near.append(number)
        offset += len(raw)
    if not found:
        where = f" (line {near[0]} starts like one but does not match)" if near else ""
        raise MalformedRecord(f"no PARITY PIN line{where}", _FIX, path=path,
                              line=near[0] if near else None)
    if len(found) > 1:
        lines = ", ".join(str(p.line) for p in found)
        raise MalformedRecord(f"{len(found)} PARITY PIN lines (lines {lines})",
                              "keep exactly one 'Active pin (advanced ...)' line", path=path,
                              line=found[1].line)
    para = found[0]
    if not blocks.is_date(para.date):
        raise MalformedRecord(f"PARITY PIN line date {para.date!r} is not a calendar date",
                              "write it as YYYY-MM-DD", path=path, line=para.line)
    return para


def render(text: str, para: Paragraph, *, date: str, sha: str,
           release_label: str | None) -> str:
    """`text` with only the paragraph's date, sha and release label replaced.

    A paragraph without a label gets ` (vLLM <label>)` after the sha; dropping an
    existing label is refused, since the narrative after it would no longer read.
    """
    m = _RULE.match(text, para.start)
    if m is None or (m.end(), m["date"], m["sha"], m["label"]) != (
            para.end, para.date, para.sha, para.release_label):
        raise UsageError("the PARITY PIN line changed since it was read",
                         "read the protocol file again")
    _check_new(para, date, sha, release_label)
    pieces = [(m.start("date"), m.end("date"), date), (m.start("sha"), m.end("sha"), sha)]
    if release_label is not None:
        pieces.append(_label_piece(m, para, release_label))
    out = text
    for begin, end, value in reversed(pieces):
        out = out[:begin] + value + out[end:]
    return out


def _check_new(para: Paragraph, date: str, sha: str, release_label: str | None) -> None:
    if not blocks.is_date(date):
        raise UsageError(f"new PARITY PIN date {date!r} is not YYYY-MM-DD", "pass a real date")
    if not _SHA.fullmatch(sha):
        raise UsageError(f"new PARITY PIN sha {sha!r} is not 7..40 lowercase hex",
                         "pass a prefix of the new vllm_commit")
    # The label comes from a measured oracle: only a version's characters may reach the
    # paragraph (no markdown, no `<!--`, nothing that ends the head the next read expects).
    if release_label is not None and not _WRITABLE_LABEL.fullmatch(release_label):
        raise UsageError(f"release label {release_label!r} is not a bare version",
                         "pass a bare version such as 0.26.0.dev0")
    if release_label is None and para.release_label is not None:
        raise UsageError(f"the PARITY PIN line names release {para.release_label}; "
                         "no new release label was given", "pass the new release label")


def _label_piece(m: re.Match[str], para: Paragraph, label: str) -> tuple[int, int, str]:
    """(begin, end, text) that puts `label` in place of the old one, or adds it."""
    if para.release_label is not None:
        return m.start("label"), m.end("label"), label
    return m.end("sha"), m.end("sha"), f" (vLLM {label})"


def agrees(para: Paragraph, pin: Pin, *, path: str | None = None) -> list[str]:
    """Problems with the paragraph as a copy of the pin block (empty when it agrees)."""
    where = f"{path}:{para.line}" if path is not None else f"line {para.line}"
    if not pin.commit.startswith(para.sha):
        return [f"{where}: the PARITY PIN paragraph's pin {para.sha} is not a prefix of the "
                f"pin block's vllm_commit {pin.commit} — write {pin.commit[:len(para.sha)]} "
                "there by hand (an advance rewrites this line itself, but not while it "
                "disagrees with the block)"]
    return []


# -- the rewrite of an advance -------------------------------------------------------------

_FLIPPED = re.compile(r",?\s*FLIPPED from the prior (?P<prior>[^\s,]+) pin")
_GATE_SENTENCE = re.compile(r"\s*(?:The golden gate at `?[0-9a-f]{7,40}`? measured .*?\.|"
                            r"No golden gate ran for this advance\.)(?=\s|$)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`*_])")
_ITEM = re.compile(r"(?P<name>[A-Za-z][\w .-]*?)\s+v?(?P<version>\d[\w.+-]*)")
_ALIASES = {"torch": "Torch", "pytorch": "Torch", "flashinfer": "FlashInfer",
            "flashinfer-python": "FlashInfer"}


@dataclass(frozen=True)
class Measured:
    """What an advance knows for the paragraph: measured, or given on its command line."""

    date: str
    commit: str  # the new pin's vllm_commit, as the pin block holds it
    release_label: str
    prior: str  # the prior pin's vllm_commit
    prior_label: str | None  # the release the paragraph named for the prior pin
    versions: tuple[tuple[str, str | None], ...]  # ("Torch", "2.13.0"); None: measured absent
    drift: str | None  # the golden gate's summary at the target; None: no golden gate ran
    target: str
    prs: frozenset[int] = frozenset()  # the cycle's range
    tallies: tuple[tuple[str, int], ...] = ()  # ("commits", n) and one per disposition

    def known(self) -> claims.Known:
        versions = {v for _, v in self.versions if v} | {self.release_label}
        versions |= {self.prior_label} if self.prior_label else set()
        return claims.Known((self.commit, self.prior), frozenset(versions), self.prs,
                            self.drift, self.date, self.tallies)


@dataclass(frozen=True)
class Rewrite:
    text: str  # the protocol file with the paragraph rewritten
    paragraph: str  # the new paragraph
    old: str  # the paragraph it replaces (what a rollback restores)
    unchecked: tuple[str, ...]  # phrases to reword first: empty when the rewrite stands
    dropped: tuple[str, ...]  # claims the measurement refuted (a version found absent)


def extent(text: str, para: Paragraph) -> int:
    """Where the paragraph ends: before the line break of its last non-blank line."""
    pos = text.find("\n", para.start)
    while pos != -1:
        nxt = text.find("\n", pos + 1)
        line = text[pos + 1: len(text) if nxt == -1 else nxt]
        if not line.strip() or line.lstrip().startswith(("```", "#", "<!--")):
            break
        pos = nxt
    end = len(text) if pos == -1 else pos
    return end - 1 if end > para.start and text[end - 1] == "\r" else end


def _versions(inner: str, m: Measured) -> tuple[str, list[str], list[str]]:
    """(the new parenthetical's version list, unchecked phrases, dropped claims)."""
    measured = dict(m.versions)
    named: list[str] = []
    unchecked: list[str] = []
    dropped: list[str] = []
    # `+` between items has a blank beside it; inside a version (`2.13.0+cpu`) it has none.
    for raw in (p.strip() for p in re.split(r"\s*,\s*|\s+\+\s*|\s*\+\s+", inner)):
        item = _ITEM.fullmatch(raw)
        name = _ALIASES.get(item["name"].lower()) if item else None
        if name is None:
            if raw:
                unchecked.append(f"{raw!r} (a version the oracle probe does not measure)")
            continue
        named.append(name)
        if measured.get(name) is None:
            dropped.append(f"{raw} (the oracle has no {name})")
    names = named + [n for n, _ in m.versions if n not in named]
    listed = [f"{n} {measured[n]}" for n in dict.fromkeys(names) if measured.get(n)]
    return (" + " + ", ".join(listed)) if listed else "", unchecked, dropped


def _split_head(body: str, para: Paragraph) -> tuple[str, str]:
    """(the parenthetical after the release label, the text after it)."""
    rest = body[para.end - para.start:]
    if para.release_label is None:
        return "", rest
    depth = 1
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return rest[:i], rest[i + 1:]
    return rest, ""


def _narrative(rest: str, known: claims.Known) -> tuple[str, list[str], list[str]]:
    """(the clause that ends the head sentence, the kept sentences, the phrases to reword)."""
    rest = _GATE_SENTENCE.sub("", _FLIPPED.sub("", rest, count=1))
    pieces = [s for s in _SENTENCE_END.split(rest.strip()) if s]
    first = ""
    if pieces and not pieces[0][:1].isupper():
        first = pieces.pop(0)
        first = (first if first.startswith((",", ";")) else " " + first).rstrip()
        first = first.removesuffix(".").rstrip()
    bad = [f"\"{_quote(s)}\" names {', '.join(found)}"
           for s in [first, *pieces] if (found := claims.unchecked(s, known))]
    return first, [" ".join(s.split()) for s in pieces], bad


def _quote(sentence: str, width: int = 100) -> str:
    """The sentence on one line, cut at a word (never inside one) when it is long."""
    flat = " ".join(sentence.split())
    if len(flat) <= width:
        return flat
    cut = flat[:width].rsplit(" ", 1)[0] if " " in flat[:width] else flat[:width]
    return cut + " …"


def _gate_sentence(m: Measured) -> str:
    if m.drift is None:
        return "No golden gate ran for this advance."
    return f"The golden gate at {short(m.target)} measured {m.drift.rstrip('.')}."


def rewrite(text: str, para: Paragraph, m: Measured) -> Rewrite:
    """`text` with the paragraph rewritten from `m`; every byte outside it kept."""
    end = extent(text, para)
    body = text[para.start:end]
    inner, rest = _split_head(body, para)
    listed, unchecked, dropped = _versions(inner, m)
    clause, kept, bad = _narrative(rest, m.known())
    prior = m.prior[:8] + (f"/{m.prior_label}" if m.prior_label else "")
    head = (f"Active pin (advanced {m.date}): current parity pin {m.commit[:9]} (vLLM "
            f"{m.release_label}{listed}), FLIPPED from the prior {prior} pin{clause}.")
    new = " ".join([head, _gate_sentence(m), *kept])
    _check_new(para, m.date, m.commit[:9], m.release_label)
    return Rewrite(text[:para.start] + new + text[end:], new, body,
                   tuple(unchecked + bad), tuple(dropped))


def restore(text: str, para: Paragraph, old: str) -> str:
    """`text` with the paragraph replaced by `old` (a rollback), every other byte kept."""
    return text[:para.start] + old + text[extent(text, para):]
