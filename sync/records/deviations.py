"""The inventory's §9 deviations, and which of them a range of upstream commits touches.

§9 entries are either sub-headings (`### 9.3 Title`) or a numbered list; the parser
is tolerant of both and never raises on any text. Deviation numbers are not unique
in real inventories (two `9.4`s exist), so a deviation is identified by its title.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from sync.records import mdscan
from sync.records.layout import Layout
from sync.records.mdscan import LIST, PR_REF, Heading, Line
from sync.records.mdtext import code, escape
from sync.upstream.gitio import short
from sync.upstream.history import Commit

_ENTRY_NUMBER = re.compile(r"(?:§\s*)?(\d+(?:\.\d+)*)\.?(?=[\s:)—–-]|\Z)")
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_TITLE_END = re.compile(r"\s+[—–]\s|:\s|\s-\s|\.\s")
_SHA = re.compile(r"(?<![\w./#-])[0-9a-f]{7,40}(?![\w/])")
_PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]*)+", re.A)


@dataclass(frozen=True)
class Deviation:
    number: str | None  # as shown ("9.3"); not unique
    title: str  # the key
    line: int
    text: str
    paths: tuple[str, ...]  # path-like tokens cited (upstream or port paths)
    shas: tuple[str, ...]
    prs: tuple[int, ...]

    @property
    def key(self) -> str:
        return title_key(self.title)

    @property
    def label(self) -> str:
        return f"§{self.number}" if self.number else "§9"


class Cited(Protocol):
    """What `touched` reads of an `inventory.Inventory` (which is built from this module,
    so it is not imported here)."""

    @property
    def deviations(self) -> tuple[Deviation, ...]: ...


class Surface(Protocol):
    """What `touched` reads of a `steps.surface.Surface` (a step, above the records)."""

    @property
    def by_upstream(self) -> Mapping[str, Sequence[str]]: ...


def title_key(title: str) -> str:
    return " ".join(title.replace("*", "").replace("`", "").split()).casefold()


class _Start(NamedTuple):
    """Where a §9 entry starts."""

    line: int
    first: str  # its first line's text, without the list marker
    listed: str | None  # the list's own number ("9.3" for item "3.")
    heading: bool  # a sub-heading, all title


def parse(lines: list[Line], code: list[bool], headings: Sequence[Heading],
          s9: Heading) -> tuple[Deviation, ...]:
    """The entries of §9 `s9`, from `mdscan.scan`'s view of the file."""
    starts = _starts(lines, code, headings, s9)
    # Each entry ends where the next starts; the last at the end of §9.
    stops = [s.line - 1 for s in starts[1:]] + [s9.end_line]
    found = (_entry(lines, code, start, stop) for start, stop in zip(starts, stops, strict=False))
    return tuple(d for d in found if d is not None)


def _starts(lines: list[Line], code: list[bool], headings: Sequence[Heading],
            s9: Heading) -> list[_Start]:
    """Sub-headings of §9 when it has any, else its list items and `9.N` lines."""
    subs = [h for h in headings if s9.line < h.line <= s9.end_line]
    if subs:
        return [_Start(h.line, h.text, None, True) for h in subs]
    body = [ln for ln in lines[s9.line: s9.end_line] if not code[ln.no]]
    return [s for s in map(_list_start, body) if s is not None]


def _list_start(ln: Line) -> _Start | None:
    m = LIST.match(ln.body)
    if m is not None and not m.group(1):
        marker = m.group(2)
        listed = f"9.{marker[:-1]}" if marker[0].isdigit() else None
        return _Start(ln.no, ln.body[m.end():], listed, False)
    if re.match(r"(?:\*\*|__)?§?\s*9\.\d", ln.body):
        return _Start(ln.no, ln.body, None, False)
    return None


def _entry(lines: list[Line], code: list[bool], start: _Start, stop: int) -> Deviation | None:
    """The deviation on lines `start.line`..`stop` (None when it has no title)."""
    text = "\n".join(lines[x - 1].body for x in range(start.line, stop + 1) if not code[x])
    number, title = _title(_lead(lines, code, start, stop), heading=start.heading)
    if not title:
        return None
    return Deviation(number or start.listed, title, start.line, text, _paths(text),
                     tuple(dict.fromkeys(_SHA.findall(text))),
                     tuple(dict.fromkeys(int(p) for p in PR_REF.findall(text))))


_LEAD_LINES = 3  # lines a bold title may wrap over


def _lead(lines: list[Line], code: list[bool], start: _Start, stop: int) -> str:
    """The entry's first line, joined with the next ones while its bold lead is open (a
    title wrapped over lines: `11. **Vendored FlashAttention-2 (… ratio-6` / `split-KV
    decode)**: …`)."""
    first = start.first
    for x in range(start.line + 1, min(stop, start.line + _LEAD_LINES) + 1):
        if start.heading or first.count("**") % 2 == 0 or code[x]:
            break
        first = f"{first} {lines[x - 1].body.strip()}"
    return first


def _title(first: str, *, heading: bool = False) -> tuple[str | None, str]:
    """(number, title) from an entry's first line (marker already removed).

    A heading is all title; a list item's title is its bold lead, else the text up to
    the first dash, colon or full stop.
    """
    text = first.strip()
    bold = _BOLD.match(text)
    inner = bold.group(2).strip() if bold else text
    number = None
    m = _ENTRY_NUMBER.match(inner)
    if m is not None:
        number = m.group(1)
        inner = inner[m.end():].lstrip(" .:)—–-\t")
    if bold is None and not heading:
        end = _TITLE_END.search(inner)
        if end is not None:
            inner = inner[: end.start()]
    elif bold is not None and not inner:
        # `**9.3** Title — body`: the bold part was only the number.
        rest = text[bold.end():].lstrip(" .:)—–-\t")
        end = _TITLE_END.search(rest)
        inner = rest[: end.start()] if end else rest
    title = " ".join(inner.strip().strip("*_").rstrip(":.").split())
    return number, title


def _paths(text: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for m in _PATHLIKE.finditer(text):
        s = m.start()
        if s > 0 and text[s - 1] in "/:":
            continue  # part of a URL or a longer token
        p = m.group().rstrip(".,;:")
        if p.startswith(("http", "www.")) or "//" in p or p.startswith("/"):
            continue
        if len([part for part in p.split("/") if part]) < 2:
            continue  # `vllm/` alone would make every commit touch the deviation
        found[p] = None
    return tuple(found)


# -- deviations touched by a range ------------------------------------------------------------


class _RangeIndex:
    """The range indexed once by changed path, SHA and PR, so matching a deviation costs
    lookups and bisections rather than a scan of every commit (ranges reach 10,000)."""

    def __init__(self, commits: list[Commit]) -> None:
        self.order = {c.sha: i for i, c in enumerate(commits)}
        self.by_path: dict[str, list[Commit]] = {}
        self.by_pr: dict[int, list[Commit]] = {}
        for c in commits:
            for p in c.paths:
                self.by_path.setdefault(p, []).append(c)
            if c.pr is not None:
                self.by_pr.setdefault(c.pr, []).append(c)
        self.paths = sorted(self.by_path)
        self.shas = sorted((c.sha, c) for c in commits)

    def _sorted(self, found: dict[str, Commit]) -> list[Commit]:
        return sorted(found.values(), key=lambda c: self.order[c.sha])

    def touching(self, cited: str) -> list[Commit]:
        """Commits changing `cited` or, for a directory, anything under it."""
        base = cited.rstrip("/")
        found = {c.sha: c for c in self.by_path.get(base, ())}
        i = bisect.bisect_left(self.paths, base + "/")
        while i < len(self.paths) and self.paths[i].startswith(base + "/"):
            found.update((c.sha, c) for c in self.by_path[self.paths[i]])
            i += 1
        return self._sorted(found)

    def named(self, sha: str) -> list[Commit]:
        found = {}
        i = bisect.bisect_left(self.shas, (sha,))
        while i < len(self.shas) and self.shas[i][0].startswith(sha):
            found[self.shas[i][0]] = self.shas[i][1]
            i += 1
        return self._sorted(found)


def touched(inv: Cited, commits: Iterable[Commit], surf: Surface) -> list[str]:
    """Report lines, one per §9 deviation (keyed by title) that the range touches."""
    return _touched(inv.deviations, commits, surf)


@dataclass
class _Cites:
    """What one deviation (all entries of one title) cites, each once, in order."""

    first: Deviation
    paths: list[str] = field(default_factory=list)
    shas: list[str] = field(default_factory=list)
    prs: list[int] = field(default_factory=list)

    def add(self, d: Deviation) -> None:
        self.paths += [p for p in dict.fromkeys(d.paths) if p not in self.paths]
        self.shas += [s for s in dict.fromkeys(d.shas) if s not in self.shas]
        self.prs += [p for p in dict.fromkeys(d.prs) if p not in self.prs]


def _by_title(deviations: Iterable[Deviation]) -> list[_Cites]:
    merged: dict[str, _Cites] = {}
    for d in deviations:
        merged.setdefault(d.key, _Cites(d)).add(d)
    return list(merged.values())


def _touched(deviations: Iterable[Deviation], commits: Iterable[Commit],
             surf: Surface) -> list[str]:
    index = _RangeIndex(list(commits))
    by_port: dict[str, set[str]] = {}
    for up, files in surf.by_upstream.items():
        for f in files:
            by_port.setdefault(f, set()).add(up)
    out: list[str] = []
    for cites in _by_title(deviations):
        parts = _hits(cites, index, by_port)
        if parts:
            # The title is the inventory's (a person's text): escaped like any other.
            title = escape(cites.first.title.replace('"', "'"), reason=True)
            out.append(f"- {escape(cites.first.label)} \"{title}\": " + "; ".join(parts))
    return out


def _hits(cites: _Cites, index: _RangeIndex, by_port: dict[str, set[str]]) -> list[str]:
    """One part per cited path, SHA or PR that commits of the range touch or name."""
    parts = [part for cited in cites.paths for part in _path_hits(cited, index, by_port)]
    parts += [f"cites {code(sha)}, in the range: " + ", ".join(_ref(c) for c in hits)
              for sha in cites.shas if (hits := index.named(sha))]
    parts += [f"cites vllm#{pr}, in the range: "
              + ", ".join(f"`{short(c.sha)}`" for c in hits)
              for pr in cites.prs if (hits := index.by_pr.get(pr, []))]
    return parts


def _path_hits(cited: str, index: _RangeIndex, by_port: dict[str, set[str]]) -> list[str]:
    # A cited port file stands for the upstream files it mirrors.
    ups = [(cited, "")]
    if cited in by_port:
        ups = [(u, f" (via {escape(cited, reason=True)})") for u in sorted(by_port[cited])]
    return [f"{escape(up, reason=True)}{via} touched by " + ", ".join(_ref(c) for c in hits)
            for up, via in ups if (hits := index.touching(up))]


def _ref(c: Commit) -> str:
    pr = f" vllm#{c.pr}" if c.pr is not None else ""
    return f"`{short(c.sha)}`{pr}"


def deviations_touched(port: Layout, commits: list[Commit], surf: Surface) -> list[str]:
    """For the report: every §9 deviation the range touches ([] without an inventory or §9)."""
    file = port.root / port.config.inventory
    if not file.exists():
        return []
    lines = mdscan.split_lines(mdscan.read(file, rel=port.rel(file)))
    code, headings = mdscan.scan(lines)
    s9 = mdscan.section9(headings)
    if s9 is None:
        return []
    return _touched(parse(lines, code, headings, s9), commits, surf)
