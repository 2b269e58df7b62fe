"""A record a command writes and the report it refreshes land together: killed anywhere.

`ledger add`, `inventory annotate` and `gates merge` change a record the open cycle's
report reads (its carry-over, its Gates section), and rewrite the report to match. Written
one after the other, a kill between the two left the record new and the report and its
JSON old: `status` and `check` said nothing, and a re-run did not repair it ("already
recorded", "0 gate(s) changed", a duplicate ledger row). Each command here is killed
(SIGKILL, `tests/hostile/test_faults.py`'s child) at every write point; after the next
command recovers, the record, the report and its JSON are all old or all new.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from portfixture import Fixture, build, run

from .test_faults import _child, leftovers, snapshot

INVENTORY = (
    "# Porting inventory\n"
    "\n"
    "## T2\n"
    "\n"
    "- T2 RoPE (not started)\n"
    "\n"
    "## 9. Deviations\n"
    "\n"
    "None.\n"
)


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Fixture, Path]:
    """A port with an open cycle, its report written, and a porting inventory."""
    tmp = tmp_path_factory.mktemp("refresh")
    fx = build(tmp)
    (fx.port / ".agents/porting-inventory.md").write_text(INVENTORY, encoding="utf-8")
    assert run(fx.port, "sync").rc == 0
    return fx, fx.port


def _report(port: Path) -> tuple[str, str]:
    md = next((port / ".agents/sync").glob("*.md"))
    rel = str(md.relative_to(port))
    return rel, rel.removesuffix(".md") + ".json"


def together(fresh: Callable[[Path], Path], argv: tuple[str, ...], record: str,
             tmp: Path) -> int:
    """Kill `argv` at each of its write points; after recovery, `record` and the report
    (both files) are all their old text or all their new; the kills made."""
    clean = fresh(tmp / "clean")
    files = (record, *_report(clean))
    before = snapshot(clean)
    log = tmp / "points.log"
    assert _child(0, log, "--port", str(clean), *argv) == 0
    after = snapshot(clean)
    # The report reads the record: the run changes all three.
    assert all(before.get(f) != after[f] for f in files), files
    n = len(log.read_text().splitlines())
    for k in range(1, n + 1):
        port = fresh(tmp / f"k{k}")
        assert _child(k, tmp / f"k{k}.log", "--port", str(port), *argv) == -signal.SIGKILL
        assert run(port, "status").rc in (0, 3)
        assert leftovers(port) == [], k
        now = snapshot(port)
        new = {f: now.get(f) == after[f] for f in files}
        assert all(new[f] or now.get(f) == before.get(f) for f in files), (k, new)
        assert len(set(new.values())) == 1, (k, new, (tmp / f"k{k}.log").read_text())
    return n


def _copy(base: Path) -> Callable[[Path], Path]:
    def fresh(where: Path) -> Path:
        shutil.copytree(base, where, symlinks=True)
        return where
    return fresh


def _shard(tmp: Path, target: str) -> Path:
    """A gate host's record of a parity gate at `target` (a PASS the report's Gates show)."""
    shard = tmp / "shard.json"
    shard.write_text(json.dumps({"schema": 1, "target": target, "gates": {"parity:op": {
        "status": "PASS", "command": "upstream-sync parity --suite op", "duration_s": 1.0,
        "host": "gate-host", "time": "2026-01-02T03:04:05Z", "handoff": None,
        "detail": "zero drift", "oracle": None}}}), encoding="utf-8")
    return shard


LEDGER_ADD = ("ledger", "add", "--commit", "abc1234", "--what", "Port a", "--pr", "101",
              "--status", "ok", "--date", "2026-01-02")
ANNOTATE = ("inventory", "annotate", "--pr", "103", "--tier", "T2")


def test_ledger_add_writes_its_row_and_the_report_together(
        synced: tuple[Fixture, Path], tmp_path: Path) -> None:
    """vllm#101 is PORT-NOW: its row takes it off the report's open items."""
    _fx, base = synced
    assert together(_copy(base), LEDGER_ADD, ".agents/parity-ledger.md", tmp_path) > 10


def test_inventory_annotate_writes_its_row_and_the_report_together(
        synced: tuple[Fixture, Path], tmp_path: Path) -> None:
    """vllm#103 is INVENTORY, unannotated in the report's carry-over until recorded."""
    _fx, base = synced
    assert together(_copy(base), ANNOTATE, ".agents/porting-inventory.md", tmp_path) > 10


def test_gates_merge_writes_the_record_and_the_report_together(
        synced: tuple[Fixture, Path], tmp_path: Path) -> None:
    """A merged gate result shows in the report's Gates section."""
    fx, base = synced
    target = fx.tip
    shard = _shard(tmp_path, target)
    argv = ("gates", "merge", str(shard))
    assert together(_copy(base), argv, f".agents/sync/gates/{target[:7]}.json",
                    tmp_path) > 10


def test_a_refresh_that_cannot_run_leaves_the_record_written_alone(
        synced: tuple[Fixture, Path], tmp_path: Path) -> None:
    """The report reads the decisions, which do not parse: each command writes its record,
    says the report was not rewritten, and exits 0, the report as it was."""
    fx, base = synced
    port = _copy(base)(tmp_path / "port")
    (port / ".agents/sync/decisions.toml").write_text("not [valid\n", encoding="utf-8")
    md, js = (port / rel for rel in _report(port))
    report = md.read_bytes(), js.read_bytes()
    records = (".agents/parity-ledger.md", ".agents/porting-inventory.md",
               f".agents/sync/gates/{fx.tip[:7]}.json")
    for argv, record in zip((LEDGER_ADD, ANNOTATE, ("gates", "merge", str(_shard(tmp_path,
                                                                              fx.tip)))),
                            records, strict=True):
        old = (port / record).read_bytes() if (port / record).exists() else None
        r = run(port, *argv)
        assert r.rc == 0, r.err
        assert "note: the report was not rewritten (.agents/sync/decisions.toml:1: " in r.err
        assert "— run 'upstream-sync sync'" in r.err
        assert (port / record).read_bytes() != old, argv
        assert (md.read_bytes(), js.read_bytes()) == report
        assert leftovers(port) == []


def test_a_retarget_writes_the_cycle_and_retires_its_old_report_together(
        synced: tuple[Fixture, Path], tmp_path: Path) -> None:
    """`sync --retarget`: cycle.toml moves to the new target and the old report (and its
    JSON) leaves ACTIVE; killed between them, the cycle had moved on and the old report
    still said ACTIVE. The new report is written after, by the run's own transaction."""
    fx, base = synced
    md, js = _report(base)
    argv = ("sync", "--target", fx.marks["rename"][:10], "--retarget")
    clean = _copy(base)(tmp_path / "clean")
    files = (".agents/sync/cycle.toml", md, js)
    before = snapshot(clean)
    log = tmp_path / "points.log"
    assert _child(0, log, "--port", str(clean), *argv) == 0
    after = snapshot(clean)
    assert all(before[f] != after[f] for f in files)
    assert b"- Cycle state: RETARGETED" in after[md]
    n = len(log.read_text().splitlines())
    for k in range(1, n + 1):
        port = _copy(base)(tmp_path / f"k{k}")
        assert _child(k, tmp_path / f"k{k}.log", "--port", str(port), *argv) == -signal.SIGKILL
        assert run(port, "status").rc in (0, 3)
        now = snapshot(port)
        new = {f: now[f] == after[f] for f in files}
        assert all(new[f] or now[f] == before[f] for f in files), (k, new)
        assert len(set(new.values())) == 1, (k, new, (tmp_path / f"k{k}.log").read_text())
        assert leftovers(port) == [], k
