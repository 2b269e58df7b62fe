"""Whether the golden gate's PASS is what the advance may rest on.

A gate record is a file: it is merged from gate hosts (`gates merge`) and can be edited
by hand. The pin block is written from the oracle verified here, so a golden PASS counts
only when it ran with that same oracle at this target (its identity names the oracle, the
target and the same version strings: the same build), and when the goldens it wrote are
in the port (a case manifest naming the gate, the target and the oracle's commit). Each
failing condition is one unmet line. (A date in the future is refused for every gate, in
`advance`; a time in another shape, when the record is read.)
"""

from __future__ import annotations

from typing import Any

from sync.port import Port
from sync.records import gates
from sync.records.mdtext import code
from sync.steps.verify import golden
from sync.steps.verify.probe import Probe
from sync.upstream.gitio import short

_SAME_BUILD = ("runtime_version", "distribution_version")


def is_golden(name: str) -> bool:
    return name == "golden" or name.startswith("golden[")


def unmet(port: Port, target: str, probe: Probe) -> list[str]:
    """One line per golden PASS that the oracle verified at `target` does not back."""
    passed = [g for g in port.gates(target) if is_golden(g.name) and g.status == "PASS"]
    if not passed:
        return []
    cases = golden.manifests(port)
    out = []
    for g in passed:
        out += _identity(g, target, probe, port.config.golden_oracle)
        out += _goldens(g, target, cases, port.config.golden_dir)
    return out


def _identity(g: gates.GateResult, target: str, probe: Probe, expected: str) -> list[str]:
    """`golden` (and its shards) runs the configured golden oracle: its identity names that
    one, and when it is the core oracle, the one verified here."""
    ident = g.oracle or {}
    oid = ident.get("oracle")
    if oid != expected:
        return [f"gate {g.name} PASSed with an oracle identity naming "
                f"{'no oracle' if oid is None else repr(oid)}, not {expected!r} (the golden "
                f"oracle) — run {code(g.command)} again"]
    if oid != probe.oracle:
        return []  # the golden oracle is not the core one (omni): its verification says nothing
    ran = ident.get("commit") or ""
    if ran != target:
        return [f"gate {g.name} PASSed with the {probe.oracle} oracle at {code(short(ran))}, "
                f"not at the target {short(target)} — run {code(g.command)} again at the "
                "target"]
    differ = [k for k in _SAME_BUILD if ident.get(k) != getattr(probe, k)]
    if differ:
        k = differ[0]
        return [f"gate {g.name} ran with {k.replace('_', ' ')} {ident.get(k)!s}, but the oracle "
                f"verified here has {getattr(probe, k)!s} — verify the build the gate ran, "
                f"or run {code(g.command)} with this one"]
    return []


def _goldens(g: gates.GateResult, target: str, cases: list[dict[str, Any]],
             where: str) -> list[str]:
    ran = (g.oracle or {}).get("commit")
    mine = [c for c in cases if c.get("gate") == g.name and c.get("target") == target
            and c["oracle"].get("commit") == ran]
    if mine:
        return []
    return [f"gate {g.name} PASSed, but no golden under {where} was written by it at "
            f"{short(target)} (a case manifest names the gate, the target and the oracle) — "
            "copy the gate run's goldens into the port, or run "
            f"{code(g.command)} again"]
