"""Text from upstream or a person, made safe to render into a markdown record: the one rule.

The report, the ledger, the inventory, the gate lines and the deviations lines all cite
commits, subjects, author names, refs, paths, reasons and notes; they escape them here,
the one place, so such a value can never start a line, a heading, a list item, a table
cell, a link, an HTML comment or a pin span wherever it lands:

- no line break of any kind: every character `str.splitlines` breaks at (LF, CR, VT, FF,
  FS, GS, RS, NEL, LS, PS) and every other run of whitespace becomes one space;
- nothing that does not show: every other character that does not print (`str.isprintable`:
  control characters, zero-width and other format characters, the bidi marks, overrides
  and isolates, tag characters, private-use and unassigned code points) is written as its
  escape (`\\u200b`, as Python writes it), so a reviewer sees it where it would hide or
  reorder text (before a `#`, inside a `](`);
- outside code spans `<` becomes `&lt;`, so no `<!--` (a comment, a pin span) or tag is
  ever written, not even backslash-escaped;
- markdown's openers are backslash-escaped: `[ ]` (links), `|` (table cells), `>`, `\\`,
  and for prose also `` ` * _ ~ ``; an `&` that would start an entity is escaped too, so every
  value reads back (`unescape`) exactly as it was;
- `code` wraps a path, ref or command in backticks only when nothing in it could end the
  span or open anything (inside a code span `<` is text; `<!` is never written); otherwise
  it is written as escaped prose.

A value is always rendered after the line's own prefix (`- `, `| `), so a `#` or `-` in
it can never be the start of a line.
"""

from __future__ import annotations

import re

SUBJECT_MAX = 300

_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")  # split at it: the `&` itself is consumed
_OPENERS = "\\[]|>"
_ENTITIES = {"<": "&lt;"}
# Backslash-escape markdown's active characters (str.translate: this runs 20,000 times
# for a 10,000-commit report).
_SUBJECT_ESC = str.maketrans({**{c: "\\" + c for c in _OPENERS + "`*_~"}, **_ENTITIES})
_REASON_ESC = str.maketrans({**{c: "\\" + c for c in _OPENERS + "`*"}, **_ENTITIES})
# A table cell a person wrote keeps its emphasis and code spans: they open nothing.
_CELL_ESC = str.maketrans({**{c: "\\" + c for c in _OPENERS}, **_ENTITIES})
_UNESC = re.compile(r"\\(.)|&lt;")
_UNENTITY = {"&lt;": "<"}
# Unsafe inside a code span: a backtick ends it, `|` splits a table cell even there, a
# backslash would show; `<!` and `-->` would still read as a comment or pin span to the
# tools that scan the text (a code span's `<if TYPE_CHECKING>` is only text).
_CODE_UNSAFE = re.compile(r"[`|\\]|<!|-->")


def flat(text: str) -> str:
    """`text` as one line: whitespace runs (line breaks of every kind) become one space, and
    a character that would not show is shown as its escape."""
    one = " ".join(text.split())
    # isprintable is one C pass: the per-character pass runs only for a value that needs it.
    return one if one.isprintable() else "".join(map(_shown, one))


def _shown(char: str) -> str:
    return char if char.isprintable() else char.encode("unicode_escape").decode("ascii")


def _escaped(text: str, table: dict[int, str]) -> str:
    out = flat(text)
    if "&" not in out:
        return out.translate(table)
    # An `&` that would start an entity is escaped around the translated pieces (the
    # `&lt;` the table writes must stay an entity).
    return "\\&".join(piece.translate(table) for piece in _ENTITY.split(out))


def escape(text: str, *, reason: bool = False) -> str:
    """Prose from upstream or a person (a subject; `reason`: a reason, a note)."""
    out = _escaped(text, _REASON_ESC if reason else _SUBJECT_ESC)
    # ` _(auto: ...)_` ends an entry line: a reason can never end like it.
    return out.replace("_(", "\\_(") if reason and "_(" in out else out


def cell(text: str) -> str:
    """A table cell's text a person wrote (`ledger add`): one line, no `|` left bare."""
    return _escaped(text, _CELL_ESC)


def code(text: str) -> str:
    """A path, ref or command: in backticks when nothing in it can open anything, else
    as escaped prose (a path with a backtick or `<` in it is still shown, just not as code)."""
    one = flat(text)
    if one and not _CODE_UNSAFE.search(one):
        return f"`{one}`"
    return escape(one, reason=True)


def unescape(text: str) -> str:
    """What `escape`/`cell` were given (after `flat`)."""
    return _UNESC.sub(lambda m: m.group(1) if m.group(1) is not None
                      else _UNENTITY[m.group(0)], text)


def one_line(line: str) -> str:
    """A rendered line kept to one line: a guard where lines another module rendered are
    placed (a line break in one would be a new line of the record)."""
    parts = line.splitlines()
    return line if len(parts) <= 1 and not line.endswith(("\n", "\r")) else " ".join(parts)


def short_subject(subject: str) -> str:
    """The subject flat, cut to SUBJECT_MAX characters with an ellipsis; a cut falls between
    two of the subject's characters, never inside the escape one is shown as."""
    one = flat(subject)
    if len(one) <= SUBJECT_MAX:
        return one
    kept, room = [], SUBJECT_MAX - 1
    for shown in map(_shown, " ".join(subject.split())):
        room -= len(shown)
        if room < 0:
            break
        kept.append(shown)
    return "".join(kept) + "…"
