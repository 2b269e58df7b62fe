"""State events: an append-only hash chain, guarded by git once committed."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from portfixture import Fixture, build, port_git, run

from sync import port
from sync.infra.errors import MalformedRecord, SyncError
from sync.records import events

A = "a" * 40
B = "b" * 40
C = "c" * 40


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def chain(fx: Fixture) -> tuple[port.Port, list[events.Event]]:
    p = port.locate(str(fx.port))
    # The advance leaves the pin where the protocol file's pin block names it.
    first = events.append(p, "advance", pin_before=A, pin_after=fx.pin,
                          report=".agents/sync/2026-01-01-bbbbbbb.md")
    second = events.append(p, "stall", pin_before=B, pin_after=B, report="",
                           detail="gates PENDING")
    third = events.append(p, "correction", supersedes=1, pin_before=A, pin_after=B, report="",
                          detail="the advance linked the wrong report")
    return p, [first, second, third]


def test_append_builds_a_chain(fx: Fixture) -> None:
    p, evs = chain(fx)
    assert [e.path.name for e in evs] == ["0001-advance.toml", "0002-stall.toml",
                                         "0003-correction.toml"]
    assert [e.index for e in evs] == [1, 2, 3]
    assert evs[0].previous_hash == ""
    assert evs[1].previous_hash == hashlib.sha256(evs[0].path.read_bytes()).hexdigest()
    assert evs[2].previous_hash == evs[1].digest
    assert (evs[2].kind, evs[2].supersedes) == ("correction", 1)
    assert events.load_all(p) == evs
    assert events.verify(p) == []
    assert run(fx.port, "check", "--no-audit").rc == 0


def test_verify_detects_an_edited_earlier_event(fx: Fixture) -> None:
    p, evs = chain(fx)
    first = evs[0].path
    first.write_text(first.read_text(encoding="utf-8").replace(fx.pin, C), encoding="utf-8")
    problems = events.verify(p)
    assert problems == [
        ".agents/sync/events/0002-stall.toml:1: previous_hash does not match the previous "
        "event: an earlier event was edited (events are immutable; append a correction)"]
    with pytest.raises(MalformedRecord, match="previous_hash does not match"):
        events.append(p, "stall", pin_before=B, pin_after=B, report="")
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 7 and problems[0] in r.out.splitlines()


def test_verify_detects_gaps_and_bad_supersedes(fx: Fixture) -> None:
    p, evs = chain(fx)
    path, data = events.staged(p, "correction", supersedes=7)
    path.write_bytes(data)
    assert events.verify(p) == [
        ".agents/sync/events/0004-correction.toml:1: supersedes 7 is not an earlier event"]
    evs[1].path.unlink()
    problems = events.verify(p)
    assert any("0003-correction.toml:1: event index 3, expected 2" in x for x in problems)
    assert any("previous_hash does not match" in x for x in problems)
    with pytest.raises(MalformedRecord, match="repair the event chain"):
        events.staged(p, "stall")


def test_git_edits_detects_a_modified_committed_event(fx: Fixture) -> None:
    p, _ = chain(fx)
    port_git(fx.port, "add", "-A", "--", ".agents/sync/events")
    port_git(fx.port, "commit", "-q", "--no-verify", "-m", "Sync: state events")
    assert events.git_edits(p) == []
    rel = ".agents/sync/events/0002-stall.toml"
    path = fx.port / rel
    path.write_bytes(path.read_bytes().replace(b"gates PENDING", b"gates PASS"))
    assert events.git_edits(p) == [
        f"{rel}:1: state event modified or deleted in the work tree (M) — events are "
        "immutable; restore it and append a correction"]
    port_git(fx.port, "commit", "-q", "--no-verify", "-am", "Rewrite history quietly")
    sha = port_git(fx.port, "rev-parse", "--short", "HEAD").strip()
    assert events.git_edits(p) == [
        f"{rel}:1: state event changed by commit {sha} — events are immutable; append a "
        "correction instead"]
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 7
    assert f"{rel}:1: state event changed by commit {sha}" in r.out


def test_a_crlf_checkout_of_the_events_keeps_the_chain(fx: Fixture) -> None:
    """`* text=auto eol=crlf` (or core.autocrlf on Windows) checks the committed events out
    with CRLF: each digest was taken over those bytes, so every link after the first read as
    'an earlier event was edited', check failed and no advance could append."""
    p, evs = chain(fx)
    (fx.port / ".gitattributes").write_text("* text=auto eol=crlf\n", encoding="utf-8")
    port_git(fx.port, "add", "-A")
    port_git(fx.port, "commit", "-q", "--no-verify", "-m", "Sync: state events")
    for e in evs:
        e.path.unlink()
    port_git(fx.port, "checkout", "--", ".agents/sync/events")
    assert all(b"\r\n" in e.path.read_bytes() for e in evs)
    assert events.verify(p) == [] and events.git_edits(p) == []
    fourth = events.append(p, "stall", pin_before=B, pin_after=B, report="")
    assert fourth.previous_hash == evs[2].digest
    assert run(fx.port, "check", "--no-audit").rc == 0


def test_git_edits_of_a_port_in_a_subfolder_of_its_repository(tmp_path: Path) -> None:
    """events were guarded by git only where the port root holds `.git`: in a monorepo's
    subfolder an edited event, in the work tree or by a commit, passed `check`."""
    fx = build(tmp_path)
    mono = tmp_path / "mono"
    shutil.copytree(fx.port, mono / "services" / "port", ignore=shutil.ignore_patterns(".git"))
    (mono / "README.md").write_text("a bigger repository\n")
    at = mono / "services" / "port"
    p = port.locate(str(at))
    events.append(p, "stall", pin_before=B, pin_after=B, report="", detail="gates PENDING")
    port_git(mono, "init", "-q", "-b", "main")
    port_git(mono, "add", "-A")
    port_git(mono, "commit", "-q", "--no-verify", "-m", "Import the monorepo")
    assert events.git_edits(p) == []
    rel = ".agents/sync/events/0001-stall.toml"
    path = at / rel
    path.write_bytes(path.read_bytes().replace(b"gates PENDING", b"gates PASS"))
    assert events.git_edits(p) == [
        f"{rel}:1: state event modified or deleted in the work tree (M) — events are "
        "immutable; restore it and append a correction"]
    port_git(mono, "commit", "-q", "--no-verify", "-am", "Rewrite history quietly")
    sha = port_git(mono, "rev-parse", "--short", "HEAD").strip()
    assert events.git_edits(p) == [
        f"{rel}:1: state event changed by commit {sha} — events are immutable; append a "
        "correction instead"]


def test_git_edits_outside_a_git_repository(tmp_path: Path) -> None:
    fx = build(tmp_path)
    p, _ = chain(fx)
    shutil.rmtree(fx.port / ".git")
    assert events.git_edits(p) == []


def test_unexpected_file_among_events(fx: Fixture) -> None:
    p, _ = chain(fx)
    (events.directory(p) / "notes.txt").write_text("hi", encoding="utf-8")
    with pytest.raises(MalformedRecord, match="unexpected file among state events"):
        events.load_all(p)
    r = run(fx.port, "check", "--no-audit")
    assert r.rc == 7 and "notes.txt: unexpected file among state events" in r.out


_VALUES = st.one_of(st.integers(-3, 10**20), st.text(max_size=8), st.booleans(),
                    st.lists(st.integers(), max_size=2), st.floats(allow_nan=False),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overrides=st.dictionaries(st.sampled_from(sorted(events.KEYS)),
                                 _VALUES, max_size=4),
       raw=st.binary(max_size=120))
def test_event_parser_raises_only_typed_errors(tmp_path: Path, overrides: dict[str, object],
                                               raw: bytes) -> None:
    doc: dict[str, object] = {"schema": 1, "index": 1, "kind": "advance", "time": "t",
                              "pin_before": A, "pin_after": B, "report": "r", "supersedes": 0,
                              "previous_hash": "", "detail": ""}
    doc.update(overrides)
    for data in (tomli_w.dumps(doc).encode(), raw):
        path = tmp_path / "0001-advance.toml"
        path.write_bytes(data)
        try:
            ev = events._parse(path, "0001-advance.toml")
        except SyncError:
            continue
        assert isinstance(ev.index, int) and isinstance(ev.supersedes, int)
        assert isinstance(ev.detail, str)
