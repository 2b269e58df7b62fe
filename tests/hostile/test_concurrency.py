"""Concurrent commands: no decision lost, and a refused command writes nothing.

`sync` and `decide` once read `decisions.toml` outside the lock they saved it under: with
a hand edit pending, 4 of 20 `decide`‖`decide` and 1 of 12 `sync`‖`decide` trials lost a
decision that had printed success, and a `decide` refused with "lock held" (exit 6) had
sometimes already written. The first tests force each interleaving in one process (a
second command runs exactly between the first one's read and its write); the others run
real commands in parallel processes and check every outcome.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from portfixture import Fixture, Ran, build, run

from sync.records import decisions
from sync.steps import report

from .generators import trials

REFUSED = 6


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    fx = build(tmp_path)
    assert run(fx.port, "sync").rc == 0
    return fx


def recorded(fx: Fixture) -> dict[str, decisions.Decision]:
    return decisions.load(fx.sync_dir / decisions.FILE, rel=decisions.FILE)


def hand_edit(fx: Fixture, name: str, reason: str = "edited by hand") -> None:
    """Edit the entry line of commit `name` in the report to `INVENTORY: <reason>`, typed
    as a person might (two spaces): the line then differs from any the tool renders, so
    every run that reads the report back sees the edit."""
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith(f"- `{fx.marks[name][:10]}` ")]
    head, _, _ = line.partition(" — ")
    md.write_text(text.replace(line, f"{head} — INVENTORY:  {reason}"), encoding="utf-8")


class LockTaker:
    """Another process that takes the port lock if it can and holds it until `release`."""

    SCRIPT = ("import sys\nfrom pathlib import Path\nfrom sync.infra.atomic import port_lock\n"
              "from sync.infra.errors import BlockedCycle\ntry:\n"
              "    with port_lock(Path(sys.argv[1])):\n        print('locked', flush=True)\n"
              "        sys.stdin.read()\nexcept BlockedCycle:\n    print('busy', flush=True)\n")

    def __init__(self, fx: Fixture) -> None:
        self.child = subprocess.Popen([sys.executable, "-c", self.SCRIPT,
                                       str(fx.sync_dir / ".lock")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.child.stdout is not None
        self.got = self.child.stdout.readline().strip() == b"locked"

    def release(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait(timeout=30)


# -- forced interleavings (deterministic) ----------------------------------------------------


def interleaved(fx: Fixture, monkeypatch: pytest.MonkeyPatch, outer: tuple[str, ...],
                inner: tuple[str, ...]) -> tuple[Ran, Ran]:
    """Run `outer`; the moment it reads the report back (it has read the decisions, and
    not saved them yet), run `inner` once. Both results."""
    ran: list[Ran] = []
    real = report.read_back

    def racing(text: str, prefixes: dict[str, str]) -> report.ReadBack:
        if not ran:
            ran.append(run(fx.port, *inner))
        return real(text, prefixes)

    monkeypatch.setattr(report, "read_back", racing)
    first = run(fx.port, *outer)
    monkeypatch.undo()
    (second,) = ran
    return first, second


def assert_kept_or_refused(fx: Fixture, second: Ran, name: str, reason: str) -> None:
    """The inner decide either succeeded and its decision is there, or was refused (the
    lock) and wrote nothing."""
    table = recorded(fx)
    if second.rc == 0:
        assert table[fx.marks[name]].reason == reason, "a decide that succeeded was lost"
    else:
        assert second.rc == REFUSED and fx.marks[name] not in table


def test_a_decide_between_syncs_read_and_write_is_never_lost(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    hand_edit(fx, "docs")
    outer, second = interleaved(fx, monkeypatch, ("sync",),
                                ("decide", fx.marks["lora"][:10], "IGNORE", "meanwhile"))
    assert outer.rc == 0, outer.err
    assert recorded(fx)[fx.marks["docs"]].disposition == "INVENTORY"  # the sync's hand edit
    assert_kept_or_refused(fx, second, "lora", "meanwhile")


def test_a_decide_between_decides_read_and_write_is_never_lost(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first decide has saved its decision and read the report back: a second decide
    # runs now, before the first one saves the hand edit it read.
    hand_edit(fx, "docs")
    first, second = interleaved(fx, monkeypatch,
                                ("decide", fx.marks["rocm_b"][:10], "PORT-NOW", "first"),
                                ("decide", fx.marks["lora"][:10], "IGNORE", "second"))
    assert first.rc == 0, first.err
    assert recorded(fx)[fx.marks["rocm_b"]].reason == "first"
    assert_kept_or_refused(fx, second, "lora", "second")


def test_a_decide_refused_for_the_lock_has_written_nothing(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process tries the lock while `decide` refreshes the report: the decide either
    kept the lock throughout (it succeeds) or is refused with nothing written."""
    hand_edit(fx, "docs")
    md = fx.report()
    before = (md.read_bytes(), (fx.sync_dir / decisions.FILE).exists())
    takers: list[LockTaker] = []
    real = report.read_back

    def racing(text: str, prefixes: dict[str, str]) -> report.ReadBack:
        if not takers:
            takers.append(LockTaker(fx))
        return real(text, prefixes)

    monkeypatch.setattr(report, "read_back", racing)
    try:
        r = run(fx.port, "decide", fx.marks["lora"][:10], "IGNORE", "under contention")
    finally:
        monkeypatch.undo()
        for t in takers:
            t.release()
    if r.rc == 0:
        assert recorded(fx)[fx.marks["lora"]].reason == "under contention"
        assert not takers[0].got  # the decide held the lock while it wrote
    else:
        assert r.rc == REFUSED, r.err
        assert (md.read_bytes(), (fx.sync_dir / decisions.FILE).exists()) == before, (
            "refused for the lock, but it had written")


# -- real processes in parallel --------------------------------------------------------------


def _spawn(fx: Fixture, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from sync.launch import entry; entry()", "--port", str(fx.port),
         *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(p: subprocess.Popen[str]) -> Ran:
    out, err = p.communicate(timeout=120)
    return Ran(p.returncode, out, err)


def _outcome(ran: Ran, table: dict[str, decisions.Decision], sha: str, reason: str) -> str:
    """'ok' when it printed success and its decision is recorded, 'refused' when it was
    refused for the lock and recorded nothing; anything else fails the test."""
    if ran.rc == 0:
        assert table.get(sha) is not None and table[sha].reason == reason, (
            f"printed success but its decision is not recorded: {ran.out}")
        return "ok"
    assert ran.rc == REFUSED and "holds the lock" in ran.err, ran.err
    assert table.get(sha) is None or table[sha].reason != reason, "refused but it wrote"
    return "refused"


PAIRS = ("rocm_b", "lora", "docs", "tests_only", "add_model", "no_pr", "fix_c", "delete")


def test_parallel_decides_lose_nothing(fx: Fixture) -> None:
    outcomes: list[str] = []
    for t in range(trials(6)):
        hand_edit(fx, "change_a", f"hand {t}")  # pending: both runs read it back
        a, b = PAIRS[(2 * t) % len(PAIRS)], PAIRS[(2 * t + 1) % len(PAIRS)]
        ra, rb = f"trial {t} a", f"trial {t} b"
        procs = [_spawn(fx, "decide", "--force", fx.marks[a][:10], "IGNORE", ra),
                 _spawn(fx, "decide", "--force", fx.marks[b][:10], "INVENTORY", rb)]
        done = [_finish(p) for p in procs]
        table = recorded(fx)
        got = [_outcome(done[0], table, fx.marks[a], ra),
               _outcome(done[1], table, fx.marks[b], rb)]
        if "ok" in got:
            assert table[fx.marks["change_a"]].reason == f"hand {t}"
        outcomes += got
    assert "ok" in outcomes


def test_parallel_sync_and_decide_lose_nothing(fx: Fixture) -> None:
    outcomes: list[str] = []
    for t in range(trials(4)):
        name = PAIRS[t % len(PAIRS)]
        hand_edit(fx, "change_a", f"hand {t}")
        reason = f"trial {t}"
        procs = [_spawn(fx, "sync"),
                 _spawn(fx, "decide", "--force", fx.marks[name][:10], "IGNORE", reason)]
        synced, decided = (_finish(p) for p in procs)
        table = recorded(fx)
        outcomes.append(_outcome(decided, table, fx.marks[name], reason))
        assert synced.rc in (0, REFUSED), synced.err
        if 0 in (synced.rc, decided.rc):
            assert table[fx.marks["change_a"]].reason == f"hand {t}", "a hand edit was lost"
    assert outcomes
