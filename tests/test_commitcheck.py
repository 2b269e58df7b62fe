"""`check-commit`: a commit may carry a sync cycle or feature work, never both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from portfixture import Fixture, build, port_git, run, write


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def commit(fx: Fixture, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        write(fx.port, rel, text)
    port_git(fx.port, "add", "-A", "--", *files)
    port_git(fx.port, "commit", "-q", "--no-verify", "-m", message)
    return port_git(fx.port, "rev-parse", "HEAD").strip()


def protocol_edit(fx: Fixture) -> str:
    text = (fx.port / ".agents/upstream-sync.md").read_text(encoding="utf-8")
    return text + "\nA note added during the sync cycle.\n"


def test_mixed_commit_fails_naming_both_sides(fx: Fixture) -> None:
    sha = commit(fx, "Sync and a feature at once", {
        ".agents/upstream-sync.md": protocol_edit(fx), "src/x.cpp": "int x = 1;\n"})
    r = run(fx.port, "check-commit")
    assert r.rc == 7
    assert r.out == (f"{sha[:10]} Sync and a feature at once: mixes sync records "
                     "(.agents/upstream-sync.md) with feature work (src/x.cpp)\n")
    assert r.err.startswith("upstream-sync: error: 1 commit(s) mix a sync cycle with feature "
                            "work")
    j = run(fx.port, "check-commit", "--json", sha)
    assert j.rc == 7
    doc = json.loads(j.out)
    assert doc.pop("error") == {
        "kind": "CheckFailed", "message": "1 commit(s) mix a sync cycle with feature work",
        "fix": "split each into a sync commit and a feature commit", "exit_code": 7,
        "text": "1 commit(s) mix a sync cycle with feature work — split each into a sync "
                "commit and a feature commit"}
    assert doc == {"ok": False, "exit_code": 7, "checked": 1, "commits": [
        {"sha": sha, "subject": "Sync and a feature at once",
         "sync_paths": [".agents/upstream-sync.md"], "feature_paths": ["src/x.cpp"]}]}


def test_a_subject_or_path_never_reaches_the_terminal_raw(fx: Fixture) -> None:
    sha = commit(fx, "Sync \x1b[2J and a \x07feature", {
        ".agents/upstream-sync.md": protocol_edit(fx), "src/x\x1b.cpp": "int x = 1;\n"})
    r = run(fx.port, "check-commit")
    assert r.rc == 7 and "\x1b" not in r.out and "\x07" not in r.out
    assert r.out == (f"{sha[:10]} Sync \\x1b[2J and a \\x07feature: mixes sync records "
                     "(.agents/upstream-sync.md) with feature work (src/x\\x1b.cpp)\n")
    doc = json.loads(run(fx.port, "check-commit", "--json").out)
    assert doc["commits"][0]["subject"] == "Sync \x1b[2J and a \x07feature"


def test_separate_commits_pass(fx: Fixture) -> None:
    base = port_git(fx.port, "rev-parse", "HEAD").strip()
    commit(fx, "Sync: note in the protocol", {".agents/upstream-sync.md": protocol_edit(fx)})
    commit(fx, "Feature: x", {"src/x.cpp": "int x = 1;\n"})
    commit(fx, "Sync: report", {".agents/sync/2026-01-01-abcdef0.md": "# report\n"})
    r = run(fx.port, "check-commit", f"{base}..HEAD")
    assert r.rc == 0, r.out + r.err
    assert r.out == (f"check-commit: no commit in {base}..HEAD mixes sync records with "
                     "feature work\n")
    assert run(fx.port, "check-commit").rc == 0
    # A reversed range holds no commit: not a pass of anything (walk-s4 U7).
    empty = run(fx.port, "check-commit", f"HEAD..{base}")
    assert empty.rc == 0 and empty.out == (f"check-commit: HEAD..{base} holds no commit "
                                           "(nothing checked; a reversed range?)\n")


def test_a_range_finds_the_one_mixed_commit(fx: Fixture) -> None:
    base = port_git(fx.port, "rev-parse", "HEAD").strip()
    commit(fx, "Feature: y", {"src/y.cpp": "int y;\n"})
    bad = commit(fx, "Decisions plus a test", {
        ".agents/sync/decisions.toml": "schema = 1\n", "tests/test_y.cpp": "// y\n"})
    commit(fx, "Feature: z", {"src/z.cpp": "int z;\n"})
    r = run(fx.port, "check-commit", f"{base}..HEAD")
    assert r.rc == 7
    assert r.out.splitlines() == [
        f"{bad[:10]} Decisions plus a test: mixes sync records (.agents/sync/decisions.toml) "
        "with feature work (tests/test_y.cpp)"]


def test_files_holding_pin_spans_are_sync_records(fx: Fixture) -> None:
    commit(fx, "Docs with a pin span", {
        "docs/BENCH.md": f"Measured at <!--pin:commit-->{fx.pin[:10]}<!--/pin--> today.\n"})
    commit(fx, "Bench numbers plus code", {
        "docs/BENCH.md": f"Measured at <!--pin:commit-->{fx.pin[:10]}<!--/pin--> again.\n",
        "src/bench.cpp": "int b;\n"})
    r = run(fx.port, "check-commit")
    assert r.rc == 7 and "(docs/BENCH.md) with feature work (src/bench.cpp)" in r.out


def test_a_commit_touching_many_paths_names_a_few_and_counts_the_rest(fx: Fixture) -> None:
    files = {f"src/f{i:02}.cpp": f"int f{i};\n" for i in range(12)}
    commit(fx, "Snapshot", {**files, ".agents/sync/decisions.toml": "schema = 1\n"})
    r = run(fx.port, "check-commit")
    assert r.rc == 7
    shown = ", ".join(sorted(files)[:5])
    assert f"with feature work ({shown} and 7 more (--json lists them))" in r.out
    doc = json.loads(run(fx.port, "check-commit", "--json").out)
    assert doc["commits"][0]["feature_paths"] == sorted(files)


def test_bad_ranges_are_one_line_usage_errors(fx: Fixture) -> None:
    for spec in ("no-such-ref", "HEAD...HEAD~1", "--all"):
        r = run(fx.port, "check-commit", "--", spec)
        assert r.rc == 2, (spec, r.err)
        assert len(r.err.strip().splitlines()) == 1


def test_one_commit_means_that_commit(fx: Fixture) -> None:
    mixed = commit(fx, "Mixed", {".agents/sync/decisions.toml": "schema = 1\n",
                                 "src/m.cpp": "int m;\n"})
    clean = commit(fx, "Feature only", {"src/n.cpp": "int n;\n"})
    assert run(fx.port, "check-commit", clean[:12]).rc == 0
    r = run(fx.port, "check-commit", mixed)
    assert r.rc == 7 and r.out.startswith(f"{mixed[:10]} Mixed: ")


@pytest.mark.parametrize("record", [".agents/parity-ledger.md", ".agents/porting-inventory.md",
                                    "goldens/case/out.json", ".agents/sync/carry-over.toml"])
def test_the_ledger_and_every_other_sync_record_count(fx: Fixture, record: str) -> None:
    """The definition `advance --commit` commits by: the ledger is a sync record too."""
    sha = commit(fx, "A row and the port change", {record: "| x |\n", "src/y.cpp": "int y;\n"})
    r = run(fx.port, "check-commit")
    assert r.rc == 7
    assert r.out == (f"{sha[:10]} A row and the port change: mixes sync records ({record}) "
                     "with feature work (src/y.cpp)\n")


def test_scratch_files_are_not_sync_records(fx: Fixture) -> None:
    from sync import port
    from sync.records import owned

    records = owned.of(port.locate(str(fx.port)))
    assert records.owns(".agents/sync/decisions.toml")
    assert not records.owns(".agents/sync/.lock")
    assert not records.owns(".agents/sync/.txn-123.json")
    assert not records.owns("src/a.cpp") and not records.owns(".agents/developer-preferences.md")


def monorepo(fx: Fixture) -> Path:
    """The fixture's port moved into `services/port/` of a bigger repository (the port root
    is not the git root), committed there."""
    mono = fx.tmp / "mono"
    port = mono / "services" / "port"
    shutil.copytree(fx.port, port, ignore=shutil.ignore_patterns(".git"))
    write(mono, "README.md", "a bigger repository\n")
    port_git(mono, "init", "-q", "-b", "main")
    port_git(mono, "add", "-A")
    port_git(mono, "commit", "-q", "--no-verify", "-m", "Import the monorepo")
    return port


def test_a_port_in_a_subfolder_of_its_repository_is_checked(fx: Fixture) -> None:
    """git names a commit's paths from the repository's root (`services/port/src/x.cpp`),
    which no sync record and no feature glob of the port matches: a mixed commit of a port
    living in a monorepo's subfolder passed. Paths are read relative to the port."""
    port = monorepo(fx)
    text = (port / ".agents/upstream-sync.md").read_text(encoding="utf-8") + "\nA note.\n"
    write(port, ".agents/upstream-sync.md", text)
    write(port, "src/x.cpp", "int x = 1;\n")
    write(port.parents[1], "other/y.cpp", "int y = 1;\n")
    port_git(port, "add", "-A", "--", ".", "../../other")
    port_git(port, "commit", "-q", "--no-verify", "-m", "Sync and a feature at once")
    sha = port_git(port, "rev-parse", "HEAD").strip()
    r = run(port, "check-commit")
    assert r.rc == 7, r.err
    assert r.out == (f"{sha[:10]} Sync and a feature at once: mixes sync records "
                     "(.agents/upstream-sync.md) with feature work (src/x.cpp)\n")


def test_a_sync_commit_of_a_port_in_a_subfolder(fx: Fixture) -> None:
    """`--commit` refused a port in a subfolder of its repository ('is not a git
    repository — drop --commit': it looked for `.git` in the port root), and git's paths from
    the repository's root were never the port's records. The stall commit holds the stall's
    records, and check-commit passes it."""
    port = monorepo(fx)
    write(port, ".agents/developer-preferences.md",
          (fx.port / ".agents/developer-preferences.md").read_text())
    assert run(port, "sync").rc == 0
    write(port.parents[1], "other/y.cpp", "int y = 1;\n")  # another project's change
    r = run(port, "advance", "--stall", "--commit")
    assert r.rc == 0, r.err
    touched = port_git(port, "show", "--format=", "--name-only", "--relative", "HEAD").split()
    assert ".agents/sync/events/0001-stall.toml" in touched
    assert ".agents/sync/carry-over.toml" in touched
    assert all(t.startswith(".agents/sync/") for t in touched), touched
    assert run(port, "check-commit").rc == 0
    assert port_git(port, "status", "--porcelain", "--", ".") == ""


def test_a_port_outside_git_or_with_no_commit_is_told_so(fx: Fixture) -> None:
    """a port not yet in git, or in a repository with no commit yet, was told 'cannot
    read the range 'HEAD' — give A..B or one commit that exists', as if the range were
    mistyped."""
    shutil.rmtree(fx.port / ".git")
    r = run(fx.port, "check-commit")
    assert (r.rc, r.out) == (2, "")
    assert r.err == (f"upstream-sync: error: {fx.port} is in no git repository — check-commit "
                     "reads the port's commits: commit the port first\n")
    port_git(fx.port, "init", "-q", "-b", "main")
    r = run(fx.port, "check-commit")
    assert r.err == (f"upstream-sync: error: the repository of {fx.port} has no commit yet — "
                     "check-commit reads the port's commits: commit the port first\n")
    assert run(fx.port, "check-commit", "HEAD~3..HEAD").rc == 2
