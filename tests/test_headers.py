from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.dev.fastimport import History, git
from sync.headers import citations as headers
from sync.headers.citations import Citation, Header, inline_citations, parse_header
from sync.headers.verify import classify_shas
from sync.infra.errors import EnvironmentUnresolved, SyncError, UsageError
from sync.steps import scan
from sync.upstream import gitio

PIN = "5559679229bc961848b121ccdeaa8fa5d79bec98"
SCHED = "vllm/v1/core/sched/scheduler.py"


def cite(path: str, sha: str | None = None, lines: str | None = None,
         symbol: str | None = None) -> tuple[str, str | None, str | None, str | None]:
    return (path, sha, lines, symbol)


def parsed(text: str, path: str) -> Header:
    header = parse_header(text, path)
    assert_offsets(text, header)
    return header


def assert_offsets(text: str, header: Header) -> None:
    """Every SHA offset slices exactly that SHA out of the original text."""
    for c in header.citations:
        assert (c.sha_start is None) == (c.sha_end is None)
        if c.sha_start is not None:
            assert c.sha is not None
            assert text[c.sha_start:c.sha_end] == c.sha


def shape(header: Header) -> list[tuple[str, str | None, str | None, str | None]]:
    return [(c.path, c.sha, c.lines, c.symbol) for c in header.citations]


# -- one test per form, C++ and Python style -----------------------------------------------------


def test_intended_form_cpp() -> None:
    text = f"// Ported from: {SCHED} @ e24d1b24\n#include <vector>\n"
    h = parsed(text, "src/vllm/v1/core/sched/scheduler.cpp")
    assert h == Header("PORTED", (Citation(SCHED, None, None, "e24d1b24", 50, 58, 1),),
                       "Ported from", 1, 1)
    assert h.shas == ("e24d1b24",)


def test_intended_form_python() -> None:
    text = f"# Ported from: {SCHED} @ e24d1b24\nimport os\n"
    h = parsed(text, "tools/parity/dump.py")
    assert h.kind == "PORTED" and shape(h) == [cite(SCHED, "e24d1b24")]


@pytest.mark.parametrize(("line", "verb"), [
    ("// Ported from vllm/x.py @ e24d1b24", "Ported from"),
    ("// Ported FROM vllm/x.py @ e24d1b24", "Ported FROM"),
    ("// Mirrors vllm/x.py @ e24d1b24", "Mirrors"),
    ("// Reimplemented from the WIRE FORMAT of: vllm/x.py @ e24d1b24",
     "Reimplemented from the WIRE FORMAT of"),
    ("// Port of vllm/x.py @ e24d1b24", "Port of"),
    ("// Adapted from `vllm/x.py` @ e24d1b24", "Adapted from"),
    ("// Upstream: vllm/x.py @ e24d1b24", "Upstream"),
])
def test_verbs(line: str, verb: str) -> None:
    for text, path in ((line + "\nint x;\n", "a.cpp"), ("#" + line[2:] + "\nx = 1\n", "a.py")):
        h = parsed(text, path)
        assert (h.kind, h.verb, shape(h)) == ("PORTED", verb, [cite("vllm/x.py", "e24d1b24")])


@pytest.mark.parametrize(("suffix", "lines", "symbol"), [
    (":12", "12", None),
    (":10-20", "10-20", None),
    (" (Scheduler)", None, "Scheduler"),
    ("(Scheduler.schedule)", None, "Scheduler.schedule"),
    ("::Scheduler", None, "Scheduler"),
    ("::Scheduler.schedule()", None, "Scheduler.schedule"),
    (":Scheduler", None, "Scheduler"),
    (" (lines 10-20)", "10-20", None),
    (":10-20 (Scheduler)", "10-20", "Scheduler"),
])
def test_line_and_symbol_suffixes(suffix: str, lines: str | None, symbol: str | None) -> None:
    for marker, path in (("//", "a.cpp"), ("#", "a.py")):
        h = parsed(f"{marker} Ported from {SCHED}{suffix} @ e24d1b24\n", path)
        assert shape(h) == [cite(SCHED, "e24d1b24", lines, symbol)]


@pytest.mark.parametrize("text", [
    # walk-s6b D6 / walk-s9: the real glm47.h and minimax_m2.h headers.
    ("// Reimplemented from the WIRE FORMAT of: vllm/x.py @ e24d1b24 (registry name \"x\"),\n"
     "// whose upstream parser is the declarative engine (vllm/parser/x.py + the engine\n"
     "// under vllm/parser/engine/). This is NOT a port of that engine: it reimplements\n"
     "// the wire surface, held to the upstream tests (tests/parser/test_x.py).\n"),
    ("// Ported from: vllm/x.py @ e24d1b24, which\n"
     "// drives the shared tests/parser/common.py::Matrix cases.\n"),
    ("// Ported from: vllm/x.py @ e24d1b24 (which drives the shared\n"
     "// tests/parser/common.py::Matrix cases). We port its data.\n"),
])
def test_paths_that_describe_the_cited_file_or_follow_a_negated_verb_are_mentions(
        text: str) -> None:
    h = parsed(text, "x.h")
    assert shape(h) == [cite("vllm/x.py", "e24d1b24")]
    assert {m.path for m in h.mentions} >= {p for p in ("vllm/parser/x.py",
                                                         "vllm/parser/engine/",
                                                         "tests/parser/test_x.py",
                                                         "tests/parser/common.py")
                                            if p in text}


@pytest.mark.parametrize("text", [
    "// Not ported from vllm/x.py @ e24d1b24: written for the port.\n",
    "// This is no port of vllm/x.py @ e24d1b24.\n",
])
def test_a_negated_verb_cites_nothing(text: str) -> None:
    assert parsed(text, "x.h").citations == ()


def test_sha_in_parentheses_is_not_a_symbol() -> None:
    h = parsed("// Ported from vllm/x.py (e24d1b24)\n", "a.cpp")
    assert shape(h) == [cite("vllm/x.py", "e24d1b24")]


def test_bullet_list_cpp_with_group_sha() -> None:
    text = ("// SPDX-License-Identifier: Apache-2.0\n"
            "// Ported from:\n"
            "// - vllm/a.py\n"
            "// - vllm/b.py:3 @ abc1234\n"
            "// - vllm/c.py\n"
            "// all @ e24d1b24\n"
            "namespace x {}\n")
    h = parsed(text, "a.h")
    assert shape(h) == [cite("vllm/a.py", "abc1234"), cite("vllm/b.py", "abc1234", "3"),
                        cite("vllm/c.py", "e24d1b24")]
    assert [c.line for c in h.citations] == [3, 4, 5]
    assert (h.start_line, h.end_line) == (1, 6)


def test_plus_and_commas_python() -> None:
    text = "# Mirrors vllm/a.py + vllm/b.py, vllm/c.py and vllm/d.py @ e24d1b24\n"
    h = parsed(text, "a.py")
    assert shape(h) == [cite(f"vllm/{n}.py", "e24d1b24") for n in "abcd"]


def test_each_path_its_own_sha() -> None:
    text = "// Ported from vllm/a.py @ abc1234 and vllm/b.py @ e24d1b24\n"
    h = parsed(text, "a.cpp")
    assert shape(h) == [cite("vllm/a.py", "abc1234"), cite("vllm/b.py", "e24d1b24")]
    assert h.shas == ("abc1234", "e24d1b24")


def test_sha_given_before_paths_applies_to_them() -> None:
    h = parsed("// At commit e24d1b24, ported from:\n//   vllm/a.py\n//   vllm/b.py\n", "a.cpp")
    assert shape(h) == [cite("vllm/a.py", "e24d1b24"), cite("vllm/b.py", "e24d1b24")]


def test_repeated_mention_is_one_citation() -> None:
    text = "// Ported from vllm/a.py @ e24d1b24.\n// Unlike vllm/a.py we keep a queue.\n"
    assert shape(parsed(text, "a.cpp")) == [cite("vllm/a.py", "e24d1b24")]


@pytest.mark.parametrize(("text", "path", "expect"), [
    ("// Ported from vllm/entrypoints/\n// openai/serving.py @ e24d1b24\n", "a.cpp",
     "vllm/entrypoints/openai/serving.py"),
    ("# Ported from vllm/entrypoints/\n# openai/serving.py @ e24d1b24\n", "a.py",
     "vllm/entrypoints/openai/serving.py"),
    ("// Ported from vllm/tool_parsers/foo_tool_parser\n// .py @ e24d1b24\n", "a.cpp",
     "vllm/tool_parsers/foo_tool_parser.py"),
    ("/* Ported from vllm/tool_parsers/foo_tool_\n * parser.py @ e24d1b24 */\n", "a.cpp",
     "vllm/tool_parsers/foo_tool_parser.py"),
    ("# Ported from vllm/\n# entrypoints/\n# openai/serving.py @ e24d1b24\n", "a.py",
     "vllm/entrypoints/openai/serving.py"),
    ("// Ported from:\n//   vllm/x.py @ e24d1b24\n", "a.cpp", "vllm/x.py"),
])
def test_wrapped_path(text: str, path: str, expect: str) -> None:
    h = parsed(text, path)
    assert shape(h) == [cite(expect, "e24d1b24")]
    assert h.citations[0].sha_start is not None  # the SHA itself was not split


def test_wrapped_path_keeps_separate_words_apart() -> None:
    text = ("// Ported from vllm/x.py and vllm/model_executor/models\n"
            "// llama.py-style loaders @ e24d1b24\n")
    assert shape(parsed(text, "a.cpp")) == [cite("vllm/x.py", "e24d1b24")]


@pytest.mark.parametrize("marker", ["//", "#"])
def test_sha_wrapped_onto_next_line_keeps_offsets(marker: str) -> None:
    text = f"{marker} Ported from vllm/x.py @\n{marker}   e24d1b24\n"
    h = parsed(text, "a.py" if marker == "#" else "a.cpp")
    c = h.citations[0]
    assert c.sha == "e24d1b24" and c.sha_start is not None
    assert text[c.sha_start:c.sha_end] == "e24d1b24"


@pytest.mark.parametrize(("text", "sha"), [
    (f"// Ported from vllm/x.py @ {PIN[:16]}\n// {PIN[16:]}\n", PIN),
    ("// Ported from vllm/x.py @ e24d1b\n// 24 was the pin then\n", "e24d1b24"),
    (f"# Ported from vllm/x.py @ pin {PIN[:30]}\n# {PIN[30:]}\n", PIN),
])
def test_sha_split_across_lines_has_no_offsets(text: str, sha: str) -> None:
    path = "a.py" if text.startswith("#") else "a.cpp"
    c = parsed(text, path).citations[0]
    assert (c.sha, c.sha_start, c.sha_end) == (sha, None, None)


def test_short_hex_then_prose_is_not_joined() -> None:
    text = "// Ported from vllm/x.py @ e24d1b24\n// 12 helpers follow\n"
    c = parsed(text, "a.cpp").citations[0]
    assert c.sha == "e24d1b24" and c.sha_start is not None


@pytest.mark.parametrize("form", [
    "@ pin {sha}", "@ `{sha}`", "@{sha}", "at commit {sha}", "({sha})", "— {sha}",
    "@ pin: {sha}", "(upstream {sha}, 2026-07-02)",
])
def test_sha_forms(form: str) -> None:
    for sha in ("e24d1b24", PIN, PIN[:7]):
        for marker, path in (("//", "a.cpp"), ("#", "a.py")):
            text = f"{marker} Ported from vllm/x.py {form.format(sha=sha)}\n"
            assert shape(parsed(text, path)) == [cite("vllm/x.py", sha)], text


def test_sha_on_a_later_line() -> None:
    text = ("// Ported from vllm/x.py (Scheduler).\n"
            "//\n"
            "// The C++ keeps one queue per priority.\n"
            "// Upstream commit: e24d1b24\n"
            "class Scheduler;\n")
    h = parsed(text, "a.h")
    assert shape(h) == [cite("vllm/x.py", "e24d1b24", None, "Scheduler")]
    assert (h.start_line, h.end_line) == (1, 4)


def test_sha_lengths() -> None:
    for n in range(7, 41):
        sha = PIN[:n]
        assert parsed(f"// Ported from vllm/x.py @ {sha}\n", "a.cpp").shas == (sha,)
    assert parsed(f"// Ported from vllm/x.py @ {PIN[:6]}\n", "a.cpp").shas == ()
    assert parsed(f"// Ported from vllm/x.py @ {PIN}0\n", "a.cpp").shas == ()


def test_english_words_and_numbers_are_not_shas() -> None:
    text = ("// Ported from vllm/x.py; added deadbeef handling, decade facade effaced.\n"
            "// 1234567 tokens max (vllm#12345678), see vllm/x.py:1234567\n")
    h = parsed(text, "a.cpp")
    assert h.shas == ()
    # The second path follows a `;` and a "see": a mention, not a second citation.
    assert shape(h) == [cite("vllm/x.py")]


def test_all_digit_sha_needs_a_cue() -> None:
    # 5559679 is the 7-character prefix of a real pin: digits only, still a SHA after "@".
    assert parsed("// Ported from vllm/x.py @ 5559679\n", "a.cpp").shas == ("5559679",)
    assert parsed("// Ported from vllm/x.py, 5559679 tokens\n", "a.cpp").shas == ()


def test_sha_inside_identifiers_and_paths_is_ignored() -> None:
    text = "// Ported from vllm/e24d1b24/x.py via kernel_e24d1b24 and e24d1b24_fn\n"
    h = parsed(text, "a.cpp")
    assert shape(h) == [cite("vllm/e24d1b24/x.py")]


def test_github_url_citation() -> None:
    text = ("// Ported from https://github.com/vllm-project/vllm/blob/e24d1b24/"
            "vllm/v1/core/sched/scheduler.py#L10-L20.\n")
    h = parsed(text, "a.cpp")
    assert shape(h) == [cite(SCHED, "e24d1b24", "10-20")]
    assert h.citations[0].sha_start is not None


def test_url_keeps_its_own_revision() -> None:
    text = ("# Adapted from https://github.com/huggingface/transformers/blob/v4.28/src/m.py\n"
            "# and vllm/x.py @ e24d1b24\n")
    assert shape(parsed(text, "a.py")) == [cite("src/m.py"), cite("vllm/x.py", "e24d1b24")]


def test_other_urls_are_not_citations() -> None:
    text = ("// Licensed under http://www.apache.org/licenses/LICENSE-2.0.txt\n"
            "// Ported from vllm/x.py @ e24d1b24\n")
    assert shape(parsed(text, "a.cpp")) == [cite("vllm/x.py", "e24d1b24")]


def test_block_comment_with_star_continuation() -> None:
    text = ("/**\n"
            " * Ported from: vllm/a.py\n"
            " *   and vllm/b.py\n"
            " * @ e24d1b24\n"
            " */\n"
            "#pragma once\n")
    h = parsed(text, "a.h")
    assert shape(h) == [cite("vllm/a.py", "e24d1b24"), cite("vllm/b.py", "e24d1b24")]
    assert (h.start_line, h.end_line) == (2, 5)  # from the first text line to the closing */


def test_crlf_file() -> None:
    text = "// Ported from vllm/entrypoints/\r\n// openai/serving.py @\r\n// e24d1b24\r\nint x;\r\n"
    h = parsed(text, "a.cpp")
    assert shape(h) == [cite("vllm/entrypoints/openai/serving.py", "e24d1b24")]
    assert h.citations[0].line == 1


def test_byte_order_mark() -> None:
    text = "\ufeff// Ported from vllm/x.py @ e24d1b24\n"
    h = parsed(text, "a.cpp")
    assert (h.start_line, shape(h)) == (1, [cite("vllm/x.py", "e24d1b24")])


# -- where the header is ------------------------------------------------------------------------


def test_header_after_shebang_python() -> None:
    text = "#!/usr/bin/env python3\n# Ported from vllm/x.py @ e24d1b24\nimport sys\n"
    h = parsed(text, "a.py")
    assert (h.kind, h.start_line, h.citations[0].line) == ("PORTED", 2, 2)


def test_header_after_pragma_once_and_blank_lines() -> None:
    text = "#pragma once\n\n// Ported from vllm/x.py @ e24d1b24\n"
    assert parsed(text, "a.h").start_line == 3


def test_header_after_licence_block() -> None:
    text = ("/*\n"
            " * Copyright 2026 The Port Authors.\n"
            " * Licensed under the Apache License, Version 2.0 (the \"License\");\n"
            " * based on the work of many.\n"
            " */\n"
            "\n"
            "// Ported from vllm/x.py @ e24d1b24\n"
            "#include <x>\n")
    h = parsed(text, "a.cpp")
    assert (h.kind, h.start_line, h.end_line, shape(h)) == (
        "PORTED", 7, 7, [cite("vllm/x.py", "e24d1b24")])


def test_header_after_spdx_block_python() -> None:
    text = ("# SPDX-License-Identifier: Apache-2.0\n"
            "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n"
            "\n"
            "# Mirrors vllm/x.py @ e24d1b24\n"
            "import os\n")
    h = parsed(text, "a.py")
    assert (h.kind, h.start_line, shape(h)) == ("PORTED", 4, [cite("vllm/x.py", "e24d1b24")])


def test_header_in_same_block_below_licence_lines() -> None:
    text = ("// SPDX-License-Identifier: Apache-2.0\n"
            "//\n"
            "// Ported from vllm/x.py @ e24d1b24\n")
    h = parsed(text, "a.cpp")
    assert (h.start_line, h.end_line) == (3, 3)


def test_python_module_docstring() -> None:
    text = '"""Tokenizer glue.\n\nPorted from vllm/x.py @ e24d1b24.\n"""\nimport os\n'
    assert shape(parsed(text, "a.py")) == [cite("vllm/x.py", "e24d1b24")]


def test_comment_after_code_is_not_a_header() -> None:
    for text, path in (("#include <x>\n// Ported from vllm/x.py @ e24d1b24\n", "a.cpp"),
                       ("import os\n# Ported from vllm/x.py @ e24d1b24\n", "a.py")):
        assert parse_header(text, path) == Header("NONE", (), None, 0, 0)


def test_header_must_start_near_the_top() -> None:
    text = "//\n" * 45 + "\n// Ported from vllm/x.py @ e24d1b24\n"
    assert parse_header(text, "a.cpp").kind == "NONE"


def test_hash_comments_are_code_in_cpp_and_slashes_are_code_in_python() -> None:
    assert parse_header("# Ported from vllm/x.py @ e24d1b24\n", "a.cpp").kind == "NONE"
    assert parse_header("// Ported from vllm/x.py @ e24d1b24\n", "a.py").kind == "NONE"


# -- ORIGINAL and NONE --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "path", "watched", "mentioned"), [
    ("// Original code: no upstream mirror. Inspired by vllm/foo.py\n", "a.cpp",
     [], ["vllm/foo.py"]),
    ("# Original implementation. Structure mirrors vllm/foo.py @ e24d1b24\n", "a.py",
     ["vllm/foo.py"], []),
    ("// Not ported from upstream; see vllm/foo.py for the Python side.\n", "a.cpp",
     [], ["vllm/foo.py"]),
    ("/* No upstream equivalent (port-original). */\n", "a.cpp", [], []),
    ("# Port-original helper.\n", "a.py", [], []),
])
def test_original_declarations(text: str, path: str, watched: list[str],
                               mentioned: list[str]) -> None:
    h = parsed(text, path)
    assert h.kind == "ORIGINAL" and h.verb is None and h.pins == ()
    assert [c.path for c in h.watched] == watched
    assert [m.path for m in h.mentions] == mentioned


def test_original_remark_inside_a_ported_header_stays_ported() -> None:
    text = ("// Ported from vllm/x.py @ e24d1b24.\n"
            "// The graph capture is original code (no upstream equivalent).\n")
    assert parsed(text, "a.cpp").kind == "PORTED"


def test_original_naming_the_upstream_is_a_port() -> None:
    h = parsed("// Original: vllm/x.py @ e24d1b24\n", "a.cpp")
    assert (h.kind, h.verb, shape(h)) == ("PORTED", "Original", [cite("vllm/x.py", "e24d1b24")])


@pytest.mark.parametrize(("text", "path"), [
    ("", "a.cpp"),
    ("#include <x>\n", "a.cpp"),
    ("// Helpers for the scheduler.\nint x;\n", "a.cpp"),
    ("// Mirrors the Python API so callers can switch.\n", "a.cpp"),
    ("# helpers\nimport os\n", "a.py"),
    ("\n\n\n", "a.py"),
])
def test_no_header(text: str, path: str) -> None:
    h = parse_header(text, path)
    assert h == headers.NO_HEADER and h.shas == ()


# -- inline citations ---------------------------------------------------------------------------


def test_inline_paths_cited_only_by_a_statement() -> None:
    text = ("// Ported from vllm/a.py @ e24d1b24\n"
            "int f() {  // see vllm/b.py:12 and vllm/entrypoints/\n"
            "           // openai/serving.py\n"
            "  return 1;  // not src/vllm/c.py, not tests/vllm/d.py, not vllm/e.cpp\n"
            "}\n"
            "// Mirrors https://github.com/vllm-project/vllm/blob/main/vllm/g.py\n"
            "/* https://github.com/vllm-project/vllm/blob/main/vllm/h.py */\n"
            "// The loop below mirrors\n"
            "// vllm/v1/i.py::step.\n"
            "const char* k = \"vllm/f.py\";\n")
    got = headers.inline_paths(text)
    assert got.cited == {"vllm/a.py", "vllm/g.py", "vllm/v1/i.py"}
    assert got.mentioned == {"vllm/b.py", "vllm/f.py", "vllm/h.py",
                             "vllm/entrypoints/openai/serving.py"}
    assert inline_citations(text) == set(got.cited)
    assert headers.inline_paths(text, ("tests/",)).mentioned == {"tests/vllm/d.py"}
    assert inline_citations(text, ()) == set()


def test_inline_citations_python_wrap() -> None:
    text = "x = 1\n# ported from vllm/tool_parsers/foo_tool_parser\n# .py closely\n"
    assert inline_citations(text) == {"vllm/tool_parsers/foo_tool_parser.py"}


# -- fuzzing --------------------------------------------------------------------------------------

TOKENS = st.sampled_from([
    "//", "#", "/*", "*/", " * ", "\n", "\r\n", " ", "  ", "Ported from", "Ported FROM", "Mirrors",
    "Reimplemented from the WIRE FORMAT of", ":", "::", "@", "`", "(", ")", "vllm/", "x", ".py",
    "_", "/", "-", "+", "and", ",", ".", "e24d1b", "24", "e24d1b24", PIN[:20], PIN[20:], "5559679",
    "Original code", "no upstream mirror", "Sched", ":12", ":10-20", '"""', "#!", "#pragma once",
    "https://github.com/o/r/blob/", "#L3-L4", "é", "\t", "*",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, max_size=60), st.sampled_from(["a.cpp", "a.py", "<text>"]))
def test_fuzz_structured(parts: list[str], path: str) -> None:
    text = "".join(parts)
    h = parse_header(text, path)
    assert_offsets(text, h)
    nlines = text.count("\n") + 1
    assert h.kind in ("PORTED", "ORIGINAL", "NONE")
    assert all(1 <= c.line <= nlines for c in h.citations)
    assert all(c.sha is None or 7 <= len(c.sha) <= 40 for c in h.citations)
    assert h.kind != "NONE" or not h.citations
    assert all(p.endswith(".py") for p in inline_citations(text))


def test_a_body_citation_with_anchors_is_cited_at_its_own_line() -> None:
    text = ("// Ported from vllm/a.py @ e24d1b24\n\nint f;\n\n"
            "// Ported from: vllm/b.py:5 (do_g).\nint g;\r\n// Ported from: vllm/c.py:7\n")
    found = scan.scan_text("a.cpp", text, ("vllm/",))
    assert [(up, line) for (up, _at, _a), line
            in zip(found.inline.anchored, found.anchored_lines, strict=True)] == [
        ("vllm/b.py", 5), ("vllm/c.py", 7)]


@settings(max_examples=300, deadline=None)
@given(st.lists(TOKENS, max_size=60))
def test_fuzz_anchored_lines(parts: list[str]) -> None:
    text = "".join(parts)
    found = scan.scan_text("a.cpp", text, ("vllm/",))
    assert found.anchored_lines == tuple(text.count("\n", 0, at) + 1
                                         for _up, at, _a in found.inline.anchored)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.sampled_from(["a.cpp", "a.py"]))
def test_fuzz_random_text(text: str, path: str) -> None:
    try:
        h = parse_header(text, path)
        inline_citations(text)
    except SyncError:
        return
    assert_offsets(text, h)


# -- classify_shas against a real repository -------------------------------------------------------


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> tuple[gitio.Reference, dict[str, str]]:
    h = History()
    old = h.modify("vllm/x.py", "v1\n").commit("[Core] one (#1)")
    pin = h.modify("vllm/x.py", "v2\n").commit("[Core] two (#2)")
    new = h.modify("vllm/x.py", "v3\n").commit("[Core] three (#3)")
    side = h.modify("vllm/x.py", "pr head\n").commit("WIP", branch="pr", parent=pin)
    other = h.modify("README", "another project\n").commit("init", branch="elsewhere")
    repo = tmp_path_factory.mktemp("upstream") / "vllm"
    marks = h.write(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", marks[new])
    git(repo, "-c", "user.name=U", "-c", "user.email=u@example.invalid", "tag", "-a", "v1",
        "-m", "v1", marks[pin])
    shas = {"old": marks[old], "pin": marks[pin], "new": marks[new], "side": marks[side],
            "other": marks[other], "tag": git(repo, "rev-parse", "v1").strip(),
            "blob": git(repo, "rev-parse", f"{marks[pin]}:vllm/x.py").strip()}
    return gitio.open_repo(Path(repo)), shas


def test_classify_shas(upstream: tuple[gitio.Reference, dict[str, str]]) -> None:
    ref, s = upstream
    cited = [s["pin"][:8], s["pin"], s["old"][:10], s["new"][:7], s["side"][:12], s["other"],
             "abcdef1234567", s["tag"], s["blob"][:9], "not-a-sha", "E24D1B24"]
    got = classify_shas(ref, s["pin"], cited, "origin/main")
    assert got == {
        s["pin"][:8]: "at-pin", s["pin"]: "at-pin", s["old"][:10]: "behind",
        s["new"][:7]: "ahead", s["side"][:12]: "not-upstream", s["other"]: "not-upstream",
        "abcdef1234567": "not-upstream", s["tag"]: "not-upstream", s["blob"][:9]: "not-upstream",
        "not-a-sha": "not-upstream", "E24D1B24": "not-upstream",
    }


def test_classify_shas_pin_given_as_ref(upstream: tuple[gitio.Reference, dict[str, str]]) -> None:
    ref, s = upstream
    got = classify_shas(ref, "v1", [s["pin"][:7], s["new"][:7]], "origin/main")
    assert got == {s["pin"][:7]: "at-pin", s["new"][:7]: "ahead"}


def test_classify_shas_from_parsed_headers(
        upstream: tuple[gitio.Reference, dict[str, str]]) -> None:
    ref, s = upstream
    text = (f"// Ported from:\n// - vllm/x.py @ {s['old'][:8]}\n"
            f"// - vllm/y.py @ {s['new'][:8]}\n")
    h = parse_header(text, "a.cpp")
    assert classify_shas(ref, s["pin"], h.shas, "origin/main") == {
        s["old"][:8]: "behind", s["new"][:8]: "ahead"}


def test_classify_shas_constant_process_count(
        upstream: tuple[gitio.Reference, dict[str, str]]) -> None:
    ref, s = upstream
    few = [s["old"][:8], s["new"][:8]]
    many = few + [s["side"], s["pin"]] + [f"{i:07x}a" for i in range(46)]
    assert len(set(many)) == 50

    def processes(shas: list[str]) -> int:
        before = gitio.PROCESS_COUNT
        classify_shas(ref, s["pin"], shas, "origin/main")
        return gitio.PROCESS_COUNT - before

    assert processes(few) == processes(many) == processes([]) == 3


def test_classify_shas_refuses_bad_pin_and_ref(
        upstream: tuple[gitio.Reference, dict[str, str]]) -> None:
    ref, s = upstream
    with pytest.raises(EnvironmentUnresolved, match="is not a commit"):
        classify_shas(ref, "abcdef1234567", [s["pin"]], "origin/main")
    with pytest.raises(EnvironmentUnresolved, match="does not resolve"):
        classify_shas(ref, s["pin"], [s["pin"]], "origin/nope")
    with pytest.raises(UsageError):
        classify_shas(ref, "--all", [s["pin"]], "origin/main")
    with pytest.raises(EnvironmentUnresolved, match="is not a commit"):
        classify_shas(ref, s["blob"], [], "origin/main")
