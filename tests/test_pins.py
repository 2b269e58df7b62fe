from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

import endings
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sync.infra.atomic import read_text, write_text
from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import pins

COMMIT = "5559679229bc961848b121ccdeaa8fa5d79bec98"
RUNTIME = "0.23.1rc1.dev1511+g555967922"
DIST = "0.23.1rc1.dev1511+g555967922.precompiled"
FLASHINFER = "0.6.15.post1"
NEXT = "e24d1b24aa0f7c3e8d5b6a1c2f9e0d4b3a2c1f00"

HEAD = (
    "# Upstream sync protocol\n"
    "\n"
    "Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0 + "
    "transformers 5.14.1, Torch 2.13.0), FLIPPED from the prior e24d1b24/0.25.0 pin.\n"
    "\n"
    "The pin, as a running oracle reports itself.\n"
    "\n"
)
TAIL = "\nvllm_runtime_version must carry a +g<sha> segment naming vllm_commit.\n"


def body(**over: str | None) -> str:
    values: dict[str, str | None] = {
        "vllm_commit": COMMIT,
        "vllm_runtime_version": RUNTIME,
        "vllm_distribution_version": DIST,
        "flashinfer_version": FLASHINFER,
        "vllm_commit_id": None,
    }
    values.update(over)
    return "".join(f"{k} = {v}\n" for k, v in values.items() if v is not None)


def doc(**over: str | None) -> str:
    return HEAD + "```parity-pin\n" + body(**over) + "```\n" + TAIL


def refused(text: str) -> MalformedRecord:
    with pytest.raises(MalformedRecord) as info:
        pins.parse(text, path=".agents/upstream-sync.md")
    message = str(info.value)
    assert "\n" not in message and " — " in message
    assert message.startswith(".agents/upstream-sync.md:")
    return info.value


# -- the good sample ------------------------------------------------------------------------


def test_parse_real_values() -> None:
    pin, block = pins.parse(doc(), path="p.md")
    assert pin == pins.Pin(COMMIT, RUNTIME, DIST, FLASHINFER, "precompiled")
    assert pin.public_version == "0.23.1rc1.dev1511"
    assert pin.short_sha == "555967922"
    assert pin.fields() == {
        "vllm_commit": COMMIT, "vllm_runtime_version": RUNTIME,
        "vllm_distribution_version": DIST, "flashinfer_version": FLASHINFER,
    }
    assert block.open_line == 7
    assert [e.line for e in block.entries] == [8, 9, 10, 11]


def test_distribution_equal_to_runtime_has_no_suffix() -> None:
    pin, _ = pins.parse(doc(vllm_distribution_version=RUNTIME), path="p.md")
    assert pin.build_suffix is None


def test_full_sha_in_runtime_is_accepted() -> None:
    runtime = f"0.23.1rc1.dev1511+g{COMMIT}"
    pin, _ = pins.parse(doc(vllm_runtime_version=runtime,
                            vllm_distribution_version=runtime + ".cu130.precompiled"),
                        path="p.md")
    assert pin.short_sha == COMMIT
    assert pin.build_suffix == "cu130.precompiled"


def test_validate_runtime_returns_the_prefix() -> None:
    assert pins.validate_runtime(RUNTIME, COMMIT) == "555967922"


def test_split_distribution() -> None:
    assert pins.split_distribution(DIST, RUNTIME) == "precompiled"
    assert pins.split_distribution(RUNTIME, RUNTIME) is None


def test_load(tmp_path: Path) -> None:
    path = tmp_path / "upstream-sync.md"
    write_text(path, doc())
    record = pins.load(path)
    assert record.pin.commit == COMMIT
    assert record.path == path
    assert record.text == doc()


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MalformedRecord) as info:
        pins.load(tmp_path / ".agents/upstream-sync.md")
    assert "missing" in str(info.value) and " — restore it" in str(info.value)


def test_load_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "upstream-sync.md"
    path.write_bytes(b"\xff\xfe" + doc().encode())
    with pytest.raises(MalformedRecord, match="not UTF-8"):
        pins.load(path)


# -- one test per refusal -------------------------------------------------------------------


def test_no_block() -> None:
    with pytest.raises(MalformedRecord, match=r"expected exactly one ```parity-pin block, found 0"):
        pins.parse(HEAD + TAIL, path="p.md")


def test_two_blocks() -> None:
    text = doc() + "```parity-pin\n" + body() + "```\n"
    with pytest.raises(MalformedRecord, match=r"found 2 \(lines 7, 15\)"):
        pins.parse(text, path="p.md")


def test_unknown_key() -> None:
    text = doc().replace("flashinfer_version", "torch_version = 2.13.0\nflashinfer_version")
    assert "unknown key 'torch_version'" in str(refused(text))


def test_duplicate_key() -> None:
    text = doc().replace("flashinfer_version", f"vllm_commit = {COMMIT}\nflashinfer_version")
    err = refused(text)
    assert "duplicate key 'vllm_commit' (first on line 8)" in str(err)
    assert err.line == 11


def test_missing_key() -> None:
    err = refused(doc(flashinfer_version=None))
    assert "missing key 'flashinfer_version'" in str(err)
    assert err.line == 7


def test_malformed_line() -> None:
    err = refused(doc().replace(f"vllm_commit = {COMMIT}", f"vllm_commit {COMMIT}"))
    assert "malformed line" in str(err) and err.line == 8


def test_short_commit() -> None:
    err = refused(doc(vllm_commit=COMMIT[:12]))
    assert "is not 40 lowercase hex" in str(err) and err.line == 8


def test_uppercase_commit() -> None:
    assert "is not 40 lowercase hex" in str(refused(doc(vllm_commit=COMMIT.upper())))


def test_released_runtime_version_without_a_commit_id() -> None:
    err = refused(doc(vllm_runtime_version="0.26.0", vllm_distribution_version="0.26.0"))
    message = str(err)
    assert "a released version names no commit, so it is a pin only with vllm_commit_id" \
        in message
    assert "add 'vllm_commit_id = g<sha>' to the block" in message
    assert err.line == 9


def test_release_pin_with_its_commit_id() -> None:
    """A pin at a release tag: the commit id (the runtime's __commit_id__) names the commit."""
    text = doc(vllm_runtime_version="0.25.0", vllm_distribution_version="0.25.0+empty",
               vllm_commit_id="g555967922")
    pin, _ = pins.parse(text, path="p.md")
    assert (pin.released, pin.build_suffix, pin.commit_id, pin.short_sha) == (
        True, "empty", "g555967922", "555967922")
    assert pin.fields()["vllm_commit_id"] == "g555967922"
    assert pins.from_values(COMMIT, "0.25.0", "0.25.0+empty", FLASHINFER,
                            commit_id="g555967922") == pin


@pytest.mark.parametrize(("commit_id", "says"), [
    ("g555967923", "vllm_commit_id names g555967923, which is not a prefix of vllm_commit"),
    ("555967922", "vllm_commit_id = '555967922' is not g<7..40 lowercase hex>"),
    ("g55596", "is not g<7..40 lowercase hex>"),
])
def test_commit_id_refused(commit_id: str, says: str) -> None:
    err = refused(doc(vllm_runtime_version="0.25.0", vllm_distribution_version="0.25.0",
                      vllm_commit_id=commit_id))
    assert says in str(err) and err.line == 12


def test_commit_id_beside_a_source_version_must_agree() -> None:
    pin, _ = pins.parse(doc(vllm_commit_id="g5559679229"), path="p.md")
    assert pin.commit_id == "g5559679229" and not pin.released
    runtime = f"0.23.1rc1.dev1511+g{COMMIT[:12]}"
    err = refused(doc(vllm_runtime_version=runtime, vllm_distribution_version=runtime,
                      vllm_commit_id="g5559679228"))
    assert "not a prefix of vllm_commit" in str(err)


def test_runtime_sha_not_a_prefix() -> None:
    err = refused(doc(vllm_runtime_version="0.23.1rc1.dev1511+g555967923",
                      vllm_distribution_version="0.23.1rc1.dev1511+g555967923"))
    assert "g555967923, which is not a prefix of vllm_commit" in str(err)


def test_runtime_prefix_shorter_than_7() -> None:
    err = refused(doc(vllm_runtime_version="0.23.1rc1.dev1511+g555967",
                      vllm_distribution_version="0.23.1rc1.dev1511+g555967"))
    assert "'555967' is shorter than 7 characters" in str(err)


def test_runtime_local_segment_not_a_sha() -> None:
    err = refused(doc(vllm_runtime_version="0.23.1rc1.dev1511+cu130"))
    assert "local segment 'cu130' is not exactly g<7..40 lowercase hex>" in str(err)


def test_runtime_uppercase_sha() -> None:
    err = refused(doc(vllm_runtime_version="0.23.1rc1.dev1511+G555967922"))
    assert "is not exactly g<7..40 lowercase hex>" in str(err)


def test_runtime_not_a_version() -> None:
    err = refused(doc(vllm_runtime_version="nightly+g555967922"))
    assert "is not a version packaging can parse" in str(err)


def test_runtime_not_canonical() -> None:
    err = refused(doc(vllm_runtime_version="v0.23.1rc1.dev1511+g555967922"))
    assert "is not in canonical form (0.23.1rc1.dev1511+g555967922)" in str(err)


def test_shallow_clone_version_is_refused() -> None:
    # A shallow clone yields 0.1.dev1+g<sha>: the right sha, but setuptools-scm saw no tag.
    err = refused(doc(vllm_runtime_version="0.1.dev1+g555967922",
                      vllm_distribution_version="0.1.dev1+g555967922.empty"))
    assert "has the shape of a shallow-clone build (0.1.devN: setuptools-scm saw no tag)" \
        in str(err) and err.line == 9


def test_distribution_public_part_differs() -> None:
    err = refused(doc(vllm_distribution_version="0.26.0.dev0+g555967922.precompiled"))
    assert "public part '0.26.0.dev0' differs" in str(err) and err.line == 10


def test_distribution_local_segment_differs() -> None:
    err = refused(doc(vllm_distribution_version="0.23.1rc1.dev1511+g5559679.precompiled"))
    assert "is not the runtime's 'g555967922' optionally followed by" in str(err)


def test_distribution_without_local_segment() -> None:
    err = refused(doc(vllm_distribution_version="0.23.1rc1.dev1511"))
    assert "local segment '' is not the runtime's" in str(err)


def test_distribution_not_canonical() -> None:
    err = refused(doc(vllm_distribution_version="0.23.1rc1.dev1511+g555967922-precompiled"))
    assert "is not the runtime's" in str(err)


def test_flashinfer_not_a_version() -> None:
    err = refused(doc(flashinfer_version="latest"))
    assert "flashinfer_version = 'latest' is not a version" in str(err) and err.line == 11


# -- rendering ------------------------------------------------------------------------------


def record_of(text: str, tmp_path: Path) -> pins.PinRecord:
    path = tmp_path / "upstream-sync.md"
    write_text(path, text)
    return pins.load(path)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_render_unchanged_is_byte_identical(tmp_path: Path, newline: str) -> None:
    text = doc().replace("\n", newline)
    record = record_of(text, tmp_path)
    assert read_text(record.path) == text
    assert pins.render(record, record.pin) == text


def test_render_golden(tmp_path: Path) -> None:
    text = doc().replace("```parity-pin\n", "```parity-pin\n# measured on dgx\n\n")
    text = text.replace(f"vllm_commit = {COMMIT}", f"vllm_commit   =   {COMMIT}  ")
    record = record_of(text.replace("\n", "\r\n"), tmp_path)
    new = pins.from_values(NEXT, "0.24.0.dev12+ge24d1b24a", "0.24.0.dev12+ge24d1b24a",
                           "0.6.16")
    out = pins.render(record, new)
    expected = (
        HEAD
        + "```parity-pin\n# measured on dgx\n\n"
        + f"vllm_commit   =   {NEXT}  \n"
        + "vllm_runtime_version = 0.24.0.dev12+ge24d1b24a\n"
        + "vllm_distribution_version = 0.24.0.dev12+ge24d1b24a\n"
        + "flashinfer_version = 0.6.16\n"
        + "```\n"
        + TAIL
    ).replace("\n", "\r\n")
    assert out == expected
    again, _ = pins.parse(out, path="p.md")
    assert again == new and again.build_suffix is None


def test_render_one_value_keeps_the_rest(tmp_path: Path) -> None:
    record = record_of(doc(), tmp_path)
    out = pins.render(record, replace(record.pin, flashinfer_version="0.6.16"))
    assert out == doc(flashinfer_version="0.6.16")


def test_render_refuses_an_invalid_pin(tmp_path: Path) -> None:
    record = record_of(doc(), tmp_path)
    with pytest.raises(UsageError, match="refusing to write an invalid pin"):
        pins.render(record, replace(record.pin, commit=NEXT))


def test_render_refuses_a_wrong_suffix(tmp_path: Path) -> None:
    record = record_of(doc(), tmp_path)
    with pytest.raises(UsageError, match="reads back as"):
        pins.render(record, replace(record.pin, build_suffix=None))


def test_render_refuses_multiline_values(tmp_path: Path) -> None:
    record = record_of(doc(), tmp_path)
    with pytest.raises(UsageError, match="must be one line"):
        pins.render(record, replace(record.pin, flashinfer_version="0.6.16\nextra = 1"))


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_render_adds_the_commit_id_line_and_never_drops_it(tmp_path: Path, newline: str
                                                            ) -> None:
    record = record_of(doc().replace("\n", newline), tmp_path)
    release = pins.from_values(NEXT, "0.24.0", "0.24.0+precompiled", FLASHINFER,
                               commit_id="ge24d1b24a")
    out = pins.render(record, release)
    assert out == doc(vllm_commit=NEXT, vllm_runtime_version="0.24.0",
                      vllm_distribution_version="0.24.0+precompiled",
                      vllm_commit_id="ge24d1b24a").replace("\n", newline)
    again = record_of(out, tmp_path)
    source = pins.from_values(COMMIT, RUNTIME, DIST, FLASHINFER)
    with pytest.raises(UsageError, match="refusing to drop vllm_commit_id"):
        pins.render(again, source)
    assert pins.render(again, source, restore=True) == doc().replace("\n", newline)


@settings(max_examples=300, deadline=None)
@example(ends=["\n"] * 10 + ["\r"] + ["\n"] * 3)  # the last entry's line ends in a lone CR
@given(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(doc().splitlines()),
                max_size=len(doc().splitlines())))
def test_adding_the_commit_id_on_mixed_line_endings_keeps_bytes_and_doubles_no_cr(
        ends: list[str]) -> None:
    """Any mix of LF, CRLF and lone CR: the commit id's line goes in one place, every old
    byte kept, no CR CR LF added, ending in the file's dominant line ending, and after a
    lone CR only the LF that makes it CRLF (a copied CR ended the new line with no line
    break to git: the new line, the last entry's and the fence's read as one)."""
    text = "".join(line + end for line, end in zip(doc().splitlines(), ends, strict=True))
    pin, block = pins.parse(text, path="p.md")
    with_id = pins.from_values(COMMIT, RUNTIME, DIST, FLASHINFER, commit_id="g555967922")
    new = pins.render(pins.PinRecord(pin, Path("p.md"), text, block), with_id)
    at = new.index("vllm_commit_id = ")
    if new[:at] != text[:at]:
        at -= 1  # the LF added after a lone CR
    added = new[at: len(new) - (len(text) - at)]
    assert new == text[:at] + added + text[at:]
    assert added.removeprefix("\n" if text[:at].endswith("\r") else "") == (
        "vllm_commit_id = g555967922" + endings.dominant(text))
    assert new.count("\r\r\n") == text.count("\r\r\n")


def test_set_values_fills_an_empty_value() -> None:
    text = "```b\na =\nb = 2\n```\n"
    from sync.records import blocks
    block = blocks.exactly_one(text, "b", path="x")
    assert pins.set_values(text, block, {"a": "1"}, path="x") == "```b\na = 1\nb = 2\n```\n"
    assert pins.set_values(text, block, {"b": ""}, path="x") == "```b\na =\nb =\n```\n"


# -- fuzzing --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_only_raises_sync_errors(text: str) -> None:
    with contextlib.suppress(SyncError):
        pins.parse(text, path="p.md")


_piece = st.text(alphabet=st.sampled_from("0123456789abcdefgG.+-_ rcdevpost!\r\n=#"),
                 max_size=50)


@settings(max_examples=300, deadline=None)
@given(_piece, _piece, _piece, _piece)
def test_random_values_only_raise_sync_errors(a: str, b: str, c: str, d: str) -> None:
    text = doc(vllm_commit=a, vllm_runtime_version=b, vllm_distribution_version=c,
               flashinfer_version=d)
    try:
        pin, _ = pins.parse(text, path="p.md")
    except SyncError:
        return
    assert pins.validate_runtime(pin.runtime_version, pin.commit).startswith(pin.short_sha[:7])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789abcdefg.+rcdev"), max_size=30))
def test_random_runtime_suffixes(local: str) -> None:
    runtime = f"0.23.1rc1.dev1511+{local}"
    try:
        sha = pins.validate_runtime(runtime, COMMIT)
    except SyncError:
        return
    assert COMMIT.startswith(sha) and len(sha) >= 7
