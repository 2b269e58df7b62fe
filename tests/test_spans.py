from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import pins, spans

COMMIT = "5559679229bc961848b121ccdeaa8fa5d79bec98"
PIN = pins.from_values(COMMIT, "0.23.1rc1.dev1511+g555967922",
                       "0.23.1rc1.dev1511+g555967922.precompiled", "0.6.15.post1")
NEXT = "e24d1b24aa0f7c3e8d5b6a1c2f9e0d4b3a2c1f00"

TEXT = (
    "# Benchmarks\n"
    "\n"
    "The harness accepts the oracle at <!--pin:commit-->555967922<!--/pin--> only, which\n"
    "reports <!--pin:label-->0.23.1rc1.dev1511<!--/pin--> (not the release label), and the\n"
    "golden manifest names <!--pin:commit-->`5559679229bc`<!--/pin--> as its source.\n"
)


def test_scan_text() -> None:
    found = spans.scan_text(TEXT, path="docs/bench.md")
    assert [(s.line, s.kind, s.value) for s in found] == [
        (3, "commit", "555967922"), (4, "label", "0.23.1rc1.dev1511"),
        (5, "commit", "5559679229bc"),
    ]
    assert all(TEXT[s.start:s.end] == s.value for s in found)
    assert found[0].path == Path("docs/bench.md")
    assert spans.problems(found, PIN) == []
    assert spans.marker_problems(TEXT, path="docs/bench.md") == []


def one(text: str) -> list[str]:
    return spans.problems(spans.scan_text(text, path="a.md"), PIN)


def test_commit_span_not_a_prefix() -> None:
    assert one("at <!--pin:commit-->555967923<!--/pin--> today\n") == [
        f"a.md:1: pin commit span 555967923 is not a prefix of vllm_commit {COMMIT}"
    ]


def test_commit_span_too_short() -> None:
    assert one("at <!--pin:commit-->5559679<!--/pin--> today\n") == [
        "a.md:1: pin commit span '5559679' is shorter than 8 characters"
    ]


def test_commit_span_uppercase() -> None:
    assert one("at <!--pin:commit-->55596792ABC<!--/pin--> today\n") == [
        "a.md:1: pin commit span '55596792ABC' is not lowercase hex"
    ]


def test_empty_commit_span() -> None:
    assert one("at <!--pin:commit--><!--/pin--> today\n") == [
        "a.md:1: pin commit span '' is not lowercase hex"
    ]


def test_label_span_differs() -> None:
    assert one("x\nruns <!--pin:label-->0.26.0.dev0<!--/pin--> now\n") == [
        "a.md:2: pin label span '0.26.0.dev0' is not the pin's public version 0.23.1rc1.dev1511"
    ]


@pytest.mark.parametrize("line", [
    "<!--pin:commit-->55596792<!--/pin--> is the pin",
    "  <!--pin:commit-->55596792<!--/pin--> is the pin",
    "- <!--pin:commit-->55596792<!--/pin--> is the pin",
    "> 1. <!--pin:label-->0.23.1rc1.dev1511<!--/pin-->",
])
def test_span_at_line_start(line: str) -> None:
    text = "intro\n" + line + "\n"
    assert spans.marker_problems(text, path="a.md") == [
        "a.md:2: pin marker starts its line — restate the pin inside a sentence, or read it "
        "from the pin block"
    ]
    assert len(spans.scan_text(text, path="a.md")) == 1


def test_unclosed_span() -> None:
    problems = spans.marker_problems("at <!--pin:commit-->55596792 and\n<!--/pin-->\n",
                                     path="a.md")
    assert problems == [
        "a.md:1: pin span opened at column 4 is never closed — add <!--/pin--> on the same line",
        "a.md:2: <!--/pin--> without an opening pin marker — remove it or add "
        "<!--pin:commit--> / <!--pin:label-->",
    ]


def test_opened_twice() -> None:
    text = "a <!--pin:commit-->55596792 b <!--pin:commit-->55596792<!--/pin--> c\n"
    assert spans.marker_problems(text, path="a.md") == [
        "a.md:1: pin span opened at column 3 is never closed — add <!--/pin--> on the same line"
    ]
    assert [s.value for s in spans.scan_text(text, path="a.md")] == ["55596792"]


def test_unknown_kind() -> None:
    text = "at <!--pin:sha-->55596792<!--/pin--> today\n"
    assert spans.marker_problems(text, path="a.md") == [
        "a.md:1: unknown pin span kind 'sha' — use <!--pin:commit--> or <!--pin:label-->"
    ]
    assert spans.scan_text(text, path="a.md") == []


@pytest.mark.parametrize("marker", ["<!-- pin:commit -->", "<!--PIN:commit-->", "<!--pin-->",
                                    "<!-- /pin -->"])
def test_malformed_marker(marker: str) -> None:
    problems = spans.marker_problems(f"at {marker}55596792 today\n", path="a.md")
    assert len(problems) == 1 and "malformed pin marker" in problems[0]


def test_other_comments_are_not_markers() -> None:
    text = "x <!-- pinned elsewhere --> and <!--pinch--> y\n"
    assert spans.marker_problems(text, path="a.md") == []


def test_rewrite_golden() -> None:
    text = TEXT.replace("\n", "\r\n")
    found = spans.scan_text(text, path="a.md")
    out = spans.rewrite(text, found, commit=NEXT, label="0.24.0.dev12")
    assert out == (
        "# Benchmarks\r\n"
        "\r\n"
        "The harness accepts the oracle at <!--pin:commit-->e24d1b24a<!--/pin--> only, which\r\n"
        "reports <!--pin:label-->0.24.0.dev12<!--/pin--> (not the release label), and the\r\n"
        "golden manifest names <!--pin:commit-->`e24d1b24aa0f`<!--/pin--> as its source.\r\n"
    )
    new_pin = pins.from_values(NEXT, "0.24.0.dev12+ge24d1b24a", "0.24.0.dev12+ge24d1b24a",
                               "0.6.16")
    assert spans.problems(spans.scan_text(out, path="a.md"), new_pin) == []


def test_rewrite_unchanged_is_byte_identical() -> None:
    found = spans.scan_text(TEXT, path="a.md")
    assert spans.rewrite(TEXT, found, commit=COMMIT, label=PIN.public_version) == TEXT


def test_rewrite_widens_short_commit_spans_to_8() -> None:
    text = "at <!--pin:commit-->555<!--/pin--> now\n"
    out = spans.rewrite(text, spans.scan_text(text, path="a.md"), commit=NEXT, label="x")
    assert out == "at <!--pin:commit-->e24d1b24<!--/pin--> now\n"


def test_rewrite_refuses_foreign_spans() -> None:
    found = spans.scan_text(TEXT, path="a.md")
    with pytest.raises(UsageError, match="does not belong to this text"):
        spans.rewrite("x" + TEXT, found, commit=NEXT, label="0.24.0")


@pytest.mark.parametrize(("commit", "label"), [(NEXT[:12], "0.24.0"), (NEXT, "a<!--/pin-->"),
                                               (NEXT, "")])
def test_rewrite_refuses_bad_values(commit: str, label: str) -> None:
    with pytest.raises(UsageError):
        spans.rewrite(TEXT, [], commit=commit, label=label)


def test_scan_tree(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/bench.md").write_text(TEXT)
    (tmp_path / "README.md").write_text("pin <!--pin:commit-->deadbeef<!--/pin--> here\n")
    (tmp_path / "notes.txt").write_text("pin <!--pin:commit-->deadbeef<!--/pin--> here\n")
    (tmp_path / "blob.md").write_bytes(b"\xff\xfe<!--pin:commit-->deadbeef<!--/pin-->")
    (tmp_path / "latin1.md").write_bytes(b"caf\xe9 <!--pin:commit-->5559679229<!--/pin-->\n")
    for skipped in (".git", ".nox/env", "node_modules/pkg"):
        (tmp_path / skipped).mkdir(parents=True)
        (tmp_path / skipped / "x.md").write_text("pin <!--pin:commit-->deadbeef<!--/pin-->\n")
    (tmp_path / "link.md").symlink_to(tmp_path / "README.md")
    found = spans.scan(tmp_path, ("**/*.md",))
    # Files that are not UTF-8 are read too: a pin copy in one is still a pin copy.
    assert [(s.path.relative_to(tmp_path).as_posix(), s.value) for s in found] == [
        ("README.md", "deadbeef"), ("blob.md", "deadbeef"), ("latin1.md", "5559679229"),
        ("docs/bench.md", "555967922"), ("docs/bench.md", "0.23.1rc1.dev1511"),
        ("docs/bench.md", "5559679229bc"),
    ]
    assert spans.check(tmp_path, ("**/*.md",), PIN) == [
        f"README.md:1: pin commit span deadbeef is not a prefix of "
        f"vllm_commit {COMMIT}",
        f"blob.md:1: pin commit span deadbeef is not a prefix of vllm_commit {COMMIT}",
    ]
    assert [p.name for p in spans.files(tmp_path, ("docs/*.md", "*.txt"))] == [
        "notes.txt", "bench.md"]


@given(st.binary(), st.sampled_from(["<!--pin:commit-->5559679229<!--/pin-->",
                                     "<!--pin:label-->0.23.1<!--/pin-->"]))
def test_a_file_that_is_not_utf8_has_its_spans_rewritten_and_every_other_byte_kept(
        around: bytes, span: str) -> None:
    data = around + b" " + span.encode() + b" " + around
    text = spans.decode(data)
    assert spans.encode(text) == data
    found = [s for s in spans.scan_text(text, path="a.md") if s.value in span]
    assert found
    out = spans.encode(spans.rewrite(text, found, commit=NEXT, label="0.24.0.dev12"))
    new = "<!--pin:commit-->" + NEXT[:10] if "commit" in span else "<!--pin:label-->0.24.0.dev12"
    assert out.startswith(around + b" " + new.encode() + b"<!--/pin--> ")
    assert out.endswith(b"<!--/pin--> " + around)


def test_scan_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret.md"
    path.write_text("x\n")
    path.chmod(0)
    try:
        if _readable(path):
            pytest.skip("running as a user who can read mode-0 files")
        with pytest.raises(MalformedRecord, match="cannot read"):
            spans.scan(tmp_path, ("**/*.md",))
    finally:
        path.chmod(0o644)


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
    except OSError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_only_raises_sync_errors(text: str) -> None:
    try:
        spans.marker_problems(text, path="a.md")
        spans.problems(spans.scan_text(text, path="a.md"), PIN)
    except SyncError:
        pass


_markup = st.lists(st.sampled_from(["<!--pin:commit-->", "<!--pin:label-->", "<!--/pin-->",
                                    "<!--pin:x-->", "<!-- pin", "5559679229bc", "0.23.1",
                                    "`", " ", "\n", "\r\n", "- ", "x"]), max_size=20)


@settings(max_examples=300, deadline=None)
@given(_markup)
def test_random_markup_rewrites_cleanly(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = spans.scan_text(text, path="a.md")
    spans.marker_problems(text, path="a.md")
    out = spans.rewrite(text, found, commit=NEXT, label="0.24.0.dev12")
    again = spans.scan_text(out, path="a.md")
    assert [(s.line, s.kind) for s in again] == [(s.line, s.kind) for s in found]
    assert all(s.value in ("0.24.0.dev12", NEXT[: len(s.value)]) for s in again)
