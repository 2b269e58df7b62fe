"""Pin spans: the only places prose may restate the pin.

    ... the oracle at <!--pin:commit-->55596792<!--/pin--> reports
    <!--pin:label-->0.23.1rc1.dev1511<!--/pin--> ...

Marking every copy lets an advance rewrite all of them in one go and lets
`check` prove none drifted (an unmarked copy drifted once and a harness refused
the right oracle for 17 days). A marker may not start its line: a line that is
only a pin is a second pin block in disguise, not a sentence restating it.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sync.infra import globs as globs_mod
from sync.infra.errors import MalformedRecord, UsageError
from sync.records.pins import Pin

Kind = Literal["commit", "label"]
KINDS: tuple[Kind, ...] = ("commit", "label")
SKIP_DIRS = frozenset({".git", ".nox", "node_modules"})
_MARKER = b"<!--"  # every span marker opens an HTML comment
MIN_COMMIT = 8

_CANDIDATE = re.compile(r"<!--\s*(?:/\s*)?pin(?![A-Za-z0-9_])", re.IGNORECASE)
_OPEN = re.compile(r"<!--pin:(commit|label)-->")
_OPEN_ANY = re.compile(r"<!--pin:([^\s<>]*)-->")
_CLOSE = "<!--/pin-->"
# Leading whitespace plus list bullets / blockquote markers: what is left is the line's start.
_LINE_START = re.compile(r"\s*(?:(?:[-*+]|[0-9]+[.)])\s+|>\s*)*")
_COMMIT = re.compile(r"[0-9a-f]+")
_FULL_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Span:
    path: Path
    line: int
    kind: Kind
    value: str
    start: int  # offsets of the value in the file's text
    end: int


@dataclass(frozen=True)
class _Open:
    kind: Kind | None  # None: an unknown kind, already reported
    at: int  # offset in the line where the marker starts
    end: int  # offset in the line just past the marker


def _value_bounds(line: str, begin: int, end: int) -> tuple[int, int]:
    # A value may be wrapped in backticks so it renders as code; the backticks are not the value.
    if end - begin >= 2 and line[begin] == "`" and line[end - 1] == "`":
        return begin + 1, end - 1
    return begin, end


def _scan(text: str, path: Path) -> tuple[list[Span], list[str]]:
    spans: list[Span] = []
    problems: list[str] = []
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        if "<!--" in raw:
            _Line(raw.rstrip("\r\n"), path, number, offset, spans, problems).scan()
        offset += len(raw)
    return spans, problems


@dataclass
class _Line:
    """One line's markers, read left to right; a span opens and closes on the same line."""

    line: str
    path: Path
    number: int
    base: int  # the line's offset in the file
    spans: list[Span]
    problems: list[str]
    pending: _Open | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"

    def scan(self) -> None:
        for cand in _CANDIDATE.finditer(self.line):
            self._marker(cand.start())
        if self.pending is not None:
            self._unclosed(self.pending)

    def _unclosed(self, pending: _Open) -> None:
        self.problems.append(f"{self.where}: pin span opened at column {pending.at + 1} "
                             f"is never closed — add {_CLOSE} on the same line")

    def _marker(self, at: int) -> None:
        opener = _OPEN.match(self.line, at)
        other = _OPEN_ANY.match(self.line, at)
        if opener is not None or other is not None:
            self._open(at, opener, other)
        elif self.line.startswith(_CLOSE, at):
            self._close(at)
        else:
            self.problems.append(f"{self.where}: malformed pin marker "
                                 f"{self.line[at:at + 24]!r} — write <!--pin:commit-->, "
                                 f"<!--pin:label--> or {_CLOSE} exactly")

    def _open(self, at: int, opener: re.Match[str] | None, other: re.Match[str] | None) -> None:
        if _LINE_START.fullmatch(self.line, 0, at):
            self.problems.append(f"{self.where}: pin marker starts its line — restate the pin "
                                 "inside a sentence, or read it from the pin block")
        if self.pending is not None:
            self._unclosed(self.pending)
        if opener is not None:
            kind: Kind = "commit" if opener.group(1) == "commit" else "label"
            self.pending = _Open(kind, at, opener.end())
        elif other is not None:
            self.problems.append(f"{self.where}: unknown pin span kind {other.group(1)!r} — "
                                 "use <!--pin:commit--> or <!--pin:label-->")
            self.pending = _Open(None, at, other.end())

    def _close(self, at: int) -> None:
        if self.pending is None:
            self.problems.append(f"{self.where}: {_CLOSE} without an opening pin marker — "
                                 "remove it or add <!--pin:commit--> / <!--pin:label-->")
        elif self.pending.kind is not None:
            begin, end = _value_bounds(self.line, self.pending.end, at)
            self.spans.append(Span(self.path, self.number, self.pending.kind,
                                   self.line[begin:end], self.base + begin, self.base + end))
        self.pending = None


def scan_text(text: str, *, path: Path | str) -> list[Span]:
    """Every well-formed span; malformed markers are reported by `marker_problems`."""
    return _scan(text, Path(path))[0]


def marker_problems(text: str, *, path: Path | str) -> list[str]:
    """Markers at line start, unclosed spans, stray closers and unknown kinds."""
    return _scan(text, Path(path))[1]


def files(root: Path, globs: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[Path]:
    """Regular files under `root` matching any glob (posix, relative), skipping tool dirs
    and the folders `skip` names (port-relative: the tool's own records, whose text is
    upstream's, escaped, and never a restatement of the pin by a person)."""
    found: list[Path] = []
    skipped = {d.strip("/") for d in skip}
    wanted = globs_mod.any_of(globs)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS
                             and (d if rel_dir == "." else f"{rel_dir}/{d}") not in skipped)
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if wanted.match(rel) is None:
                continue  # most files: no system call at all
            full = Path(dirpath) / name
            try:
                regular = stat.S_ISREG(full.lstat().st_mode)  # a link is never followed
            except OSError:
                continue
            if regular:
                found.append(full)
    return found


def decode(data: bytes) -> str:
    """A scanned file's text. Bytes that are not UTF-8 (a Latin-1 page) are kept as lone
    surrogates: a pin copy in such a file is still read, checked and rewritten, and every
    other byte written back as it was (`encode`)."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _read(path: Path) -> str:
    """The file's text; "" when it holds no marker (nothing to decode: most files)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MalformedRecord(f"cannot read ({exc.strerror})",
                              "fix its permissions: an unread file could hide a stale pin copy",
                              path=str(path)) from None
    return decode(data) if _MARKER in data else ""


def scan(root: Path, globs: tuple[str, ...]) -> list[Span]:
    spans: list[Span] = []
    for path in files(root, globs):
        text = _read(path)
        if text:  # "" when it holds no marker
            spans.extend(scan_text(text, path=path))
    return spans


def problems(spans: list[Span], pin: Pin) -> list[str]:
    """Spans that do not agree with the pin block, as "path:line: what is wrong"."""
    out = []
    for s in spans:
        where = f"{s.path}:{s.line}"
        if s.kind == "label":
            if s.value != pin.public_version:
                out.append(f"{where}: pin label span {s.value!r} is not the pin's public "
                           f"version {pin.public_version}")
        elif not _COMMIT.fullmatch(s.value):
            out.append(f"{where}: pin commit span {s.value!r} is not lowercase hex")
        elif len(s.value) < MIN_COMMIT:
            out.append(f"{where}: pin commit span {s.value!r} is shorter than {MIN_COMMIT} "
                       "characters")
        elif not pin.commit.startswith(s.value):
            out.append(f"{where}: pin commit span {s.value} is not a prefix of vllm_commit "
                       f"{pin.commit}")
    return out


def check(root: Path, globs: tuple[str, ...], pin: Pin, skip: tuple[str, ...] = ()) -> list[str]:
    """Every marker problem and every disagreeing span under `root` (but `skip`)."""
    out: list[str] = []
    for path in files(root, globs, skip):
        text = _read(path)
        if text:  # "" when it holds no marker
            found, marker = _scan(text, path.relative_to(root))
            out.extend(marker)
            out.extend(problems(found, pin))
    return out


def rewrite(text: str, spans_in_text: list[Span], *, commit: str, label: str) -> str:
    """`text` with every span's value replaced; commit spans keep their own length (>= 8)."""
    if not _FULL_SHA.fullmatch(commit):
        raise UsageError(f"new commit {commit!r} is not 40 lowercase hex",
                         "pass the full vllm_commit")
    if not label or label != label.strip() or any(c in label for c in "<>`") \
            or len(f"{label}x".splitlines()) != 1:
        raise UsageError(f"new label {label!r} cannot sit inside a pin span",
                         "pass the pin's public version")
    out = text
    unique = {(s.start, s.end): s for s in spans_in_text}
    for s in sorted(unique.values(), key=lambda s: s.start, reverse=True):
        if text[s.start:s.end] != s.value:
            raise UsageError(f"{s.path}:{s.line}: span does not belong to this text",
                             "scan the text again before rewriting it")
        new = label if s.kind == "label" else commit[: max(MIN_COMMIT, len(s.value))]
        out = out[: s.start] + new + out[s.end:]
    return out
