"""Reference checkout health (findings §7, recipe 14): what status, fetch, sync and the report
say of a checkout that lost objects, whose checkout failed, whose index is gone, or whose
`origin/main` is older than the pin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from portfixture import Fixture, build, run

from sync.dev.fastimport import git


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def _loosen(repo: Path) -> None:
    """Unpack every pack into loose objects (so single objects can be removed)."""
    git(repo, "config", "gc.auto", "0")
    pack_dir = repo / ".git/objects/pack"
    keep = repo.parent / "packs"
    keep.mkdir(exist_ok=True)
    for p in pack_dir.iterdir():
        shutil.move(str(p), keep / p.name)
    for p in sorted(keep.glob("*.pack")):
        git(repo, "unpack-objects", "-q", input=p.read_bytes())


def drop_blobs(fx: Fixture) -> list[str]:
    """Remove the blobs that are new in pin..tip: the checkout can no longer read the range."""
    _loosen(fx.reference)
    new = git(fx.reference, "rev-list", "--objects", f"{fx.pin}..{fx.tip}").split("\n")
    dropped = []
    for line in new:
        parts = line.split()
        if len(parts) == 2 and git(fx.reference, "cat-file", "-t", parts[0]).strip() == "blob":
            (fx.reference / ".git/objects" / parts[0][:2] / parts[0][2:]).unlink()
            dropped.append(parts[0])
    return dropped


def status_line(fx: Fixture) -> str:
    r = run(fx.port, "status")
    return next(ln for ln in r.out.splitlines() if ln.startswith("reference checkout:"))


def test_a_healthy_checkout_reads_clean(fx: Fixture) -> None:
    assert status_line(fx) == f"reference checkout: {fx.reference} at {fx.pin[:10]}, clean; " \
        "pin present"
    doc = json.loads(run(fx.port, "status", "--json").out)
    assert doc["reference"]["objects"] == {"ok": True, "missing": 0, "first": None}
    assert doc["behind"]["relation"] == "ahead" and doc["behind"]["commits"] > 0


def test_missing_objects_are_reported_and_sync_refuses(fx: Fixture) -> None:
    dropped = drop_blobs(fx)
    in_tip = {ln.split()[2] for ln in git(fx.reference, "ls-tree", "-r", fx.tip).splitlines()}
    n = len(set(dropped) & in_tip)
    assert n
    r = run(fx.port, "status")
    assert r.rc == 3
    line = next(ln for ln in r.out.splitlines() if ln.startswith("reference checkout:"))
    assert line.endswith(f"clean, OBJECTS MISSING ({n}); pin present")
    assert f"cannot read {n} object(s) of {fx.pin[:10]}..{fx.tip[:10]}" in r.err
    s = run(fx.port, "sync")
    assert s.rc == 3
    assert s.err.startswith(f"upstream-sync: error: the reference checkout {fx.reference} "
                            f"cannot read {n} object(s)")
    assert "fetch --refetch origin" in s.err
    assert not (fx.port / ".agents/sync/cycle.toml").exists()  # nothing frozen


def test_a_failed_checkout_is_dirty_not_clean(fx: Fixture) -> None:
    drop_blobs(fx)
    merge = git_rc(fx.reference, "merge", "--ff-only", "origin/main")
    assert merge != 0  # git aborts half way: the work tree is left changed
    doc = json.loads(run(fx.port, "status", "--json").out)
    ref = doc["reference"]
    assert ref["dirty"] is True and ref["objects"]["ok"] is False
    assert ref["tree"]["unstaged"] == ref["tree"]["unstaged_deleted"] > 0
    assert ref["state"].startswith(f"dirty: {ref['tree']['unstaged']} unstaged changes, ")
    assert ref["state"].endswith(f"OBJECTS MISSING ({ref['objects']['missing']})")


def git_rc(repo: Path, *args: str) -> int:
    import subprocess

    from sync.dev.fastimport import hermetic_env

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                          env=hermetic_env(), check=False).returncode


def test_a_lost_index_reads_as_staged_deletions(fx: Fixture) -> None:
    (fx.reference / ".git/index").unlink()
    line = status_line(fx)
    assert "dirty: the index is missing (every file reads as a staged deletion)" in line
    r = run(fx.port, "status")
    assert f"git -C {fx.reference} reset" in r.out
    s = run(fx.port, "sync")
    assert s.rc == 0, s.err
    assert ("warning: the reference checkout is dirty: the index is missing (every file reads "
            "as a staged deletion)") in s.err and "advance refuses until it is clean" in s.err
    report = next((fx.port / ".agents/sync").glob("*.md")).read_text(encoding="utf-8")
    assert ("- Reference checkout: at `" + fx.pin[:10] + "`, dirty: the index is missing "
            "(every file reads as a staged deletion), full clone") in report


def test_staged_deletions_without_a_lost_index(fx: Fixture) -> None:
    git(fx.reference, "rm", "-q", "--cached", "vllm/a.py", "vllm/b.py")
    assert "dirty: 2 staged deletions (a checkout that failed?)" in status_line(fx)


def test_origin_older_than_the_pin(fx: Fixture) -> None:
    older = fx.marks["base"]
    git(fx.reference, "update-ref", "refs/remotes/origin/main", older)
    r = run(fx.port, "status")
    assert "behind origin/main: 0 commits" not in r.out
    assert f"origin/main ({older[:10]}) is 1 commit(s) older than the pin" in r.out
    assert "origin/main 1 commit(s) older than the pin" in status_line(fx)
    s = run(fx.port, "sync")
    assert s.rc == 2 and "is behind the pin" in s.err and "only moves forward" in s.err
    assert not (fx.port / ".agents/sync/cycle.toml").exists()  # refused before freezing


def test_fetch_says_so_when_the_remote_is_older_than_the_pin(fx: Fixture) -> None:
    git(fx.remote, "update-ref", "refs/heads/main", fx.marks["base"])
    r = run(fx.port, "fetch")
    assert r.rc == 2
    assert f"origin/main ({fx.marks['base'][:10]}) is 1 commit(s) older than the pin" in r.err
    assert "does not move past the pin after the fetch" in r.err
    assert not (fx.port / ".agents/sync/cycle.toml").exists()


def test_a_git_command_that_hits_a_missing_object_names_the_fix(fx: Fixture) -> None:
    from sync.infra.errors import EnvironmentUnresolved
    from sync.upstream import gitio

    drop_blobs(fx)
    with pytest.raises(EnvironmentUnresolved) as info:
        gitio.run(fx.reference, ["diff", fx.pin, fx.tip])  # reads the blobs it lost
    assert f"re-fetch them with 'git -C {fx.reference} fetch --refetch origin'" in str(
        info.value)


def test_the_refetch_advice_names_the_remote_the_preferences_name(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `fetch_remote = upstream` (the checkout's origin a fork, or none), every advice
    to fetch the lost objects again said 'fetch --refetch origin'; it names upstream."""
    from sync.upstream import gitio

    git(fx.reference, "remote", "rename", "origin", "upstream")
    monkeypatch.setenv("SYNC_FETCH_REMOTE", "upstream")
    assert run(fx.port, "sync").rc == 0
    drop_blobs(fx)
    drop_commit(fx, "docs")
    gitio._KNOWN.clear()
    for argv in (["sync"], ["status"], ["queue"], ["check"], ["advance", "--dry-run"]):
        r = run(fx.port, *argv)
        said = r.out + r.err
        assert r.rc == 3 and "fetch --refetch upstream'" in said, (argv, said)
        assert "origin" not in said, (argv, said)


def drop_commit(fx: Fixture, name: str) -> str:
    """Remove the object of one commit inside pin..tip: the range can no longer be walked."""
    _loosen(fx.reference)
    sha = fx.marks[name]
    (fx.reference / ".git/objects" / sha[:2] / sha[2:]).unlink()
    return sha


def test_a_missing_commit_of_the_range_is_missing_objects_not_divergence(fx: Fixture) -> None:
    """walk-s11 D6a: `git merge-base --is-ancestor` exits 1 ("no") also when it cannot read a
    commit between the two (it says so on stderr): `sync` and `advance` advised
    --allow-divergent, `status` said "diverged" (rc 0). It is the missing-objects refusal."""
    from sync.infra.errors import EnvironmentUnresolved
    from sync.upstream import gitio

    assert run(fx.port, "sync").rc == 0  # a cycle open to tip, as in the walk
    drop_commit(fx, "docs")
    gitio._KNOWN.clear()  # what this process learnt before the loss: a new run knows nothing
    ref = gitio.open_repo(fx.reference)
    with pytest.raises(EnvironmentUnresolved) as info:
        gitio.is_ancestor(ref, fx.pin, fx.tip)
    assert f"re-fetch them with 'git -C {fx.reference} fetch --refetch origin'" in str(
        info.value)
    assert not gitio.is_ancestor(ref, fx.marks["side"], fx.pin)  # a plain "no" stays one
    cycle = (fx.port / ".agents/sync/cycle.toml").read_bytes()
    # ...and so is every other command's walk that meets it (`git rev-list`: "Could not read").
    for argv in (["sync"], ["sync", "--retarget"], ["advance", "--dry-run"], ["status"],
                 ["status", "--json"], ["queue"], ["check"], ["bump-headers", "--check"]):
        r = run(fx.port, *argv)
        assert r.rc == 3, (argv, r.rc, r.out, r.err)
        said = r.out + r.err
        assert "fetch --refetch origin" in said, (argv, said)
        assert "allow-divergent" not in said and "diverged" not in said
        assert "does not descend" not in said, (argv, said)
    assert (fx.port / ".agents/sync/cycle.toml").read_bytes() == cycle
    (fx.port / ".agents/sync/cycle.toml").unlink()
    r = run(fx.port, "sync")  # no cycle open: the target is checked against the pin first
    assert r.rc == 3 and "fetch --refetch origin" in r.err and "divergent" not in r.err, r.err
    assert not (fx.port / ".agents/sync/cycle.toml").exists()


def blobless(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A blobless partial clone of the remote (main at the pin), made the reference checkout;
    its promisor remote then gone, as a clone whose source moved or went offline."""
    git(fx.remote, "config", "uploadpack.allowFilter", "true")
    partial = fx.tmp / "partial"
    git(fx.tmp, "clone", "-q", "--filter=blob:none", "--no-checkout",
        f"file://{fx.remote}", str(partial))
    git(partial, "checkout", "-q", "-B", "main", fx.pin)
    monkeypatch.setenv("VLLM_SOURCE", str(partial))
    fx.remote.rename(fx.tmp / "moved.git")
    return partial


def test_a_partial_clone_is_told_how_to_fetch_what_its_filter_left_out(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fetch --refetch origin` re-applies the clone's filter (blob:none): the blobs stay
    missing. The fix for a partial clone fetches without it and drops the filter."""
    partial = blobless(fx, monkeypatch)
    for argv in (["status"], ["sync"]):
        r = run(fx.port, *argv)
        assert r.rc == 3, (argv, r.out, r.err)
        assert "partial clone (--filter=blob:none from 'origin')" in r.err, r.err
        assert f"'git -C {partial} fetch --refetch --no-filter origin'" in r.err, r.err
        assert f"'git -C {partial} config --unset remote.origin.partialclonefilter'" in r.err
    assert not (fx.port / ".agents/sync/cycle.toml").exists()


def test_a_partial_clone_that_cannot_fetch_a_blob_lazily_says_so(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cycle open (frozen from a whole clone), explain and queue read the range's
    blobs: git tries to fetch each from the promisor remote and fails. That is a missing
    object of a partial clone, not 'check the repository and the revisions given' under the
    transport's error ("does not appear to be a git repository")."""
    assert run(fx.port, "sync").rc == 0
    partial = blobless(fx, monkeypatch)
    for argv in (["explain", fx.marks["change_a"]], ["queue"]):
        r = run(fx.port, *argv)
        assert r.rc == 3, (argv, r.out, r.err)
        assert len(r.err.strip().splitlines()) == 1, r.err
        assert "from promisor remote" in r.err, r.err
        assert "check the repository and the revisions given" not in r.err, r.err
        assert f"'git -C {partial} fetch --refetch --no-filter origin'" in r.err, r.err


def test_a_bare_mirror_is_no_work_tree_not_a_lost_index(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare mirror (`git clone --mirror`) read as "the index is missing (every file reads
    as a staged deletion) — run 'git reset'", which a bare repository refuses; and the
    advance, which moves the checkout after writing its records, met 'this operation must be
    run in a work tree' only then. It is a bare repository, said as one, and the advance
    lists it among its unmet preconditions, before it writes anything."""
    assert run(fx.port, "sync").rc == 0
    mirror = fx.tmp / "vllm.git"
    git(fx.tmp, "clone", "-q", "--mirror", str(fx.remote), str(mirror))
    git(mirror, "update-ref", "refs/remotes/origin/main", fx.tip)  # as our fetch writes it
    monkeypatch.setenv("VLLM_SOURCE", str(mirror))
    r = run(fx.port, "status")
    said = r.out + r.err
    assert "index is missing" not in said and "git -C" + f" {mirror} reset" not in said, said
    line = next(ln for ln in r.out.splitlines() if ln.startswith("reference checkout:"))
    assert line == f"reference checkout: {mirror} at {fx.tip[:10]}, bare (no work tree); " \
        "pin present", line
    assert f"the reference checkout {mirror} is a bare repository" in r.out, r.out
    assert json.loads(run(fx.port, "status", "--json").out)["reference"]["tree"]["bare"]
    a = run(fx.port, "advance", "--dry-run")
    assert a.rc == 6, (a.out, a.err)
    assert f"unmet: the reference checkout {mirror} is a bare repository" in a.out, a.out


def test_a_checkout_whose_remote_is_not_origin_is_told_to_name_it(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clone made with `-o upstream` has upstream/main, no origin/main: status said
    "origin/main does not resolve — run 'upstream-sync fetch'", sync and check the same, and
    fetch then failed ('no remote named origin'). Each says the remote is misnamed, which
    remotes the checkout has, and the preference that names it."""
    other = fx.tmp / "other"
    git(fx.tmp, "clone", "-q", "--no-local", "-o", "upstream", str(fx.remote), str(other))
    git(other, "reset", "-q", "--hard", fx.pin)
    monkeypatch.setenv("VLLM_SOURCE", str(other))
    said = f"the reference checkout {other} has no remote 'origin' (its remotes: upstream)"
    for argv in (["status"], ["sync"], ["check"], ["audit"], ["fetch"],
                 ["bump-headers", "--to", fx.pin]):
        r = run(fx.port, *argv)
        assert r.rc == (0 if argv == ["status"] else 3), (argv, r.rc, r.out, r.err)
        assert said in r.out + r.err, (argv, r.out, r.err)
        assert "SYNC_FETCH_REMOTE" in r.out + r.err, (argv, r.out, r.err)
    monkeypatch.setenv("SYNC_FETCH_REMOTE", "upstream")
    assert run(fx.port, "sync").rc == 0
