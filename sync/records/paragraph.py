"""The PARITY PIN line: the prose paragraph in the protocol file naming the active pin.

Only its anchored head is machine-owned:

    Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0 ...

Real ports write it as markdown (`**Active pin (advanced 2026-07-26):** current parity pin
`555967922` (vLLM ...`), and before a first advance as `**Active cycle (2026-07-12):**
current parity pin `e24d1b24`; ...`: emphasis and backticks are read, and kept on rewrite.

An advance rewrites the date, the sha and the release label and leaves every
other byte of the paragraph (the human narrative) alone. Exactly one line may
match; two would make "the active pin" ambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sync.infra.errors import MalformedRecord, UsageError
from sync.records import blocks
from sync.records.pins import Pin

_LEAD = re.compile(r"(?:[-*+>]\s+)?(?:\*\*|__)?Active (?:pin|cycle) \(")
_LABEL = r"[^\s(),`*]+"
_RULE = re.compile(
    r"(?:[-*+>]\s+)?(?:\*\*|__)?Active (?:pin \(advanced |cycle \()"
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})\):(?:\*\*|__)? "
    r"current parity pin `?(?P<sha>[0-9a-f]{7,40})(?![0-9A-Za-z])`?"
    rf"(?: \(vLLM `?(?P<label>{_LABEL}))?"
)
_SHA = re.compile(r"[0-9a-f]{7,40}")
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
    if release_label is not None and not re.fullmatch(_LABEL, release_label):
        raise UsageError(f"release label {release_label!r} contains spaces, commas or "
                         "parentheses", "pass a bare version such as 0.26.0.dev0")
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
        return [f"{where}: PARITY PIN line names {para.sha}, which is not a prefix of "
                f"vllm_commit {pin.commit}"]
    return []
