"""Malformed records, wrong file kinds, absurd sizes, links out of the port: typed refusals.

Every malformed input gets an exit code of 2-7 and one line naming the file: never 1
("internal error"). Before: a protocol file that is not UTF-8, is UTF-16 or is a
directory (`check`), a 5-million-digit version (every command) and a non-JSON `detail`
in an event (`rollback`) exited 1; a symlinked `sync_dir` was followed and
`frozen_at = "../../../ESCAPE"` put the report in the port's parent, both with exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from portfixture import Fixture, build, port_git, run

from sync import port as port_mod
from sync.records import events

from .generators import budget

# A command line for every command that reads the port (oracle, golden and parity need an
# oracle environment; they read the same records through the same loaders).
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("status",), ("sync",), ("fetch",), ("check", "--no-audit"), ("check",),
    ("decide", "#101", "IGNORE", "why"), ("queue",), ("audit",),
    ("ledger", "add", "--commit", "abc1234", "--what", "w", "--pr", "1", "--status", "ok"),
    ("inventory", "annotate", "--pr", "103", "--tier", "T2"),
    ("bump-headers", "--check", "src/a.cpp"), ("advance", "--dry-run"), ("rollback",),
    ("gates", "merge", "none.json"), ("check-commit",),
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    fx = build(tmp_path_factory.mktemp("refusals"))
    assert run(fx.port, "sync").rc == 0
    return fx


@pytest.fixture
def port(base: Fixture, tmp_path: Path) -> Path:
    """A fresh copy of the synced port (sharing the reference checkout)."""
    shutil.copytree(base.port, tmp_path / "port", symlinks=True)
    return tmp_path / "port"


def typed(root: Path, *commands: tuple[str, ...]) -> list[tuple[tuple[str, ...], int, str]]:
    """Each command's (argv, exit, stderr); the test asserts none is an internal error."""
    out = []
    for argv in commands or COMMANDS:
        r = run(root, *argv)
        out.append((argv, r.rc, r.err))
    return out


def assert_typed(results: list[tuple[tuple[str, ...], int, str]]) -> None:
    bad = [(argv, rc, err) for argv, rc, err in results
           if rc == 1 or "internal error" in err or len(err.strip().splitlines()) > 3]
    assert bad == [], bad


PROTOCOL = ".agents/upstream-sync.md"


def _utf16(path: Path) -> None:
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))


def _latin1(path: Path) -> None:
    path.write_bytes(path.read_bytes() + "café\n".encode("latin-1"))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("x\n")


def _huge_version(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("vllm_runtime_version"))
    path.write_text(text.replace(line, "vllm_runtime_version = " + "1" * 5_000_000))


@pytest.mark.parametrize("damage", [_utf16, _latin1, _directory, _huge_version],
                         ids=["utf-16", "not-utf-8", "directory", "5M-digit-version"])
def test_a_broken_protocol_file_is_a_typed_refusal_for_every_command(
        port: Path, damage: Callable[[Path], None]) -> None:
    damage(port / PROTOCOL)
    results = typed(port)
    assert_typed(results)
    check = dict((argv, (rc, err)) for argv, rc, err in results)[("check", "--no-audit")]
    assert check[0] == 7 and "internal error" not in check[1]


# Each record, and the commands that read it: (record path, commands).
RECORDS: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {
    "decisions": (".agents/sync/decisions.toml", (("sync",), ("check", "--no-audit"))),
    "carry-over": (".agents/sync/carry-over.toml", (("sync",), ("check", "--no-audit"))),
    "cycle": (".agents/sync/cycle.toml", (("sync",), ("check", "--no-audit"), ("status",))),
    "ledger": (".agents/parity-ledger.md", (("sync",), ("check", "--no-audit"))),
    "inventory": (".agents/porting-inventory.md", (("sync",), ("check", "--no-audit"))),
    "config": (".agents/upstream-sync.toml", (("status",),)),
    "preferences": (".agents/developer-preferences.md", (("sync",), ("check",))),
    "event": (".agents/sync/events/0001-stall.toml", (("check", "--no-audit"), ("rollback",))),
    "gates": ("GATES", (("sync",),)),
    "report json": ("JSON", (("sync",), ("queue",), ("status",),
                             ("inventory", "annotate", "--pr", "103", "--tier", "T2"))),
    "oracle file": (".agents/oracles/vllm.md", (("check", "--no-audit"),)),
}
BREAKAGES: dict[str, bytes | None] = {
    "not UTF-8": b"schema = 1\n\xff\xfe\n",
    "UTF-16": "schema = 1\n".encode("utf-16"),
    "bad syntax": b"schema = = [\n{\n",
    "huge int": b"schema = " + b"9" * 5000 + b"\n",
    "deep nesting": b"x = " + b"[" * 100_000 + b"\n",
    "huge value": b"x = '" + b"a" * 2_000_000 + b"'\n",
    "empty": b"",
    "directory": None,
}


def _record_path(port: Path, key: str) -> Path:
    sync_dir = port / ".agents/sync"
    if key == "GATES":
        line = next(x for x in (sync_dir / "cycle.toml").read_text().splitlines()
                    if x.startswith("target = "))
        return sync_dir / "gates" / (line.split('"')[1][:7] + ".json")
    if key == "JSON":
        return next(sync_dir.glob("*.json"))
    return port / key


def break_record(port: Path, record: str, data: bytes | None) -> Path:
    path = _record_path(port, RECORDS[record][0])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file():
        path.unlink()
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("record", sorted(RECORDS))
def test_every_record_broken_every_way_is_a_typed_refusal(port: Path, record: str) -> None:
    path = _record_path(port, RECORDS[record][0])
    original = path.read_bytes() if path.is_file() else None
    for data in BREAKAGES.values():
        break_record(port, record, data)
        assert_typed(typed(port, *RECORDS[record][1]))
        _restore(path, original)


@budget(25)
@given(st.sampled_from(sorted(RECORDS)), st.binary(max_size=300))
def test_random_record_bytes_never_crash(base: Fixture, record: str, data: bytes) -> None:
    where = base.tmp / "random"
    if not where.exists():
        shutil.copytree(base.port, where, symlinks=True)
    path = _record_path(where, RECORDS[record][0])
    original = path.read_bytes() if path.is_file() else None
    break_record(where, record, data)
    try:
        assert_typed(typed(where, *RECORDS[record][1]))
    finally:
        _restore(path, original)


def _restore(path: Path, original: bytes | None) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if original is not None:
        path.write_bytes(original)


def test_a_non_json_event_detail_is_a_typed_refusal_for_rollback(port: Path,
                                                                 base: Fixture) -> None:
    p = port_mod.locate(str(port))
    events.append(p, "advance", pin_before="a" * 40, pin_after=base.pin, report="",
                  detail="this is not JSON {")
    r = run(port, "rollback")
    assert r.rc == 4 and "detail is not JSON" in r.err, r.err
    p = port_mod.locate(str(port))
    (p.sync_dir / "events/0001-advance.toml").unlink()
    events.append(p, "advance", pin_before="a" * 40, pin_after=base.pin, report="",
                  detail=json.dumps({"before": {"vllm_commit": 7}}))
    r = run(port, "rollback")
    assert r.rc == 4 and "no 'before' pin" in r.err, r.err


def test_a_journal_naming_files_outside_the_port_is_refused(port: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    staged = victim.with_name(f".{victim.name}.txn")
    staged.write_text("overwritten\n")
    journal = port / ".agents/sync/.txn-journal.json"
    journal.write_text(json.dumps([[str(staged), str(victim)]]))
    r = run(port, "status")
    assert r.rc == 4 and "outside this port" in r.err, r.err
    assert victim.read_text() == "mine\n"
    journal.write_text("[[1, 2]")
    assert run(port, "status").rc == 4


# -- confinement ---------------------------------------------------------------------------


def test_a_symlinked_sync_dir_is_refused_and_nothing_is_written_elsewhere(
        port: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(port / ".agents/sync", elsewhere)
    (port / ".agents/sync").symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    for argv in COMMANDS:
        r = run(port, *argv)
        assert r.rc == 2 and "symbolic link" in r.err, (argv, r.rc, r.err)
    assert sorted(p.name for p in elsewhere.rglob("*")) == before


@pytest.mark.parametrize("link", [".agents/sync/gates", ".agents/sync/events",
                                  ".agents/parity-ledger.md", ".agents"])
def test_a_link_on_any_record_path_is_refused(port: Path, tmp_path: Path, link: str) -> None:
    target = tmp_path / "target"
    source = port / link
    if source.exists():
        shutil.move(source, target)
    else:
        target.mkdir()
    source.symlink_to(target)
    r = run(port, "sync")
    assert r.rc == 2 and "symbolic link" in r.err, r.err


@pytest.mark.parametrize("value", ["../../../ESCAPE", "/tmp/ESCAPE", "2026-01-01/../../x",
                                   "2026-13-45T00:00:00Z", "2026-01-01T00:00:00Z\n## x"])
def test_a_cycle_value_that_would_become_a_path_is_malformed(port: Path, value: str) -> None:
    cycle = port / ".agents/sync/cycle.toml"
    text = cycle.read_text()
    line = next(x for x in text.splitlines() if x.startswith("frozen_at = "))
    cycle.write_text(text.replace(line, "frozen_at = " + json.dumps(value)))
    before = set(port.parent.iterdir())
    for argv in (("sync",), ("decide", "#101", "IGNORE", "x"), ("check", "--no-audit")):
        r = run(port, *argv)
        assert r.rc in (4, 7) and "frozen_at" in (r.err + r.out), (argv, r.rc, r.err)
    assert set(port.parent.iterdir()) == before
    assert not list(port.parent.parent.glob("*ESCAPE*"))


def test_an_event_report_that_leaves_the_port_is_malformed(port: Path, base: Fixture) -> None:
    p = port_mod.locate(str(port))
    path, data = events.staged(p, "stall", pin_before=base.pin, pin_after=base.pin)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.replace(b'report = ""', b'report = "../../../etc/x.md"'))
    r = run(port, "check", "--no-audit")
    assert r.rc == 7 and "is not a sync report's port-relative path" in r.out, r.out


# -- check: its own reports, uncommitted events, the reference checkout, temp files -----------


def test_check_skips_the_tools_own_reports(port: Path, base: Fixture) -> None:
    md = next((port / ".agents/sync").glob("*.md"))
    # A report written before markers were neutralised (a subject's span, escaped).
    md.write_text(md.read_text() + "\n- `abc` \\<!--pin:commit--\\>x\\<!--/pin--\\>\n")
    r = run(port, "check", "--no-audit")
    assert r.rc == 0, r.out


def test_check_flags_an_added_event_edited_or_deleted_before_its_commit(
        port: Path, base: Fixture) -> None:
    p = port_mod.locate(str(port))
    ev = events.append(p, "stall", pin_before=base.pin, pin_after=base.pin, report="",
                       detail="gates PENDING")
    port_git(port, "add", "--", str(ev.path))
    assert run(port, "check", "--no-audit").rc == 0  # an append ("A ")
    ev.path.write_bytes(ev.path.read_bytes().replace(b"gates PENDING", b"all fine"))
    r = run(port, "check", "--no-audit")
    assert r.rc == 7 and "modified or deleted in the work tree (AM)" in r.out, r.out
    ev.path.unlink()
    r = run(port, "check", "--no-audit")
    assert r.rc == 7 and "(AD)" in r.out, r.out


def test_check_flags_a_deleted_uncommitted_advance_event(port: Path, base: Fixture) -> None:
    p = port_mod.locate(str(port))
    events.append(p, "advance", pin_before="a" * 40, pin_after=base.pin, report="")
    second = events.append(p, "advance", pin_before=base.pin, pin_after="c" * 40, report="")
    r = run(port, "check", "--no-audit")
    assert r.rc == 7 and "pin block names" in r.out, r.out
    second.path.unlink()  # the untracked newest advance deleted: the pin is where it was
    assert run(port, "check", "--no-audit").rc == 0


def test_check_reports_a_missing_or_shallow_reference_checkout(
        port: Path, base: Fixture, tmp_path: Path) -> None:
    prefs = port / ".agents/developer-preferences.md"
    text = prefs.read_text()
    prefs.write_text(text.replace(str(base.reference), str(tmp_path / "gone")))
    r = run(port, "check", "--json")
    doc = json.loads(r.out)
    assert r.rc == 0 and any("audit not run" in w and "does not exist" in w
                             for w in doc["warnings"]), doc
    shallow = tmp_path / "shallow"
    port_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{base.remote}", str(shallow))
    prefs.write_text(text.replace(str(base.reference), str(shallow)))
    r = run(port, "check")
    assert r.rc == 0 and "warning: per-file pin audit not run" in r.out and "shallow" in r.out
    prefs.unlink()  # CI without a reference checkout: a note, nothing worse
    r = run(port, "check")
    assert r.rc == 0 and "note: per-file pin audit skipped" in r.err and "warning" not in r.out


def test_check_flags_an_inventory_that_is_not_utf8_and_leftover_temps(port: Path) -> None:
    (port / ".agents/porting-inventory.md").write_bytes(b"# Inventory\n\xff\n")
    (port / "src/.a.cpp.ab12cd34.tmp").write_text("half\n")
    child = subprocess.Popen(["true"])  # a writer that is no more
    child.wait()
    dead = port / f"src/.b.cpp.us{child.pid}-x1y2z3.tmp"
    dead.write_text("half\n")
    r = run(port, "check", "--no-audit")
    assert r.rc == 7 and "porting-inventory.md:2: is not UTF-8" in r.out, r.out
    assert "src/.a.cpp.ab12cd34.tmp: temp file" in r.out
    assert f"{dead.name}: temp file" in r.out
    os.unlink(dead)


@pytest.mark.parametrize("name", ['"../../x"', '"a/b"', '"x\\n## y"'])
def test_names_that_become_paths_are_refused_in_the_configuration(port: Path,
                                                                  name: str) -> None:
    config = port / ".agents/upstream-sync.toml"
    base = config.read_text()
    for table in (f"[oracles.{name}]\nbuild_mode = \"source\"\n",
                  f"[parity.suites.{name}]\ncommand = [\"true\"]\n"):
        config.write_text(base + "\n" + table)
        r = run(port, "status")
        assert r.rc == 2 and "is not a name" in r.err, r.err


# -- a port that cannot be written --------------------------------------------------------

# Every command that writes the records, each taking the port lock first.
WRITERS: tuple[tuple[str, ...], ...] = (
    ("sync",), ("decide", "#101", "IGNORE", "why"), ("bump-headers", "--unchanged"),
    ("ledger", "add", "--commit", "abc1234", "--what", "w", "--pr", "1", "--status", "ok",
     "--outside-range"),
    ("advance", "--stall"),
)


def assert_unwritable(results: list[tuple[tuple[str, ...], int, str]], lock: Path) -> None:
    want = f"upstream-sync: error: cannot write {lock} ("
    bad = [(argv, rc, err) for argv, rc, err in results
           if rc != 3 or not err.strip().splitlines()[-1].startswith(want)
           or "run where the port is writable" not in err]
    assert bad == [], bad


def test_a_port_whose_records_cannot_be_written_is_an_environment_refusal(port: Path) -> None:
    """The records folder under a regular file: creating the lock fails with ENOTDIR, as a
    read-only mount fails with EROFS (the tests run as root, for whom chmod is no bar).
    Before: every writer exited 1, 'internal error: OSError … report it'."""
    (port / "blocked").write_text("a file where the records folder must be\n")
    config = port / ".agents/upstream-sync.toml"
    config.write_text(config.read_text() + '\n[paths]\nsync_dir = "blocked/sync"\n')
    lock = port / "blocked/sync/.lock"
    assert_unwritable(typed(port, *WRITERS), lock)
    r = run(port, "sync", "--json")
    doc = json.loads(r.out)  # exactly one document, the refusal's code in it
    assert (r.rc, doc["ok"], doc["exit_code"], doc["error"]["kind"]) == (
        3, False, 3, "Unwritable")


def _read_only(port: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` run on `port` bind-mounted read-only, in a mount namespace of its own."""
    code = Path(__file__).resolve().parents[2]
    script = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && cd "$0" && '
              'exec "$@"')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(port), sys.executable,
                           "-m", "sync", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code)}, check=False)


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o '
                            'remount,bind,ro "$0" "$0"', str(tmp_path)],
                           capture_output=True, check=False)
    return probe.returncode == 0


def test_a_read_only_port_is_an_environment_refusal(port: Path, tmp_path: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs a mount namespace (unshare -m, as root)")
    lock = port / ".agents/sync/.lock"
    results = []
    for argv in WRITERS:
        r = _read_only(port, *argv)
        results.append((argv, r.returncode, r.stderr))
    assert_unwritable(results, lock)
    assert all("Read-only file system" in err for _argv, _rc, err in results), results
    r = _read_only(port, "sync", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["exit_code"] == 3, r.stdout
    assert _read_only(port, "status").returncode == 0  # a reader still reads
