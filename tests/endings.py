"""What the record editors' property tests expect of a line they add: the ending of the
file's lines, worked out apart from `mdscan.newline`, which it checks."""

from __future__ import annotations

import re


def dominant(text: str) -> str:
    """The line ending most lines of `text` end with (LF-split, as git and the ledger read
    it), the first one's on a tie, LF when none has one."""
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    if crlf != lf:
        return "\r\n" if crlf > lf else "\n"
    first = re.search(r"\r?\n", text)
    return first.group() if first else "\n"
