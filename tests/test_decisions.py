"""Decisions (`decisions.toml`) and the frozen cycle target (`cycle.toml`)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.port import Port
from sync.records import cycle, decisions, schema
from sync.records.config import Config
from sync.records.decisions import Decision

A = "00f7f25828" + "a" * 30
B = "5559679229bc961848b121ccdeaa8fa5d79bec98"

GOLDEN = f'''\
# Decisions for upstream commits (written by upstream-sync; edit via 'decide').
schema = 1

[decisions.{A}]
disposition = "PORT-NOW"
reason = "touches vllm/config/vllm.py"
by = "dev"
at = "2026-01-02T03:04:05Z"
subject = "[Misc] Don't allow \\"X\\" with Y (#53127)"

[decisions.{B}]
disposition = "IGNORE"
reason = "docs only"
by = "agent"
at = "2026-01-02T03:04:06Z"
subject = ""
'''


def table() -> dict[str, Decision]:
    return {
        B: Decision(B, "IGNORE", "docs only", "agent", "2026-01-02T03:04:06Z"),
        A: Decision(A, "PORT-NOW", "touches vllm/config/vllm.py", "dev", "2026-01-02T03:04:05Z",
                    "[Misc] Don't allow \"X\" with Y (#53127)"),
    }


def test_render_golden() -> None:
    assert decisions.render(table()) == GOLDEN


def test_round_trip(tmp: Path) -> None:
    path = tmp / ".agents/sync/decisions.toml"
    decisions.save(path, table())
    assert path.read_text() == GOLDEN
    assert decisions.load(path, rel="d.toml") == table()
    assert decisions.parse(GOLDEN, path="d.toml") == table()


def test_missing_file_is_empty(tmp: Path) -> None:
    assert decisions.load(tmp / "absent.toml", rel="absent.toml") == {}
    assert decisions.parse("", path="d.toml") == {}
    assert decisions.parse("schema = 1\n", path="d.toml") == {}


def test_optional_fields_default_empty() -> None:
    got = decisions.parse(f'[decisions.{A}]\ndisposition = "INVENTORY"\nreason = "later"\n',
                          path="d.toml")
    assert got == {A: Decision(A, "INVENTORY", "later", "", "", "")}


def bad(text: str) -> str:
    with pytest.raises(MalformedRecord) as exc:
        decisions.parse(text, path="d.toml")
    message = str(exc.value)
    assert "\n" not in message and re.match(r"d\.toml:(\d+:)? ", message)
    assert exc.value.exit_code == 4
    return message


def entry(sha: str = A, **kw: Any) -> str:
    base: dict[str, Any] = {"disposition": "IGNORE", "reason": "r"}
    base.update(kw)
    return tomli_w.dumps({"decisions": {sha: {k: v for k, v in base.items() if v is not None}}})


def test_malformed() -> None:
    # The refusal points at the line tomllib stopped on.
    assert bad("[decisions\n").startswith("d.toml:1: not valid TOML: Expected ']'")
    assert bad("schema = 1\n\n[decisions\n").startswith("d.toml:3: not valid TOML:")
    assert bad("schema = [\n").startswith("d.toml: not valid TOML:")  # at the end: no line
    assert "nested too deeply" in bad("a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert bad("schema = 1\nextra = 2\n") == "d.toml: unknown key 'extra' — remove it"
    assert bad("schema = 2\n") == "d.toml: schema 2, expected 1 — upgrade upstream-sync"
    assert bad("decisions = 3\n").startswith("d.toml: 'decisions' must be a table")
    assert bad(entry("00f7f25828")).startswith(
        "d.toml:1: decision key '00f7f25828' is not a full lowercase SHA")
    assert "is not a full lowercase SHA" in bad(entry(A.upper()))
    assert "is not a full lowercase SHA" in bad(entry("g" * 40))
    assert bad(tomli_w.dumps({"decisions": {A: "IGNORE"}})) == (
        "d.toml: decision 00f7f25828 is not a table — fix the file")
    assert bad(entry(disposition="SKIP")) == (
        "d.toml:2: decision 00f7f25828: disposition 'SKIP' is not one of "
        "PORT-NOW, INVENTORY, IGNORE, UNCLASSIFIED — fix the file")
    assert "disposition None" in bad(entry(disposition=None))
    assert bad(entry(reason=None)) == "d.toml:1: decision 00f7f25828 has no reason — add a reason"
    assert bad(entry(reason="  ")).startswith("d.toml:3: decision 00f7f25828 has no reason")
    assert "has no reason" in bad(entry(reason="  "))
    assert "has no reason" in bad(entry(reason=3))
    assert bad(entry(who="me")) == ("d.toml:4: decision 00f7f25828 has unknown key 'who' — "
                                 "remove it")
    assert bad(entry(by=1)).startswith("d.toml:4: decision 00f7f25828: by/at/subject must be")


def test_a_bad_decision_is_refused_at_its_key_line() -> None:
    """walk-s9 nit, walk-s10 N3: the refusal names the line of the bad key in the decision's
    table (`path:line:`), else the table's line; a key of the same name in the next table
    is not it."""
    b = "b" * 40
    text = (f"schema = 1\n\n[decisions.{A}]\ndisposition = \"IGNORE\"\nreason = \"r\"\n\n"
            f"[decisions.{b}]\n  # a comment\n  disposition=\"IGNROE\"\nreason = \"r\"\n")
    assert bad(text).startswith(f"d.toml:9: decision {b[:10]}: disposition 'IGNROE' is not")
    no_reason = (f"[decisions.{A}]\ndisposition = \"IGNORE\"\n\n"
                 f"[decisions.{b}]\ndisposition = \"IGNORE\"\nreason = \"r\"\n")
    assert bad(no_reason).startswith(f"d.toml:1: decision {A[:10]} has no reason")
    inline = f"decisions = {{ {A} = {{ disposition = \"X\", reason = \"r\" }} }}\n"
    assert bad(inline).startswith(f"d.toml: decision {A[:10]}: disposition 'X'")


def test_merge_conflict_markers_are_refused_as_that() -> None:
    """walk-s11 U2: two branches' decisions were refused as a TOML syntax error."""
    text = (f"schema = 1\n<<<<<<< HEAD\n[decisions.{A}]\ndisposition = \"IGNORE\"\n"
            f"reason = \"a\"\n=======\n[decisions.{A}]\ndisposition = \"INVENTORY\"\n"
            "reason = \"b\"\n>>>>>>> other\n")
    assert bad(text) == ("d.toml:2: holds merge conflict markers — resolve the conflict (keep "
                         "one side, or both, as git's merge left them to you), then run again")
    # A lone ======= (a Markdown underline) or an unclosed <<<<<<< is no conflict.
    assert schema.conflict_line("Title\n=======\n") is None
    assert schema.conflict_line("<<<<<<< x\nno end\n") is None


def test_load_not_utf8(tmp: Path) -> None:
    path = tmp / "d.toml"
    path.write_bytes(b"# \xff\n")
    with pytest.raises(MalformedRecord, match=r"^d.toml:1: is not UTF-8 \(byte 0xff at column 3, "):
        decisions.load(path, rel="d.toml")
    # Located by line and column, as an editor shows it, not by byte offset alone.
    path.write_bytes(b"schema = 1\n\n# caf\xc3\xa9 \xff\n")
    with pytest.raises(MalformedRecord, match=r"^d.toml:3: is not UTF-8 \(byte 0xff at column 8, "):
        decisions.load(path, rel="d.toml")
    path.unlink()
    path.mkdir()
    with pytest.raises(MalformedRecord, match=r"^d.toml: cannot read it"):
        decisions.load(path, rel="d.toml")


_sha = st.text("0123456789abcdef", min_size=40, max_size=40)
_text = st.text(st.characters(codec="utf-8"), max_size=30)
_decision = st.builds(
    lambda sha, disp, reason, by, at, subject: Decision(sha, disp, reason, by, at, subject),
    _sha, st.sampled_from(decisions.ALL), _text.filter(str.strip), _text, _text, _text)


@settings(max_examples=100, deadline=None)
@given(st.lists(_decision, max_size=5, unique_by=lambda d: d.sha))
def test_round_trip_property(items: list[Decision]) -> None:
    table = {d.sha: d for d in items}
    assert decisions.parse(decisions.render(table), path="d.toml") == table


_scalar = st.one_of(_text, st.integers(), st.booleans(), st.sampled_from(decisions.ALL))
_doc_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(_sha, st.sampled_from(["disposition", "reason", "by", "x"])),
                    inner, max_size=4)), max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["schema", "decisions", "other"]), _doc_value, max_size=3))
def test_parse_random_documents(doc: dict[str, Any]) -> None:
    try:
        decisions.parse(tomli_w.dumps(doc), path="d.toml")
    except SyncError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_random_text(text: str) -> None:
    with contextlib.suppress(SyncError):
        decisions.parse(text, path="d.toml")


# -- cycle.toml ------------------------------------------------------------------------------


def port(tmp: Path) -> Port:
    return Port(tmp, Config())


def test_cycle_round_trip(tmp: Path) -> None:
    p = port(tmp)
    assert cycle.load(p) is None
    saved = cycle.save(p, B, A, "origin/main")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", saved.frozen_at)
    assert saved.target7 == A[:7]
    assert cycle.path(p) == tmp / ".agents/sync/cycle.toml"
    assert cycle.load(p) == saved
    assert cycle.require(p) == saved
    text = cycle.path(p).read_text()
    assert text.startswith("# Frozen target of the current sync cycle")
    assert f'target = "{A}"\n' in text


def test_cycle_require_without_cycle(tmp: Path) -> None:
    with pytest.raises(UsageError, match="no sync cycle is open"):
        cycle.require(port(tmp))


def malformed_cycle(tmp: Path, text: str | bytes) -> str:
    path = tmp / ".agents/sync/cycle.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(MalformedRecord) as exc:
        cycle.load(port(tmp))
    message = str(exc.value)
    assert message.startswith(".agents/sync/cycle.toml:") and "\n" not in message
    return message


def cycle_doc(**kw: Any) -> str:
    doc: dict[str, Any] = {"schema": 1, "pin": B, "target": A, "target_ref": "origin/main",
                           "frozen_at": "2026-01-01T00:00:00Z"}
    doc.update(kw)
    return tomli_w.dumps({k: v for k, v in doc.items() if v is not None})


def test_cycle_malformed(tmp: Path) -> None:
    assert malformed_cycle(tmp, "pin = \n").startswith(
        ".agents/sync/cycle.toml:1: not valid TOML: Invalid value (column 7)")
    assert "is not UTF-8" in malformed_cycle(tmp, b"pin = '\xff'\n")
    assert "nested too deeply" in malformed_cycle(tmp, "a = " + "[" * 5000 + "]" * 5000)
    assert "missing key 'target'" in malformed_cycle(tmp, cycle_doc(target=None))
    assert "missing key 'schema'" in malformed_cycle(tmp, cycle_doc(schema=None))
    assert "schema 2, expected 1" in malformed_cycle(tmp, cycle_doc(schema=2))
    assert "frozen_at must be a string" in malformed_cycle(tmp, cycle_doc(frozen_at=3))
    assert "target 'origin/main' is not a full lowercase SHA" in malformed_cycle(
        tmp, cycle_doc(target="origin/main"))
    assert "pin '--upload-pack' is not a full lowercase SHA" in malformed_cycle(
        tmp, cycle_doc(pin="--upload-pack"))
    path = cycle.path(port(tmp))
    path.unlink()
    path.mkdir()
    with pytest.raises(MalformedRecord, match="cannot read it"):
        cycle.load(port(tmp))
