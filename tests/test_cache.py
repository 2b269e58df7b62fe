"""The cache of what is computed from content (`infra/cache.py`): a re-run parses only what
changed, reads no unchanged port file, gives the same report, and a broken or planted cache
is only a miss."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest
from openhook import reads_during, under
from portfixture import Fixture, build, run, write
from stepfixture import LEDGER

from sync.infra import atomic, cache
from sync.records import ledger


@pytest.fixture
def fx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fixture:
    monkeypatch.setenv("SYNC_CACHE_DIR", str(tmp_path / "cache"))
    f = build(tmp_path)
    _age(f.port / "src")
    return f


def _age(folder: Path) -> None:
    """Files last modified a minute ago: their time stamps can be trusted (not racy)."""
    past = time.time() - 60
    for path in folder.rglob("*"):
        os.utime(path, (past, past))


def _report(fx: Fixture) -> tuple[str, str]:
    md = fx.report()
    return md.read_text(encoding="utf-8"), md.with_suffix(".json").read_text(encoding="utf-8")


def test_a_rerun_reads_no_unchanged_port_file_and_writes_the_same_report(fx: Fixture) -> None:
    first = under(fx, reads_during(fx, "sync"), "src")
    assert first and all(n == 1 for n in first.values())
    report = _report(fx)
    assert under(fx, reads_during(fx, "sync"), "src") == {}
    assert _report(fx) == report


def test_a_changed_file_is_read_again_and_what_it_says_counts(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    write(fx.port, "src/orig.cpp", "// Ported from: vllm/b.py @ "
          f"{fx.pin[:10]}\n\nint o;\n")
    again = under(fx, reads_during(fx, "sync"), "src")
    assert again == {"src/orig.cpp": 1}
    assert "src/orig.cpp" in fx.report().with_suffix(".json").read_text(encoding="utf-8")


def test_the_cached_report_equals_an_uncached_one(fx: Fixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(fx.port, "sync").rc == 0
    assert run(fx.port, "sync").rc == 0
    cached = _report(fx)
    monkeypatch.setenv("SYNC_CACHE_DIR", cache.OFF)
    fx.report().unlink()
    assert run(fx.port, "sync").rc == 0
    assert _report(fx) == cached


def test_off_writes_no_cache(fx: Fixture, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_CACHE_DIR", cache.OFF)
    assert run(fx.port, "sync").rc == 0
    assert not (tmp_path / "cache").exists()


class _Planted:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted",))


@pytest.mark.parametrize("content", [b"", b"not a pickle", b"\x80\x05K", "planted"])
def test_a_broken_or_planted_cache_is_a_miss(fx: Fixture, content: bytes | str) -> None:
    assert run(fx.port, "sync").rc == 0
    report = _report(fx)
    files = list(Path(os.environ["SYNC_CACHE_DIR"]).rglob("*.pickle"))
    assert files
    for f in files:
        f.write_bytes(pickle.dumps((cache.fingerprint(), {"x": _Planted()}))
                      if isinstance(content, str) else content)
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    assert _report(fx) == report
    assert not (fx.port / "planted").exists() and not Path("planted").exists()


def test_the_cache_lives_outside_the_port(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    folder = cache.location(fx.port)
    assert folder is not None and folder.is_dir()
    assert not folder.is_relative_to(fx.port)


@pytest.mark.parametrize("planted", [atomic.write_bytes, cache.Store, os.system])
def test_the_cache_unpickles_no_callable_but_records(planted: object, tmp_path: Path) -> None:
    """A function (even this package's own) or a class that is not a record of data could be
    called by the pickle's REDUCE: the unpickler refuses to build it."""
    store = cache.Store(tmp_path, "scan")
    assert store.path is not None
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(pickle.dumps((cache.fingerprint(), {"x": planted})))
    assert store.load() == {}


def test_a_killed_save_leaves_no_temp_file_after_the_next_run(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    folder = cache.location(fx.port)
    assert folder is not None
    orphan = folder / ".scan.pickle.us999999999-dead.tmp"  # its writer (a pid) is gone
    orphan.write_bytes(b"half a pickle")
    assert atomic.is_orphan(orphan.name)
    changed = min((fx.port / "src").rglob("*.*"))
    changed.write_text(changed.read_text() + "\n// a change: the scan cache is saved again\n")
    assert run(fx.port, "sync").rc == 0
    assert not orphan.exists()


def test_explaining_one_commit_keeps_what_the_sync_cached(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    store = cache.Store(fx.reference, "symbols")
    cached = store.load()
    assert len(cached) > 1  # the sync's symbol pass, one entry per touching commit
    # One commit not cached (as after the cache lost it): explain computes it and saves.
    key = next(iter(cached))
    store.save({k: v for k, v in cached.items() if k != key})
    r = run(fx.port, "explain", key[0][:10])
    assert r.rc == 0, r.err
    assert store.load().keys() == cached.keys()


def test_a_cache_that_cannot_be_written_is_only_a_miss(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache's folder under a regular file: the write is refused (`atomic.Unwritable`)
    and the save, like any other failed save, leaves nothing and raises nothing."""
    (tmp_path / "blocked").write_text("a file\n")
    monkeypatch.setenv("SYNC_CACHE_DIR", str(tmp_path / "blocked/cache"))
    store = cache.Store(tmp_path, "scan")
    store.save({"x": 1})
    assert store.load() == {}


def _ledger_read(root: Path) -> ledger.Read:
    return ledger.read(root / "ledger.md", rel="ledger.md", kept=cache.Store(root, "ledger"))


def test_a_ledger_read_before_comes_back_indexed_and_an_edited_one_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ledger.md").write_text(LEDGER, encoding="utf-8")
    first = _ledger_read(tmp_path)
    store = cache.Store(tmp_path, "ledger")
    (key, kept), = store.load().items()
    assert kept == first and {"refs"} <= vars(kept).keys()  # kept with its indexes built
    assert kept.table is not None and "after_slash" in vars(kept.table)
    # What is kept for these bytes is what a read gives: a planted read proves the lookup.
    planted = ledger.Read("ledger.md", ledger.Table((), 0, "\n", False), None)
    store.save({key: planted})
    assert _ledger_read(tmp_path) == planted
    with (tmp_path / "ledger.md").open("a", encoding="utf-8") as fh:
        fh.write("| 2026-01-05 / `abc1234` | Port c | `vllm/c.py` | ✅ |\n")
    again = _ledger_read(tmp_path)
    assert again != planted and again.table is not None and first.table is not None
    assert ledger.latest_mention(again.table, "vllm/c.py") is not None
    assert ledger.latest_mention(first.table, "vllm/c.py") is None


def test_an_unreadable_ledger_is_never_kept(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ledger.md").write_text("no table here\n", encoding="utf-8")
    assert _ledger_read(tmp_path).problem is not None
    assert cache.Store(tmp_path, "ledger").load() == {}
    assert ledger.read(tmp_path / "gone.md", rel="gone.md").problem is not None
