"""The advance's preconditions that the records and this machine's settings decide alone:
no range is classified, no oracle is measured, no gate runs. `advance` checks them with the
rest; `status` lists them (walk-s13 U1), so it imports this module and not the advance.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sync.infra.errors import SyncError
from sync.port import Port
from sync.records import config, oraclefile, paragraph
from sync.steps.verify import oracle

CORE = oraclefile.CORE_ID


def unmeasured(port: Port) -> list[str]:
    """What `status` names of the advance's unmet lines, worded as the advance words them
    (the PORT-NOW commits, the gates and the core oracle file it shows otherwise)."""
    return gates_declared(port) + paragraph_stale(port) + oracle_home_unmet(port)


def required_gates(port: Port) -> list[str]:
    names = []
    if port.config.golden_scripts:
        names.append("golden")
    names += [f"parity:{s.name}" for s in port.config.suites]
    return names


def covers(required: list[str], gate: str) -> bool:
    """`gate` is one of the `required` gates, or a shard of one (`golden[1/2]`)."""
    return any(gate == n or gate.startswith(n + "[") for n in required)


def unrequired(port: Port, gates: tuple[str, ...]) -> list[str]:
    """The `gates` the configuration does not require: the advance waits for none of them
    (yet refuses one recorded as anything but PASS), so a merge says so (walk N5b)."""
    required = required_gates(port)
    return [g for g in gates if not covers(required, g)]


def gates_declared(port: Port) -> list[str]:
    """Gates are configured, or the port declares it has none: an advance never passes only
    because nothing was configured."""
    if required_gates(port) or port.config.gates_none:
        return []
    return [f"no gates are configured — configure [golden] scripts or [parity.suites.<name>] "
            f"in {config.CONFIG_PATH}, or declare that the "
            "port has none with [gates] none = true"]


def paragraph_stale(port: Port) -> list[str]:
    """The PARITY PIN paragraph must copy the pin it moves from (the advance rewrites it from
    there): checked before the oracle, as `check` does, so a dry run lists it at once."""
    rel = port.rel(port.protocol)
    record = port.pin_record()  # the protocol file as the read model holds it: read once
    try:
        para = paragraph.find(record.text, path=rel)
    except SyncError as exc:
        return [f"the PARITY PIN paragraph: {exc}"]
    return paragraph.agrees(para, record.pin, path=rel)


def core_file_unmet(port: Port) -> list[str]:
    """The core oracle file the advance rewrites exists (known from the start: said with the
    other unmet lines, not found last) and copies the pin it moves from, as `check` requires:
    the advance rewrites it from there, so a copy that drifted would be overwritten unsaid
    (and a rollback would restore the drift)."""
    # By its name, as `check` requires (`id` is the file stem).
    if not any(p.stem == CORE for p in port.oracle_files()):
        return [f"no core oracle file ({CORE}.md) among {port.config.oracles} — add "
                f"{Path(port.config.oracles).parent.as_posix()}/{CORE}.md holding one "
                "`oracle-pin` block (id, role, upstream, scope, pin, pin_label, pinned_on, "
                "gateable, evidence): the advance rewrites its pin"]
    try:
        core = oraclefile.core(port.oracle_records(), CORE)
    except SyncError:
        return []  # malformed: the advance refuses it, typed, where it reads it to rewrite
    if core is None:
        return []
    pin = port.pin_record().pin
    return [f"{line} — write {pin.commit} there by hand (an advance rewrites this line "
            "itself, but not while it disagrees with the block)"
            for line in oraclefile.agreement(replace(core, path=Path(port.rel(core.path))), pin)]


def unverifiable(exc: SyncError | str) -> str:
    """The unmet line of a core oracle that cannot be verified at the target at all: why
    (the refusal, or what stands for it)."""
    return f"oracle {CORE} at the target cannot be verified: {exc}"


def oracle_home_unmet(port: Port) -> list[str]:
    """No oracle home here (unset, or inside a checkout): no oracle can be verified, which
    the advance finds first when it verifies the target's."""
    try:
        oracle.oracle_home(port, port.preferences())
    except SyncError as exc:
        return [unverifiable(exc)]
    return []
