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
from dataclasses import dataclass, replace
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
    rows = _Rows(lines, code, head_at)
    items: list[Item] = []
    stack: list[Heading] = []  # the headings the current line is under, outermost first
    i = 0
    while i < len(lines):
        ln = lines[i]
        if code[ln.no]:
            i += 1
        elif ln.no in head_at:
            _nest(stack, head_at[ln.no])
            i += 1
        else:
            item, i = rows.item_at(i, _Scope.of(stack))
            if item is not None:
                items.append(item)
    return items


def _nest(stack: list[Heading], h: Heading) -> None:
    while stack and stack[-1].level >= h.level:
        stack.pop()
    stack.append(h)


@dataclass(frozen=True)
class _Scope:
    """What the headings above a row say about it."""

    tier: str | None  # the innermost tier heading's
    section: str | None  # the innermost heading's text
    own_tier: bool  # in a cycle's INVENTORY section, where rows carry their tier themselves

    @classmethod
    def of(cls, stack: list[Heading]) -> _Scope:
        return cls(next((h.tier for h in reversed(stack) if h.tier is not None), None),
                   stack[-1].text if stack else None,
                   any(_CYCLE_TITLE.match(h.text) for h in stack))

    def tier_of(self, lead: str) -> str | None:
        """The row's tier; `lead` is its text after the marker (`T2 (vllm#N) ...`)."""
        if self.tier is not None or not self.own_tier:
            return self.tier
        return _row_tier(lead)


@dataclass(frozen=True)
class _Rows:
    """Reads the row starting at a line: a table row, or a list item and its continuation."""

    lines: list[Line]
    code: list[bool]
    head_at: dict[int, Heading]

    def item_at(self, i: int, scope: _Scope) -> tuple[Item | None, int]:
        """(the row at line index `i`, if it is one; the index of the line after it)."""
        ln = self.lines[i]
        stripped = ln.body.strip()
        if stripped.startswith("|"):
            return self._table_row(i, stripped, scope), i + 1
        m = LIST.match(ln.body)
        if m is None:
            return None, i + 1
        j = i + 1
        while j < len(self.lines) and not self._ends_item(self.lines[j]):
            j += 1
        return self._bullet(i, j, ln.body[m.end():], scope), j

    def _table_row(self, i: int, stripped: str, scope: _Scope) -> Item | None:
        nxt = self.lines[i + 1].body.strip() if i + 1 < len(self.lines) else ""
        is_header = nxt.startswith("|") and _TABLE_SEP.match(nxt) is not None
        if is_header or _TABLE_SEP.match(stripped) is not None:
            return None
        ln = self.lines[i]
        tier = scope.tier_of(_first_cell(stripped)) or _cell_tier(stripped)
        return Item("table", ln.no, ln.no, ln.start, ln.start + len(ln.body), stripped, tier,
                    scope.section)

    def _ends_item(self, ln: Line) -> bool:
        """Whether `ln` is not a continuation line of the list item above it."""
        body = ln.body
        return (self.code[ln.no] or ln.no in self.head_at or not body.strip()
                or LIST.match(body) is not None or body.strip().startswith(("|", ">"))
                or FENCE.match(body) is not None)

    def _bullet(self, i: int, j: int, content: str, scope: _Scope) -> Item:
        ln, last = self.lines[i], self.lines[j - 1]
        joined = " ".join(x.body.strip() for x in self.lines[i:j])
        return Item("bullet", ln.no, last.no, ln.start, last.start + len(last.body.rstrip()),
                    joined, scope.tier_of(content.lstrip()), scope.section)


def _first_cell(row: str) -> str:
    return row.lstrip("|").split("|", 1)[0].strip()


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def _cell_tier(row: str) -> str | None:
    """A table row outside a tier heading names its tier in a cell of its own (the last
    such): `| MLA family | DeepSeek V3 | ... | T2 |`, `| ... | **T0 (the gate)** |`."""
    return next((tier for c in reversed(_cells(row)) if (tier := _row_tier(c))), None)


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
    tier: str | None = None  # "already": the tier the row is recorded under


def cycle_title(date: str, target: str) -> str:
    return f"Sync {date}-{target[:7]}: INVENTORY"


def cites_path(path: str, text: str) -> bool:
    """Whether `text` names `path` as inventories write it: whole, without its root
    (`v1/engine/async_llm.py` for `vllm/v1/engine/async_llm.py`), or by a folder holding it
    (`v1/kv_offload/`, two parts at least below the root). A brace list names each path it
    makes (`v1/worker/gpu/{dp,pp}_utils.py`), not the folder before it."""
    text = _BRACES.sub(_expand, text) if "{" in text else text
    return any(re.search(rf"(?<![\w./-]){re.escape(s)}(?![\w/{{-]|\.\w)", text) is not None
               for s in _spellings(path))


_BRACES = re.compile(r"(?P<head>[\w./-]*)\{(?P<names>[\w.-]+(?:,\s?[\w.-]+)+)\}"
                     r"(?P<tail>[\w./-]*)", re.A)


def _expand(m: re.Match[str]) -> str:
    return " ".join(f"{m['head']}{n.strip()}{m['tail']}" for n in m["names"].split(","))


def _spellings(path: str) -> list[str]:
    """`path`, without its root, and each folder holding it (a folder ends in `/`)."""
    parts = path.split("/")
    out = [path]
    if len(parts) >= 3:
        out.append("/".join(parts[1:]))
    for k in range(len(parts) - 1, 2, -1):
        out += ["/".join(parts[:k]) + "/", "/".join(parts[1:k]) + "/"]
    return out


def _ref_in(pr: int, text: str) -> bool:
    return re.search(rf"vllm#{pr}\b", text) is not None


def _line_text(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start: len(text) if end < 0 else end].rstrip("\r")


@dataclass(frozen=True)
class Request:
    """What `annotate` records: `(vllm#PR)` in `tier`, for the upstream `paths`."""

    pr: int
    tier: str
    paths: Sequence[str]
    subject: str | None  # the upstream subject, for a new bullet
    note: str | None
    section_title: str | None  # the cycle's INVENTORY section; None when no cycle is open
    intro: str  # the first paragraph of a new section
    row_line: int | None = None  # the row to annotate, when several cite the paths


def annotate(inv: Inventory, req: Request) -> Annotation:
    """Record `(vllm#PR)` on the row citing one of `paths`, else in the cycle's section.

    `section_title` is None when no cycle is open: then only an existing row will do.
    """
    if req.tier not in TIERS:
        raise UsageError(f"tier {req.tier!r} is not one of {', '.join(TIERS)}",
                         "pass --tier T0..T3")
    # The note is a person's text: one line, escaped, wherever it is written.
    req = replace(req, note=mdtext.escape(req.note, reason=True) if req.note else None)
    rows = inv.rows()
    done = next((r for r in rows if _ref_in(req.pr, r.text)), None)
    if done is not None:
        return Annotation("already", done.line, inv.text, _line_text(inv.text, done.start),
                          done.tier)
    row = _row_at(inv, rows, req.row_line) if req.row_line is not None else (
        _row_citing(rows, req) or _row_naming(inv, rows, req))
    if row is not None:
        return _on_row(inv, row, req)
    if req.section_title is None:
        raise UsageError(
            f"no inventory row cites {', '.join(req.paths) or 'this item'} and no sync cycle "
            "is open for a section", "run 'upstream-sync fetch' or 'sync' first, or pass --row")
    return _in_section(inv, req, req.section_title)


def _row_at(inv: Inventory, rows: Sequence[Item], line: int) -> Item:
    chosen = [r for r in rows if r.line <= line <= r.end_line]
    if not chosen:
        raise UsageError(f"{inv.path}:{line} is not an inventory row under a tier",
                         "give the line of a bullet or table row in T0..T3")
    return chosen[0]


def _row_citing(rows: Sequence[Item], req: Request) -> Item | None:
    """The one row citing a path; of several, the one in the asked tier (else refused)."""
    chosen = [r for r in rows if any(cites_path(p, r.text) for p in req.paths)]
    if len(chosen) > 1:
        same = [r for r in chosen if r.tier == req.tier]
        if len(same) != 1:
            raise UsageError(
                f"{len(chosen)} inventory rows cite {', '.join(req.paths)} (lines "
                + ", ".join(str(r.line) for r in chosen) + ")", "pick one with --row LINE")
        chosen = same
    return chosen[0] if chosen else None


_GENERIC = frozenset((
    "add", "adds", "added", "support", "supports", "fix", "fixes", "fixed", "the", "and", "for",
    "with", "from", "into", "via", "per", "use", "uses", "when", "every", "all", "new",
    "update", "updates", "bump", "model", "models", "layer", "layers", "misc", "core",
    "kernel", "perf", "bugfix", "doc", "docs", "test", "tests", "refactor", "chore", "feature",
    "features", "not", "only", "also", "its", "this", "that", "are", "was"))


def _words(text: str) -> set[str]:
    """The distinctive words of a subject or a row: lowercase, 3+ characters, not generic."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower())
            if len(w) >= 3 and not w.isdigit() and w not in _GENERIC}


# Distinctive words a row must share with the subject to be taken for the feature without
# a cited path: one shared word ("encoder") names unrelated rows as often as the right one,
# and a wrong row is a silent edit where the cycle's section would only be a new bullet.
MIN_SHARED_WORDS = 2


def _row_naming(inv: Inventory, rows: Sequence[Item], req: Request) -> Item | None:
    """The one row of the asked tier that names the feature: it shares at least
    `MIN_SHARED_WORDS` distinctive words with the upstream subject (`Fused MoE layers` →
    `Fused MoE layer and per-device kernel configs`), and the most of them, a word counting
    less the more rows of the tier use it. None when no row shares that many."""
    if not req.subject:
        return None
    wanted = _words(_PR_SUFFIX.sub("", req.subject))
    # A cycle section's bullet is one upstream PR, not a feature of the port: another PR
    # sharing its words is another item (walk-s10 U2).
    tier = [(r, shared) for r in rows if r.tier == req.tier
            and not _CYCLE_TITLE.match(r.section or "")
            if len(shared := _words(PR_REF.sub("", r.text)) & wanted) >= MIN_SHARED_WORDS]
    used: dict[str, int] = {}
    for _, words in tier:
        for w in words:
            used[w] = used.get(w, 0) + 1
    scored = [(round(sum(1 / used[w] for w in words), 6), r) for r, words in tier if words]
    best = max((s for s, _ in scored), default=0.0)
    top = [r for s, r in scored if s == best]
    if len(top) > 1:
        raise UsageError(f"{len(top)} {req.tier} rows of {inv.path} name this feature equally "
                         "(lines " + ", ".join(str(r.line) for r in top) + ")",
                         "pick one with --row LINE")
    return top[0] if top else None


def _on_row(inv: Inventory, r: Item, req: Request) -> Annotation:
    if r.tier != req.tier:
        raise UsageError(
            f"{inv.path}:{r.line}: the row citing this is under {r.tier}, not {req.tier}",
            "moving an item between tiers is a hand edit; pass its current tier")
    tag = f"(vllm#{req.pr} — {req.note})" if req.note else f"(vllm#{req.pr})"
    text = inv.text
    at = _row_insert_at(text, r, req)
    new = text[:at] + " " + tag + text[at:]
    return Annotation("row", r.line, new, _line_text(new, _line_start(new, at)))


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _before_blanks(text: str, start: int, end: int) -> int:
    """`end` moved back over spaces and tabs, never before `start`."""
    while end > start and text[end - 1] in " \t":
        end -= 1
    return end


def _row_insert_at(text: str, r: Item, req: Request) -> int:
    if r.kind == "bullet":
        return _before_blanks(text, r.start, r.end)
    return r.start + _cell_end(text[r.start: r.end], req)


def _cell_end(row: str, req: Request) -> int:
    """In a table row: the end of the cell citing a path, else of the one naming the
    feature most, else of the last cell."""
    bars = [m.start() for m in re.finditer(r"(?<!\\)\|", row)]
    cells = list(itertools.pairwise(bars))
    if not cells:
        return len(row)
    cited = next((c for c in cells if any(cites_path(p, row[c[0] + 1: c[1]]) for p in req.paths)),
                 None)
    if cited is None and req.subject:
        wanted = _words(_PR_SUFFIX.sub("", req.subject))
        score, best = max(((len(wanted & _words(row[c[0] + 1: c[1]])), c) for c in cells),
                          key=lambda sc: sc[0])
        cited = best if score else None
    lo, hi = cited or cells[-1]
    return _before_blanks(row, lo + 1, hi)


def _bullet(req: Request) -> str:
    bullet = f"- {req.tier} (vllm#{req.pr})"
    if req.subject:
        bare = _PR_SUFFIX.sub("", req.subject) or req.subject  # the (vllm#N) just written says it
        bullet += " " + mdtext.escape(mdtext.short_subject(bare))
    if req.paths:
        bullet += " — " + ", ".join(mdtext.code(p) for p in req.paths)
    if req.note:
        bullet += f" — {req.note}"
    return bullet


def _in_section(inv: Inventory, req: Request, title: str) -> Annotation:
    bullet = _bullet(req)
    existing = next((h for h in inv.headings if h.text == title), None)
    if existing is not None:
        return _append_to(inv, existing, bullet)
    return _new_section(inv, title, req.intro, bullet)


def _append_to(inv: Inventory, h: Heading, bullet: str) -> Annotation:
    """`bullet` after the last non-blank line of the section under `h`."""
    text, nl = inv.text, inv.newline
    lines = split_lines(text)
    last = max((ln for ln in lines[h.line - 1: h.end_line] if ln.body.strip()),
               key=lambda ln: ln.no)
    at = last.start + len(last.body) + len(last.nl)
    new = text[:at] + mdscan.line_break(text[:at], nl, rel=inv.path) + bullet + nl + text[at:]
    return Annotation("section", last.no + 1, new, bullet)


def _new_section(inv: Inventory, title: str, intro: str, bullet: str) -> Annotation:
    """A new section holding `bullet`, just before §9."""
    text, nl = inv.text, inv.newline
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
