"""A record's schema is its frozen dataclass: the fields are the stored keys, typed.

Records kept as TOML or JSON tables (decisions, the cycle, state events, gate results)
declare one dataclass; this module reads the keys, defaults and types off its fields,
so the parser, the renderer and the validator cannot drift apart. A field the file does
not hold (a gate's name is its key in the file, an event's path is where it was read
from) is declared with `field(metadata=DERIVED)`.

Each record words its own refusals (they are pinned by tests and read by people): the
checks here say *what* is wrong (`Problem`) and the record says it.
"""

from __future__ import annotations

import re
import tomllib
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from sync.infra.errors import MalformedRecord

_DERIVED = "upstream_sync.derived"
# `field(metadata=DERIVED)`: computed when the record is read, never a key of the file.
DERIVED: Mapping[str, bool] = {_DERIVED: True}


def stored(cls: type) -> Iterator[Field[Any]]:
    """The fields that are keys of the file, in declaration order (the file's key order)."""
    return (f for f in fields(cls) if not f.metadata.get(_DERIVED))


def keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in stored(cls))


def required(cls: type) -> tuple[str, ...]:
    """Stored keys without a default: a file without one of them is malformed."""
    return tuple(f.name for f in stored(cls)
                 if f.default is MISSING and f.default_factory is MISSING)


def missing(doc: Mapping[str, object], cls: type) -> str | None:
    """The first required key `doc` lacks."""
    return next((k for k in required(cls) if k not in doc), None)


def unknown(doc: Mapping[str, object], cls: type) -> str | None:
    """The first (sorted) key of `doc` that `cls` does not declare."""
    extra = sorted(set(doc) - set(keys(cls)))
    return extra[0] if extra else None


def values(doc: Mapping[str, object], cls: type) -> dict[str, Any]:
    """The stored keys of `doc`, defaults filled in for the keys it omits (for `cls(**...)`
    once `missing` and `mistyped` found nothing)."""
    out: dict[str, Any] = {}
    for f in stored(cls):
        if f.name in doc:
            out[f.name] = doc[f.name]
        elif f.default is not MISSING:
            out[f.name] = f.default
    return out


def as_doc(record: object) -> dict[str, Any]:
    """The stored keys of `record` with their values, in the file's key order."""
    return {f.name: getattr(record, f.name) for f in stored(type(record))}


@dataclass(frozen=True)
class Problem:
    """A value that does not have its field's type."""

    key: str
    value: object
    want: str  # "a string", "a number or null", "one of PASS, FAIL, PENDING", ...
    choice: bool  # the field is a Literal: the value is not one of its members

    @property
    def text(self) -> str:
        """`status 'X' is not one of A, B` / `command must be a string`."""
        if self.choice:
            return f"{self.key} {self.value!r} is not {self.want}"
        return f"{self.key} must be {self.want}"


def mistyped(doc: Mapping[str, object], cls: type) -> Problem | None:
    """The first stored key present in `doc` whose value does not have the field's type."""
    hints = _hints(cls)
    for name in keys(cls):
        if name in doc and not conforms(doc[name], hints[name]):
            hint = hints[name]
            return Problem(name, doc[name], describe(hint), get_origin(hint) is Literal)
    return None


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def conforms(value: object, hint: Any) -> bool:
    """Whether a parsed TOML/JSON value has type `hint` (bool is never a number here)."""
    origin = get_origin(hint)
    if _is_union(hint):
        return any(conforms(value, h) for h in get_args(hint))
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in get_args(hint))
    if origin is dict:
        kt, vt = get_args(hint)
        return isinstance(value, dict) and all(
            conforms(k, kt) and conforms(v, vt) for k, v in value.items())
    if origin is list:
        (item,) = get_args(hint)
        return isinstance(value, list) and all(conforms(v, item) for v in value)
    return _scalar(value, hint)


def _scalar(value: object, hint: Any) -> bool:
    if hint is type(None):
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)
    if hint in (int, str, bool):
        return isinstance(value, hint)
    raise TypeError(f"schema: no check for type {hint!r}")


def describe(hint: Any) -> str:
    """The type in a refusal's words: `a string or null`, `an object of strings`."""
    if _is_union(hint):
        return _alternatives(hint, describe)
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(hint))
    if get_origin(hint) is dict:
        return "an object of " + _alternatives(get_args(hint)[1], _plural, null=False)
    if get_origin(hint) is list:
        return "a list of " + _alternatives(get_args(hint)[0], _plural, null=False)
    return _NAMES.get(hint, repr(hint))


def _alternatives(hint: Any, name: Callable[[Any], str], *, null: bool = True) -> str:
    """`a string or null`; with `null` False, a null member goes unsaid."""
    args = get_args(hint) if _is_union(hint) else (hint,)
    named = " or ".join(name(h) for h in args if h is not type(None))
    return named + (" or null" if null and type(None) in args else "")


_NAMES: dict[Any, str] = {str: "a string", int: "an integer", float: "a number",
                          bool: "true or false", type(None): "null"}
_PLURALS: dict[Any, str] = {str: "strings", int: "integers", float: "numbers"}


def _plural(hint: Any) -> str:
    return _PLURALS.get(hint, describe(hint))


def table_line(text: str, parent: str, key: str) -> int | None:
    """The line of `[parent.key]` in a TOML record's text (where a refusal points), None
    when the table is not written so (an inline table, a dotted key)."""
    m = re.search(rf'^[ \t]*\[[ \t]*{re.escape(parent)}[ \t]*\.[ \t]*"?{re.escape(key)}"?[ \t]*\]',
                  text, re.MULTILINE)
    return None if m is None else text.count("\n", 0, m.start()) + 1


def key_line(text: str, parent: str, table: str, key: str | None) -> int | None:
    """The line of `key = ...` in the table `[parent.table]` of a TOML record's text, else
    the table's own line (`table_line`); None when the table is not written so."""
    start = table_line(text, parent, table)
    if start is None or key is None:
        return start
    lines = text.split("\n")
    for n in range(start, len(lines)):  # the lines after the table's header, 0-based
        line = lines[n].lstrip(" \t")
        if line.startswith("["):
            break  # the next table
        if re.match(rf'"?{re.escape(key)}"?[ \t]*=', line):
            return n + 1
    return start


_OURS = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_THEIRS = re.compile(r"^>{7}(?: |$)", re.MULTILINE)


def conflict_line(text: str) -> int | None:
    """The line of a merge conflict's `<<<<<<< HEAD` (closed by a `>>>>>>> branch` line) in
    a record's text, None when it has none: a record two branches changed must be resolved
    by a person, never read half of each (walk-s11 U2). A lone `=======` is a Markdown
    heading's underline."""
    m = _OURS.search(text)
    if m is None or _THEIRS.search(text, m.end()) is None:
        return None
    return text.count("\n", 0, m.start()) + 1


def refuse_conflict(text: str, path: str) -> None:
    line = conflict_line(text)
    if line is not None:
        raise MalformedRecord("holds merge conflict markers", "resolve the conflict (keep one "
                              "side, or both, as git's merge left them to you), then run "
                              "again", path=path, line=line)


_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\Z")
# What tomllib says of a file an editor saved with a BOM: "Invalid statement (at line 1,
# column 1)", at a character no editor shows. Said as what it is, with its own fix.
TOML_BOM = ("not valid TOML: it starts with a UTF-8 byte-order mark (BOM), which TOML does "
            "not allow", "save it as UTF-8 without a BOM")


def parse_toml(text: str, path: str, fix: str) -> dict[str, Any]:
    """A TOML record's document; MalformedRecord at the line tomllib stopped on, so the
    refusal points where an editor jumps (`decisions.toml:7: not valid TOML: ...`)."""
    if text.startswith("\ufeff"):
        raise MalformedRecord(*TOML_BOM, path=path, line=1)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _TOML_AT.search(message)
        if at is None:  # "(at end of document)" and the like: no line to point at
            raise MalformedRecord(f"not valid TOML: {message}", fix, path=path) from None
        raise MalformedRecord(f"not valid TOML: {message[:at.start()]} (column {at[2]})", fix,
                              path=path, line=int(at[1])) from None
    except RecursionError:
        # tomllib recurses per nested array or inline table: no record nests deeply.
        raise MalformedRecord("not valid TOML: nested too deeply", fix, path=path) from None
    except ValueError:
        # tomllib turns an integer of more than 4300 digits into int(): a ValueError.
        raise MalformedRecord("not valid TOML: a value is out of bounds", fix,
                              path=path) from None
