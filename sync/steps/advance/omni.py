"""Advance the omni oracle's pin, only with a proof of isolation.

Advancing the omni pin leaves the vLLM-side binding grids alone PROVIDED the omni
oracle lives in its own virtualenv and touched neither `$VLLM_SOURCE` nor the
core environment (protocol §Rules). The proof is the one `oracle build`/`verify`
recorded for that omni commit; without it, or with a failed check, the advance is
refused and reported as a core sync cycle.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sync.infra import clock
from sync.infra.errors import BlockedCycle, EnvironmentUnresolved, UsageError
from sync.port import Port
from sync.records import events, oraclefile
from sync.records.prefs import Preferences
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import isolation, oracle, watch
from sync.upstream import gitio
from sync.upstream.gitio import short

OMNI = "vllm-omni"
_FULL_SHA = re.compile(r"[0-9a-f]{40}")


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


def measure(port: Port, oracle_id: str, commit_spec: str, *, store: bool = True,
            allow_behind: bool = False, allow_divergent: bool = False) -> Measured:
    """Refuse a commit off the pin's line (behind it, unless `allow_behind`; elsewhere, unless
    `allow_divergent`) and one without a proof of isolation; otherwise verify the omni
    oracle at the commit (its isolation check recorded unless not `store`: a dry run records
    nothing)."""
    of = oracle.oracle_file(port, oracle_id)  # no oracle file, no pin to move: said first
    prefs = port.preferences()
    commit = oracle.resolve_commit(port, prefs, oracle_id, commit_spec)
    refuse_off_line(port, prefs, of, commit, allow_behind=allow_behind,
                    allow_divergent=allow_divergent)
    # Proven against the core environment of the pin as it is now, which the advance
    # labels it with (`core_pin`): a proof made before a core advance watched another.
    core_env = watch.core_env(port, oracle.oracle_home(port, prefs))
    proof = isolation.require(port, oracle_id, commit, core_env=core_env)
    return Measured(oracle_id, of, commit, proof,
                    oracle_verify.verify_candidate(port, prefs, oracle_id, commit,
                                                   store=store))


def refuse_off_line(port: Port, prefs: Preferences, of: oraclefile.OracleFile, commit: str, *,
                    allow_behind: bool = False, allow_divergent: bool = False) -> None:
    """The omni pin moves along its line, as the core pin does (`target.refuse_off_line`): a
    commit behind it (an ancestor of it) is refused, and so is one off its line (neither an
    ancestor nor a descendant: a side branch, a force-push). The omni pin has no rollback, so
    moving it back on purpose is `--allow-behind`; moving it off its line on purpose,
    `--allow-divergent`, as for a sync target. Said before anything is measured or written."""
    if allow_behind and allow_divergent:
        return  # nothing to refuse: the checkout is not asked
    # A pin the checkout lacks is refused in the words of what is still asked.
    ref = _pin_line(port, prefs, of, commit,
                    asked="descends from it" if allow_behind else "is behind it")
    if ref is None or gitio.is_ancestor(ref, of.pin, commit):
        return
    if gitio.is_ancestor(ref, commit, of.pin):
        if not allow_behind:
            raise UsageError(
                f"{short(commit)} is behind the pin {short(of.pin)} of oracle {of.id} (an "
                "ancestor of it): advance-omni only moves forward",
                "pick a commit after the pin, or pass --allow-behind to move the pin back")
    elif not allow_divergent:
        raise UsageError(f"{short(commit)} does not descend from the pin {short(of.pin)} of "
                         f"oracle {of.id}",
                         "pick a commit on the pin's line, or pass --allow-divergent")


def _pin_line(port: Port, prefs: Preferences, of: oraclefile.OracleFile, commit: str, *,
              asked: str) -> gitio.Reference | None:
    """The omni checkout, to tell where `commit` lies from the pin (whether it `asked`); None
    where there is nothing to tell."""
    if not _FULL_SHA.fullmatch(of.pin) or commit == of.pin:
        return None  # UNPINNED or a release: no line to be off
    cfg = port.config.oracle(of.id)
    src = oracle.source_path(prefs, cfg)
    if src is None:
        return None  # its verification refuses it: the tree cannot be checked without it
    ref = gitio.open_repo(src, what=f"{of.id} source checkout", variable=cfg.source_variable)
    if not gitio.has_commit(ref, commit):
        return None  # likewise: a commit the checkout lacks has no tree to check the oracle with
    if not gitio.has_commit(ref, of.pin):
        raise EnvironmentUnresolved(
            f"the pin {short(of.pin)} of oracle {of.id} is not in {src}: whether "
            f"{short(commit)} {asked} cannot be told", f"run 'git -C {src} fetch'")
    return ref


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
