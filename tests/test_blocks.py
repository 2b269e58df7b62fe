from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord, SyncError
from sync.records import blocks
from sync.records.blocks import KeyValue

DOC = (
    "# Protocol\n"
    "\n"
    "PARITY PIN: see below.\n"
    "\n"
    "```parity-pin\n"
    "vllm_commit = 5559679229bc961848b121ccdeaa8fa5d79bec98\n"
    "# a comment line\n"
    "\n"
    "flashinfer_version =   0.6.15.post1  \n"
    "note = a = b\n"
    "```\n"
    "\n"
    "    ```parity-pin\n"
    "    indented: not a block\n"
    "```python\n"
    "x = 1\n"
    "```\n"
    "trailing prose\n"
)


def test_find_entries_and_offsets() -> None:
    [block] = blocks.find(DOC, "parity-pin", path="p.md")
    assert block.info == "parity-pin"
    assert block.entries == (
        KeyValue("vllm_commit", "5559679229bc961848b121ccdeaa8fa5d79bec98", 6),
        KeyValue("flashinfer_version", "0.6.15.post1", 9),
        KeyValue("note", "a = b", 10),
    )
    assert block.open_line == 5 and block.newline == "\n"
    assert DOC[block.start:].startswith("vllm_commit = ")
    assert DOC[block.end:].startswith("```\n\n    ```parity-pin")
    assert block.as_dict()["note"] == "a = b"
    assert blocks.find(DOC, "python", path="p.md")[0].entries == (KeyValue("x", "1", 16),)
    assert blocks.find(DOC, "oracle-pin", path="p.md") == []


def test_info_must_match_exactly() -> None:
    text = "```parity-pin-old\na = 1\n```\n``` parity-pin \nb = 2\n```\n"
    [block] = blocks.find(text, "parity-pin", path="p.md")
    assert block.entries == (KeyValue("b", "2", 5),)


def test_empty_block() -> None:
    [block] = blocks.find("```parity-pin\n```\n", "parity-pin", path="p.md")
    assert block.entries == () and block.start == block.end == len("```parity-pin\n")


def test_unclosed_fence() -> None:
    with pytest.raises(MalformedRecord) as exc:
        blocks.find("x\n```parity-pin\na = 1\n", "parity-pin", path="p.md")
    assert str(exc.value) == "p.md:2: ```parity-pin block is never closed — add the closing ```"


@pytest.mark.parametrize(("line", "expect"), [
    ("just words", "p.md:2: malformed line 'just words' (expected 'key = value')"),
    ("Key = 1", "p.md:2: malformed key 'Key'"),
    ("= 1", "p.md:2: malformed key ''"),
    ("two words = 1", "p.md:2: malformed key 'two words'"),
])
def test_malformed_lines(line: str, expect: str) -> None:
    with pytest.raises(MalformedRecord) as exc:
        blocks.find(f"```parity-pin\n{line}\n```\n", "parity-pin", path="p.md")
    assert str(exc.value).startswith(expect)


def test_exactly_one() -> None:
    one = "```parity-pin\na = 1\n```\n"
    assert blocks.exactly_one(one, "parity-pin", path="p.md").as_dict() == {"a": "1"}
    with pytest.raises(MalformedRecord) as exc:
        blocks.exactly_one("prose\n", "parity-pin", path="p.md")
    assert str(exc.value) == ("p.md: expected exactly one ```parity-pin block, found 0 — "
                              "keep exactly one ```parity-pin block")
    with pytest.raises(MalformedRecord) as exc:
        blocks.exactly_one(one + "\n" + one, "parity-pin", path="p.md")
    assert str(exc.value).startswith(
        "p.md:5: expected exactly one ```parity-pin block, found 2 (lines 1, 5)")


def test_check_keys() -> None:
    def block(body: str) -> blocks.Block:
        return blocks.exactly_one(f"```k\n{body}```\n", "k", path="k.md")

    assert blocks.check_keys(block("a = 1\nc = 3\n"), ("a",), optional=("c", "d"),
                             path="k.md") == {"a": "1", "c": "3"}
    with pytest.raises(MalformedRecord) as exc:
        blocks.check_keys(block("a = 1\na = 2\n"), ("a",), path="k.md")
    assert str(exc.value) == "k.md:3: duplicate key 'a' (first on line 2) — keep one"
    with pytest.raises(MalformedRecord) as exc:
        blocks.check_keys(block("a = 1\nz = 2\n"), ("a",), optional=("c",), path="k.md")
    assert str(exc.value) == "k.md:3: unknown key 'z' in ```k — allowed keys: a, c"
    with pytest.raises(MalformedRecord) as exc:
        blocks.check_keys(block("a = 1\n"), ("a", "b"), path="k.md")
    assert str(exc.value) == "k.md:1: missing key 'b' in ```k — add it"


def test_replace_body_keeps_every_other_byte() -> None:
    [block] = blocks.find(DOC, "parity-pin", path="p.md")
    new = blocks.replace_body(DOC, block, [("vllm_commit", "e" * 40), ("b", "2")])
    head, tail = DOC[:block.start], DOC[block.end:]
    assert new == head + f"vllm_commit = {'e' * 40}\nb = 2\n" + tail


def test_replace_body_crlf() -> None:
    text = ("Intro line\r\n\r\n```parity-pin\r\nvllm_commit = abc\r\nold = 1\r\n```\r\n"
            "after\r\nlone LF line\nend")
    [block] = blocks.find(text, "parity-pin", path="p.md")
    assert block.newline == "\r\n"
    assert block.entries == (KeyValue("vllm_commit", "abc", 4), KeyValue("old", "1", 5))
    new = blocks.replace_body(text, block, [("vllm_commit", "def"), ("new", "2")])
    assert new == ("Intro line\r\n\r\n```parity-pin\r\nvllm_commit = def\r\nnew = 2\r\n```\r\n"
                   "after\r\nlone LF line\nend")
    # Rendering the parsed entries back gives the same bytes.
    again = blocks.replace_body(text, block, [(e.key, e.value) for e in block.entries])
    assert again == text


def test_render_body() -> None:
    assert blocks.render_body([("a", "1"), ("b", "x y")], "\r\n") == "a = 1\r\nb = x y\r\n"
    assert blocks.render_body([], "\n") == ""


# -- property tests --------------------------------------------------------------------------

_key = st.builds(str.__add__, st.sampled_from(string.ascii_lowercase),
                 st.text(string.ascii_lowercase + string.digits + "_", max_size=10))
_value = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                 max_size=20).map(str.strip)
_prose = st.text(st.characters(codec="utf-8", exclude_characters="`"),
                 max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30),
                          st.sampled_from(["```", "```k", "``` k", "a = 1", "#", "x"])),
                max_size=12),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_find_gives_only_sync_errors(lines: list[str], nl: str) -> None:
    text = nl.join(lines)
    try:
        found = blocks.find(text, "k", path="p.md")
    except SyncError as exc:
        assert "\n" not in str(exc)
        return
    for b in found:
        assert 0 <= b.start <= b.end <= len(text)
        new = blocks.replace_body(text, b, [("z", "1")])
        assert new[:b.start] == text[:b.start] and new[b.start:].endswith(text[b.end:])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["```k", "```", "a = 1", "b = x y", "# c", "", "prose"]),
                max_size=10), st.sampled_from(["\n", "\r\n"]))
def test_a_bom_before_a_fence_on_line_1_is_no_part_of_it(lines: list[str], nl: str) -> None:
    """An oracle or protocol file that opens with its block, saved with a BOM: the fence
    read as '\ufeff```k', and the block as missing. It reads as without the BOM, and a
    rewrite keeps the BOM."""
    text = nl.join(lines)
    try:
        plain = blocks.find(text, "k", path="p.md")
    except SyncError as exc:
        with pytest.raises(SyncError) as again:
            blocks.find("\ufeff" + text, "k", path="p.md")
        assert str(again.value) == str(exc)
        return
    bom = blocks.find("\ufeff" + text, "k", path="p.md")
    assert [(b.entries, b.open_line, b.start + 1, b.end + 1) for b in plain] == [
        (b.entries, b.open_line, b.start, b.end) for b in bom]
    for p, b in zip(plain, bom, strict=True):
        assert blocks.replace_body("\ufeff" + text, b, [("z", "1")]) == (
            "\ufeff" + blocks.replace_body(text, p, [("z", "1")]))


@settings(max_examples=200, deadline=None)
@given(_prose, st.lists(st.tuples(_key, _value), max_size=6), _prose,
       st.sampled_from(["\n", "\r\n"]), st.lists(st.tuples(_key, _value), max_size=6))
def test_render_round_trip(before: str, entries: list[tuple[str, str]], after: str, nl: str,
                           replacement: list[tuple[str, str]]) -> None:
    before = "".join(line + nl for line in before.splitlines())
    after = "".join(nl + line for line in after.splitlines())
    text = before + "```k" + nl + blocks.render_body(entries, nl) + "```" + after
    [block] = blocks.find(text, "k", path="p.md")
    assert [(e.key, e.value) for e in block.entries] == entries
    assert blocks.replace_body(text, block, entries) == text
    new = blocks.replace_body(text, block, replacement)
    assert new.startswith(before + "```k" + nl) and new.endswith("```" + after)
    [again] = blocks.find(new, "k", path="p.md")
    assert [(e.key, e.value) for e in again.entries] == replacement
