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

from sync.port import Port
from sync.records import cycle, gates, ledger
from sync.steps.classify import Entry
from sync.upstream.gitio import short

_REPORT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-[0-9a-f]{7}\.md$")


def pr_refs(text: str) -> set[int]:
    """Every whole `vllm#N` in `text`: a row for vllm#1010 does not name vllm#101."""
    return {int(n) for n in re.findall(r"vllm#(\d+)\b", text)}


@dataclass(frozen=True)
class LedgerRefs:
    """What the ledger's rows name, and why nothing can be said when it cannot be read."""

    refs: ledger.Refs
    read: ledger.Read

    @classmethod
    def of(cls, read: ledger.Read) -> LedgerRefs:
        return cls(ledger.Refs.of(read.rows), read)

    @property
    def prs(self) -> frozenset[int]:
        return self.refs.prs

    @property
    def text(self) -> str:
        return self.refs.text

    def unreadable(self, affects: str) -> str | None:
        return self.read.unreadable(affects)


def ledger_refs(port: Port) -> LedgerRefs:
    """What the port's ledger rows name (malformed rows included)."""
    return LedgerRefs.of(port.ledger_read())


def ported(entry: Entry, refs: LedgerRefs) -> bool:
    """A ledger row names the entry's PR, or its commit by a 7+ character SHA prefix."""
    return refs.refs.names(entry.sha, entry.pr)


UNREADABLE_PORT_NOW = "every PORT-NOW commit below shows as open because no row can be checked"


def annotated(entry: Entry, prs: set[int]) -> bool:
    return entry.pr is not None and entry.pr in prs


def _owed(e: Entry, led: LedgerRefs, inv: set[int]) -> str | None:
    """The carry-over line of an entry this cycle still owes work on, if it does."""
    pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
    if e.disposition == "PORT-NOW" and not ported(e, led):
        why = "ledger unreadable" if led.read.problem is not None else "no ledger row yet"
        return f"- PORT-NOW open: `{short(e.sha)}` {pr} ({why})"
    if e.disposition == "INVENTORY" and not annotated(e, inv):
        return f"- INVENTORY unannotated: `{short(e.sha)}` {pr} (not in the inventory)"
    if e.disposition == "UNCLASSIFIED":
        return f"- UNCLASSIFIED: `{short(e.sha)}` {pr} (decide it)"
    return None


def own_lines(port: Port, entries: Iterable[Entry],
              recorded: list[gates.GateResult]) -> list[str]:
    """What this cycle owes: undecided, unported and unannotated entries, then unpassed gates."""
    led = ledger_refs(port)
    inventory = port.inventory()
    inv = pr_refs(inventory.text if inventory is not None else "")
    groups: dict[str, list[str]] = {"UNCLASSIFIED": [], "PORT-NOW": [], "INVENTORY": []}
    for e in entries:
        line = _owed(e, led, inv)
        if line is not None:
            groups[e.disposition].append(line)
    out = [line for group in groups.values() for line in group]
    problem = led.unreadable(UNREADABLE_PORT_NOW)
    if problem is not None:
        out.insert(0, f"- {problem}")
    for g in recorded:
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
    candidates = _candidates(port, current, hint)
    if not candidates:
        return None
    path = candidates[-1]
    text = port.text(path) or ""
    if "- Cycle state: ADVANCED" in text:
        return None
    return path, _carried(text)


def _candidates(port: Port, current: Path, hint: str) -> list[Path]:
    if hint and _REPORT_NAME.match(hint) and (port.sync_dir / hint).exists():
        return [port.sync_dir / hint]
    return sorted(p for p in port.sync_dir.iterdir()
                  if _REPORT_NAME.match(p.name) and p.name < current.name)


def _carried(report_text: str) -> list[str]:
    """A report's own carry-over lines (not those it imported from the one before)."""
    lines, inside = [], False
    for raw in report_text.splitlines():
        if raw.startswith("## "):
            inside = raw.strip() == "## Carry-over"
            continue
        if inside and raw.startswith("- ") and not raw.startswith("- from "):
            lines.append(raw[2:])
    return lines


def lines(port: Port, c: cycle.Cycle, entries: Iterable[Entry],
          recorded: list[gates.GateResult]) -> list[str]:
    """The report's carry-over section: what this cycle owes, then what the last one left."""
    out = own_lines(port, entries, recorded)
    current = port.sync_dir / cycle.report_name(c)
    prev = previous(port, current, c.previous_report)
    if prev is not None:
        out += [f"- from {prev[0].name}: {line}" for line in prev[1]]
    return out
