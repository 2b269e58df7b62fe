"""Advance the omni oracle's pin, only with a proof of isolation.

Advancing the omni pin leaves the vLLM-side binding grids alone PROVIDED the omni
oracle lives in its own virtualenv and touched neither `$VLLM_SOURCE` nor the
core environment (protocol §Rules). The proof is the one `oracle build`/`verify`
recorded for that omni commit; without it, or with a failed check, the advance is
refused and reported as a core sync cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sync.infra import clock
from sync.infra.errors import BlockedCycle
from sync.port import Port
from sync.records import events, oraclefile
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import isolation, oracle

OMNI = "vllm-omni"


@dataclass(frozen=True)
class Measured:
    """The omni oracle at the commit: its isolation proof and its verification."""

    oracle: str
    file: oraclefile.OracleFile  # its oracle file, as measured under the advance's lock
    commit: str
    proof: isolation.Proof
    verification: oracle_verify.Verification


@dataclass(frozen=True)
class OmniAdvance:
    oracle: str
    before: oraclefile.OracleFile  # the oracle file as it is
    commit: str
    label: str  # the new pin label: the omni runtime's public version
    checks: tuple[str, ...]  # the isolation checks that prove the advance
    labels: dict[str, str | None]  # omni_commit, vllm_commit (what it ran against), core_pin
    text: str  # the oracle file moved to `commit`

    def staged(self, port: Port) -> tuple[Path, dict[Path, bytes]]:
        """The omni-advance event's path, and every write of the advance."""
        ev_path, ev_bytes = events.staged(
            port, "omni-advance", pin_before=self.before.pin, pin_after=self.commit, report="",
            detail=json.dumps({**self.labels, "isolation_checks": list(self.checks)},
                              sort_keys=True))
        return ev_path, {self.before.path: self.text.encode(), ev_path: ev_bytes}


def measure(port: Port, oracle_id: str, commit_spec: str, *, store: bool = True) -> Measured:
    """Refuse without a proof of isolation; otherwise verify the omni oracle at the commit
    (its isolation check recorded unless not `store`: a dry run records nothing)."""
    of = oracle.oracle_file(port, oracle_id)  # no oracle file, no pin to move: said first
    prefs = port.preferences()
    commit = oracle.resolve_commit(port, prefs, oracle_id, commit_spec)
    proof = isolation.require(port, oracle_id, commit)
    return Measured(oracle_id, of, commit, proof,
                    oracle_verify.verify_candidate(port, prefs, oracle_id, commit,
                                                   store=store))


def plan(port: Port, m: Measured) -> OmniAdvance:
    """The oracle file at the verified commit, labelled with the measured version."""
    runtime = m.verification.probe.runtime_version
    if runtime is None:
        raise BlockedCycle("the omni oracle reports no version", "rebuild it")
    of = m.file
    core_pin = port.pin_record().pin.commit
    today = clock.now().strftime("%Y-%m-%d")
    label = runtime.partition("+")[0]
    text = oraclefile.render(of, pin=m.commit, pin_label=label, pinned_on=today)
    labels = {"omni_commit": m.commit, "vllm_commit": m.verification.identity.get("vllm_commit"),
              "core_pin": core_pin}
    return OmniAdvance(m.oracle, of, m.commit, label, tuple(c.op for c in m.proof.checks),
                       labels, text)
