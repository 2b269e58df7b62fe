"""Text from upstream or a person, made safe to render into a markdown record.

The report, the inventory and the deviations lines all cite commits and subjects; they
shorten and escape them here, the one place, so a subject can never start a line,
heading, table cell, link or span wherever it lands.
"""

from __future__ import annotations

import re

SUBJECT_MAX = 300

# Backslash-escape markdown's active characters (str.translate: this runs 20,000 times
# for a 10,000-commit report).
_SUBJECT_ESC = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~"})
_REASON_ESC = str.maketrans({c: "\\" + c for c in "\\`*[]<>|"})
_UNESC = re.compile(r"\\(.)")


def escape(text: str, *, reason: bool = False) -> str:
    flat = " ".join(text.split())
    return flat.translate(_REASON_ESC if reason else _SUBJECT_ESC)


def unescape(text: str) -> str:
    return _UNESC.sub(r"\1", text)


def short_subject(subject: str) -> str:
    flat = " ".join(subject.split())
    return flat if len(flat) <= SUBJECT_MAX else flat[: SUBJECT_MAX - 1] + "…"
