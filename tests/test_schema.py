"""records/schema.py: a record's frozen dataclass is its schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord
from sync.records import schema
from sync.records.schema import DERIVED

Colour = Literal["red", "blue"]


@dataclass(frozen=True)
class Sample:
    name: str = field(metadata=DERIVED)
    colour: Colour
    count: int
    weight: float | None
    note: str | None = None
    tags: dict[str, str | None] | None = None
    flag: bool = False


def test_keys_defaults_and_order() -> None:
    assert schema.keys(Sample) == ("colour", "count", "weight", "note", "tags", "flag")
    assert schema.required(Sample) == ("colour", "count", "weight")
    assert schema.missing({"colour": "red", "weight": 1}, Sample) == "count"
    assert schema.missing({"colour": "red", "count": 1, "weight": None}, Sample) is None
    assert schema.unknown({"colour": "red", "zz": 1, "aa": 2}, Sample) == "aa"
    assert schema.unknown({"colour": "red"}, Sample) is None
    assert schema.values({"colour": "red", "count": 2, "weight": None, "zz": 1}, Sample) == {
        "colour": "red", "count": 2, "weight": None, "note": None, "tags": None, "flag": False}
    s = Sample("n", "blue", 3, 1.5, tags={"a": None})
    assert list(schema.as_doc(s)) == list(schema.keys(Sample))
    assert Sample(name="n", **schema.as_doc(s)) == s


@pytest.mark.parametrize(("key", "value", "text"), [
    ("colour", "green", "colour 'green' is not one of red, blue"),
    ("colour", 1, "colour 1 is not one of red, blue"),
    ("count", True, "count must be an integer"),
    ("count", 1.0, "count must be an integer"),
    ("weight", "1", "weight must be a number or null"),
    ("weight", False, "weight must be a number or null"),
    ("note", 3, "note must be a string or null"),
    ("tags", {"a": 1}, "tags must be an object of strings or null"),
    ("tags", {1: "a"}, "tags must be an object of strings or null"),
    ("tags", ["a"], "tags must be an object of strings or null"),
    ("flag", 0, "flag must be true or false"),
])
def test_mistyped_names_the_key_and_the_type(key: str, value: object, text: str) -> None:
    doc: dict[str, Any] = {"colour": "red", "count": 1, "weight": 2, "note": None,
                           "tags": {"a": "b", "c": None}, "flag": True}
    assert schema.mistyped(doc, Sample) is None
    problem = schema.mistyped({**doc, key: value}, Sample)
    assert problem is not None and problem.key == key and problem.text == text


def test_an_unsupported_type_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="no check for type"):
        schema.conforms({1}, set[int])


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=4),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@given(st.dictionaries(st.sampled_from(["colour", "count", "weight", "note", "tags", "flag",
                                        "other"]), _JSON))
def test_any_parsed_document_is_typed_or_a_problem(doc: dict[str, Any]) -> None:
    problem = schema.mistyped(doc, Sample)
    if problem is None:
        assert all(schema.conforms(doc[k], schema._hints(Sample)[k]) for k in doc
                   if k in schema.keys(Sample))
    else:
        assert problem.key in doc and "\n" not in problem.text


@given(st.lists(st.sampled_from(["schema = 1", "[t]", "d = 1", "", "# note", "f = 'ok'",
                                 "a = ["]), max_size=6), st.sampled_from(["\n", "\r\n"]))
def test_a_toml_record_saved_with_a_bom_is_refused_as_that(lines: list[str], nl: str) -> None:
    """An editor's BOM read as 'Invalid statement (column 1)' with 'fix the syntax', at a
    character the editor does not show; whatever follows it, the BOM is what is named."""
    with pytest.raises(MalformedRecord) as exc:
        schema.parse_toml("\ufeff" + nl.join(lines) + nl, "r.toml", "fix it")
    assert str(exc.value) == ("r.toml:1: not valid TOML: it starts with a UTF-8 byte-order mark "
                              "(BOM), which TOML does not allow — save it as UTF-8 without a BOM")


@given(st.lists(st.sampled_from(["schema = 1", "[decisions", "[t]", "a = [", "b = = 2", "c = '",
                                 "d = 1", "", "# note", "e = {x = 1", "]", "f = 'ok'"]),
                max_size=8))
def test_a_toml_refusal_is_one_line_at_a_line_of_the_record(lines: list[str]) -> None:
    """Whatever the text, parse_toml returns a table or refuses in one line, and a line it
    names is one of the record's (walk-s11's nit: the carry-over refusal named none)."""
    text = "\n".join(lines) + "\n"
    try:
        doc = schema.parse_toml(text, "r.toml", "fix it")
    except MalformedRecord as exc:
        message = str(exc)
        assert "\n" not in message and "not valid TOML: " in message
        assert message.endswith(" — fix it")
        if exc.line is not None:
            assert 1 <= exc.line <= len(lines) + 1
            assert message.startswith(f"r.toml:{exc.line}: ")
        else:
            assert message.startswith("r.toml: ")
    else:
        assert isinstance(doc, dict)
