"""DEFERRED / "not ported" paragraphs: what they are, and the fast scan against its definition.

`headers/deferred.py` finds paragraphs through substring hints, splits a file into lines only
once a marker is found, and looks up outside words only for the tokens that hold one; the
reference below is the definition written plainly (every line, every token). They must agree
on every text, hostile characters included ('İ' lower-cases to two characters, U+212A to
an ASCII 'k', U+2028 and friends break lines for `str.splitlines`).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sync.headers import deferred as d


def _comments(text: str, path: str) -> list[str | None]:
    pattern = d._HASH_COMMENT if path.lower().endswith(d._HASH_SUFFIXES) else d._C_COMMENT
    out: list[str | None] = []
    for line in text.splitlines():
        m = pattern.match(line)
        out.append(None if m is None else m.group("text").strip())
    return out


def _lead(lines: list[str | None], i: int) -> list[str]:
    lead: list[str] = []
    k = i - 1
    while k >= 0 and len(lead) < d.LEAD_LINES:
        prev = lines[k]
        if not prev or d._RULE.search(prev) or prev.endswith((".", ":", ";")):
            break
        lead.insert(0, prev)
        k -= 1
    return lead


def reference_paragraphs(text: str, path: str) -> list[tuple[int, str, list[str]]]:
    lines = _comments(text, path)
    out: list[tuple[int, str, list[str]]] = []
    i = 0
    while i < len(lines):
        body = lines[i]
        if body is None or d._MARK.search(body) is None:
            i += 1
            continue
        para = [*_lead(lines, i), body]
        j = i + 1
        while j < len(lines) and len(para) < d.PARAGRAPH_LINES:
            nxt = lines[j]
            if not nxt or d._RULE.search(nxt) or d._MARK.search(nxt):
                break
            para.append(nxt)
            j += 1
        out.append((i + 1, body, para))
        i = j
    return out


def reference_words(text: str) -> set[str]:
    """A text's words, token by token."""
    out: set[str] = set()
    for token in set(d._TOKEN.findall(text)):
        out.add(token.lower())
        out.update(w.lower() for w in d._SPLIT.findall(token))
        out.update(part.lower() for part in token.split("_") if part)
    return {w for w in out if len(w) >= d.MIN_WORD and w not in d._STOP and not w.isdigit()}


def reference(text: str, path: str) -> tuple[d.Deferred, ...]:
    found = reference_paragraphs(text, path)
    inside = {no for start, _t, para in found
              for no in range(start - d.LEAD_LINES, start + len(para))}
    outside = reference_words(" ".join(line for no, line in enumerate(text.splitlines(),
                                                                       start=1)
                                       if no not in inside))
    return tuple(d.Deferred(start, body, frozenset(reference_words(" ".join(para)) - outside))
                 for start, body, para in found)


def test_a_paragraph_names_the_words_only_it_uses() -> None:
    text = ("// DEFERRED: speculative decoding (EAGLE drafts) is not ported;\n"
            "// the draft proposer needs the MTP heads first.\n"
            "int decode_step(int block);  // the block table is ported\n")
    (found,) = d.deferred(text, "src/runner.cpp")
    assert found.line == 1 and found.text.startswith("DEFERRED: speculative decoding")
    assert {"speculative", "eagle", "drafts", "draft", "proposer", "heads"} <= found.words
    assert "decoding" in found.words and "block" not in found.words  # `block` is used outside


def test_markers_in_code_and_headers_are_no_paragraph() -> None:
    text = ("// Ported from vllm/v1/worker/gpu/model_runner.py @ d28fbddc\n"
            'const char* kMsg = "not ported";\n')
    assert d.deferred(text, "a.cpp") == () and d.paragraphs(text, "a.cpp") == []


def test_a_text_lowering_lengthens_still_finds_its_marker_lines() -> None:
    # 'İ'.lower() is two characters: offsets found in the lower-cased text are not the
    # text's own (the fast scan once looked for the marker on the wrong line).
    text = "\u0130\u0130\u0130\u0130\u0130\n// not ported: lora\nint x;\n"
    assert d.deferred(text, "a.cpp") == reference(text, "a.cpp")
    assert [p.line for p in d.deferred(text, "a.cpp")] == [2]


PIECES = ["// DEFERRED: spec decode\n", "// not ported: lora\n", "# deferred x\n", "int x;\n",
          "\n", "// ────\n", "\r\n", "\u2028", "\x0c", "code // not ported yet\n",
          "/* omitted block */\n", "// spec_decode lora_adapter SpecDecode\n",
          "int spec = lora;\n", "x9SPEC_decode_y = 1;\n", "_LoRA9 \u212aelvin spec\u0130x\n",
          "// not ported: \u212a specdecode\n", "// Ported from vllm/a.py\n", "// the ",
          "does not exist in this tree\n", "\u0130", "\u0130" * 6, "NOT  PORTED", "\t", " "]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
       st.sampled_from(["a.cpp", "a.py", "CMakeLists.txt", "a.cu"]))
def test_the_fast_scan_is_the_definition(text: str, path: str) -> None:
    assert d.deferred(text, path) == reference(text, path)
    assert d.paragraphs(text, path) == reference_paragraphs(text, path)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["a.cpp", "a.py"]))
def test_the_fast_scan_is_the_definition_on_any_text(text: str, path: str) -> None:
    assert d.deferred(text, path) == reference(text, path)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=12), max_size=20).map(" ".join))
def test_the_words_of_a_text_are_its_tokens_words(text: str) -> None:
    # Worked out on the tokens joined: no camel-case or `_` part may cross two tokens.
    assert d._words(text) == reference_words(text)
    assert d._words("specDecode lora_Adapter") == {"spec", "specdecode", "decode", "lora",
                                                   "lora_adapter", "adapter"}
