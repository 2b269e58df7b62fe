"""Kills at every write point: records stay whole and no temp file outlives the next run.

A kill inside an atomic write once left its `.tmp` file behind for good (16 of 22 kill
points, one inside `events/`). Each command here runs in a child process that SIGKILLs
itself at the k-th write point (`infra.atomic.FAULT`: a temp file created, written,
synced, given its mode, replaced; `infra.txn.FAULT`: between a transaction's writes);
then any command (`status`) recovers, and the test checks that no temp, staged or
journal file is left, that every record is its old or its new text, and that running
the command again completes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from portfixture import Fixture, build, run

from sync.infra import atomic, txn

from .generators import DEPTH

KILLER = """
import os, signal, sys
from sync.infra import atomic, txn
target, log, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
seen = [0]
def hit(point, path=None):
    seen[0] += 1
    with open(log, "a") as fh:
        fh.write(f"{seen[0]} {point} {getattr(path, 'name', '')}\\n")
    if point == "replaced" and target == 0:  # every version a record goes through
        with open(f"{log}.{seen[0]}", "wb") as fh:
            fh.write(str(path).encode() + b"\\0" + path.read_bytes())
    if seen[0] == target:
        os.kill(os.getpid(), signal.SIGKILL)
atomic.FAULT = hit
txn.FAULT = hit
if argv[0] == "txn":
    import json
    from pathlib import Path
    writes = {Path(p): d.encode() for p, d in json.loads(argv[2]).items()}
    txn.commit(Path(argv[1]), writes)
else:
    from sync.cli import main
    sys.exit(main(argv))
"""
_TIME = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
KILLS: dict[str, int] = {}


def leftovers(root: Path) -> list[str]:
    """Temp, staged and journal files anywhere under `root` (outside .git)."""
    out = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in names:
            if (name.endswith((".tmp", ".txn")) or name in (txn.INTENT, txn.JOURNAL)
                    or atomic.TEMP.match(name)):
                out.append(str(Path(dirpath, name).relative_to(root)))
    return out


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file but git's and the lock, its timestamps blanked (runs differ by seconds)."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in names:
            path = Path(dirpath, name)
            if name != ".lock":
                out[str(path.relative_to(root))] = _TIME.sub(b"T", path.read_bytes())
    return out


def _child(k: int, log: Path, *argv: str) -> int:
    # Each child its own empty cache: a cache an earlier child filled would skip that
    # child's writes, and the k-th write point would not be the same one in every run.
    env = {**os.environ, "SYNC_CACHE_DIR": str(log.with_suffix(".cache"))}
    return subprocess.run([sys.executable, "-c", KILLER, str(k), str(log), *argv], env=env,
                          capture_output=True, check=False, timeout=120).returncode


def _points(n: int, step: int = 6) -> list[int]:
    """Which write points to kill at: every one from depth 2; at depth 1 every `step`-th and
    the last (a write has 5 points, so a step of 6 hits each kind of point in turn)."""
    every = list(range(1, n + 1))
    return every if DEPTH > 1 else sorted({*every[::step], n})


def _versions(clean: Path, log: Path) -> dict[str, set[bytes]]:
    """Each record's texts as the uninterrupted run wrote them, one after the other."""
    out: dict[str, set[bytes]] = {}
    for dump in log.parent.glob(f"{log.name}.*"):
        name, _, data = dump.read_bytes().partition(b"\0")
        if not Path(name.decode()).is_relative_to(clean):
            continue  # the cache (outside the port) is no record: tests/test_cache.py
        rel = str(Path(name.decode()).relative_to(clean))
        out.setdefault(rel, set()).add(_TIME.sub(b"T", data))
    return out


def kill_everywhere(name: str, fresh: Callable[[Path], Path], argv: tuple[str, ...],
                    tmp: Path, *, rc: int = 0) -> None:
    """Run `argv` on a fresh port killed at each write point; recover; check; run again."""
    clean = fresh(tmp / "clean")
    before = snapshot(clean)
    log = tmp / "points.log"
    assert _child(0, log, "--port", str(clean), *argv) == rc
    after = snapshot(clean)
    versions = _versions(clean, log)
    # What running it again over a finished run leaves (a stall re-renders its report with
    # the items it carried): a killed run then a second one may end there too.
    again = tmp / "again"
    shutil.copytree(clean, again, symlinks=True)
    assert run(again, *argv).rc == rc
    twice = snapshot(again)
    n = len(log.read_text().splitlines())
    assert n >= 5, log.read_text()
    for k in _points(n):
        port = fresh(tmp / f"k{k}")
        assert _child(k, tmp / f"k{k}.log", "--port", str(port), *argv) == -signal.SIGKILL
        recovered = run(port, "status")
        assert recovered.rc in (0, 3), recovered.err
        assert leftovers(port) == [], (k, (tmp / f"k{k}.log").read_text())
        now = snapshot(port)
        for rel in set(now) | set(before) | set(after):
            # Its old text or one the run wrote: never half of one.
            assert (now.get(rel) in (before.get(rel), after.get(rel))
                    or now.get(rel) in versions.get(rel, ())), (k, rel)
        if now != after:  # the kill came before the last write: running again finishes it
            assert run(port, *argv).rc == rc
            assert snapshot(port) in (after, twice) and leftovers(port) == []
        KILLS[name] = KILLS.get(name, 0) + 1
    print(f"{name}: {n} write points, {KILLS[name]} kills")  # the counts, with -s


def _copy_of(fx: Fixture) -> Callable[[Path], Path]:
    def fresh(where: Path) -> Path:
        shutil.copytree(fx.port, where, symlinks=True)
        return where
    return fresh


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    return build(tmp_path_factory.mktemp("faults"))


def test_kills_inside_sync(world: Fixture, tmp_path: Path) -> None:
    # The first sync of a cycle: cycle.toml, the report and its JSON.
    kill_everywhere("sync", _copy_of(world), ("sync",), tmp_path)


def test_kills_inside_decide_and_ledger_add(world: Fixture, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(world.port, base, symlinks=True)
    assert run(base, "sync").rc == 0
    md = next((base / ".agents/sync").glob("*.md"))
    sha = world.marks["docs"][:10]
    text = md.read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith(f"- `{sha}` ")]
    md.write_text(text.replace(line, line.split(" — ")[0] + " — INVENTORY: by hand"),
                  encoding="utf-8")  # a hand edit pending: decide saves it too

    def fresh(where: Path) -> Path:
        shutil.copytree(base, where, symlinks=True)
        return where

    kill_everywhere("decide", fresh, ("decide", world.marks["lora"][:10], "IGNORE", "r"),
                    tmp_path / "decide")
    kill_everywhere("ledger add", fresh, ("ledger", "add", "--commit", "abc1234", "--what",
                                          "Port a", "--pr", "101", "--status", "ok",
                                          "--date", "2026-01-02"), tmp_path / "ledger")


def test_kills_inside_a_stall(world: Fixture, tmp_path: Path) -> None:
    """`advance --stall`: a state event in `events/`, the carry-over record, the report."""
    base = tmp_path / "base"
    shutil.copytree(world.port, base, symlinks=True)
    assert run(base, "sync").rc == 0

    def fresh(where: Path) -> Path:
        shutil.copytree(base, where, symlinks=True)
        return where

    kill_everywhere("advance --stall", fresh, ("advance", "--stall"), tmp_path / "stall")


def test_kills_inside_a_transaction(tmp_path: Path) -> None:
    """A journaled multi-file write (advance, rollback): all old or all new, and clean."""
    import json

    def fresh(where: Path) -> Path:
        (where / "sync/events").mkdir(parents=True)
        (where / "a.md").write_text("old a\n")
        (where / "sync/b.json").write_text("old b\n")
        return where

    new = {"a.md": "new a\n", "sync/b.json": "new b\n", "sync/events/0001-advance.toml": "e\n"}
    clean = fresh(tmp_path / "clean")
    log = tmp_path / "points.log"

    def argv(root: Path) -> tuple[str, ...]:
        return ("txn", str(root / "sync"), json.dumps({str(root / k): v for k, v in new.items()}))

    assert _child(0, log, *argv(clean)) == 0
    n = len(log.read_text().splitlines())
    # 5 atomic writes (the intent, 3 staged files, the journal), 3 staged, journal, 3 replaced
    assert n == 5 * 5 + 3 + 1 + 3
    for k in _points(n, step=3):
        root = fresh(tmp_path / f"k{k}")
        assert _child(k, tmp_path / f"k{k}.log", *argv(root)) == -signal.SIGKILL
        txn.recover(root / "sync", root)
        atomic.sweep([(root / "sync", True), (root, False)])
        assert leftovers(root) == [], k
        state = {rel: (root / rel).read_text() if (root / rel).exists() else None for rel in new}
        assert state in ({"a.md": "old a\n", "sync/b.json": "old b\n",
                          "sync/events/0001-advance.toml": None}, new), (k, state)
        KILLS["transaction"] = KILLS.get("transaction", 0) + 1

