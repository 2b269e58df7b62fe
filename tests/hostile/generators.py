"""Hostile input for the hostile-input tests: generators, the example budget, shared checks.

`HOSTILE_DEPTH` (default 1) multiplies every example count and trial count: CI runs the
default, well under a minute for the whole package; `HOSTILE_DEPTH=20` is a deep local run.
"""

from __future__ import annotations

import os
import random
import re

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

DEPTH = max(1, int(os.environ.get("HOSTILE_DEPTH", "1")))


def budget(n: int) -> settings:
    """Hypothesis settings for a property: `n` examples at depth 1, no deadline."""
    return settings(max_examples=n * DEPTH, deadline=None, derandomize=DEPTH == 1,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def trials(n: int) -> int:
    return n * DEPTH


# Every character `str.splitlines` breaks at, then the other openers a record must never
# get from a value: headings, list items, table cells, links, comments, pin spans, code.
BREAKS = ("\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
FRAGMENTS = (
    *BREAKS, "\t", "\x00", "\x1b[31m", "\u202e", "\ufeff", " ", "  ",
    "#", "## IGNORE", "# ", "- ", "* ", "+ ", "1. ", "> ", "|", "\\|", "| a | b |", "|---|",
    "[", "]", "[x](http://evil)", "![i](x)", "<", ">", "<!--", "-->", "<!--pin:commit-->",
    "<!--/pin-->", "<!--pin:label-->", "<!-- pin", "<script>", "<br>", "`", "``", "```",
    "~~~", "*", "**", "_", "__", "~", "&", "&lt;", "&#60;", "&amp;", "&gt;", "\\", "\\\\",
    " — ", "— ", "PORT-NOW: ", "IGNORE: forged", " _(auto: x)_", "_(", ")_", "(#12)",
    "vllm#12", "(no PR)", "- `0123456789` ", "Active pin (advanced 2026-01-01): ", ":", "http://",
    "a", "Z", "é", "…", "漢", "0123456789abcdef", "vllm/a.py", "/", "..", ".",
)

# What shows nothing, or shows other than it reads, where it is rendered: zero-width and
# other invisible format characters, the bidi marks, overrides and isolates, a tag
# character (it smuggles ASCII unseen), C0 and C1 controls. Not in FRAGMENTS: `sample`'s
# seeded end-to-end runs stay as they are.
INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\u2061", "\u2062",
             "\u2063", "\u2064", "\ufeff", "\u00ad", "\u202a", "\u202b", "\u202c", "\u202d",
             "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\U000e0041", "\x07", "\x9b")
_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")

fragment_text = st.lists(st.sampled_from((*FRAGMENTS, *INVISIBLE)), max_size=14).map("".join)
hostile_text = st.one_of(fragment_text, st.text(max_size=30),
                         st.tuples(fragment_text, st.text(max_size=10)).map("".join))
# A value that says something once flattened (a reason, a subject the report must show).
saying = hostile_text.filter(lambda s: bool(s.split()))


def _component(text: str) -> str:
    return text.replace("/", "∕") or "x"


# A path: components of hostile text (git allows anything but NUL in a path).
hostile_path = st.lists(hostile_text.map(_component), min_size=1, max_size=4).map(
    lambda parts: "/".join(p.replace("\x00", "0") for p in parts))


def sample(rng: random.Random, n: int, *, size: int = 8) -> list[str]:
    """`n` hostile strings from fragments (for end-to-end runs built once, not shrunk)."""
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, size))))
    return out


# -- what a rendered record may never contain -----------------------------------------------

_LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> bool:
    return _LINE_BREAK.search(text) is None


def bare(text: str, chars: str) -> list[str]:
    """The characters of `chars` in `text` that no backslash escapes."""
    out, escaped = [], False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in chars:
            out.append(c)
    return out


def prose(text: str) -> str:
    """`text` without its code spans (whose contents `mdtext.code` vetted); an escaped
    backtick opens none."""
    out, escaped, span = [], False, False
    for c in text:
        if span:
            span = c != "`"
        elif escaped:
            escaped = False
            out.append(c)
        elif c == "`":
            span = True
        else:
            escaped = c == "\\"
            out.append(c)
    return "".join(out)


def angles_safe(text: str) -> bool:
    """No `<` outside code spans (no tag), and no `<!` or `-->` anywhere (no comment or
    pin span, even to a tool that scans the raw text)."""
    return "<" not in prose(text) and "<!" not in text and "-->" not in text


def no_markup(text: str) -> bool:
    """No `<` at all (no comment, no pin span, no tag) and no bare `|`, `[` or `]`."""
    return "<" not in text and not bare(text, "|[]")


def hides_nothing(text: str) -> bool:
    """No character of `INVISIBLE`'s kinds: each is shown (as its escape), none rendered."""
    return _INVISIBLE.search(text) is None
