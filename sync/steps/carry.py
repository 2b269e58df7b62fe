"""Carry-over: what this cycle still owes, and what the previous stalled cycle left.

Open PORT-NOW items (no ledger row names their PR or SHA), PENDING gates with
their handoffs, INVENTORY items not yet annotated in the inventory, and the
carry-over section of the newest earlier report that did not advance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sync.infra.atomic import read_text
from sync.port import Port
from sync.records import cycle, gates, ledger
from sync.steps.classify import Entry

_REPORT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-[0-9a-f]{7}\.md$")


def _inventory_text(port: Port) -> str:
    path = port.root / port.config.inventory
    return read_text(path) if path.exists() else ""


def pr_refs(text: str) -> set[int]:
    """Every whole `vllm#N` in `text`: a row for vllm#1010 does not name vllm#101."""
    return {int(n) for n in re.findall(r"vllm#(\d+)\b", text)}


@dataclass(frozen=True)
class LedgerRefs:
    prs: frozenset[int]
    text: str

    @classmethod
    def of(cls, ledger_text: str) -> LedgerRefs:
        return cls(frozenset(pr_refs(ledger_text)), ledger_text)


def ported(entry: Entry, refs: LedgerRefs) -> bool:
    """A ledger row names the entry's PR or its SHA."""
    return (entry.pr is not None and entry.pr in refs.prs) or entry.sha[:10] in refs.text


def annotated(entry: Entry, prs: set[int]) -> bool:
    return entry.pr is not None and entry.pr in prs


def own_lines(port: Port, target: str, entries: Iterable[Entry]) -> list[str]:
    led = LedgerRefs.of(ledger.rows_text(port.root / port.config.ledger,
                                         rel=port.config.ledger))
    inv = pr_refs(_inventory_text(port))
    groups: dict[str, list[str]] = {"UNCLASSIFIED": [], "PORT-NOW": [], "INVENTORY": []}
    for e in entries:
        pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
        if e.disposition == "PORT-NOW" and not ported(e, led):
            groups["PORT-NOW"].append(f"- PORT-NOW open: `{e.sha[:10]}` {pr} (no ledger row yet)")
        elif e.disposition == "INVENTORY" and not annotated(e, inv):
            groups["INVENTORY"].append(
                f"- INVENTORY unannotated: `{e.sha[:10]}` {pr} (not in the inventory)")
        elif e.disposition == "UNCLASSIFIED":
            groups["UNCLASSIFIED"].append(f"- UNCLASSIFIED: `{e.sha[:10]}` {pr} (decide it)")
    out = [line for group in groups.values() for line in group]
    for g in gates.load(port, target):
        if g.status != "PASS":
            out.append(f"- gate {g.name} {g.status}" + (f": run `{g.handoff}`" if g.handoff
                                                         else ""))
    return out


def previous(port: Port, current: Path, hint: str = "") -> tuple[Path, list[str]] | None:
    """The previous cycle's report, if it did not advance, with its carry-over lines.

    `hint` (recorded when a retarget replaced that cycle) names it; without one, the
    newest earlier report by name (date first) is taken.
    """
    if not port.sync_dir.is_dir():
        return None
    if hint and _REPORT_NAME.match(hint) and (port.sync_dir / hint).exists():
        candidates = [port.sync_dir / hint]
    else:
        candidates = sorted(p for p in port.sync_dir.iterdir()
                            if _REPORT_NAME.match(p.name) and p.name < current.name)
    for path in reversed(candidates):
        text = read_text(path)
        if "- Cycle state: ADVANCED" in text:
            return None
        lines, inside = [], False
        for raw in text.splitlines():
            if raw.startswith("## "):
                inside = raw.strip() == "## Carry-over"
                continue
            if inside and raw.startswith("- ") and not raw.startswith("- from "):
                lines.append(raw[2:])
        return path, lines
    return None


def lines(port: Port, c: cycle.Cycle, entries: Iterable[Entry]) -> list[str]:
    out = own_lines(port, c.target, entries)
    current = port.sync_dir / cycle.report_name(c)
    prev = previous(port, current, c.previous_report)
    if prev is not None:
        out += [f"- from {prev[0].name}: {line}" for line in prev[1]]
    return out
