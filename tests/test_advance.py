"""Step 7 on the bundled example: advance, rollback, stall; journaled writes; state events.

The example is built, synced, decided, gated and given an oracle once per module. Each
test that writes gets its own copy of the port and of the reference checkout (an advance
fast-forwards it), while every copy shares the one oracle home: a virtualenv does not
survive being moved, and advance only reads it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync import cli
from sync.dev import example
from sync.dev.fastimport import git
from sync.infra import txn
from sync.infra.atomic import read_text
from sync.infra.errors import MalformedRecord
from sync.port import Port
from sync.records import config, events, mdtext, oraclefile, paragraph, pins, spans
from sync.steps.advance import advance
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import oracle

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
HOST = socket.gethostname()
PROTOCOL = ".agents/upstream-sync.md"
CORE_FILE = ".agents/oracles/vllm.md"
SPANS = "docs/BENCHMARKS.md"
CARRY = "carry-over: next cycle"
STALE = (" The advance re-validated the T0 goldens with zero drift (Qwen3-0.6B greedy and top-p "
         "traces bit-identical).")
# sync.fastimport.git is hermetic down to having no identity to commit with.
IDENTITY = ("-c", "user.name=Port Dev", "-c", "user.email=port@example.invalid")


@dataclass(frozen=True)
class Prepared:
    ex: Path  # the built example: port/, vllm/, upstream.git/, oracles/
    pin: str
    target: str
    fresh: Path  # the port right after the first `sync` (PORT-NOW items open)
    ready: Path  # the port with every precondition met
    ported: str  # the PORT-NOW item given a ledger row instead of a carry-over decision


@dataclass(frozen=True)
class Copy:
    port: Path
    ref: Path
    upstream: Path

    def head(self) -> str:
        return git(self.ref, "rev-parse", "HEAD").strip()


def cmd(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def ok(*argv: str) -> str:
    rc, out, err = cmd(*argv)
    assert rc == 0, f"{argv}: exit {rc}\n{out}\n{err}"
    return out


def _hermetic(mp: pytest.MonkeyPatch, home: Path) -> None:
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Port Dev\n\temail = port@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n")
    mp.setenv("HOME", str(home))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("VLLM_SOURCE", "VLLM_OMNI_SOURCE", "SYNC_FETCH_REMOTE", "SYNC_BRANCH",
                "SYNC_ORACLE_HOME"):
        mp.delenv(var, raising=False)


def open_port_now(report: str) -> list[str]:
    return re.findall(r"^- PORT-NOW open: `([0-9a-f]{10})`", report, re.MULTILINE)


def report_path(port: Path) -> Path:
    (path,) = (p for p in (port / ".agents" / "sync").glob("*.md"))
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prepared]:
    base = tmp_path_factory.mktemp("advance")
    home = base / "home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        _hermetic(mp, home)
        ex = base / "ex"
        example.build(ex, EXAMPLES)
        mp.setenv("SYNC_PORT", str(ex / "port"))
        mp.setenv("SYNC_GATE_HOSTS", HOST)
        ok("sync")
        shutil.copytree(ex / "port", base / "fresh", symlinks=True)
        path = report_path(ex / "port")
        items = open_port_now(read_text(path))
        assert len(items) > 3
        head = git(ex / "port", "rev-parse", "HEAD").strip()
        pr = json.loads(read_text(path.with_suffix(".json")))
        by_sha = {e["sha"][:10]: e for e in pr["entries"]}
        ported = next(s for s in items if by_sha[s]["pr"] is not None)
        ok("ledger", "add", "--commit", head, "--what", "Port it", "--pr",
           str(by_sha[ported]["pr"]), "--status", "✅ goldens bit-identical")
        for sha in items:
            if sha != ported:
                ok("decide", sha, "PORT-NOW", CARRY)
        target = pr["target"]
        ok("oracle", "build", "--oracle", "vllm", "--commit", "target")
        ok("golden")
        ok("parity")
        # The example's paragraph claims zero drift; the golden gate measured drift, so the
        # advance asks for the sentence to be reworded first (as a maintainer does here).
        protocol = ex / "port" / PROTOCOL
        protocol.write_text(protocol.read_text().replace(STALE, ""))
        shutil.copytree(ex / "port", base / "ready", symlinks=True)
        yield Prepared(ex, pr["pin"], target, base / "fresh", base / "ready", ported)


@pytest.fixture
def copy(prepared: Prepared, tmp: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Callable[[str], Copy]:
    """A private port (the fresh or the ready snapshot), reference checkout and upstream."""
    def make(which: str) -> Copy:
        c = Copy(tmp / "port", tmp / "vllm", tmp / "upstream.git")
        shutil.copytree(getattr(prepared, which), c.port, symlinks=True)
        shutil.copytree(prepared.ex / "vllm", c.ref, symlinks=True)
        shutil.copytree(prepared.ex / "upstream.git", c.upstream, symlinks=True)
        git(c.ref, "remote", "set-url", "origin", str(c.upstream))
        monkeypatch.setenv("SYNC_PORT", str(c.port))
        monkeypatch.setenv("VLLM_SOURCE", str(c.ref))
        monkeypatch.setenv("SYNC_ORACLE_HOME", str(prepared.ex / "oracles"))
        monkeypatch.setenv("SYNC_GATE_HOSTS", HOST)
        return c
    return make


def files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path, but .git and the lock (its holder's pid)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts and p.name != ".lock"}


def the_port(root: Path) -> Port:
    return Port(root, config.load(root))


@dataclass(frozen=True)
class Surfaces:
    """What every pin surface says, plus the cycle's state and the event chain."""

    pin: str
    runtime: str
    paragraph_sha: str
    oracle_pin: str
    oracle_label: str
    commit_spans: frozenset[str]
    label_spans: frozenset[str]
    state: str
    events: tuple[str, ...]


def surfaces(root: Path) -> Surfaces:
    port = the_port(root)
    text = read_text(port.protocol)
    pin = pins.load(port.protocol).pin
    para = paragraph.find(text, path=PROTOCOL)
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), root), "vllm")
    assert core is not None
    found = [s for f in spans.files(root, port.config.span_globs)
             for s in spans.scan_text(read_text(f), path=f)]
    state = re.search(r"^- Cycle state: (\w+)", read_text(report_path(root)), re.MULTILINE)
    assert state is not None
    return Surfaces(pin.commit, pin.runtime_version, para.sha, core.pin, core.pin_label,
                    frozenset(s.value for s in found if s.kind == "commit"),
                    frozenset(s.value for s in found if s.kind == "label"),
                    state.group(1), tuple(e.kind for e in events.load_all(port)))


def assert_all_say(s: Surfaces, commit: str) -> None:
    """Every pin surface names `commit` (spans and the paragraph by prefix)."""
    public = s.runtime.partition("+")[0]
    assert s.pin == s.oracle_pin == commit
    assert oracle_verify.commit_rule(s.runtime, commit) is None
    assert commit.startswith(s.paragraph_sha)
    assert s.commit_spans and all(commit.startswith(v) for v in s.commit_spans)
    assert s.oracle_label == public and s.label_spans == {public}


def carry_over(root: Path) -> list[str]:
    text = read_text(report_path(root))
    section = text.split("## Carry-over", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


# -- the full cycle ---------------------------------------------------------------------------


def test_full_cycle_advances_every_surface_commits_and_rolls_back(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    before = files(c.port)
    assert c.head() == prepared.pin
    assert_all_say(surfaces(c.port), prepared.pin)

    out = ok("advance", "--dry-run")
    assert f"--- a/{PROTOCOL}\n+++ b/{PROTOCOL}\n" in out
    assert f"\n-vllm_commit = {prepared.pin}\n" in out
    assert f"\n+vllm_commit = {prepared.target}\n" in out
    assert f"+++ b/{CORE_FILE}\n" in out and f"+++ b/{SPANS}\n" in out
    assert "+kind = \"advance\"\n" in out
    assert f"would advance {prepared.pin[:10]} → {prepared.target[:10]}; nothing written" in out
    assert files(c.port) == before and c.head() == prepared.pin
    left = json.loads(ok("advance", "--dry-run", "--json"))["left_behind"]
    assert left["behind"] and all(isinstance(f, str) for f in left["behind"])

    rc, out, err = cmd("advance", "--commit")
    assert rc == 0, err
    assert f"advanced the parity pin {prepared.pin[:10]} → {prepared.target[:10]}" in out
    # The fake oracle has no FlashInfer: the pin keeps its version, and the advance says so.
    assert "flashinfer_version stays 0.6.15.post1: the oracle at the target has no " \
        "FlashInfer to measure" in err
    after = surfaces(c.port)
    assert_all_say(after, prepared.target)
    assert (after.state, after.events) == ("ADVANCED", ("advance",))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    port = the_port(c.port)
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), c.port), "vllm")
    assert core is not None and core.pinned_on == today
    text = read_text(port.protocol)
    para = paragraph.find(text, path=PROTOCOL)
    assert para.date == today
    # ... and the paragraph, which says what was measured, names no FlashInfer at all.
    line = text.splitlines()[para.line - 1]
    assert "FlashInfer" not in line, line
    pin = pins.load(port.protocol).pin
    assert pin.distribution_version == pin.runtime_version + ".precompiled"
    assert c.head() == prepared.target
    assert git(c.ref, "status", "--porcelain") == ""
    rep = report_path(c.port)
    assert json.loads(read_text(rep.with_suffix(".json")))["state"] == "ADVANCED"

    log = git(c.port, "log", "--format=%s%n%b", "-1")
    assert log.startswith(f"sync(upstream): advance parity pin {prepared.pin[:10]} → "
                          f"{prepared.target[:10]}\n")
    assert f"Range: {prepared.pin}..{prepared.target}" in log
    assert f"Report: .agents/sync/{rep.name}" in log and "Gates: " in log
    assert git(c.port, "rev-list", "--count", "HEAD").strip() == "2"
    touched = set(git(c.port, "show", "--format=", "--name-only", "HEAD").split())
    # The sync commit carries the cycle's evidence with the pin surfaces, nothing else.
    assert touched == {PROTOCOL, CORE_FILE, SPANS, f".agents/sync/{rep.name}",
                       f".agents/sync/{rep.with_suffix('.json').name}",
                       ".agents/sync/events/0001-advance.toml", ".agents/sync/decisions.toml",
                       ".agents/sync/cycle.toml", f".agents/sync/gates/{prepared.target[:7]}.json",
                       ".agents/sync/carry-over.toml", ".agents/parity-ledger.md",
                       "goldens/sampler/logprobs.json", "goldens/sampler/manifest.json"}
    assert git(c.port, "status", "--porcelain") == ""
    # What the advance warned it leaves behind is what `check` then warns of, file for file
    # (walk-s6b D7: 31 such warnings appeared on the real case with no word before).
    said = re.search(r"warning: (\d+) ported file\(s\) will be behind the new pin", err)
    assert said is not None, err
    rc, check_out, check_err = cmd("check")
    assert rc == 0, check_err
    behind = re.findall(r"^warning: (\S+):\d+: per-file pin behind the parity pin, and the "
                        r"upstream file changed with no ledger note", check_out, re.MULTILINE)
    assert int(said.group(1)) == len(behind) > 0
    listed = err.split(said.group(0), 1)[1].split("\n", 1)[1].splitlines()
    assert [line.strip() for line in listed[:len(behind)]] == behind
    # The paths the target deleted or renamed since the pin: said before, warned of after.
    gone = re.findall(r"^warning: (\S+):\d+: the header cites a path the parity pin does "
                      r"not have", check_out, re.MULTILINE)
    already = "src/vllm/v1/worker/async_output.cpp"  # a wrong path, gone at the pin already
    assert already in gone and already not in left["gone"]
    assert left["gone"] == [f for f in gone if f != already] != []
    # ... and those gone at the pin already are said again, apart (walk-s9 U6, s10 U3: the
    # advance of the cycle that left them was the only one to say it).
    assert left["still_gone"] == [already]
    assert "1 ported file(s) already cite a path the current pin does not have" in err
    assert events.verify(port) == []
    # The committed event names the oracle by its place under the oracle home: an absolute
    # path would be one maintainer's machine.
    env = json.loads(events.load_all(port)[-1].detail)["after"]["oracle_env"]
    assert env == f"<oracle_home>/vllm-{prepared.target[:10]}"

    # A re-run after the advance refuses and records nothing: the cycle did not stall.
    rc, out, _ = cmd("advance")
    assert rc == 6 and "unmet: the cycle to" in out and "already advanced" in out
    assert surfaces(c.port) == after

    out = ok("rollback")
    assert "previous oracle environment: " in out
    now = files(c.port)
    for rel in (PROTOCOL, CORE_FILE, SPANS):
        assert now[rel] == before[rel], rel
    back = surfaces(c.port)
    assert back.events == ("advance", "rollback") and back.state == "ACTIVE"
    rolled = events.load_all(port)[-1]
    assert (rolled.supersedes, rolled.pin_before, rolled.pin_after) == (
        1, prepared.target, prepared.pin)
    assert rolled.report == f".agents/sync/{rep.name}"
    assert json.loads(rolled.detail)["oracle_env"].startswith(
        f"<oracle_home>/vllm-{prepared.pin[:10]}")
    ok("check")

    # The rolled-back cycle is open again: a second advance to the same target works.
    ok("advance")
    again = surfaces(c.port)
    assert_all_say(again, prepared.target)
    assert again.events == ("advance", "rollback", "advance")
    assert events.verify(port) == [] and events.git_edits(port) == []
    ok("rollback")
    rc, _, err = cmd("rollback")
    assert rc == 2 and "there is no advance to roll back" in err


def test_rollback_dry_run_shows_the_diff_and_writes_nothing(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    ok("advance")
    carried = the_port(c.port).carried()
    assert carried and all(x.by == "advance" for x in carried.values())
    before = files(c.port)
    out = ok("rollback", "--dry-run")
    assert f"\n-vllm_commit = {prepared.target}\n" in out
    assert f"\n+vllm_commit = {prepared.pin}\n" in out
    assert "+kind = \"rollback\"\n" in out and "--- a/.agents/sync/carry-over.toml" in out
    assert out.endswith(f"dry run: would roll back the parity pin {prepared.target[:10]} → "
                        f"{prepared.pin[:10]}; nothing written\n")
    rc, out, _ = cmd("rollback", "--dry-run", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["dry_run"] is True and doc["rolled_back"] is False
    assert doc["pin_after"] == prepared.pin and "+vllm_commit" in doc["diff"]
    assert files(c.port) == before
    ok("rollback")
    # The rolled-back cycle is open again and owes its items itself: nothing stays carried.
    assert the_port(c.port).carried() == {}
    ok("check")


def test_rollback_after_the_next_sync_restores_the_cycle_and_the_carry_over_record(
        prepared: Prepared, copy: Callable[[str], Copy], tmp: Path) -> None:
    # walk-s6b D11: a `sync` after the advance froze the next cycle (from the advanced pin);
    # the rollback left that cycle, and an empty carry-over record where there was none.
    c = copy("ready")
    port = the_port(c.port)
    assert not port.carry_over_path.exists()
    before = files(c.port)
    ok("advance")
    assert port.carry_over_path.exists()
    _push_newer_target(c, tmp, later=True, than=prepared.target)
    ok("fetch")
    ok("sync")
    moved = tomllib.loads(read_text(c.port / ".agents/sync/cycle.toml"))
    assert moved["pin"] == prepared.target
    # A commit of the advanced cycle is an entry of its report, which explain names
    # (walk-s10 U1).
    rc, _, err = cmd("explain", prepared.ported)
    assert rc == 2
    assert "is not in the open cycle: it is an entry of the earlier report .agents/sync/" in err
    assert f"-{prepared.target[:7]}.md, as PORT-NOW" in err
    out = ok("rollback", "--dry-run")
    assert "--- a/.agents/sync/carry-over.toml\n+++ /dev/null\n" in out
    doc = json.loads(ok("rollback", "--dry-run", "--json"))
    assert doc["removed"] == [".agents/sync/carry-over.toml"]
    assert ".agents/sync/cycle.toml" in doc["files"]
    ok("rollback", "--commit")
    now = files(c.port)
    for rel in (".agents/sync/cycle.toml", PROTOCOL, CORE_FILE, SPANS):
        assert now[rel] == before[rel], rel
    # The next cycle's report is no longer the open cycle's: one report is ACTIVE.
    states = {p.name: re.findall(r"^- Cycle state: (\w+)", read_text(p), re.MULTILINE)
              for p in (c.port / ".agents/sync").glob("*.md")}
    assert sorted(states.values()) == [["ACTIVE"], ["RETARGETED"]], states
    (reopened,) = (name for name, state in states.items() if state == ["ACTIVE"])
    assert reopened.endswith(f"-{prepared.target[:7]}.md")
    json_states = {p.name: json.loads(read_text(p))["state"]
                   for p in (c.port / ".agents/sync").glob("2*.json")}
    assert json_states == {n.replace(".md", ".json"): s[0] for n, s in states.items()}
    assert ".agents/sync/carry-over.toml" not in now
    assert git(c.port, "status", "--porcelain", "--untracked-files=all",
               "--", ".agents/sync/carry-over.toml") == ""
    # The reopened cycle is the one advanced: its report and target, ready to advance again.
    rc, out, _ = cmd("advance", "--dry-run")
    assert rc == 0, out
    assert f"+vllm_commit = {prepared.target}\n" in out
    ok("check")


def test_stall_commit_commits_the_stall_records(prepared: Prepared,
                                                 copy: Callable[[str], Copy]) -> None:
    c = copy("fresh")
    rc, out, err = cmd("advance", "--stall", "--commit", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    rep = report_path(c.port)
    assert doc["also"] == [".agents/sync/cycle.toml"]  # `sync` froze it: not the stall's
    assert doc["stalled"] is True and doc["report"] == f".agents/sync/{rep.name}"
    assert doc["event"] == ".agents/sync/events/0001-stall.toml" and doc["carried"] > 3
    touched = set(git(c.port, "show", "--format=", "--name-only", "HEAD").split())
    assert {f".agents/sync/{rep.name}", ".agents/sync/carry-over.toml",
            ".agents/sync/events/0001-stall.toml"} <= touched
    assert all(t.startswith(".agents/") for t in touched)
    assert git(c.port, "log", "-1", "--format=%s").startswith("sync(upstream): stall the cycle")
    rc, out, _ = cmd("advance", "--stall", "--json")
    assert rc == 0 and json.loads(out)["event"] is None  # recorded once
    assert [e.kind for e in events.load_all(the_port(c.port))] == ["stall"]
    # The stall commit holds the report the next `sync` writes (walk-s6b D9): the items it
    # carried are the report's own, never "carried since" itself.
    md, js = rep.read_bytes(), rep.with_suffix(".json").read_bytes()
    ok("sync")
    assert rep.read_bytes() == md and rep.with_suffix(".json").read_bytes() == js
    assert b"carried since" not in md and json.loads(js)["carried"] == []
    assert git(c.port, "status", "--porcelain") == ""


def test_a_stall_commit_run_again_has_nothing_to_commit(prepared: Prepared,
                                                         copy: Callable[[str], Copy]) -> None:
    """A stall committed, then run again (as after a kill that came once the commit was
    made): the second `--commit` exited 3, 'committing them failed: ... no message', and
    said to commit no path by hand (`git add -A -- && git commit`). It commits nothing."""
    c = copy("fresh")
    assert cmd("advance", "--stall", "--commit")[0] == 0
    head = git(c.port, "rev-parse", "HEAD")
    rc, out, err = cmd("advance", "--stall", "--commit", "--json")
    assert rc == 0, err
    assert json.loads(out)["commit"] is None and "committed" not in err
    assert git(c.port, "rev-parse", "HEAD") == head
    assert git(c.port, "status", "--porcelain") == ""


def test_a_stall_commit_names_a_hand_edit_it_carries(prepared: Prepared,
                                                     copy: Callable[[str], Copy]) -> None:
    """walk-s11 D10: a stray line a person added to the ledger went into the stall's commit
    with no word: the commit holds every changed record, and now names those it did not
    write."""
    c = copy("fresh")
    ledger = c.port / ".agents/parity-ledger.md"
    ledger.write_text(ledger.read_text() + "extra line\n")
    rc, _out, err = cmd("advance", "--stall", "--commit")
    assert rc == 0, err
    assert ("note: the commit also holds 2 record(s) changed before this command ran "
            "(review them: git show --stat HEAD): .agents/parity-ledger.md, "
            ".agents/sync/cycle.toml") in err


def test_a_stall_lists_an_unported_commit_once(prepared: Prepared,
                                               copy: Callable[[str], Copy],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s7 N4: each unported PORT-NOW was an unmet line and a "PORT-NOW open" line."""
    c = copy("ready")
    _port_now_open(c, prepared, monkeypatch)
    assert cmd("advance", "--stall")[0] == 0
    lines = carry_over(c.port)
    (unmet,) = [line for line in lines if line.startswith("- unmet: PORT-NOW ")]
    sha = unmet.split("`")[1]
    assert [line for line in lines if f"`{sha}`" in line] == [unmet]
    # ... and a sync of the stalled report keeps it so.
    ok("sync")
    assert carry_over(c.port) == lines


def test_a_stall_lists_a_failing_gate_once(prepared: Prepared, copy: Callable[[str], Copy],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    c = copy("ready")
    _gate_fails(c, prepared, monkeypatch)
    assert cmd("advance", "--stall")[0] == 0
    lines = [line for line in carry_over(c.port) if "parity:op" in line]
    assert lines == [f"- unmet: gate parity:op is FAIL: exit 1 — fix the cause, then run "
                     f"`upstream-sync parity --suite op --target {prepared.target}` again"], lines


def test_the_advance_moves_only_the_branch_the_preferences_name(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """With another branch checked out in the reference checkout (`work`, at the pin), the
    advance fast-forwarded that branch to the target, and `main`, the preferences' branch,
    stayed at the pin: refused (the table above), with both branches left where they were,
    and status says it before. A branch of another name that tracks origin/main is the
    preferences' branch, and moves."""
    c = copy("ready")
    git(c.ref, "checkout", "-q", "-b", "work")
    rc, out, _ = cmd("advance")
    assert rc == 6 and "has branch work checked out, not main" in out, out
    assert git(c.ref, "rev-parse", "work", "main").split() == [prepared.pin] * 2
    said = json.loads(cmd("status", "--json")[1])["reference"]["problems"]
    assert any("has branch work checked out, not main" in p for p in said), said
    git(c.ref, "branch", "-q", "--set-upstream-to=origin/main", "work")
    rc, _, err = cmd("advance")
    assert rc == 0, err
    assert git(c.ref, "rev-parse", "work", "main").split() == [prepared.target, prepared.pin]


def test_an_advance_killed_before_the_fast_forward_is_finished_by_the_next_run(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    ok("advance")
    # As if the process died after the records were replaced, before the checkout moved.
    git(c.ref, "reset", "-q", "--hard", prepared.pin)
    rc, out, err = cmd("advance")
    assert rc == 6 and "already advanced" in out
    assert f"finished the interrupted advance: fast-forwarded {c.ref} to " in err
    assert c.head() == prepared.target


def test_rollback_with_nothing_to_roll_back_is_a_usage_error(
        copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    before = files(c.port)
    rc, _, err = cmd("rollback")
    assert rc == 2 and "there is no advance to roll back" in err
    assert files(c.port) == before


def test_commit_is_refused_when_another_path_is_staged(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    (c.port / "README.md").write_text("feature work\n")
    git(c.port, "add", "README.md")
    before = files(c.port)
    rc, _, err = cmd("advance", "--commit")
    assert rc == 2 and "other paths are staged: README.md" in err
    assert files(c.port) == before and c.head() == prepared.pin
    assert git(c.port, "rev-list", "--count", "HEAD").strip() == "1"

    ok("advance")  # without --commit the staged feature work is none of its business
    before = files(c.port)
    rc, _, err = cmd("rollback", "--commit")
    assert rc == 2 and "other paths are staged: README.md" in err
    assert files(c.port) == before
    assert git(c.port, "diff", "--cached", "--name-only").split() == ["README.md"]


def test_after_an_advance_commit_a_sync_at_the_pin_writes_nothing(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """walk-s9: the no-op sync after an advance froze a cycle of no commits, rewriting
    cycle.toml, and dirtied the tree the advance commit had left clean; `status` spoke of
    the advanced cycle as the open one."""
    c = copy("ready")
    ok("advance", "--commit")
    status_before = git(c.port, "status", "--porcelain", "--untracked-files=all")
    cycle_file = c.port / ".agents/sync/cycle.toml"
    before = cycle_file.read_bytes()
    assert ok("sync") == f"nothing to sync: the target {prepared.target[:10]} is the pin\n"
    assert ok("fetch").endswith(f"nothing to sync: the target {prepared.target[:10]} is the "
                                "pin\n")
    assert cycle_file.read_bytes() == before
    assert git(c.port, "status", "--porcelain", "--untracked-files=all") == status_before
    lines = ok("status").splitlines()
    assert (f"cycle: none open; the last one, to {prepared.target[:10]}, is ADVANCED (run "
            "'upstream-sync fetch' or 'upstream-sync sync' for the next)") in lines
    assert not any("keeps its target" in line for line in lines)
    doc = json.loads(ok("status", "--json"))["cycle"]
    assert doc["open"] is False and doc["pin"] == prepared.pin
    # The commands that work in a cycle say there is none (walk-s10 D2: they read the closed
    # one, and queue's advice, to sync again, could not be followed).
    closed = (f"no sync cycle is open: the last one, to {prepared.target[:10]}, is closed (an "
              "advance moved the pin to its target) — run 'upstream-sync fetch' or "
              "'upstream-sync sync' to open the next")
    for argv in (("queue",), ("explain", prepared.ported), ("decide", prepared.ported,
                                                           "IGNORE", "late")):
        rc, _, err = cmd(*argv)
        assert (rc, err.strip().splitlines()[-1]) == (2, f"upstream-sync: error: {closed}"), argv
    rc, _, err = cmd("ledger", "add", "--commit", "abc1234", "--what", "w", "--status", "s",
                     "--pr", "1")
    assert rc == 2 and (f"no sync cycle is open (the last one, to {prepared.target[:10]}, is "
                        "closed), so vllm#1 is in no cycle's range") in err
    rc, out, _ = cmd("advance")
    assert rc == 6 and "already advanced" in out


def test_advance_commit_names_the_uncommitted_paths_it_leaves_out(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """walk-s9 U5: the advance reads headers from the work tree; a modified ported file is
    not in the sync commit, and the commit says so."""
    c = copy("ready")
    tracked = [f for f in git(c.port, "ls-files").split() if not f.startswith(".agents/")]
    edited = tracked[0]
    (c.port / edited).write_text((c.port / edited).read_text() + "// edited\n")
    rc, out, err = cmd("advance", "--commit", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    # What the cycle's earlier commands changed goes in, named (walk-s11 D10).
    assert {".agents/parity-ledger.md", ".agents/sync/decisions.toml"} <= set(doc["also"])
    assert not {".agents/upstream-sync.md", ".agents/sync/carry-over.toml"} & set(doc["also"])
    assert doc["left_out"] == [edited]
    assert edited not in git(c.port, "show", "--name-only", "--format=", "HEAD").split()
    ok("rollback")
    (c.port / edited).write_text((c.port / edited).read_text() + "// again\n")
    rc, out, err = cmd("advance", "--commit")
    assert rc == 0, err
    assert re.search(r"^committed [0-9a-f]{10} \(\d+ file\(s\)\)$", out, re.MULTILINE), out
    assert (f"note: 1 other path(s) have uncommitted changes and are not in the commit (the "
            f"records were checked against the work tree as it is): {edited}") in err


def test_a_row_older_than_the_cycle_that_brought_a_change_is_no_note_after_the_advance(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """walk-s10 D1: the upstream commits are dated 2026-01-01; the cycle that brought them
    was frozen today. A row of 2026-06-01 was written before the port saw them."""
    c = copy("ready")
    ok("advance")
    # The advance records the ledger's length: a row appended after it is of a later cycle.
    detail = json.loads(events.load_all(the_port(c.port))[-1].detail)
    assert detail["after"]["ledger_rows"] == len(the_port(c.port).ledger_read().rows)
    doc = json.loads(ok("audit", "--json"))
    behind = next(f for f in doc["files"] if f["status"] == "behind-changed"
                  and all(x["since"] for x in f["citations"] if x["status"] == "behind-changed"))
    ledger_path = c.port / ".agents/parity-ledger.md"
    text = ledger_path.read_text()
    last = [line for line in text.splitlines() if line.startswith("| 20")][-1]
    row = f"| 2026-06-01 / `abc1234` | waits | `{behind['path']}` | 🚧 |"
    ledger_path.write_text(text.replace(last, last + "\n" + row, 1))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    line = next(x for x in ok("audit").splitlines() if f"`{behind['path']}` behind" in x)
    assert ("ledger note: MISSING (the latest row naming it (of 2026-06-01) was written before "
            "the cycle that brought `") in line
    assert line.endswith(f"(frozen on {today}))"), line


def test_a_failed_commit_says_the_records_are_written_and_how_to_commit_them(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    lock = c.port / ".git" / "index.lock"
    lock.write_text("")  # another git (or a crashed one) holds the index
    rc, _, err = cmd("advance", "--commit")
    assert rc == 3, err
    line = err.strip().splitlines()[-1]
    assert "the records are written, but committing them failed: git add failed" in line
    assert f"commit them by hand: git -C {c.port} add -A -- " in line and "index.lock" in line, line
    assert surfaces(c.port).state == "ADVANCED" and c.head() == prepared.target
    lock.unlink()
    rc, out, _ = cmd("advance", "--commit")
    assert rc == 6 and "already advanced" in out  # nothing to redo: only the commit is owed
    git(c.port, "add", "-A", "--", ".agents")
    git(c.port, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q",
        "-m", "sync(upstream): advance by hand")
    ok("check")


def test_an_advance_commit_killed_before_its_commit_says_what_commits_it(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """`advance --commit` SIGKILLed after its records and the checkout moved, before `git
    commit` (a plain `advance` leaves the same): running it again said only 'already
    advanced — fetch a new target', and the next cycle's commit swept the advance in.
    The refusal says what commits it; after that the records are committed as one."""
    c = copy("ready")
    ok("advance")
    rc, out, err = cmd("advance", "--commit")
    assert rc == 6 and "already advanced" in out, err
    (line,) = [x for x in out.splitlines()
               if x.startswith(f"unmet: the advance to {prepared.target[:10]}")]
    assert (".agents/sync/events/0001-advance.toml and the records beside it are written but "
            "not committed") in line
    hand = line.split(" — commit them: ", 1)[1]
    assert hand.startswith(f"git -C {c.port} add -A -- ") and "0001-advance.toml" in hand
    git(c.port, "add", "-A")
    git(c.port, *IDENTITY, "commit", "-q", "-m", "sync(upstream): advance")
    rc, out, _ = cmd("advance", "--commit")
    assert rc == 6 and "not committed" not in out
    assert git(c.port, "status", "--porcelain") == ""


def test_a_rollback_commit_killed_before_its_commit_says_what_commits_it(
        copy: Callable[[str], Copy]) -> None:
    """As for the advance: a rollback run again said 'there is no advance to roll back —
    nothing to undo' over a rollback no commit holds."""
    c = copy("ready")
    ok("advance", "--commit")
    ok("rollback")
    rc, _, err = cmd("rollback", "--commit")
    assert rc == 2, err
    line = err.strip().splitlines()[-1]
    assert ("the last rollback is done: .agents/sync/events/0002-rollback.toml and the records "
            "beside it are written but not committed") in line, line
    assert f" — commit them: git -C {c.port} add -A -- " in line
    git(c.port, "add", "-A")
    git(c.port, *IDENTITY, "commit", "-q", "-m", "sync(upstream): roll back")
    rc, _, err = cmd("rollback", "--commit")
    assert rc == 2 and "there is no advance to roll back" in err, err


def test_a_tampered_event_chain_refuses_the_next_event(copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    ok("advance")
    ok("rollback")
    first = c.port / ".agents" / "sync" / "events" / "0001-advance.toml"
    first.write_text(first.read_text().replace('report = ".agents', 'report = "./.agents'))
    port = the_port(c.port)
    problems = events.verify(port)
    assert len(problems) == 1 and "0002-rollback.toml:1: previous_hash" in problems[0]
    before = files(c.port)
    rc, _, err = cmd("advance")
    assert rc == 4 and "previous_hash does not match" in err
    assert files(c.port) == before
    rc, out, _ = cmd("check")
    assert rc == 7 and "0002-rollback.toml:1: previous_hash does not match" in out


# -- preconditions and stalls -----------------------------------------------------------------


def _no_report(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    rep = report_path(c.port)
    rep.unlink()
    rep.with_suffix(".json").unlink()


def _unclassified(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    ok("decide", p.ported, "UNCLASSIFIED", "not sure yet")


def _port_now_open(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    rep = read_text(report_path(c.port))
    sha = next(s for s in re.findall(r"`([0-9a-f]{10})`.*PORT-NOW", rep) if s != p.ported)
    ok("decide", sha, "PORT-NOW", "port it this cycle", "--force")


def _gates_pending(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    mp.delenv("SYNC_GATE_HOSTS")
    ok("golden")
    ok("parity")


def _gate_fails(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    (c.port / "goldens" / "sampler" / "logprobs.json").write_text('{"logprobs": [0.0, 0.0]}')
    assert cmd("parity")[0] == 7


def _oracle_missing(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    empty = c.port.parent / "no-oracles"
    empty.mkdir()
    mp.setenv("SYNC_ORACLE_HOME", str(empty))


def _oracle_wrong(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    # A copy whose build record says another build mode than the one its version shows.
    home = c.port.parent / "oracles"
    env = oracle.env_path(home, "vllm", p.target)
    shutil.copytree(oracle.env_path(p.ex / "oracles", "vllm", p.target), env, symlinks=True)
    marker = env / oracle.MARKER
    marker.write_text(marker.read_text().replace('"precompiled"', '"source"'))
    mp.setenv("SYNC_ORACLE_HOME", str(home))


def _reference_dirty(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    (c.ref / "README.md").write_text("local edit\n")


def _reference_diverged(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    (c.ref / "LOCAL").write_text("local\n")
    git(c.ref, "add", "LOCAL")
    git(c.ref, *IDENTITY, "commit", "-q", "-m", "local work")


def _reference_on_another_branch(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    git(c.ref, "checkout", "-q", "-b", "work")


def _edit_golden(c: Copy, p: Prepared, **fields: str) -> None:
    """The golden gate's PASS record edited by hand (as a forged or mangled merge would)."""
    rec = c.port / ".agents" / "sync" / "gates" / f"{p.target[:7]}.json"
    doc = json.loads(rec.read_text())
    gate = doc["gates"]["golden"]
    assert gate["status"] == "PASS"
    for key, value in fields.items():
        if key in gate:
            gate[key] = value
        else:
            gate["oracle"][key] = value
    rec.write_text(json.dumps(doc, indent=2) + "\n")


def _golden_elsewhere(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    _edit_golden(c, p, commit=p.pin)


def _golden_other_build(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    _edit_golden(c, p, runtime_version="9.9.9")


def _golden_from_the_future(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    _edit_golden(c, p, time="2099-01-01T00:00:00Z")


def _golden_names_no_oracle(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    rec = c.port / ".agents" / "sync" / "gates" / f"{p.target[:7]}.json"
    doc = json.loads(rec.read_text())
    del doc["gates"]["golden"]["oracle"]["oracle"]
    doc["gates"]["golden"]["oracle"]["runtime_version"] = "9.9.9"
    rec.write_text(json.dumps(doc, indent=2) + "\n")


def _golden_names_another_oracle(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    rec = c.port / ".agents" / "sync" / "gates" / f"{p.target[:7]}.json"
    doc = json.loads(rec.read_text())
    doc["gates"]["golden"]["oracle"].update(oracle="omni", runtime_version="9.9.9")
    rec.write_text(json.dumps(doc, indent=2) + "\n")


def _golden_shard_fails(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    """walk-s8 D1: only the first shard found was checked."""
    rec = c.port / ".agents" / "sync" / "gates" / f"{p.target[:7]}.json"
    doc = json.loads(rec.read_text())
    doc["gates"]["golden[2/2]"] = {**doc["gates"]["golden"], "status": "FAIL",
                                   "detail": "shard 2 broke"}
    rec.write_text(json.dumps(doc, indent=2) + "\n")


def _parity_from_the_future(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    rec = c.port / ".agents" / "sync" / "gates" / f"{p.target[:7]}.json"
    doc = json.loads(rec.read_text())
    assert doc["gates"]["parity:op"]["status"] == "PASS"
    doc["gates"]["parity:op"]["time"] = "2099-01-01T00:00:00Z"
    rec.write_text(json.dumps(doc, indent=2) + "\n")


def _goldens_missing(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    shutil.rmtree(c.port / "goldens" / "sampler")


def _core_oracle_file_missing(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    (c.port / CORE_FILE).unlink()


def _core_oracle_file_disagrees(c: Copy, p: Prepared, mp: pytest.MonkeyPatch) -> None:
    """The core oracle file's pin is not the pin the advance moves from (a hand edit, a
    merge): the advance overwrote it, so the drift was never said and a rollback restored
    it. Refused until it agrees, as the PARITY PIN paragraph is."""
    path = c.port / CORE_FILE
    text = path.read_text()
    assert f"pin = {p.pin}\n" in text
    path.write_text(text.replace(f"pin = {p.pin}\n", f"pin = {'e24d1b24' * 5}\n"))


Breaker = Callable[[Copy, Prepared, pytest.MonkeyPatch], None]
CASES: dict[str, tuple[Breaker, str]] = {
    "no report": (_no_report, r"no sync report for the target [0-9a-f]{10} — run "),
    "unclassified": (_unclassified, r"1 commit\(s\) UNCLASSIFIED — classify each with "),
    "port-now without ledger row": (
        _port_now_open, r"PORT-NOW `[0-9a-f]{10}` vllm#\d+ has no ledger row — port it and run "
        r"'upstream-sync ledger add', or carry it over"),
    "gates pending": (_gates_pending, r"gate (golden|parity:op) is PENDING — run `.+` on a "
                      r"gate host"),
    "gate fails": (_gate_fails, r"gate parity:op is FAIL"),
    "oracle missing": (_oracle_missing, r"oracle vllm at the target cannot be verified: no "
                       r"oracle environment for vllm at [0-9a-f]{10}"),
    "oracle fails verification": (_oracle_wrong, r"oracle vllm at [0-9a-f]{10} fails "
                                  r"verification: build mode: built in mode 'source'"),
    "golden ran at another commit": (
        _golden_elsewhere, r"gate golden (PASSed with the vllm oracle at `[0-9a-f]{10}`, not at "
        r"the target|PASSed, but no golden under goldens was written by it)"),
    "golden ran with another build": (
        _golden_other_build, r"gate golden ran with runtime version 9\.9\.9, but the oracle "
                             r"verified here has "),
    "golden dated in the future": (
        _golden_from_the_future, r"gate golden is dated 2099-01-01T00:00:00Z, in the future"),
    "golden names no oracle": (
        _golden_names_no_oracle, r"gate golden PASSed with an oracle identity naming no "
                                 r"oracle, not 'vllm' \(the golden oracle\)"),
    "golden names another oracle": (
        _golden_names_another_oracle, r"gate golden PASSed with an oracle identity naming "
                                      r"'omni', not 'vllm'"),
    "a golden shard fails": (
        _golden_shard_fails, r"gate golden\[(1/2\] has not run at [0-9a-f]{10} — run `.+ "
                             r"--shard 1/2`|2/2\] is FAIL: shard 2 broke — fix the cause)"),
    "parity dated in the future": (
        _parity_from_the_future, r"gate parity:op is dated 2099-01-01T00:00:00Z, in the future"),
    "golden without its goldens": (
        _goldens_missing, r"gate golden PASSed, but no golden under goldens was written by it"),
    "no core oracle file": (_core_oracle_file_missing, r"no core oracle file \(vllm\.md\)"),
    "core oracle file disagrees": (
        _core_oracle_file_disagrees, r"\.agents/oracles/vllm\.md:\d+: pin = (e24d1b24){5} but "
        r"the pin block's vllm_commit is [0-9a-f]{40} — write [0-9a-f]{40} there by hand"),
    "reference dirty": (_reference_dirty, r"the reference checkout .+ has uncommitted changes "
                        r"— commit or stash them"),
    "reference diverged": (_reference_diverged, r"the reference checkout's HEAD [0-9a-f]{10} "
                           r"cannot fast-forward to [0-9a-f]{10}"),
    "reference on another branch": (
        _reference_on_another_branch, r"the reference checkout .+ has branch work checked "
        r"out, not main \(the developer preferences' branch\), which the advance would "
        r"fast-forward — check out main \('git -C .+ checkout main'\)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_unmet_precondition_refuses_and_only_stall_records_it(
        case: str, prepared: Prepared, copy: Callable[[str], Copy],
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = copy("ready")
    breaker, pattern = CASES[case]
    breaker(c, prepared, monkeypatch)
    before = files(c.port)
    head = c.head()

    rc, out, err = cmd("advance", "--dry-run")
    assert rc == 6
    for _ in range(2):
        rc, out, err = cmd("advance")
        assert rc == 6, err
        unmet = [line.removeprefix("unmet: ") for line in out.splitlines()]
        assert unmet and all(re.fullmatch(r"unmet: .+", line) for line in out.splitlines())
        assert all(re.match(pattern, u) for u in unmet), unmet
        assert f"the advance is refused: {len(unmet)} unmet precondition(s)" in err
    # A refused advance reports and writes nothing: stalling is its own act.
    assert files(c.port) == before and c.head() == head
    assert events.load_all(the_port(c.port)) == []

    for _ in range(2):
        rc, out, err = cmd("advance", "--stall")
        if case == "no report":
            # Nothing was synced: no report to mark STALLED, no event pointing at a missing file.
            assert rc == 2 and "nothing to stall" in err
            continue
        assert rc == 0, err
        assert "stalled the cycle: " in out
    stalls = events.load_all(the_port(c.port))
    if case == "no report":
        assert stalls == [] and files(c.port) == before
        return
    assert [e.kind for e in stalls] == ["stall"]  # recorded once
    assert stalls[0].pin_before == stalls[0].pin_after == prepared.pin
    assert stalls[0].detail == "; ".join(unmet)
    for rel in (PROTOCOL, CORE_FILE, SPANS):
        assert files(c.port).get(rel) == before.get(rel)
    assert c.head() == head
    assert re.search(r"^- Cycle state: STALLED$", read_text(report_path(c.port)), re.MULTILINE)
    assert [f"- unmet: {mdtext.cell(u)}" for u in unmet] == [
        line for line in carry_over(c.port) if line.startswith("- unmet: ")]


def test_a_stall_event_keeps_whole_unmet_items_and_counts_the_rest(
        copy: Callable[[str], Copy], monkeypatch: pytest.MonkeyPatch) -> None:
    """The stall event's detail was the unmet lines joined and cut at 2,000 characters: on the
    real port (23 unmet) the immutable event ended mid-word ("carry-ov") and never said that
    15 more were left out. Now: whole items, then how many more."""
    copy("fresh")
    rc, out, _ = cmd("advance", "--dry-run")
    unmet = [line.removeprefix("unmet: ") for line in out.splitlines()]
    assert rc == 6 and len(unmet) > 3
    monkeypatch.setattr(advance, "DETAIL_MAX", len("; ".join(unmet[:2])) + 80, raising=False)
    ok("advance", "--stall")
    (stall,) = events.load_all(the_port(Path(os.environ["SYNC_PORT"])))
    left = len(unmet) - 2
    assert stall.detail == "; ".join(
        [*unmet[:2], f"… and {left} more (the report's Carry-over lists every one)"])


def _gates_section(port: Path) -> str:
    text = read_text(report_path(port))
    return text.split("## Gates\n", 1)[1].split("\n## ", 1)[0]


def test_the_reports_gates_section_follows_each_gate_run_and_merge(
        prepared: Prepared, copy: Callable[[str], Copy], monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s6b D8: a reviewer of the cycle's report saw no golden gate until a stall."""
    c = copy("fresh")
    monkeypatch.delenv("SYNC_GATE_HOSTS")
    ok("golden")
    assert "`golden` **PENDING**" in _gates_section(c.port)
    monkeypatch.setenv("SYNC_GATE_HOSTS", HOST)
    rec = c.port / ".agents" / "sync" / "gates" / f"{prepared.target[:7]}.json"
    pending = rec.read_bytes()
    ok("golden")
    assert "`golden` **PASS**" in _gates_section(c.port)
    # A merged record from a gate host shows as well (here: the earlier PENDING, older).
    shard = c.port.parent / "shard.json"
    doc = json.loads(rec.read_text())
    doc["gates"]["parity:op"] = {**json.loads(pending)["gates"]["golden"],
                                 "command": "upstream-sync parity --suite op"}
    shard.write_text(json.dumps(doc))
    ok("gates", "merge", str(shard))
    assert "`parity:op` **PENDING**" in _gates_section(c.port)


def _without_gates(text: str) -> str:
    """A report (or its JSON) with its Gates section (or `gates` array) left out."""
    if text.startswith("{"):
        return json.dumps({**json.loads(text), "gates": None})
    head, rest = text.split("## Gates\n", 1)
    return head + rest.split("\n## ", 1)[1]


def test_oracle_verify_at_the_gate_target_refreshes_the_reports_gates(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """`oracle verify` at the gate target recorded gate oracle:vllm and left the report's
    Gates section and its JSON's gates as they were until the next `sync`, saying nothing,
    where `golden`, `parity` and `gates merge` refresh them; it refreshes them as they do, in
    the one transaction with the record, every other byte of both files kept."""
    c = copy("ready")
    md = report_path(c.port)
    js = md.with_suffix(".json")
    before = {p: read_text(p) for p in (md, js)}
    assert "`oracle:vllm`" not in _gates_section(c.port)
    ok("oracle", "verify", "--oracle", "vllm", "--commit", "target")
    assert re.search(r"^- `oracle:vllm` \*\*PASS\*\* — ", _gates_section(c.port), re.MULTILINE)
    doc = json.loads(read_text(js))
    assert [g["status"] for g in doc["gates"] if g["name"] == "oracle:vllm"] == ["PASS"]
    for p, text in before.items():
        assert _without_gates(read_text(p)) == _without_gates(text)
    after = {p: read_text(p) for p in (md, js)}
    ok("sync")  # what the refresh wrote is what a sync writes
    assert {p: read_text(p) for p in (md, js)} == after


@pytest.mark.parametrize("gate", ["golden", "parity"])
def test_a_gate_command_refused_before_it_records_leaves_the_report_as_it_was(
        copy: Callable[[str], Copy], gate: str) -> None:
    """`golden` and `parity` re-ran the whole sync in a `finally`, after and apart from the
    record, so one refused before any gate was recorded (a --target of another checkout)
    still rewrote the report and its JSON (here: a hand-edited entry line read back and
    rendered again) though no record the report reads had changed. The report is
    refreshed in one transaction with the gate record it shows, and only then."""
    c = copy("fresh")
    md = report_path(c.port)
    text = read_text(md)
    edited = re.sub(r"(?m)^(- `[0-9a-f]{10}` .*) — IGNORE: [^\n]*$",
                    r"\1 — INVENTORY: a reviewer's call", text, count=1)
    assert edited != text
    md.write_text(edited, encoding="utf-8")
    before = files(c.port)
    rc, _, err = cmd(gate, "--target", "0" * 40)
    assert rc == 6, err
    assert files(c.port) == before


def test_a_gate_that_has_not_run_names_the_upstream_sync_command_that_runs_it(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    # A port has no noxfile of its own: the line names the command the PENDING handoff names
    # (less --strict), and running exactly that command clears the line.
    copy("fresh")
    rc, out, _ = cmd("advance", "--dry-run")
    assert rc == 6
    t = prepared.target
    lines = re.findall(r"^unmet: gate (\S+) has not run at .*$", out, re.MULTILINE)
    assert sorted(lines) == ["golden", "parity:op"], out
    runs = {
        "golden": f"upstream-sync golden --oracle vllm --target {t}",
        "parity:op": f"upstream-sync parity --suite op --target {t}",
    }
    for name, run in runs.items():
        assert f"unmet: gate {name} has not run at {t[:10]} — run `{run}`" in out.splitlines()
        assert "nox" not in out
        ok(*shlex.split(run)[1:])
    _, out, _ = cmd("advance", "--dry-run")
    assert "has not run" not in out


def _edit_paragraph(c: Copy, edit: Callable[[str, paragraph.Paragraph], str]) -> None:
    """Rewrite the copy's protocol file as `edit` makes it from its text and paragraph."""
    protocol = c.port / PROTOCOL
    text = protocol.read_text()
    protocol.write_text(edit(text, paragraph.find(text, path=PROTOCOL)))


def test_a_stale_paragraph_is_refused_naming_its_phrases(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")

    def stale(text: str, para: paragraph.Paragraph) -> str:
        end = paragraph.extent(text, para)
        return text[:end] + STALE + " Torch 9.9.9 is in vllm#123." + text[end:]

    _edit_paragraph(c, stale)
    before = files(c.port)
    rc, out, _ = cmd("advance", "--json")
    assert rc == 6
    doc = json.loads(out)
    (line,) = doc["unmet"]
    assert line.startswith(f"the PARITY PIN paragraph in {PROTOCOL} states what this advance "
                           "cannot check — reword or remove: ")
    assert ("'zero drift' (the golden gate measured nothing to compare: 1 new case "
            "(sampler))") in line
    assert "'bit-identical' (the golden gate measured nothing to compare" in line
    assert "'9.9.9' (a version the advance did not measure)" in line
    assert "'vllm#123' (a PR outside the cycle's range)" in line
    assert doc["error"]["kind"] == "BlockedCycle" and doc["exit_code"] == 6
    assert files(c.port) == before


def test_advance_omni_names_a_missing_oracle_file_first(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    # walk17 B13: with no oracle file for the id, that is the problem, not the isolation proof.
    copy("fresh")
    rc, _, err = cmd("advance-omni", "a" * 40, "--oracle", "other-omni")
    assert rc == 2
    assert "no oracle file declares id 'other-omni'" in err and "isolation" not in err


def test_a_paragraph_naming_another_pin_is_unmet_before_any_oracle(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    # walk17 B2: the paragraph's own pin is checked up front, as `check` does: a dry run
    # with no oracle at the target lists it beside the oracle line, not after it.
    c = copy("fresh")
    line = 0

    def other_pin(text: str, para: paragraph.Paragraph) -> str:
        nonlocal line
        line = para.line
        lines = text.splitlines(keepends=True)
        lines[line - 1] = lines[line - 1].replace(para.sha, "e24d1b24", 1)
        return "".join(lines)

    _edit_paragraph(c, other_pin)
    rc, out, _ = cmd("advance", "--dry-run", "--json")
    assert rc == 6
    unmet = json.loads(out)["unmet"]
    assert any(u.startswith(f"{PROTOCOL}:{line}: the PARITY PIN paragraph's pin e24d1b24 "
                            "is not a prefix of the pin block's vllm_commit") for u in unmet), unmet
    assert any("oracle" in u for u in unmet), unmet


def test_port_now_items_need_a_ledger_row_or_a_carry_over_decision(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("fresh")
    items = open_port_now(read_text(report_path(c.port)))
    rc, out, _ = cmd("advance")
    assert rc == 6
    no_row = re.findall(r"^unmet: PORT-NOW `([0-9a-f]{10})` .* has no ledger row", out,
                        re.MULTILINE)
    assert no_row == items
    # Every other precondition but the gates and the oracle holds on the fresh copy.
    assert all(re.match(r"unmet: (PORT-NOW|gate|oracle|the PARITY PIN paragraph)", line)
               for line in out.splitlines())
    head = git(c.port, "rev-parse", "HEAD").strip()
    rep = json.loads(read_text(report_path(c.port).with_suffix(".json")))
    pr = next(e["pr"] for e in rep["entries"] if e["sha"].startswith(items[0]))
    ok("ledger", "add", "--commit", head, "--what", "Port it", "--pr", str(pr),
       "--status", "✅")
    ok("decide", items[1], "PORT-NOW", CARRY)
    rc, out, _ = cmd("advance")
    no_row = re.findall(r"^unmet: PORT-NOW `([0-9a-f]{10})` .* has no ledger row", out,
                        re.MULTILINE)
    assert rc == 6 and no_row == items[2:]
    assert events.load_all(the_port(c.port)) == []


# Same-day report names differ only by the target's hash: both orders must import.
@pytest.mark.parametrize("order", ["later", "earlier"])
def test_a_stall_then_a_newer_target_imports_the_carry_over(
        order: str, prepared: Prepared, copy: Callable[[str], Copy], tmp: Path) -> None:
    c = copy("fresh")
    ok("advance", "--stall")
    stalled = report_path(c.port)
    owed = carry_over(c.port)
    assert any(line.startswith("- unmet: ") for line in owed)
    # A stalled report lists each unported commit once, as its unmet line.
    open_items = re.findall(r"^- unmet: PORT-NOW `([0-9a-f]{10})`", read_text(stalled),
                            re.MULTILINE)
    assert open_items and not open_port_now(read_text(stalled))
    carried = the_port(c.port).carried()
    assert {s[:10] for s in carried} >= set(open_items)
    assert all(x.by == "stall" and x.since == f".agents/sync/{stalled.name}"
               for x in carried.values())

    new = _push_newer_target(c, tmp, later=order == "later", than=prepared.target)
    ok("fetch", "--retarget")
    ok("sync")
    current = next(p for p in (c.port / ".agents" / "sync").glob("*.md") if p != stalled)
    assert current.name.endswith(f"-{new[:7]}.md")
    lines = _carry(current)
    # Each stalled item once: in this range, so on its own line, saying since when.
    for sha in open_items:
        (line,) = [x for x in lines if f"`{sha}`" in x]
        assert line.startswith("- PORT-NOW open: ") and f"carried since {stalled.name}" in line
    assert not any(line.startswith("- unmet: ") for line in lines)
    assert "- Cycle state: STALLED" in read_text(stalled)


def _carry(path: Path) -> list[str]:
    section = read_text(path).split("## Carry-over", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def _push_newer_target(c: Copy, tmp: Path, *, later: bool, than: str) -> str:
    """Push one upstream commit past the tip, its hash sorting after (or before) `than`.

    Same-day report names differ only by the target's hash: the import must not depend on
    which way they sort.
    """
    work = tmp / "upstream-work"
    git(tmp, "clone", "-q", str(c.upstream), str(work))
    (work / "NEWS.md").write_text("news\n")
    git(work, "add", "NEWS.md")
    for n in range(200):
        git(work, *IDENTITY, "commit", "-q", *(["--amend"] if n else []), "-m",
            f"[Doc] Add the news ({n}) (#41000)")
        sha = git(work, "rev-parse", "HEAD").strip()
        if (sha[:7] > than[:7]) == later:
            git(work, "push", "-q", "origin", "HEAD:main")
            return sha
    raise AssertionError("no commit hash sorted the wanted way")


# -- all or nothing ---------------------------------------------------------------------------


class Killed(BaseException):
    """A kill between two writes: no handler of ours may catch it."""


def test_a_kill_between_any_two_writes_leaves_all_old_or_all_new(
        prepared: Prepared, copy: Callable[[str], Copy], tmp: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = copy("ready")
    old = surfaces(c.port)
    points: list[str] = []
    monkeypatch.setattr(txn, "FAULT", points.append)
    ok("advance")
    monkeypatch.setattr(txn, "FAULT", None)
    new = surfaces(c.port)
    assert new.pin == prepared.target and new.events == ("advance",)
    n = (len(points) - 1) // 2
    assert n == 7 and points[n] == "journal written"  # 7 files: the carry-over record too
    assert {p.split(" ", 1)[0] for p in points[:n]} == {"staged"}
    assert {p.split(" ", 1)[0] for p in points[n + 1:]} == {"replaced"}
    assert {"staged upstream-sync.md", "staged vllm.md", "staged BENCHMARKS.md",
            "staged 0001-advance.toml"} <= set(points)

    for i, point in enumerate(points):
        shutil.rmtree(c.port)
        shutil.rmtree(c.ref)
        shutil.copytree(prepared.ready, c.port, symlinks=True)
        shutil.copytree(prepared.ex / "vllm", c.ref, symlinks=True)
        before = files(c.port)

        def kill(at: str, point: str = point) -> None:
            if at == point:
                raise Killed(at)

        monkeypatch.setattr(txn, "FAULT", kill)
        with pytest.raises(Killed):
            cmd("advance")
        monkeypatch.setattr(txn, "FAULT", None)
        rc, _, err = cmd("status")
        assert rc == 0, err
        leftovers = [p for p in c.port.rglob("*") if p.name.endswith(".txn")
                     or p.name in (txn.JOURNAL, txn.INTENT)]
        assert leftovers == [], point
        if i < n:
            assert "discarded the staged files" in err, point
            assert surfaces(c.port) == old, point
            assert files(c.port) == before, point
        else:
            assert "finished an interrupted transaction" in err, point
            assert surfaces(c.port) == new, point


def test_a_stall_killed_between_its_writes_is_all_or_nothing(
        prepared: Prepared, copy: Callable[[str], Copy],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s11 D7: the report, then the carry-over, then the event, each its own write: a
    kill after the report left it STALLED with neither, and `check` called it a hand edit."""
    c = copy("fresh")
    rep = report_path(c.port)
    old = (rep.read_bytes(), rep.with_suffix(".json").read_bytes())
    points: list[str] = []
    monkeypatch.setattr(txn, "FAULT", points.append)
    ok("advance", "--stall")
    monkeypatch.setattr(txn, "FAULT", None)
    assert {"staged carry-over.toml", "staged 0001-stall.toml", f"staged {rep.name}",
            "journal written", f"replaced {rep.name}"} <= set(points)
    new = (rep.read_bytes(), rep.with_suffix(".json").read_bytes())
    for point in (f"staged {rep.name}", f"replaced {rep.name}"):
        shutil.rmtree(c.port)
        shutil.copytree(prepared.fresh, c.port, symlinks=True)

        def kill(at: str, point: str = point) -> None:
            if at == point:
                raise Killed(at)

        monkeypatch.setattr(txn, "FAULT", kill)
        with pytest.raises(Killed):
            cmd("advance", "--stall")
        monkeypatch.setattr(txn, "FAULT", None)
        assert cmd("status")[0] == 0
        stalled = point.startswith("replaced")
        assert (rep.read_bytes(), rep.with_suffix(".json").read_bytes()) == (
            new if stalled else old), point
        assert (c.port / ".agents/sync/carry-over.toml").exists() is stalled, point
        assert (c.port / ".agents/sync/events/0001-stall.toml").exists() is stalled, point
        _rc, out, err = cmd("check")
        assert "a hand edit?" not in out + err, point


def test_recovery_leaves_a_live_transaction_alone(
        prepared: Prepared, copy: Callable[[str], Copy], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    c = copy("ready")
    sync_dir = c.port / ".agents" / "sync"

    def kill(at: str) -> None:
        if at == "staged vllm.md":
            raise Killed(at)

    monkeypatch.setattr(txn, "FAULT", kill)
    with pytest.raises(Killed):
        cmd("advance")
    monkeypatch.setattr(txn, "FAULT", None)
    staged = sorted(p.name for p in c.port.rglob("*.txn"))
    assert staged and (sync_dir / txn.INTENT).exists()
    with Held(sync_dir / ".lock"):
        # While a writer holds the lock its transaction is in progress, not interrupted.
        rc, _, err = cmd("status")
        assert rc == 0 and "discarded" not in err
        assert sorted(p.name for p in c.port.rglob("*.txn")) == staged
    rc, _, err = cmd("status")
    assert "discarded the staged files" in err
    assert list(c.port.rglob("*.txn")) == [] and not (sync_dir / txn.INTENT).exists()


class Held:
    """The port lock held by another process until the block ends."""

    def __init__(self, lock: Path) -> None:
        self.lock = lock

    def __enter__(self) -> subprocess.Popen[bytes]:
        script = ("import sys\nfrom pathlib import Path\nfrom sync.infra.atomic import port_lock\n"
                  "with port_lock(Path(sys.argv[1])):\n    print('locked', flush=True)\n"
                  "    sys.stdin.read()\n")
        self.child = subprocess.Popen([sys.executable, "-c", script, str(self.lock)],
                                      cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.child.stdout is not None
        assert self.child.stdout.readline() == b"locked\n"
        return self.child

    def __exit__(self, *exc: object) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        assert self.child.wait(timeout=30) == 0


def test_two_concurrent_advances_one_wins_one_refuses(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("ready")
    before = files(c.port)
    with Held(c.port / ".agents" / "sync" / ".lock"):
        rc, _, err = cmd("advance")
        assert rc == 6 and "holds the lock" in err
        assert files(c.port) == before
        assert c.head() == prepared.pin
    ok("advance")
    assert_all_say(surfaces(c.port), prepared.target)
    assert c.head() == prepared.target


# -- state events -----------------------------------------------------------------------------


_VALID: dict[str, object] = {
    "schema": 1, "index": 1, "kind": "advance", "time": "2026-01-01T00:00:00Z",
    "pin_before": "a" * 40, "pin_after": "b" * 40, "report": ".agents/sync/r.md",
    "supersedes": 0, "previous_hash": "", "detail": "{}"}
_FIELD = st.one_of(st.text(max_size=12), st.integers(-3, 3), st.booleans(), st.floats(),
                   st.lists(st.integers(0, 2), max_size=2),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.fixed_dictionaries({k: st.one_of(st.just(v), _FIELD) for k, v in _VALID.items()}),
       drop=st.sets(st.sampled_from(sorted(_VALID)), max_size=1),
       raw=st.one_of(st.none(), st.text(max_size=80)))
def test_event_files_parse_or_fail_typed(tmp: Path, doc: dict[str, object], drop: set[str],
                                         raw: str | None) -> None:
    root = tmp / "p"
    if not root.exists():
        shutil.copytree(EXAMPLES / "port" / ".agents", root / ".agents")
    port = the_port(root)
    path = events.directory(port) / "0001-advance.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {k: v for k, v in doc.items() if k not in drop}
    path.write_text(raw if raw is not None else tomli_w.dumps(body))
    try:
        loaded = events.load_all(port)
    except MalformedRecord as exc:
        assert "\n" not in str(exc)
    else:
        assert [(type(e.index), type(e.detail)) for e in loaded] == [(int, str)]


def test_an_unreadable_ledger_is_an_unmet_precondition(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    c = copy("fresh")
    (c.port / ".agents/parity-ledger.md").write_text("# Ledger\n\nno table\n")
    rc, out, _ = cmd("advance", "--dry-run")
    assert rc == 6
    assert ("unmet: the parity ledger .agents/parity-ledger.md cannot be read (no ledger table "
            "with columns") in out
    assert "no PORT-NOW commit can be checked for its ledger row" in out
    # ... said once, not followed by a "has no ledger row" line per commit (walk-s11 U7).
    assert "has no ledger row" not in out


@pytest.mark.parametrize(("tail", "why"), [
    (None, "no ledger table with columns"), (b"\xff\xfe not UTF-8\n", "line *: is not UTF-8")])
def test_what_an_advance_leaves_behind_is_unknown_not_none_when_the_ledger_cannot_be_read(
        prepared: Prepared, copy: Callable[[str], Copy], tail: bytes | None, why: str) -> None:
    """walk N4: with a ledger that cannot be read, no file was behind with no ledger note
    (`left_behind.behind` was [], and no line said so): which rows note which files is then
    unknown. It is null, and one warning says why, in the text and in the JSON."""
    c = copy("ready")
    assert json.loads(ok("advance", "--dry-run", "--json"))["left_behind"]["behind"]
    ledger = c.port / ".agents/parity-ledger.md"
    ledger.write_bytes(b"# Ledger\n\nno table\n" if tail is None else ledger.read_bytes() + tail)
    rc, out, _ = cmd("advance", "--dry-run", "--json")
    left = json.loads(out)["left_behind"]
    assert rc == 6 and left["behind"] is None
    assert fnmatch.fnmatchcase(left["warning"], (
        f"the parity ledger .agents/parity-ledger.md cannot be read ({why}*): the ported files "
        f"that will be behind the new pin {prepared.target[:10]} with upstream changes no "
        "ledger row notes cannot be counted — fix the ledger (upstream-sync check names the "
        "problem)")), left["warning"]
    rc, _, err = cmd("advance", "--dry-run")
    assert rc == 6 and err.splitlines()[0] == f"warning: {left['warning']}", err
    assert "will be behind the new pin" not in err.split("\n", 1)[1], err


def test_a_retarget_behind_a_stall_keeps_later_carried_commits_dormant(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """walk-s4 D2: after a stall, a retarget to an earlier commit owed the carried commits
    that come after it ("its diff up to <target>" of a commit the target lacks). They are
    not owed by that cycle and stay in the record, through its own stall, until a target
    includes them."""
    c = copy("fresh")
    ok("advance", "--stall")
    carried = the_port(c.port).carried()
    commits = git(c.ref, "rev-list", "--reverse", f"{prepared.pin}..{prepared.target}").split()
    later = max((s for s in carried), key=commits.index)
    earlier = git(c.ref, "rev-parse", f"{later}^").strip()
    assert earlier != prepared.pin
    rc, _out, err = cmd("sync", "--target", earlier, "--retarget")
    assert rc == 0, err
    after = [s for s in carried if commits.index(s) > commits.index(earlier)]
    assert (f"warning: {len(after)} carried commit(s) come after the target {earlier[:10]}"
            in err)
    (current,) = (c.port / ".agents" / "sync").glob(f"*-{earlier[:7]}.md")
    assert not any(f"`{later[:10]}`" in line for line in _carry(current))
    ok("advance", "--stall")
    assert set(carried) <= set(the_port(c.port).carried())  # the dormant ones kept


@pytest.mark.parametrize("state", ["ADVANCED", "STALLED"])
def test_a_hand_edited_cycle_state_no_event_records_is_not_kept(
        state: str, copy: Callable[[str], Copy]) -> None:
    """walk-s4 D1: a report edited to ADVANCED was read back as advanced, and the cycle could
    neither advance nor stall; check said nothing. A state the events do not record is
    flagged by check and written back as ACTIVE by the next sync, with a warning."""
    c = copy("fresh")
    path = report_path(c.port)
    text = read_text(path)
    path.write_text(text.replace("- Cycle state: ACTIVE", f"- Cycle state: {state}"))
    rc, out, _err = cmd("check")
    rel = path.relative_to(c.port).as_posix()
    assert rc == 7 and (f"{rel}: '- Cycle state: {state}' is recorded by no state event (a hand "
                        "edit?)") in out
    if state == "ADVANCED":
        rc, out, _err = cmd("advance", "--dry-run")
        assert rc == 6 and (f"unmet: {rel} says ADVANCED, but no state event records an "
                            "advance to it (a hand edit?)") in out
    rc, _out, err = cmd("sync")
    assert rc == 0
    assert (f"warning: {rel} said '- Cycle state: {state}', which no state event records (a "
            "hand edit?): written as ACTIVE") in err
    assert "- Cycle state: ACTIVE" in read_text(path)
    # A real stall is recorded, so its state stays.
    ok("advance", "--stall")
    assert "- Cycle state: STALLED" in read_text(path)
    rc, _out, err = cmd("sync")
    assert rc == 0 and "written as ACTIVE" not in err
    assert "- Cycle state: STALLED" in read_text(path)
    # A stall is no advance: rollback says which event is the latest (walk-s4 U1).
    rc, _out, err = cmd("rollback")
    assert rc == 2 and ("there is no advance to roll back (the latest state event, "
                        "0001-stall.toml, is a stall, which moved no pin)") in err


def test_a_refused_advance_still_says_what_it_would_leave_behind(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """walk-s13 U6: what an advance leaves behind is said before the unmet lines too, not
    only once every precondition holds: it is work for the same session. Counted there, the
    files in JSON (walk-s14 N2: listing 105 paths buried the unmet lines)."""
    c = copy("ready")
    left = json.loads(ok("advance", "--dry-run", "--json"))["left_behind"]
    assert left["behind"]

    def other_pin(text: str, para: paragraph.Paragraph) -> str:
        lines = text.splitlines(keepends=True)
        lines[para.line - 1] = lines[para.line - 1].replace(para.sha, "e24d1b24", 1)
        return "".join(lines)

    _edit_paragraph(c, other_pin)
    rc, out, _ = cmd("advance", "--dry-run", "--json")
    doc = json.loads(out)
    assert rc == 6 and doc["unmet"] and doc["left_behind"] == left
    rc, out, err = cmd("advance", "--dry-run")
    assert rc == 6 and out.startswith("unmet: ")
    warned = f"warning: {len(left['behind'])} ported file(s) will be behind the new pin "
    assert err.startswith(warned), err
    first = err.splitlines()[0]
    assert first.endswith(" naming each of the others (each listed once the preconditions "
                          "hold; now in --json: left_behind)"), first
    assert not any(line.startswith("  ") for line in err.splitlines()), err


def test_a_pin_copy_in_a_file_that_is_not_utf8_is_rewritten_keeping_its_other_bytes(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    # A Latin-1 page restating the pin: skipped as "not text", it kept the old pin for ever.
    c = copy("ready")
    page = c.port / "docs" / "latin1.md"
    page.write_bytes(b"Caf\xe9: the oracle at <!--pin:commit-->" + prepared.pin[:10].encode()
                     + b"<!--/pin--> \xff.\n")
    out = ok("advance", "--dry-run")
    assert "+++ b/docs/latin1.md\n" in out
    port = the_port(c.port)
    new = dataclasses.replace(pins.load(port.protocol).pin, commit=prepared.target)
    writes = advance.span_writes(port, {}, new)
    assert writes[page] == (b"Caf\xe9: the oracle at <!--pin:commit-->"
                            + prepared.target[:10].encode() + b"<!--/pin--> \xff.\n")


# -- a work tree with CRLF line endings -------------------------------------------------------


def test_an_advance_commit_in_a_crlf_work_tree_changes_only_the_pin_lines(
        prepared: Prepared, copy: Callable[[str], Copy]) -> None:
    """core.autocrlf (git on Windows): every record in the work tree has CRLF line endings.
    The advance edits them in place and commits: git must see the pin lines changed, not
    whole files, and the records it edits stay CRLF."""
    c = copy("ready")
    git(c.port, "config", "core.autocrlf", "true")
    tracked = [c.port / rel for rel in git(c.port, "ls-files", "-z").split("\0") if rel]
    text = [p for p in tracked if p.suffix in (".md", ".toml", ".cpp", ".h", ".py")]
    for p in text:
        p.write_bytes(p.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    ok("advance", "--commit")
    # (git status names every converted file, stat-dirty; git diff reads their content.)
    assert git(c.port, "diff", "HEAD", "--numstat") == ""
    numstat = git(c.port, "show", "--numstat", "--format=", "HEAD").splitlines()
    edited = {row.split("\t")[2]: int(row.split("\t")[0]) for row in numstat}
    # Written whole: the report, its JSON, the cycle, the events, and the goldens' run.
    whole = (".agents/sync/", "goldens/")
    big = {rel: n for rel, n in edited.items() if n > 6 and not rel.startswith(whole)}
    assert edited and not big, big
    for p in text:
        data = p.read_bytes()
        rel = p.relative_to(c.port).as_posix()
        if not rel.startswith(whole):
            assert b"\n" not in data.replace(b"\r\n", b""), rel
    assert cmd("check", "--no-audit")[0] == 0
