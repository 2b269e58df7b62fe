"""`fetch`: a real remote that moves; only the remote-tracking ref moves; the target is frozen."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from portfixture import Fixture, advance_remote, build, run

from sync import cli, port
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
    assert "the open cycle keeps its target" in s.err
    j = run(fx.port, "fetch", "--json")
    assert json.loads(j.out)["remote_moved_to"] == second
    moved = run(fx.port, "fetch", "--retarget")
    assert moved.rc == 0 and f"target {second} (origin/main) frozen" in moved.out
    assert frozen(fx).target == second


def test_a_remote_moved_back_is_told_as_that(fx: Fixture) -> None:
    """walk-s11 U1: a force-push behind the frozen target read "moved to", and a retarget
    then dropped commits from the cycle without a word."""
    first = advance_remote(fx, "later1")
    second = advance_remote(fx, "later2")
    assert run(fx.port, "fetch").rc == 0 and frozen(fx).target == second
    git(fx.remote, "update-ref", "refs/heads/main", first)
    dropped = int(git(fx.reference, "rev-list", "--count", "--no-merges",
                      f"{first}..{second}").strip())
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert (f"origin/main moved back, behind the open cycle's target, to {first[:10]} (a "
            f"force-push?); the open cycle keeps its target {second[:10]}: --retarget would "
            f"drop {dropped} of its commits") in r.err
    s = run(fx.port, "sync")
    assert s.rc == 0 and "the remote moved back, behind the open cycle's target" in s.err


def test_status_tells_a_remote_moved_back_as_fetch_does(fx: Fixture) -> None:
    """After the force-push above, fetch said the remote moved back and that --retarget
    would drop commits; status said "origin/main moved to <sha>; this cycle keeps its target
    ('upstream-sync sync --retarget' moves it)", the plain move's line. It says what fetch
    says."""
    first = advance_remote(fx, "later1")
    second = advance_remote(fx, "later2")
    assert run(fx.port, "fetch").rc == 0 and frozen(fx).target == second
    git(fx.remote, "update-ref", "refs/heads/main", first)
    assert run(fx.port, "fetch").rc == 0
    s = run(fx.port, "status")
    assert s.rc == 0, s.err
    assert "('upstream-sync sync --retarget' moves it)" not in s.out, s.out
    assert (f"  origin/main moved back, behind the open cycle's target, to {first[:10]} (a "
            f"force-push?); the open cycle keeps its target {second[:10]}: --retarget would "
            "drop") in s.out, s.out
    assert json.loads(run(fx.port, "status", "--json").out)["cycle"]["moved"].startswith(
        "origin/main moved back")


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
    # Another target for the open cycle is refused without --retarget (nothing changes).
    other = run(fx.port, "fetch", "--target", fx.tip)
    assert other.rc == 2 and frozen(fx) == c
    assert other.err.splitlines()[-1] == (
        f"upstream-sync: error: the open cycle is frozen at {fx.marks['rename'][:10]} "
        f"({fx.marks['rename'][:10]}); {fx.tip} is {fx.tip[:10]} — pass --retarget to move "
        "the cycle to it, or leave --target out to keep the frozen target")
    # The pin is no target for it, --retarget or not (walk-s11 D8: it froze the cycle there).
    for argv in ([], ["--retarget"]):
        same = run(fx.port, "fetch", "--target", fx.pin, *argv)
        assert same.rc == 2 and frozen(fx) == c
        assert same.err.splitlines()[-1] == (
            f"upstream-sync: error: the target {fx.pin[:10]} is the pin: there is nothing to "
            f"retarget to — the open cycle to {fx.marks['rename'][:10]} is kept: leave "
            "--target out to sync it, or name a target past the pin")
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


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _many_upstream_objects(fx: Fixture, tmp: Path) -> None:
    """Push a few hundred blobs to the remote so git reports progress many times over."""
    work = tmp / "work"
    git(tmp, "clone", "-q", str(fx.remote), str(work))
    for n in range(300):
        (work / f"blob{n}.txt").write_bytes(os.urandom(2048).hex().encode())
    git(work, "add", "-A")
    git(work, "-c", "user.name=U", "-c", "user.email=u@example.invalid", "commit", "-q",
        "-m", "[Misc] Many blobs (#999)")
    git(work, "push", "-q", "origin", "HEAD:main")


def test_fetch_progress_off_a_terminal_is_a_bounded_number_of_lines(tmp_path: Path) -> None:
    seen = {}
    for name, err in (("log", io.StringIO()), ("terminal", _Terminal())):
        fx = build(tmp_path / name)
        _many_upstream_objects(fx, tmp_path / name)
        assert cli.main(["--port", str(fx.port), "fetch"], out=io.StringIO(), err=err) == 0
        seen[name] = [line for line in err.getvalue().splitlines() if "objects" in line]
    # Off a terminal: the line that ends each stage, a handful whatever the fetch's size.
    assert seen["log"] and len(seen["log"]) <= 8, seen["log"]
    assert all("100%" in line or "done" in line for line in seen["log"]), seen["log"]
    # On a terminal every update is shown (they redraw in place there).
    assert len(seen["terminal"]) > 2 * len(seen["log"])


def test_fetch_a_named_tag_fetches_it(fx: Fixture) -> None:
    """A release tag the checkout has not seen: `fetch --target TAG` brings it, then freezes."""
    # A release commit only the tag holds (no branch the clone or a fetch of main brings).
    tree = git(fx.remote, "rev-parse", f"{fx.marks['release']}^{{tree}}").strip()
    tagged = git(fx.remote, "-c", "user.name=U", "-c", "user.email=u@example.invalid",
                 "commit-tree", tree, "-p", fx.marks["release"], "-m",
                 "[Release] v0.1.1 (#401)").strip()
    git(fx.remote, "tag", "v0.1.1", tagged)
    assert run(fx.port, "fetch").rc == 0
    assert git(fx.reference, "tag", "--list", "v0.1.1") == ""
    r = run(fx.port, "fetch", "--target", "v0.1.1", "--retarget")
    assert r.rc == 0, r.err
    assert git(fx.reference, "rev-parse", "v0.1.1^{commit}").strip() == tagged
    c = frozen(fx)
    assert (c.target, c.target_ref) == (tagged, "v0.1.1")
    bad = run(fx.port, "fetch", "--target", "v9.9.9", "--retarget")
    assert bad.rc == 2 and "target 'v9.9.9' does not name a commit" in bad.err


def test_fetch_refuses_a_target_sync_would_refuse(fx: Fixture) -> None:
    """`fetch --target` froze a target behind the pin ("0 commits after the pin", exit 0) or
    off its line ("1 commits after the pin"), which every later `sync` refused; it refuses
    them as `sync` does, before anything is frozen."""
    behind = run(fx.port, "fetch", "--target", fx.marks["base"])
    assert behind.rc == 2 and behind.out == ""
    assert (f"target {fx.marks['base'][:10]} is behind the pin {fx.pin[:10]} (an ancestor of "
            "it): a sync only moves forward") in behind.err
    side = fx.marks["side"]
    off = run(fx.port, "fetch", "--target", side)
    assert off.rc == 2 and off.out == ""
    assert off.err.splitlines()[-1] == (
        f"upstream-sync: error: target {side[:10]} does not descend from the pin "
        f"{fx.pin[:10]} — pick a target on the pin's line, or freeze it with 'upstream-sync "
        f"sync --target {side} --allow-divergent'")
    assert cycle.load(port.locate(str(fx.port))) is None
    # A cycle that accepted the divergence keeps it: fetch no longer refuses its target.
    assert run(fx.port, "sync", "--target", side, "--allow-divergent").rc == 0
    again = run(fx.port, "fetch")
    assert again.rc == 0 and frozen(fx).target == side, again.err


def test_fetch_refuses_a_pin_the_checkout_lacks(fx: Fixture) -> None:
    """A pin block naming no commit of the reference checkout froze a target ("? commits
    after the pin", exit 0), and `sync` then said to run fetch; it is refused (exit 3)."""
    from portfixture import protocol_text, write

    write(fx.port, ".agents/upstream-sync.md", protocol_text("1" * 40))
    r = run(fx.port, "fetch")
    assert r.rc == 3 and r.out == ""
    assert r.err.splitlines()[-1] == (
        f"upstream-sync: error: the pin 1111111111 is not in the reference checkout "
        f"{fx.reference}, even after fetching origin/main — fetch the branch or tag that "
        f"holds it ('git -C {fx.reference} fetch origin <ref>'), or check vllm_commit in the "
        "pin block")
    assert cycle.load(port.locate(str(fx.port))) is None


def test_a_remote_force_pushed_behind_the_pin_keeps_the_open_cycle(fx: Fixture) -> None:
    """With a cycle open, a remote reset behind the pin (or off its line) refused the fetch
    (exit 2, 'pass --target', which the open cycle refuses) and told the user to run the
    fetch that had just run; the cycle keeps its frozen target, and says how the remote
    moved, as `sync` does."""
    assert run(fx.port, "fetch").rc == 0
    for name in ("base", "side"):
        git(fx.remote, "update-ref", "refs/heads/main", fx.marks[name])
        r = run(fx.port, "fetch")
        assert r.rc == 0, r.err
        assert f"to {fx.marks[name][:10]} (a force-push?); the open cycle keeps its target " \
            f"{fx.tip[:10]}" in r.err
        assert f"target {fx.tip} (origin/main) frozen for this cycle" in r.out
        assert frozen(fx).target == fx.tip
    # No cycle open: refused, in one line that names where the remote stands.
    (fx.sync_dir / "cycle.toml").unlink()
    git(fx.remote, "update-ref", "refs/heads/main", fx.marks["base"])
    r = run(fx.port, "fetch")
    assert r.rc == 2
    assert r.err.splitlines()[1:] == [
        f"upstream-sync: error: origin/main does not move past the pin after the fetch: "
        f"origin/main ({fx.marks['base'][:10]}) is 1 commit(s) older than the pin — check the "
        "remote and branch in the developer preferences, or pass --target"]


def test_the_note_of_a_force_push_offers_no_refused_retarget(fx: Fixture) -> None:
    """a remote force-pushed behind the pin (or off its line) read '--retarget would drop
    N of its commits', and 'fetch --retarget' was then refused: the note offers a retarget
    only where one is taken."""
    assert run(fx.port, "fetch").rc == 0
    base, side = fx.marks["base"], fx.marks["side"]
    git(fx.remote, "update-ref", "refs/heads/main", base)
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert (f"origin/main moved back, behind the pin {fx.pin[:10]}, to {base[:10]} (a "
            f"force-push?); the open cycle keeps its target {fx.tip[:10]}, and no retarget can "
            "move it there (a sync only moves forward)") in r.err.splitlines()
    assert "--retarget" not in r.err
    assert run(fx.port, "fetch", "--retarget").rc == 2
    assert run(fx.port, "sync", "--retarget").rc == 2
    git(fx.remote, "update-ref", "refs/heads/main", side)
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    dropped = int(git(fx.reference, "rev-list", "--count", "--no-merges",
                      f"{side}..{fx.tip}").strip())
    assert (f"origin/main moved off the pin's line, to {side[:10]} (a force-push?); the open "
            f"cycle keeps its target {fx.tip[:10]}: only 'upstream-sync sync --retarget "
            f"--allow-divergent' moves it there, and would drop {dropped} of its commits"
            ) in r.err.splitlines()
    assert run(fx.port, "fetch", "--retarget").rc == 2
    assert run(fx.port, "sync", "--retarget").rc == 2
    assert frozen(fx).target == fx.tip
    assert run(fx.port, "sync", "--retarget", "--allow-divergent").rc == 0
    assert frozen(fx).target == side


def test_fetch_says_an_unreadable_range_once(fx: Fixture) -> None:
    """The refusal of missing objects was printed twice, as a note and as the error."""
    from test_checkout_health import drop_blobs

    drop_blobs(fx)
    r = run(fx.port, "fetch")
    assert r.rc == 3
    assert [line for line in r.err.splitlines() if "cannot read" in line] == [
        line for line in r.err.splitlines() if line.startswith("upstream-sync: error:")]


def test_a_failed_fetch_says_what_git_said_and_what_to_fix(fx: Fixture, tmp_path: Path) -> None:
    """The refusal quoted GitPython's wrapper ("stderr: 'fatal: …'", or a lone "…repository.'"
    from its last line), and told a remote with no such branch to check its URL and network."""
    git(fx.remote, "branch", "-m", "main", "master")
    r = run(fx.port, "fetch")
    assert r.rc == 3
    assert r.err.splitlines()[-1] == (
        "upstream-sync: error: fetch of origin main failed: fatal: couldn't find remote ref "
        "refs/heads/main — the remote has no branch 'main': set branch in the developer "
        "preferences (or SYNC_BRANCH) to the upstream branch, then run fetch again")
    nowhere = tmp_path / "nowhere.git"
    git(fx.reference, "remote", "set-url", "origin", str(nowhere))
    r = run(fx.port, "fetch")
    assert r.rc == 3
    assert r.err.splitlines()[-1] == (
        f"upstream-sync: error: fetch of origin main failed: fatal: '{nowhere}' does not "
        "appear to be a git repository — check the remote URL and your network, then run "
        "fetch again")


def _local_commit(fx: Fixture) -> str:
    git(fx.reference, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
        "--allow-empty", "-m", "local experiment")
    return git(fx.reference, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("detached", [False, True])
def test_fetch_says_a_checkout_the_advance_cannot_move(fx: Fixture, detached: bool) -> None:
    """local commits on top of the pin (or a HEAD detached at one) read 'clean; pin
    present', and only the advance, after the cycle's work, refused to fast-forward."""
    local = _local_commit(fx)
    if detached:
        git(fx.reference, "checkout", "-q", "--detach", local)
        git(fx.reference, "branch", "-q", "-f", "main", fx.pin)
    said = (f"the reference checkout's HEAD {local[:10]} cannot fast-forward to "
            f"{fx.tip[:10]} — check out the pin's branch")
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert f"note: {said}" in r.err.splitlines()
    assert json.loads(run(fx.port, "fetch", "--json").out)["move_problem"] == said
    status = json.loads(run(fx.port, "status", "--json").out)
    assert said in status["reference"]["problems"]
    assert f"  {said}" in run(fx.port, "status").out.splitlines()
    git(fx.reference, "checkout", "-q", "-B", "main", fx.pin)
    again = run(fx.port, "fetch")
    assert again.rc == 0 and "cannot fast-forward" not in again.err
    assert json.loads(run(fx.port, "fetch", "--json").out)["move_problem"] is None
    assert json.loads(run(fx.port, "status", "--json").out)["reference"]["problems"] == []
