"""A command run again over unchanged inputs replays its kept output (`infra/memo.py`); any
change to what it read, or anything that makes a run unrepeatable, runs it afresh.

The end-to-end tests run the console entry (`python -m sync`) in a child, as a user does.
They prove a replay by editing the kept output: a run that prints the edited text was
replayed, one that prints the command's own output ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stepfixture import World, make_world, run, write

from sync.dev import floors
from sync.dev.fastimport import git
from sync.infra import atomic, clock, memo
from sync.infra.errors import BlockedCycle

MARK = "REPLAYED FROM THE MEMO\n"


def launched(world: World, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sync", "--port", str(world.root), *argv],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **env}, cwd=world.root)


def settle(*trees: Path) -> None:
    """Date every file and folder a minute back: older than a change could be unseen."""
    old = time.time() - 60
    for tree in trees:
        for here, dirs, files in os.walk(tree):
            for name in [*dirs, *files]:
                os.utime(os.path.join(here, name), (old, old), follow_symlinks=False)
        os.utime(tree, (old, old))


def memos(cache: Path) -> list[Path]:
    return sorted((cache / "runs").glob("*.json"))


def mark(cache: Path) -> None:
    """Make every kept run print MARK instead of its own output."""
    for path in memos(cache):
        doc = json.loads(path.read_text())
        doc["output"] = [[0, MARK]]
        path.write_text(json.dumps(doc))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    w = make_world(tmp_path, monkeypatch)
    monkeypatch.setenv("SYNC_CACHE_DIR", str(tmp_path / "cache"))
    settle(w.root, w.up.repo, Path(os.environ["HOME"]))
    return w


def _edit(w: World) -> None:
    write(w.root, "src/b.cpp", f"// Ported from: vllm/b.py @ {w.up.older[:10]}\n\nint b = 2;\n")


def _add(w: World) -> None:
    write(w.root, "src/new.cpp", f"// Ported from: vllm/c.py @ {w.up.older[:10]}\n\nint n;\n")


def _remove(w: World) -> None:
    (w.root / "src/c.cpp").unlink()


def _ledger(w: World) -> None:
    with (w.root / ".agents/parity-ledger.md").open("a") as fh:
        fh.write("| 2026-01-05 / `abc1234` | Port c | `vllm/c.py` | ✅ |\n")


def _ref(w: World) -> None:
    git(w.up.repo, "update-ref", "refs/remotes/origin/main", w.up.target)


CHANGES: dict[str, Callable[[World], None]] = {
    "a port file edited": _edit, "a port file added": _add, "a port file removed": _remove,
    "a record edited": _ledger, "the upstream ref moved": _ref}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_run_over_unchanged_inputs_is_replayed_and_a_changed_one_runs(
        world: World, change: str) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    first = launched(world, "audit", "--json")
    assert first.returncode == 0 and len(memos(cache)) == 1
    assert launched(world, "audit", "--json").stdout == first.stdout  # replayed as it was
    mark(cache)
    assert launched(world, "audit", "--json").stdout == MARK
    CHANGES[change](world)
    after = launched(world, "audit", "--json")
    assert after.stdout != MARK
    assert after.stdout == run(world.root, "audit", "--json").out  # what it says now


def test_another_environment_or_invocation_is_another_run(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    launched(world, "check")
    mark(cache)
    assert launched(world, "check").stdout == MARK
    assert launched(world, "check", SYNC_ANYTHING="1").stdout != MARK
    assert launched(world, "check", "--json").stdout != MARK
    assert launched(world, "check", VLLM_SOURCE=str(world.root)).stdout != MARK


def test_a_sync_that_wrote_its_report_is_not_kept_and_its_rerun_is(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    wrote = launched(world, "sync", "--target", world.up.target)
    assert wrote.returncode == 0 and memos(cache) == []
    settle(world.root)
    again = launched(world, "sync", "--target", world.up.target)
    assert again.returncode == 0 and len(memos(cache)) == 1
    mark(cache)
    assert launched(world, "sync", "--target", world.up.target).stdout == MARK
    (world.root / ".agents/sync/decisions.toml").write_text(
        f'schema = 1\n\n[decisions.{world.up.a_again}]\ndisposition = "IGNORE"\n'
        'reason = "nothing to port"\n')
    assert launched(world, "sync", "--target", world.up.target).stdout != MARK


def test_a_dirty_reference_checkout_runs_status_again(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    git(world.up.repo, "checkout", "-q", "--force", world.up.target)
    settle(world.up.repo)
    clean = launched(world, "status", "--json")
    assert json.loads(clean.stdout)["reference"]["dirty"] is False and memos(cache)
    mark(cache)
    assert launched(world, "status", "--json").stdout == MARK
    with (world.up.repo / "vllm/a.py").open("a") as fh:
        fh.write("# edited\n")
    os.utime(world.up.repo / "vllm/a.py", (time.time() - 30, time.time() - 30))
    dirty = launched(world, "status", "--json")
    assert dirty.stdout != MARK and json.loads(dirty.stdout)["reference"]["dirty"] is True


def test_inputs_changed_moments_before_are_not_kept(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    _edit(world)  # modified now: an edit within the clock's granularity could go unseen
    assert launched(world, "audit").returncode == 0 and memos(cache) == []


def test_nothing_is_kept_with_the_cache_off(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    assert launched(world, "audit", SYNC_CACHE_DIR="off").returncode == 0
    assert not cache.exists()


def test_a_broken_memo_runs_the_command(world: World) -> None:
    cache = Path(os.environ["SYNC_CACHE_DIR"])
    first = launched(world, "audit")
    (path,) = memos(cache)
    path.write_bytes(b'{"format": 1, "key": [')
    again = launched(world, "audit")
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)


def test_a_replay_imports_only_the_entry_and_the_memo() -> None:
    # What makes a replay cheap: nothing else of the tool is loaded before it.
    probe = ("import sys\nfrom sync import launch\n"
             "print(sorted(m for m in sys.modules if m == 'sync' or m.startswith('sync.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str(sorted(floors.REPLAYED))


# -- the recorder, in this process, on real files ------------------------------------------

def recorded(tmp_path: Path, body: Callable[[], None]) -> str:
    """What `finish` says of a run doing `body` (its inputs dated a minute back)."""
    settle(tmp_path)
    plan = memo.Plan(str(tmp_path / "memos"), "k")
    with plan.recording() as rec:
        body()
    return rec.finish(0)


def test_a_run_that_reads_is_kept_and_replayed(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("x")

    def body() -> None:
        print("read", (tmp_path / "in.txt").read_text(), (tmp_path / "no").exists())
        print("warned", file=sys.stderr)

    assert recorded(tmp_path, body) == "kept"
    out, err = _Stream(), _Stream()
    assert memo.Plan(str(tmp_path / "memos"), "k").replay(out, err) == 0  # type: ignore[arg-type]
    assert (out.text, err.text) == ("read x False\n", "warned\n")
    (tmp_path / "no").write_text("now it exists")  # what was looked for and not found
    assert memo.Plan(str(tmp_path / "memos"), "k").replay(out, err) is None  # type: ignore[arg-type]


class _Stream:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def _writes(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("y")


def _temp_file(tmp_path: Path) -> None:
    made = tmp_path / "scratch.tmp"
    made.write_text("t")
    made.unlink()


def _clock(tmp_path: Path) -> None:
    clock.now()


def _program(tmp_path: Path) -> None:
    subprocess.run(["true"], check=True)


def _changed(tmp_path: Path) -> None:
    (tmp_path / "in.txt").read_text()
    (tmp_path / "in.txt").write_text("changed")  # by someone else, while the run reads


def _locked(tmp_path: Path) -> None:
    with atomic.port_lock(tmp_path / ".lock"), pytest.raises(BlockedCycle), \
            atomic.port_lock(tmp_path / ".lock"):
        pass


@pytest.mark.parametrize(("body", "said"), [
    (_writes, "not kept: it wrote"), (_temp_file, "kept"), (_clock, "not kept: it read the clock"),
    (_program, "not kept: it ran true"), (_changed, "not kept: it wrote"),
    (_locked, "not kept: another run held the port lock")])
def test_what_makes_a_run_unrepeatable(tmp_path: Path, body: Callable[[Path], None],
                                       said: str) -> None:
    (tmp_path / "in.txt").write_text("x")
    assert recorded(tmp_path, lambda: body(tmp_path)).startswith(said)


def test_an_input_changed_by_another_process_while_it_ran_is_never_replayed(
        tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("x")
    out, err = _Stream(), _Stream()

    def body() -> None:
        print((tmp_path / "in.txt").read_text())
        subprocess.run(["git", "-C", str(tmp_path), "init", "-q", "sub"], check=True)

    # git made a folder the run had not read, then: the listing below changes nothing read
    assert recorded(tmp_path, body) == "kept"
    assert memo.Plan(str(tmp_path / "memos"), "k").replay(out, err) == 0  # type: ignore[arg-type]

    def lists() -> None:
        print(os.listdir(tmp_path))
        subprocess.run(["git", "-C", str(tmp_path), "init", "-q", "other"], check=True)

    # Kept with the listing's signature from before it was read: the folder it changed no
    # longer matches it, so the memo is never replayed.
    assert recorded(tmp_path, lists) == "kept"
    assert memo.Plan(str(tmp_path / "memos"), "k").replay(out, err) is None  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode)
       | st.sampled_from([b'{"format": 1, "key": "k", "code": "x", "inputs": [], "output": []}',
                          b'{"format": 1, "key": "k", "code": 0, "inputs": [[1]], "output": []}',
                          b'{"format": 1, "key": "k", "code": 0, "inputs": [], "output": [[5, 1]]}',
                          b'[]', b'{"format": 1, "key": "k", "code": 0, "inputs": {}, '
                          b'"output": [[0, "x"]]}']))
def test_any_memo_file_is_replayed_whole_or_not_at_all(tmp_path_factory: pytest.TempPathFactory,
                                                        data: bytes) -> None:
    folder = tmp_path_factory.mktemp("memos")
    (folder / "k.json").write_bytes(data)
    out, err = _Stream(), _Stream()
    got = memo.Plan(str(folder), "k").replay(out, err)  # type: ignore[arg-type]
    assert got is None or isinstance(got, int)
    if got is None:
        assert out.text == err.text == ""
