"""One command reads each of the port's record files at most once (the port's read model).

Counted with an audit hook on the `open` event (what `open()`, `Path.read_text` and
`os.open` raise), in process, around one `cli.main` call. Only reads count: writes
of the report, its JSON and the decisions go through `infra.atomic`'s temporary
files and the lock file is opened read-write.
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

import pytest
from portfixture import Fixture, build, run, write
from stepfixture import INVENTORY

from sync import port
from sync.records import gates

# Audit hooks cannot be removed, so one is installed per test session and counts only
# while a test holds this counter.
_counting: collections.Counter[str] | None = None
_installed = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _counting is None or event != "open":
        return
    path, mode, flags = args
    if not isinstance(path, str | bytes | os.PathLike):
        return  # an open file descriptor
    if isinstance(mode, str):
        if any(c in mode for c in "wax+"):
            return
    elif not isinstance(flags, int) or flags & os.O_ACCMODE != os.O_RDONLY:
        return
    _counting[os.path.abspath(os.fsdecode(path))] += 1


@pytest.fixture(scope="session", autouse=True)
def audit_hook() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def counted(fx: Fixture, *argv: str, rc: int = 0) -> dict[str, int]:
    """Reads per port-relative path under .agents/ during one command exiting with `rc`."""
    global _counting
    reads: collections.Counter[str] = collections.Counter()
    _counting = reads
    try:
        r = run(fx.port, *argv)
    finally:
        _counting = None
    assert r.rc == rc, r.err
    agents = str(fx.port / ".agents") + os.sep
    return {Path(p).relative_to(fx.port).as_posix(): n for p, n in reads.items()
            if p.startswith(agents)}


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    """The synthetic port with every record a sync reads: an inventory with §9 too."""
    f = build(tmp_path)
    write(f.port, ".agents/porting-inventory.md", INVENTORY)
    return f


def _with_a_gate(fx: Fixture) -> str:
    """Record a PENDING gate for the open cycle's target; the gate file's port path."""
    p = port.locate(str(fx.port))
    c = p.open_cycle()
    gates.record(p, c.target, gates.GateResult("golden", "PENDING", "nox -s golden", None,
                                               "host", "2026-01-01T00:00:00Z",
                                               handoff="nox -s golden -- --shard 1/1"))
    return p.rel(gates.path(p, c.target))


def _at_most_once(opened: dict[str, int]) -> None:
    twice = {path: n for path, n in opened.items() if n > 1}
    assert not twice, f"record files read more than once: {twice}"


def test_a_first_sync_reads_each_record_once(fx: Fixture) -> None:
    opened = counted(fx, "sync")
    _at_most_once(opened)
    assert {".agents/upstream-sync.md", ".agents/upstream-sync.toml",
            ".agents/developer-preferences.md", ".agents/parity-ledger.md",
            ".agents/porting-inventory.md"} <= set(opened)


def test_a_rerun_reads_each_record_once(fx: Fixture) -> None:
    """With a report, its JSON, decisions and a gate record to read back as well."""
    assert run(fx.port, "sync").rc == 0
    gate = _with_a_gate(fx)
    assert run(fx.port, "decide", "#104", "IGNORE", "docs only").rc == 0
    md = fx.report().relative_to(fx.port).as_posix()
    for argv in (("sync",), ("sync", "--json")):
        opened = counted(fx, *argv)
        _at_most_once(opened)
        assert {md, md.removesuffix(".md") + ".json", ".agents/sync/cycle.toml",
                ".agents/sync/decisions.toml", gate, ".agents/parity-ledger.md",
                ".agents/porting-inventory.md"} <= set(opened), argv


def test_decide_reads_each_record_once(fx: Fixture) -> None:
    """`decide` writes a decision, then reruns the cycle on what it holds."""
    assert run(fx.port, "sync").rc == 0
    assert run(fx.port, "decide", "#104", "IGNORE", "docs only").rc == 0
    opened = counted(fx, "decide", "#103", "IGNORE", "not now")
    _at_most_once(opened)
    assert {".agents/sync/decisions.toml", ".agents/sync/cycle.toml"} <= set(opened)


def test_a_refused_advance_reads_each_record_once(fx: Fixture) -> None:
    """`advance` reruns the cycle for its preconditions; `--stall` again to mark it STALLED."""
    assert run(fx.port, "sync").rc == 0
    gate = _with_a_gate(fx)
    opened = counted(fx, "advance", rc=6)
    _at_most_once(opened)
    md = fx.report().relative_to(fx.port).as_posix()
    assert {md, ".agents/sync/cycle.toml", gate, ".agents/parity-ledger.md"} <= set(opened)
    assert "- Cycle state: ACTIVE" in fx.report().read_text(encoding="utf-8")
    opened = counted(fx, "advance", "--stall", rc=0)
    _at_most_once(opened)
    assert "- Cycle state: STALLED" in fx.report().read_text(encoding="utf-8")
