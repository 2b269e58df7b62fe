from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync.infra.atomic import write_text
from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import oraclefile, pins

COMMIT = "5559679229bc961848b121ccdeaa8fa5d79bec98"
PIN = pins.from_values(COMMIT, "0.23.1rc1.dev1511+g555967922",
                       "0.23.1rc1.dev1511+g555967922.precompiled", "0.6.15.post1")
NEXT = "e24d1b24aa0f7c3e8d5b6a1c2f9e0d4b3a2c1f00"

VALUES = {
    "id": "vllm",
    "role": "core oracle: goldens and parity suites",
    "upstream": "https://github.com/vllm-project/vllm",
    "scope": "T0 surface",
    "pin": COMMIT,
    "pin_label": "0.23.1rc1.dev1511",
    "pinned_on": "2026-07-26",
    "gateable": "yes",
    "evidence": "goldens/manifest.json",
}


def doc(**over: str | None) -> str:
    values: dict[str, str | None] = {**VALUES, **over}
    lines = "".join(f"{k} = {v}\n" for k, v in values.items() if v is not None)
    return ("# vLLM (core) oracle\n\nThe one place this oracle's revision is recorded.\n\n"
            "```oracle-pin\n" + lines + "```\n\nBuilt from the reference checkout.\n")


@pytest.fixture
def port(tmp_path: Path) -> Path:
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens/manifest.json").write_text("{}\n")
    (tmp_path / ".agents/oracles").mkdir(parents=True)
    return tmp_path


def refused(text: str, port: Path, name: str = "vllm.md") -> MalformedRecord:
    path = port / ".agents/oracles" / name
    with pytest.raises(MalformedRecord) as info:
        oraclefile.parse(text, path=path, port_root=port)
    message = str(info.value)
    assert "\n" not in message and " — " in message
    assert message.startswith(f"{path}:")
    return info.value


def write(port: Path, text: str, name: str = "vllm.md") -> Path:
    path = port / ".agents/oracles" / name
    write_text(path, text)
    return path


def test_parse_core(port: Path) -> None:
    of = oraclefile.load(write(port, doc()), port)
    assert (of.id, of.pin, of.pin_label, of.pinned_on, of.gateable, of.evidence) == (
        "vllm", COMMIT, "0.23.1rc1.dev1511", "2026-07-26", True, "goldens/manifest.json")
    assert not of.unpinned
    assert oraclefile.agreement(of, PIN) == []


def test_omni_with_version_pin_and_no_gate(port: Path) -> None:
    text = doc(id="vllm-omni", pin="0.3.0.dev267", pin_label="0.3.0.dev267", gateable="no",
               evidence="-")
    of = oraclefile.load(write(port, text, "vllm-omni.md"), port)
    assert of.pin == "0.3.0.dev267" and not of.gateable


def test_unpinned(port: Path) -> None:
    text = doc(id="sglang", pin="UNPINNED", pin_label="-", pinned_on="-", gateable="no",
               evidence="")
    of = oraclefile.parse(text, path=port / ".agents/oracles/sglang.md", port_root=port)
    assert of.unpinned and of.evidence == ""


def test_load_all(port: Path) -> None:
    a = write(port, doc())
    b = write(port, doc(id="vllm-omni", pin="0.3.0.dev267", gateable="no", evidence="-"),
              "vllm-omni.md")
    files = oraclefile.load_all([a, b], port)
    assert [o.id for o in files] == ["vllm", "vllm-omni"]
    assert oraclefile.core(files) is files[0]
    assert oraclefile.core(files[1:]) is None


def test_load_all_refuses_a_repeated_id(port: Path) -> None:
    a = write(port, doc())
    (port / "other").mkdir()
    b = port / "other/vllm.md"
    write_text(b, doc())
    with pytest.raises(MalformedRecord, match="oracle id 'vllm' is also declared in"):
        oraclefile.load_all([a, b], port)


def test_missing_file(port: Path) -> None:
    with pytest.raises(MalformedRecord, match="oracle file is missing — restore it"):
        oraclefile.load(port / ".agents/oracles/vllm.md", port)


def test_no_block(port: Path) -> None:
    assert "found 0" in str(refused("# vLLM\n", port).message)


def test_two_blocks(port: Path) -> None:
    assert "found 2" in str(refused(doc() + doc(), port))


def test_missing_key(port: Path) -> None:
    err = refused(doc(pin_label=None), port)
    assert "missing key 'pin_label' in ```oracle-pin" in str(err) and err.line == 5


def test_unknown_key(port: Path) -> None:
    assert "unknown key 'commit'" in str(refused(doc() .replace("pin =", "commit = x\npin ="),
                                                 port))


def test_duplicate_key(port: Path) -> None:
    assert "duplicate key 'scope'" in str(refused(doc().replace("pin =", "scope = x\npin ="),
                                                  port))


def test_empty_value(port: Path) -> None:
    err = refused(doc(role=""), port)
    assert "role is empty" in str(err) and err.line == 7


def test_id_must_match_the_file_name(port: Path) -> None:
    err = refused(doc(id="vllm-core"), port)
    assert "id = 'vllm-core' does not match the file name vllm.md" in str(err)


@pytest.mark.parametrize("pin", [COMMIT[:12], COMMIT.upper(), "unpinned", "main"])
def test_bad_pin(port: Path, pin: str) -> None:
    assert "is neither 40 lowercase hex, a version, nor UNPINNED" in str(refused(doc(pin=pin),
                                                                                port))


def test_dash_date_needs_unpinned(port: Path) -> None:
    assert "pinned_on = '-' is not an ISO date" in str(refused(doc(pinned_on="-"), port))


def test_bad_date(port: Path) -> None:
    assert "pinned_on = '2026-13-01'" in str(refused(doc(pinned_on="2026-13-01"), port))


def test_gateable_not_yes_or_no(port: Path) -> None:
    assert "gateable = 'true' is not yes or no" in str(refused(doc(gateable="true"), port))


@pytest.mark.parametrize("evidence", ["", "-"])
def test_gateable_yes_without_evidence(port: Path, evidence: str) -> None:
    err = refused(doc(evidence=evidence), port)
    assert "gateable = yes but no evidence path is given" in str(err)


def test_gateable_yes_with_missing_evidence(port: Path) -> None:
    err = refused(doc(evidence="goldens/absent.json"), port)
    assert "evidence 'goldens/absent.json' does not exist" in str(err) and err.line == 14


@pytest.mark.parametrize("evidence", ["/etc/passwd", "../outside.json", "a\\b"])
def test_evidence_escaping_the_port(port: Path, evidence: str) -> None:
    assert "escapes the port" in str(refused(doc(evidence=evidence), port))


def test_agreement_compares_the_pin_never_the_label(port: Path) -> None:
    # pin_label is the revision's human name (the real registry: 0.26.0.dev0, v0.5.15, b9892).
    of = oraclefile.load(write(port, doc(pin=NEXT, pin_label="0.26.0.dev0")), port)
    assert oraclefile.agreement(of, PIN) == [
        f"{of.path}:10: pin = {NEXT} but the pin block's vllm_commit is {COMMIT}"]
    ok = oraclefile.load(write(port, doc(pin_label="0.26.0.dev0")), port)
    assert oraclefile.agreement(ok, PIN) == []


STRICT = {"role": "primary", "gateable": "no", "evidence": "#633 (no gate host yet)"}


def lint(port: Path, name: str = "vllm.md", **over: str | None) -> list[str]:
    path = write(port, doc(**{**STRICT, **over}), name)
    out = []
    for e in oraclefile.lint(path, port):
        text = str(e)
        assert "\n" not in text and " — " in text and text.startswith(f"{path}:")
        out.append(text[len(str(path)) + 1:])
    return out


def test_lint_accepts_the_port_rules(port: Path) -> None:
    assert lint(port) == []
    assert lint(port, gateable="yes", evidence="goldens/manifest.json") == []
    assert lint(port, "llama.cpp.md", id="llama.cpp", role="secondary", pin="UNPINNED",
                pin_label="b9892") == []


def test_lint_refuses_what_the_port_checker_refuses(port: Path) -> None:
    # The real registry's failure shapes (findings §5.2): each is named, all at once.
    assert lint(port, "llama.cpp.md", id="llama.cpp", role="advisory", pin="UNPINNED",
                pinned_on="-", evidence="soon") == [
        "7: role = 'advisory' is not primary or secondary — write primary (the oracle the "
        "port is gated on) or secondary",
        "12: pinned_on = '-' is not an ISO date — write the date the pin was recorded, as "
        "YYYY-MM-DD",
        "14: gateable = no but evidence = 'soon' names no issue — name the issue that owes "
        "the gate, as #N"]
    assert lint(port, "sglang.md", id="sglang", pin="UNPINNED", gateable="yes",
                evidence="goldens/manifest.json") == [
        "10: gateable = yes but pin = UNPINNED — pin the oracle before gating on it, or set "
        "gateable = no"]
    assert lint(port, gateable="yes", evidence="#12") == [
        "14: gateable = yes but no evidence path is given — name the file (relative to the "
        "port root) that shows the gate works"]
    assert lint(port, scope="", evidence="") == [
        "9: scope is empty — give it a value", "14: evidence is empty — give it a value"]
    assert lint(port, extra="x")[0].startswith("15: unknown key 'extra' in ```oracle-pin")


def test_loading_for_use_is_lenient_where_check_is_not(port: Path) -> None:
    # A build or a probe needs the pin, not the record's paperwork.
    path = write(port, doc(role="core", evidence="-", gateable="no"))
    assert oraclefile.load(path, port).id == "vllm"
    assert next(str(e).split(": ", 1)[1] for e in oraclefile.lint(path, port)).startswith(
        "role = 'core' is not primary or secondary")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_render_unchanged_is_byte_identical(port: Path, newline: str) -> None:
    text = doc().replace("\n", newline)
    of = oraclefile.load(write(port, text), port)
    assert oraclefile.render(of) == text
    assert oraclefile.render(of, pin=COMMIT, gateable="yes") == text


def test_render_golden(port: Path) -> None:
    text = doc().replace("\n", "\r\n")
    of = oraclefile.load(write(port, text), port)
    out = oraclefile.render(of, pin=NEXT, pin_label="0.24.0.dev12", pinned_on="2026-08-14")
    assert out == doc(pin=NEXT, pin_label="0.24.0.dev12", pinned_on="2026-08-14").replace(
        "\n", "\r\n")


def test_render_clears_evidence(port: Path) -> None:
    of = oraclefile.load(write(port, doc()), port)
    out = oraclefile.render(of, gateable="no", evidence="")
    assert "gateable = no\nevidence =\n```" in out


@pytest.mark.parametrize(("changes", "what"), [
    ({"commit": NEXT}, "has no key 'commit'"),
    ({"gateable": "maybe"}, "gateable = 'maybe' is not yes or no"),
    ({"id": "other"}, "does not match the file name"),
    ({"pin": NEXT + "\nextra = 1"}, "must be one line"),
])
def test_render_refuses(port: Path, changes: dict[str, str], what: str) -> None:
    of = oraclefile.load(write(port, doc()), port)
    with pytest.raises(UsageError, match=what):
        oraclefile.render(of, **changes)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text())
def test_random_text_only_raises_sync_errors(port: Path, text: str) -> None:
    with contextlib.suppress(SyncError):
        oraclefile.parse(text, path=port / ".agents/oracles/vllm.md", port_root=port)


_value = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries({k: _value for k in ("pin", "pinned_on", "gateable", "evidence",
                                                   "pin_label")}))
def test_random_values_only_raise_sync_errors(port: Path, over: dict[str, str]) -> None:
    path = port / ".agents/oracles/vllm.md"
    try:
        of = oraclefile.parse(doc(**over), path=path, port_root=port)
    except SyncError:
        return
    assert oraclefile.render(of) == of.text
