"""records/carryover.py: the carry-over record round-trips and refuses anything else typed."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord
from sync.records import carryover
from sync.steps import carry

_SHA = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
_TEXT = st.text(max_size=60)
# `since` names a report, port-relative (the record refuses anything else: reports show it).
_REPORT = st.from_regex(r"\.agents/sync/20[0-9]{2}-[01][0-9]-[0-3][0-9]-[0-9a-f]{7}\.md",
                        fullmatch=True)


@st.composite
def items(draw: st.DrawFn) -> dict[str, carryover.Carried]:
    out = {}
    for sha in draw(st.lists(_SHA, max_size=5, unique=True)):
        out[sha] = carryover.Carried(
            sha, draw(st.sampled_from(carryover.KINDS)), draw(_TEXT), draw(_TEXT), draw(_REPORT),
            draw(_SHA), draw(st.sampled_from(("advance", "stall"))),
            draw(st.integers(min_value=0, max_value=10**9)))
    return out


@settings(max_examples=150, deadline=None)
@given(items())
def test_render_then_parse_is_the_identity(record: dict[str, carryover.Carried]) -> None:
    assert carryover.parse(carryover.render(record), rel="c.toml") == record


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_parses_or_is_refused_typed(text: str) -> None:
    with contextlib.suppress(MalformedRecord):
        carryover.parse(text, rel="c.toml")


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6000))
def test_an_inventory_pr_of_any_length_is_read_or_is_no_pr(digits: int) -> None:
    """The inventory's `vllm#N` with N of 5000 digits raised ValueError (int() over 4300
    digits): sync, queue and advance said 'internal error'. A PR is at most 12 digits."""
    number = "9" * digits
    refs = carry.pr_refs(f"- vllm#{number} and vllm#7 (vllm#70x)")
    assert refs == ({7, int(number)} if digits <= 12 else {7})
