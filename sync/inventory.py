"""The porting inventory: tiered items with `(vllm#N)` references, and §9's deviations.

Real inventories mix styles: tiers as headings (`## T0 — ...`, `### Tier 2`), items
as bullets or table rows carrying status markers (none / 🚧 `<commit>` / ✅
`<commit>`), and §9 deviations either as sub-headings (`### 9.3 Title`) or as a
numbered list. The parser is tolerant of all of them and never raises on any text;
edits (`annotate`) are surgical: one insertion, every other byte kept.

Deviation numbers are not unique in real inventories (two `9.4`s exist), so a
deviation is identified by its title.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import report
from .atomic import read_text
from .errors import MalformedRecord, UsageError
from .history import Commit
from .port import Port
from .surface import Surface

ItemKind = Literal["bullet", "table"]
ItemStatus = Literal["todo", "wip", "done"]
Where = Literal["row", "section", "already"]
TIERS = ("T0", "T1", "T2", "T3")

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\Z")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LIST = re.compile(r"([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+|\Z)")
_TABLE_SEP = re.compile(r"\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*\Z")
_HEADING_TIER = re.compile(
    r"(?:§?\s*\d+(?:\.\d+)*\.?\s+)?(?:T([0-3])|[Tt]ier[ \t]*([0-3]))(?![\w.])")
_ROW_TIER = re.compile(r"\**(?:T([0-3])|[Tt]ier[ \t]*([0-3]))(?![\w.])")
_SECTION9 = re.compile(r"(?:§\s*)?9(?:\.(?!\d)|(?=[\s:)—–-])|\Z)|.*§\s*9(?![.\d])")
_ENTRY_NUMBER = re.compile(r"(?:§\s*)?(\d+(?:\.\d+)*)\.?(?=[\s:)—–-]|\Z)")
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_TITLE_END = re.compile(r"\s+[—–]\s|:\s|\s-\s|\.\s")
_PR_REF = re.compile(r"vllm#([0-9]{1,12})\b")
_SHA = re.compile(r"(?<![\w./#-])[0-9a-f]{7,40}(?![\w/])")
_PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]*)+", re.A)
_PR_SUFFIX = re.compile(r"(?:\s*\(#[0-9]+\))+\s*\Z")
_CYCLE_TITLE = re.compile(r"Sync \d{4}-\d{2}-\d{2}-[0-9a-f]{7}: INVENTORY\Z")


@dataclass(frozen=True)
class _Line:
    no: int  # 1-based
    start: int  # offset of the first character
    body: str  # without its terminator
    nl: str  # "\n", "\r\n", "\r" or "" at end of file


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int
    start: int  # offset of the heading line
    end_line: int  # last line of its section (before the next heading of the same or a
    # higher level)
    tier: str | None


@dataclass(frozen=True)
class Item:
    """One inventory row: a list item (with its continuation lines) or a table row."""

    kind: ItemKind
    line: int
    end_line: int
    start: int
    end: int  # offset just past the last content character of the row (before its newline)
    text: str
    tier: str | None
    section: str | None  # the innermost heading above it

    @property
    def status(self) -> ItemStatus:
        if "✅" in self.text:
            return "done"
        return "wip" if "🚧" in self.text else "todo"

    @property
    def prs(self) -> tuple[int, ...]:
        return tuple(int(n) for n in _PR_REF.findall(self.text))


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


@dataclass(frozen=True)
class Inventory:
    path: str
    text: str
    newline: str
    headings: tuple[Heading, ...]
    items: tuple[Item, ...]
    section9: Heading | None
    deviations: tuple[Deviation, ...]

    def rows(self) -> tuple[Item, ...]:
        """Items that are inventory rows proper: they have a tier and are not in §9."""
        return tuple(i for i in self.items if i.tier is not None and not self.in_section9(i.line))

    def in_section9(self, line: int) -> bool:
        s = self.section9
        return s is not None and s.line <= line <= s.end_line


def title_key(title: str) -> str:
    return " ".join(title.replace("*", "").replace("`", "").split()).casefold()


def _split_lines(text: str) -> list[_Line]:
    """Lines as markdown and editors count them: split at LF only, a CR before it kept as
    part of the terminator (str.splitlines would also split at form feeds and U+2028)."""
    out: list[_Line] = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        stop = len(text) if end < 0 else end + 1
        raw = text[pos:stop]
        body = raw[:-1] if raw.endswith("\n") else raw
        body = body[:-1] if body.endswith("\r") and raw.endswith("\n") else body
        out.append(_Line(len(out) + 1, pos, body, raw[len(body):]))
        pos = stop
    return out


def _newline(lines: Sequence[_Line]) -> str:
    for ln in lines:
        if ln.nl:
            return ln.nl
    return "\n"


def _heading_tier(text: str) -> str | None:
    m = _HEADING_TIER.match(text)
    return None if m is None else f"T{m.group(1) or m.group(2)}"


def _row_tier(body: str) -> str | None:
    m = _ROW_TIER.match(body)
    return None if m is None else f"T{m.group(1) or m.group(2)}"


def _is_section9(text: str) -> bool:
    return _SECTION9.match(text) is not None


def parse(text: str, *, path: str) -> Inventory:
    """Parse the inventory; tolerant: any text gives an Inventory, never an exception."""
    lines = _split_lines(text)
    raw_heads: list[tuple[int, str, _Line]] = []
    code = [False] * (len(lines) + 2)
    fence: str | None = None
    for ln in lines:
        f = _FENCE.match(ln.body)
        if fence is not None:
            code[ln.no] = True
            if f is not None and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) \
                    and not ln.body[f.end():].strip():
                fence = None
            continue
        if f is not None:
            fence = f.group(1)
            code[ln.no] = True
            continue
        h = _HEADING.match(ln.body)
        if h is not None:
            title = (h.group(2) or "").strip()
            title = re.sub(r"(?:^|[ \t]+)#+\Z", "", title).strip()
            raw_heads.append((len(h.group(1)), title, ln))
    headings: list[Heading] = []
    for i, (level, title, ln) in enumerate(raw_heads):
        end = len(lines)
        for level2, _, ln2 in raw_heads[i + 1:]:
            if level2 <= level:
                end = ln2.no - 1
                break
        headings.append(Heading(level, title, ln.no, ln.start, end, _heading_tier(title)))
    head_at = {h.line: h for h in headings}
    items = _items(lines, code, head_at)
    section9 = next((h for h in headings if _is_section9(h.text)), None)
    deviations: tuple[Deviation, ...] = ()
    if section9 is not None:
        deviations = _deviations(lines, code, headings, section9)
    return Inventory(path, text, _newline(lines), tuple(headings), tuple(items), section9,
                     deviations)


def _items(lines: list[_Line], code: list[bool], head_at: dict[int, Heading]) -> list[Item]:
    items: list[Item] = []
    stack: list[Heading] = []
    i = 0
    n = len(lines)
    while i < n:
        ln = lines[i]
        if code[ln.no]:
            i += 1
            continue
        if ln.no in head_at:
            h = head_at[ln.no]
            while stack and stack[-1].level >= h.level:
                stack.pop()
            stack.append(h)
            i += 1
            continue
        tier = next((h.tier for h in reversed(stack) if h.tier is not None), None)
        section = stack[-1].text if stack else None
        # Rows of a cycle's INVENTORY section carry their tier themselves (`- T2 (vllm#N) ...`).
        own_tier = any(_CYCLE_TITLE.match(h.text) for h in stack)
        stripped = ln.body.strip()
        if stripped.startswith("|"):
            nxt = lines[i + 1].body.strip() if i + 1 < n else ""
            is_header = nxt.startswith("|") and _TABLE_SEP.match(nxt) is not None
            if not is_header and _TABLE_SEP.match(stripped) is None:
                items.append(Item("table", ln.no, ln.no, ln.start, ln.start + len(ln.body),
                                  stripped, tier or (_row_tier(_first_cell(stripped)) if own_tier
                                                    else None), section))
            i += 1
            continue
        m = _LIST.match(ln.body)
        if m is None:
            i += 1
            continue
        j = i + 1
        while j < n:
            nb = lines[j]
            body = nb.body
            if (code[nb.no] or nb.no in head_at or not body.strip() or _LIST.match(body)
                    or body.strip().startswith(("|", ">")) or _FENCE.match(body)):
                break
            j += 1
        last = lines[j - 1]
        joined = " ".join(x.body.strip() for x in lines[i:j])
        content = ln.body[m.end():]
        items.append(Item("bullet", ln.no, last.no, ln.start,
                          last.start + len(last.body.rstrip()), joined,
                          tier or (_row_tier(content.lstrip()) if own_tier else None),
                          section))
        i = j
    return items


def _first_cell(row: str) -> str:
    return row.lstrip("|").split("|", 1)[0].strip()


def _deviations(lines: list[_Line], code: list[bool], headings: list[Heading],
                s9: Heading) -> tuple[Deviation, ...]:
    body = [ln for ln in lines[s9.line: s9.end_line] if not code[ln.no]]
    subs = [h for h in headings if s9.line < h.line <= s9.end_line]
    # (line, first-line text without its marker, the list's own number, from a heading)
    starts: list[tuple[int, str, str | None, bool]] = []
    if subs:
        starts = [(h.line, h.text, None, True) for h in subs]
    else:
        for ln in body:
            m = _LIST.match(ln.body)
            if m is not None and not m.group(1):
                marker = m.group(2)
                listed = f"9.{marker[:-1]}" if marker[0].isdigit() else None
                starts.append((ln.no, ln.body[m.end():], listed, False))
            elif re.match(r"(?:\*\*|__)?§?\s*9\.\d", ln.body):
                starts.append((ln.no, ln.body, None, False))
    out: list[Deviation] = []
    for k, (line, first, listed, heading) in enumerate(starts):
        stop = starts[k + 1][0] - 1 if k + 1 < len(starts) else s9.end_line
        text = "\n".join(lines[x - 1].body for x in range(line, stop + 1) if not code[x])
        number, title = _title(first, heading=heading)
        number = number or listed
        if not title:
            continue
        out.append(Deviation(number, title, line, text, _paths(text),
                             tuple(dict.fromkeys(_SHA.findall(text))),
                             tuple(dict.fromkeys(int(p) for p in _PR_REF.findall(text)))))
    return tuple(out)


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


def load(port: Port) -> Inventory | None:
    """The port's inventory, or None when the file does not exist."""
    file = port.root / port.config.inventory
    if not file.exists():
        return None
    return read(file, rel=port.rel(file))


def read(file: Path, *, rel: str) -> Inventory:
    try:
        text = read_text(file)
    except UnicodeDecodeError:
        raise MalformedRecord("not UTF-8", "re-save it as UTF-8", path=rel) from None
    return parse(text, path=rel)


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


def touched(inv: Inventory, commits: Iterable[Commit], surf: Surface) -> list[str]:
    """Report lines, one per §9 deviation (keyed by title) that the range touches."""
    index = _RangeIndex(list(commits))
    by_port: dict[str, set[str]] = {}
    for up, files in surf.by_upstream.items():
        for f in files:
            by_port.setdefault(f, set()).add(up)
    merged: dict[str, tuple[Deviation, list[str], list[str], list[int]]] = {}
    for d in inv.deviations:
        slot = merged.setdefault(d.key, (d, [], [], []))
        slot[1].extend(p for p in d.paths if p not in slot[1])
        slot[2].extend(s for s in d.shas if s not in slot[2])
        slot[3].extend(p for p in d.prs if p not in slot[3])
    out: list[str] = []
    for d, paths, shas, prs in merged.values():
        parts: list[str] = []
        for cited in paths:
            ups = [(cited, "")]
            if cited in by_port:
                ups = [(u, f" (via {cited})") for u in sorted(by_port[cited])]
            for up, via in ups:
                hits = index.touching(up)
                if hits:
                    parts.append(f"{up}{via} touched by " + ", ".join(_ref(c) for c in hits))
        for sha in shas:
            hits = index.named(sha)
            if hits:
                parts.append(f"cites `{sha}`, in the range: " + ", ".join(_ref(c) for c in hits))
        for pr in prs:
            hits = index.by_pr.get(pr, [])
            if hits:
                parts.append(f"cites vllm#{pr}, in the range: "
                             + ", ".join(f"`{c.sha[:report.SHA_LEN]}`" for c in hits))
        if parts:
            title = d.title.replace('"', "'")
            out.append(f"- {d.label} \"{title}\": " + "; ".join(parts))
    return out


def _ref(c: Commit) -> str:
    pr = f" vllm#{c.pr}" if c.pr is not None else ""
    return f"`{c.sha[:report.SHA_LEN]}`{pr}"


def deviations_touched(port: Port, commits: list[Commit], surf: Surface) -> list[str]:
    """For the report: every §9 deviation the range touches ([] without an inventory or §9)."""
    inv = load(port)
    if inv is None or inv.section9 is None:
        return []
    return touched(inv, commits, surf)


# -- annotate ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Annotation:
    where: Where
    line: int  # the row's line (for "section": the new bullet's line)
    text: str  # the whole new file text (unchanged for "already")
    row: str  # the annotated row as it now reads


def cycle_title(date: str, target: str) -> str:
    return f"Sync {date}-{target[:7]}: INVENTORY"


def cites_path(path: str, text: str) -> bool:
    return re.search(rf"(?<![\w./-]){re.escape(path)}(?![\w/-]|\.\w)", text) is not None


def _ref_in(pr: int, text: str) -> bool:
    return re.search(rf"vllm#{pr}\b", text) is not None


def _line_text(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start: len(text) if end < 0 else end].rstrip("\r")


def annotate(inv: Inventory, *, pr: int, tier: str, paths: Sequence[str], subject: str | None,
             note: str | None, section_title: str | None, intro: str,
             row_line: int | None = None) -> Annotation:
    """Record `(vllm#PR)` on the row citing one of `paths`, else in the cycle's section.

    `section_title` is None when no cycle is open: then only an existing row will do.
    """
    if tier not in TIERS:
        raise UsageError(f"tier {tier!r} is not one of {', '.join(TIERS)}", "pass --tier T0..T3")
    note = " ".join(note.split()) if note else None
    text = inv.text
    rows = inv.rows()
    for r in rows:
        if _ref_in(pr, r.text):
            return Annotation("already", r.line, text, _line_text(text, r.start))
    if row_line is not None:
        chosen = [r for r in rows if r.line <= row_line <= r.end_line]
        if not chosen:
            raise UsageError(f"{inv.path}:{row_line} is not an inventory row under a tier",
                             "give the line of a bullet or table row in T0..T3")
    else:
        chosen = [r for r in rows if any(cites_path(p, r.text) for p in paths)]
        if len(chosen) > 1:
            same = [r for r in chosen if r.tier == tier]
            if len(same) == 1:
                chosen = same
            else:
                raise UsageError(
                    f"{len(chosen)} inventory rows cite {', '.join(paths)} (lines "
                    + ", ".join(str(r.line) for r in chosen) + ")",
                    "pick one with --row LINE")
    tag = f"(vllm#{pr})" if not note else f"(vllm#{pr} — {note})"
    if chosen:
        r = chosen[0]
        if r.tier != tier:
            raise UsageError(
                f"{inv.path}:{r.line}: the row citing this is under {r.tier}, not {tier}",
                "moving an item between tiers is a hand edit; pass its current tier")
        at = _row_insert_at(text, r, paths)
        new = text[:at] + " " + tag + text[at:]
        return Annotation("row", r.line, new, _line_text(new, _line_start(new, at)))
    if section_title is None:
        raise UsageError(
            f"no inventory row cites {', '.join(paths) or 'this item'} and no sync cycle is "
            "open for a section", "run 'upstream-sync fetch' or 'sync' first, or pass --row")
    return _in_section(inv, pr, tier, paths, subject, note, section_title, intro)


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _row_insert_at(text: str, r: Item, paths: Sequence[str]) -> int:
    if r.kind == "bullet":
        end = r.end
        while end > r.start and text[end - 1] in " \t":
            end -= 1
        return end
    # A table row: at the end of the cell citing the path (or the last cell).
    row = text[r.start: r.end]
    bars = [m.start() for m in re.finditer(r"(?<!\\)\|", row)]
    cells = list(itertools.pairwise(bars))
    target = next((c for c in cells if any(cites_path(p, row[c[0] + 1: c[1]]) for p in paths)),
                  cells[-1] if cells else None)
    if target is None:
        return r.end
    end = target[1]
    while end > target[0] + 1 and row[end - 1] in " \t":
        end -= 1
    return r.start + end


def _in_section(inv: Inventory, pr: int, tier: str, paths: Sequence[str], subject: str | None,
                note: str | None, title: str, intro: str) -> Annotation:
    text, nl = inv.text, inv.newline
    bullet = f"- {tier} (vllm#{pr})"
    if subject:
        bare = _PR_SUFFIX.sub("", subject) or subject  # the (vllm#N) just written says it
        bullet += " " + report.escape(report.short_subject(bare))
    if paths:
        bullet += " — " + ", ".join(f"`{p}`" for p in paths)
    if note:
        bullet += f" — {note}"
    existing = next((h for h in inv.headings if h.text == title), None)
    if existing is not None:
        lines = _split_lines(text)
        last = max((ln for ln in lines[existing.line - 1: existing.end_line] if ln.body.strip()),
                   key=lambda ln: ln.no)
        at = last.start + len(last.body) + len(last.nl)
        lead = "" if last.nl else nl
        new = text[:at] + lead + bullet + nl + text[at:]
        return Annotation("section", last.no + 1, new, bullet)
    s9 = inv.section9
    if s9 is None:
        raise MalformedRecord(
            "the inventory has no §9 (deviations) section: the cycle's INVENTORY section goes "
            "just before it", "restore the '## 9. Deviations' heading, then annotate again",
            path=inv.path)
    before = text[: s9.start]
    gap = "" if not before or before.endswith(("\n\n", "\n\r\n")) else nl
    if before and not before.endswith("\n"):
        gap = nl + nl
    block = (f"{'#' * s9.level} {title}{nl}{nl}{intro}{nl}{nl}{bullet}{nl}{nl}")
    new = before + gap + block + text[s9.start:]
    line = len(_split_lines(before + gap)) + 5
    return Annotation("section", line, new, bullet)

