"""`fetch`: a real remote that moves; only the remote-tracking ref moves; the target is frozen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from portfixture import Fixture, advance_remote, build, run

from sync import port
from sync.dev.fastimport import git
from sync.records import cycle


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def refs(fx: Fixture) -> dict[str, str]:
    """Every ref but symbolic ones (origin/HEAD follows origin/main)."""
    out = git(fx.reference, "for-each-ref", "--format=%(refname) %(objectname) %(symref)")
    return {parts[0]: parts[1] for parts in map(str.split, out.splitlines()) if len(parts) == 2}


def frozen(fx: Fixture) -> cycle.Cycle:
    c = cycle.load(port.locate(str(fx.port)))
    assert c is not None
    return c


def test_fetch_moves_only_the_remote_tracking_ref(fx: Fixture) -> None:
    later = advance_remote(fx, "later1")
    before = refs(fx)
    head = git(fx.reference, "rev-parse", "HEAD").strip()
    a_py = (fx.reference / "vllm/a.py").read_bytes()
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    after = refs(fx)
    assert after["refs/remotes/origin/main"] == later
    assert {k: v for k, v in after.items() if k != "refs/remotes/origin/main"} == {
        k: v for k, v in before.items() if k != "refs/remotes/origin/main"}
    assert after["refs/heads/main"] == fx.pin
    assert git(fx.reference, "rev-parse", "HEAD").strip() == head == fx.pin
    assert (fx.reference / "vllm/a.py").read_bytes() == a_py
    assert git(fx.reference, "status", "--porcelain") == ""
    # Progress and notices on stderr; stdout holds only the result line.
    assert r.err.startswith(f"fetching origin main in {fx.reference}")
    assert r.out == (f"target {later} (origin/main) frozen for this cycle; 14 commits after "
                     f"the pin {fx.pin[:10]}\n")
    c = frozen(fx)
    assert (c.pin, c.target, c.target_ref) == (fx.pin, later, "origin/main")


def test_second_fetch_keeps_the_target_until_retarget(fx: Fixture) -> None:
    first = advance_remote(fx, "later1")
    assert run(fx.port, "fetch").rc == 0
    stamp = frozen(fx).frozen_at
    second = advance_remote(fx, "later2")
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert refs(fx)["refs/remotes/origin/main"] == second
    assert f"origin/main moved to {second[:10]}; the open cycle keeps its target {first[:10]}" \
        in r.err
    assert "--retarget" in r.err
    assert f"target {first} (origin/main) frozen" in r.out
    assert (frozen(fx).target, frozen(fx).frozen_at) == (first, stamp)
    # sync follows the frozen target too, and says the remote moved.
    s = run(fx.port, "sync", "--json")
    assert s.rc == 0 and json.loads(s.out)["target"] == first
    assert "this cycle keeps its target" in s.err
    j = run(fx.port, "fetch", "--json")
    assert json.loads(j.out)["remote_moved_to"] == second
    moved = run(fx.port, "fetch", "--retarget")
    assert moved.rc == 0 and f"target {second} (origin/main) frozen" in moved.out
    assert frozen(fx).target == second


def test_fetch_with_a_dirty_reference_checkout(fx: Fixture) -> None:
    dirty = fx.reference / "vllm/a.py"
    dirty.write_text("a = 'local experiment'\n", encoding="utf-8")
    later = advance_remote(fx, "later1")
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert refs(fx)["refs/remotes/origin/main"] == later
    assert dirty.read_text(encoding="utf-8") == "a = 'local experiment'\n"
    assert git(fx.reference, "status", "--porcelain") == " M vllm/a.py\n"
    assert git(fx.reference, "rev-parse", "HEAD").strip() == fx.pin
    assert "has uncommitted changes (dirty: 1 unstaged change) — commit or stash them" in r.err
    assert json.loads(run(fx.port, "fetch", "--json").out)["dirty"] is True


def test_fetch_target_options(fx: Fixture) -> None:
    r = run(fx.port, "fetch", "--target", fx.marks["rename"][:10])
    assert r.rc == 0, r.err
    c = frozen(fx)
    assert (c.target, c.target_ref) == (fx.marks["rename"], fx.marks["rename"][:10])
    same = run(fx.port, "fetch", "--target", fx.pin)
    assert same.rc == 0 and same.out == f"nothing to sync: the target {fx.pin[:10]} is the pin\n"
    bad = run(fx.port, "fetch", "--target", "v9.9.9")
    assert bad.rc == 2
    assert bad.err.splitlines()[-1].startswith(
        "upstream-sync: error: target 'v9.9.9' does not name a commit")


def test_fetch_from_a_missing_remote_is_one_line(fx: Fixture, tmp_path: Path) -> None:
    git(fx.reference, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    r = run(fx.port, "fetch")
    assert r.rc == 3
    lines = r.err.strip().splitlines()
    assert lines[-1].startswith("upstream-sync: error: fetch of origin main failed")
    assert "check the remote URL" in lines[-1]
    assert cycle.load(port.locate(str(fx.port))) is None
