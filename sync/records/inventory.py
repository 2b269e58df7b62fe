"""The porting inventory: tiered items with `(vllm#N)` references, and `annotate`.

Real inventories mix styles: tiers as headings (`## T0 — ...`, `### Tier 2`), items
as bullets or table rows carrying status markers (none / 🚧 `<commit>` / ✅
`<commit>`). The parser is tolerant of all of them and never raises on any text;
edits (`annotate`) are surgical: one insertion, every other byte kept. §9's entries
are parsed by `deviations` and kept on the record.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sync.infra.errors import MalformedRecord, UsageError
from sync.records import deviations, mdscan, mdtext
from sync.records.deviations import Deviation
from sync.records.layout import Layout
from sync.records.mdscan import FENCE, LIST, PR_REF, Heading, Line, split_lines

ItemKind = Literal["bullet", "table"]
ItemStatus = Literal["todo", "wip", "done"]
Where = Literal["row", "section", "already"]
TIERS = ("T0", "T1", "T2", "T3")

_TABLE_SEP = re.compile(r"\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*\Z")
_ROW_TIER = re.compile(r"\**(?:T([0-3])|[Tt]ier[ \t]*([0-3]))(?![\w.])")
_PR_SUFFIX = re.compile(r"(?:\s*\(#[0-9]+\))+\s*\Z")
_CYCLE_TITLE = re.compile(r"Sync \d{4}-\d{2}-\d{2}-[0-9a-f]{7}: INVENTORY\Z")


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
        return tuple(int(n) for n in PR_REF.findall(self.text))


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


def _row_tier(body: str) -> str | None:
    m = _ROW_TIER.match(body)
    return None if m is None else f"T{m.group(1) or m.group(2)}"


def parse(text: str, *, path: str) -> Inventory:
    """Parse the inventory; tolerant: any text gives an Inventory, never an exception."""
    lines = split_lines(text)
    code, headings = mdscan.scan(lines)
    head_at = {h.line: h for h in headings}
    items = _items(lines, code, head_at)
    section9 = mdscan.section9(headings)
    devs: tuple[Deviation, ...] = ()
    if section9 is not None:
        devs = deviations.parse(lines, code, headings, section9)
    return Inventory(path, text, mdscan.newline(lines), tuple(headings), tuple(items), section9,
                     devs)


def _items(lines: list[Line], code: list[bool], head_at: dict[int, Heading]) -> list[Item]:
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
        m = LIST.match(ln.body)
        if m is None:
            i += 1
            continue
        j = i + 1
        while j < n:
            nb = lines[j]
            body = nb.body
            if (code[nb.no] or nb.no in head_at or not body.strip() or LIST.match(body)
                    or body.strip().startswith(("|", ">")) or FENCE.match(body)):
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


def load(port: Layout) -> Inventory | None:
    """The port's inventory, or None when the file does not exist."""
    file = port.root / port.config.inventory
    if not file.exists():
        return None
    return read(file, rel=port.rel(file))


def read(file: Path, *, rel: str) -> Inventory:
    return parse(mdscan.read(file, rel=rel), path=rel)


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
        bullet += " " + mdtext.escape(mdtext.short_subject(bare))
    if paths:
        bullet += " — " + ", ".join(f"`{p}`" for p in paths)
    if note:
        bullet += f" — {note}"
    existing = next((h for h in inv.headings if h.text == title), None)
    if existing is not None:
        lines = split_lines(text)
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
    line = len(split_lines(before + gap)) + 5
    return Annotation("section", line, new, bullet)

