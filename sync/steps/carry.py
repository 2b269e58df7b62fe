"""Carry-over: what this cycle still owes, and what earlier cycles carried into it.

What a cycle owes: open PORT-NOW items (no ledger row names their PR or SHA),
INVENTORY items not yet annotated in the inventory, UNCLASSIFIED items, and gates that
have not passed at its target. What earlier cycles carried is the carry-over record
(`records/carryover`): every item in it that is still open is imported by every cycle,
whatever its range, until a ledger row ports it or a decision closes it. An item in
this cycle's range shows once, as its own line (saying since when it is carried); an
item outside it gets a line of its own whose instructions name this cycle's target.

An advance carries forward every PORT-NOW decided `carry-over: ...` and every INVENTORY
item still missing from the inventory; a stall carries every item it leaves open
(`carried_on`). Both drop what was closed meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from sync.port import Port
from sync.records import carryover, cycle, gates, ledger, mdscan
from sync.records.carryover import Carried
from sync.records.decisions import Decision
from sync.records.mdtext import code, escape, short_subject
from sync.steps.classify import Entry, Inputs, classify_one
from sync.steps.surface import Surface
from sync.upstream import gitio, history
from sync.upstream.gitio import short

CARRY_OVER = "carry-over"  # a PORT-NOW decision whose reason starts so is carried, not owed


def pr_refs(text: str) -> set[int]:
    """Every whole `vllm#N` in `text`: a row for vllm#1010 does not name vllm#101."""
    # mdscan's PR_REF, 1-12 ASCII digits: `vllm#` and 5000 digits in the inventory raised
    # ValueError from int() (over 4300 digits) in sync, queue and advance.
    return {int(n) for n in mdscan.PR_REF.findall(text)}


@dataclass(frozen=True)
class LedgerRefs:
    """What the ledger's rows name, and why nothing can be said when it cannot be read."""

    refs: ledger.Refs
    read: ledger.Read

    @classmethod
    def of(cls, read: ledger.Read) -> LedgerRefs:
        return cls(read.refs, read)

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


def is_carry_over(e: Entry) -> bool:
    """A PORT-NOW decided `carry-over: <why>`: carried to the next cycle, not owed now."""
    return e.reason.lower().startswith(CARRY_OVER)


@dataclass(frozen=True)
class Owed:
    """What closes an item: the ledger's references and the inventory's PRs, read once."""

    ledger: LedgerRefs
    inventory: frozenset[int]

    @classmethod
    def of(cls, port: Port) -> Owed:
        inv = port.inventory()
        return cls(ledger_refs(port), frozenset(pr_refs(inv.text if inv is not None else "")))

    def open(self, e: Entry) -> bool:
        """The item still needs work: unported, unannotated or undecided."""
        if e.disposition == "PORT-NOW":
            return not ported(e, self.ledger)
        if e.disposition == "INVENTORY":  # annotated, or ported after all
            return not (annotated(e, set(self.inventory)) or ported(e, self.ledger))
        return e.disposition == "UNCLASSIFIED"


@dataclass(frozen=True)
class Imported:
    """An item of the carry-over record that is still open, as classified now."""

    entry: Entry
    record: Carried
    in_range: bool  # also an entry of this cycle's range (then its own line shows it)

    def doc(self) -> dict[str, Any]:
        e = self.entry
        return {"sha": e.sha, "pr": e.pr, "subject": e.subject, "disposition": e.disposition,
                "reason": e.reason, "rule": e.rule, "upstream_paths": list(e.upstream_paths),
                "port_files": list(e.port_files), "since": self.record.since,
                "since_target": self.record.since_target, "carried_by": self.record.by,
                "carried_reason": self.record.reason, "in_range": self.in_range}


@dataclass(frozen=True)
class Carry:
    """The carry-over record as this cycle reads it."""

    owed: list[Imported]  # still open, and in the target's history
    dormant: tuple[str, ...] = ()  # carried commits the target does not reach: owed later


def imported(port: Port, ref: gitio.Reference, surf: Surface, entries: Iterable[Entry],
             target: str, report: str | None = None) -> Carry:
    """Every still-open item of the carry-over record, oldest carry first; not those this
    cycle's own report (`report`) carried when it stalled: they are its own items still, and
    a re-sync after a stall writes the report the stall wrote.

    Items in the range are taken as this run classified them; the others are read from
    git (one process for all of them) and classified now: their decision if there is
    one, else what the record says they were carried as. A carried commit the target does
    not reach (a retarget to an earlier commit) is not owed by this cycle: it stays in the
    record, dormant, until a target includes it (one more process).
    """
    by_sha = {e.sha: e for e in entries}
    record = {sha: rec for sha, rec in port.carried().items()
              if not (rec.since == report and sha in by_sha)}
    if not record:
        return Carry([])
    now = _outside(port, ref, surf, [sha for sha in record if sha not in by_sha])
    later = history.not_reached(ref, list(now), target) if now else set()
    owed = Owed.of(port)
    out = []
    for sha, rec in sorted(record.items(), key=lambda kv: (kv[1].since, kv[1].pr, kv[0])):
        e = by_sha.get(sha) or now.get(sha) or _unresolved(rec)
        if sha not in later and owed.open(e):
            out.append(Imported(e, rec, sha in by_sha))
    return Carry(out, tuple(sorted(later)))


def _outside(port: Port, ref: gitio.Reference, surf: Surface, outside: list[str]
             ) -> dict[str, Entry]:
    """The carried commits outside the range, classified: their decision, else what the
    record says they were carried as; one the checkout lacks is refused when it never was
    a commit there (`carryover.mistyped`), and left out otherwise."""
    record, decided = port.carried(), port.decisions()
    as_recorded = {sha: Decision(sha, record[sha].disposition, record[sha].reason)
                   for sha in outside if sha not in decided}
    inputs = Inputs(surf, (), {**as_recorded, **decided})
    now = {c.sha: classify_one(c, inputs) for c in history.log_commits(ref, outside)}
    bad = carryover.mistyped(port.carry_over_path, port.rel(port.carry_over_path), record, ref,
                             [sha for sha in outside if sha not in now])
    if bad:
        raise bad[0]
    return now


def _unresolved(rec: Carried) -> Entry:
    """A carried commit the reference checkout lacks: kept as recorded (it stays open)."""
    return Entry(rec.sha, rec.pr_or_none, rec.subject, rec.disposition,
                 f"{rec.reason} (not in the reference checkout: fetch it)", None, False, (), ())


def _pr(e: Entry) -> str:
    return f"vllm#{e.pr}" if e.pr is not None else "(no PR)"


def _since(name: str | None) -> str:
    return f"; carried since {name}" if name else ""


def _owed_line(e: Entry, owed: Owed, since: str | None) -> str | None:
    """The carry-over line of an entry of this range that still needs work, if it does."""
    if not owed.open(e):
        return None
    if e.disposition == "PORT-NOW" and is_carry_over(e):
        return (f"- PORT-NOW carried over: `{short(e.sha)}` {_pr(e)} "
                f"({escape(e.reason, reason=True)}{_since(since)})")
    if e.disposition == "PORT-NOW":
        why = "ledger unreadable" if owed.ledger.read.problem is not None else "no ledger row yet"
        return f"- PORT-NOW open: `{short(e.sha)}` {_pr(e)} ({why}{_since(since)})"
    if e.disposition == "INVENTORY":
        return (f"- INVENTORY unannotated: `{short(e.sha)}` {_pr(e)} (not in the inventory"
                f"{_since(since)})")
    return f"- UNCLASSIFIED: `{short(e.sha)}` {_pr(e)} (decide it{_since(since)})"


def own_lines(port: Port, entries: Iterable[Entry], recorded: list[gates.GateResult],
              carried: list[Imported] | None = None) -> list[str]:
    """What this cycle owes: undecided, unported and unannotated entries, then unpassed gates."""
    owed = Owed.of(port)
    since = {i.entry.sha: _report_name(i.record.since) for i in carried or []}
    groups: dict[str, list[str]] = {"UNCLASSIFIED": [], "PORT-NOW": [], "INVENTORY": []}
    for e in entries:
        line = _owed_line(e, owed, since.get(e.sha))
        if line is not None:
            groups[e.disposition].append(line)
    out = [line for group in groups.values() for line in group]
    problem = owed.ledger.unreadable(UNREADABLE_PORT_NOW)
    if problem is not None:
        out.insert(0, f"- {problem}")
    for g in recorded:
        if g.status != "PASS":
            out.append(f"- gate {g.name} {g.status}"
                       + (f": run {code(g.handoff)}" if g.handoff else ""))
    return out


def _report_name(rel: str) -> str:
    return rel.rsplit("/", 1)[-1]


_NEXT_STEP: dict[str, str] = {  # what a carried item still needs, by disposition
    "PORT-NOW": "port it (its diff up to `{target}`: 'upstream-sync queue'), then add a ledger "
                "row ('upstream-sync ledger add --pr {pr}'), or decide it otherwise",
    "INVENTORY": "annotate it ('upstream-sync inventory annotate --pr {pr} --tier T?'), or "
                 "decide it otherwise",
    "UNCLASSIFIED": "decide it ('upstream-sync decide {sha} <DISPOSITION> <reason>')",
}


def carried_line(i: Imported, target: str) -> str:
    """The line of a carried item outside this range, its instructions for `target`."""
    e = i.entry
    step = _NEXT_STEP[e.disposition].format(target=short(target), pr=e.pr or "N",
                                            sha=short(e.sha))
    return (f"- carried {e.disposition}: `{short(e.sha)}` {_pr(e)} "
            f"{escape(short_subject(e.subject))} — since {_report_name(i.record.since)}: "
            f"{escape(e.reason, reason=True)}; {step}")


def lines(port: Port, c: cycle.Cycle, entries: list[Entry], recorded: list[gates.GateResult],
          carried: list[Imported]) -> list[str]:
    """The report's carry-over section: what this cycle owes (each item once), then the
    carried items outside its range."""
    return (own_lines(port, entries, recorded, carried)
            + [carried_line(i, c.target) for i in carried if not i.in_range])


def _carries(e: Entry, by: carryover.By) -> bool:
    """Whether an open item of this range goes into the record: a stall carries every open
    item; an advance its carry-over decisions and its unannotated INVENTORY items."""
    return by == "stall" or e.disposition == "INVENTORY" or (
        e.disposition == "PORT-NOW" and is_carry_over(e))


def _why(e: Entry, by: carryover.By, report: str) -> str:
    if e.disposition == "PORT-NOW" and is_carry_over(e):
        return e.reason
    if by == "stall":
        return f"open when {_report_name(report)} stalled"
    return f"not in the inventory when {_report_name(report)} advanced"


@dataclass(frozen=True)
class Closing:
    """The cycle an advance or a stall closes: its report, target and entries."""

    report: str  # port-relative
    target: str
    entries: tuple[Entry, ...]
    carried: tuple[Imported, ...]
    by: carryover.By
    dormant: tuple[str, ...] = ()  # carried commits after the target: kept as recorded


def carried_on(port: Port, closing: Closing) -> dict[str, Carried]:
    """The carry-over record after this advance or stall: the still-open carried items
    (their first report kept), the dormant ones as recorded, then this cycle's items it
    carries, each item once."""
    record = port.carried()
    out: dict[str, Carried] = {sha: record[sha] for sha in closing.dormant if sha in record}
    for i in closing.carried:
        kind = i.entry.disposition
        rec = i.record if kind == i.record.disposition or kind not in carryover.KINDS else (
            replace(i.record, disposition=kind))
        out[rec.sha] = rec
    owed = Owed.of(port)
    for e in closing.entries:
        if e.sha in out or not owed.open(e) or not _carries(e, closing.by):
            continue
        out[e.sha] = Carried(e.sha, e.disposition, e.subject,  # type: ignore[arg-type]
                             _why(e, closing.by, closing.report), closing.report,
                             closing.target, closing.by, e.pr or 0)
    return out


def record_bytes(items: dict[str, Carried]) -> bytes:
    return carryover.render(items).encode()
