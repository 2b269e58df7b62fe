"""records/carryover.py: the carry-over record round-trips and refuses anything else typed."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord
from sync.records import carryover

_SHA = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
_TEXT = st.text(max_size=60)


@st.composite
def items(draw: st.DrawFn) -> dict[str, carryover.Carried]:
    out = {}
    for sha in draw(st.lists(_SHA, max_size=5, unique=True)):
        out[sha] = carryover.Carried(
            sha, draw(st.sampled_from(carryover.KINDS)), draw(_TEXT), draw(_TEXT), draw(_TEXT),
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
