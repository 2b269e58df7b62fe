"""Path globs for port-relative POSIX paths: `**` spans directories, `*` and `?` do not.

`**/x` also matches `x` at the top. One implementation for every glob in the config
(header globs, span globs, mapping rules, classification rules, feature globs).
"""

from __future__ import annotations

import re

_CACHE: dict[str, re.Pattern[str]] = {}
_ANY: dict[tuple[str, ...], re.Pattern[str]] = {}  # any_of, by its globs


def pattern(glob: str) -> re.Pattern[str]:
    pat = _CACHE.get(glob)
    if pat is None:
        out = []
        i = 0
        while i < len(glob):
            if glob.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            elif glob.startswith("**", i):
                out.append(".*")
                i += 2
            elif glob[i] == "*":
                out.append("[^/]*")
                i += 1
            elif glob[i] == "?":
                out.append("[^/]")
                i += 1
            else:
                out.append(re.escape(glob[i]))
                i += 1
        pat = re.compile("".join(out) + r"\Z")
        _CACHE[glob] = pat
    return pat


def match(path: str, glob: str) -> bool:
    return pattern(glob).match(path) is not None


def any_of(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern matching what any of `globs` matches (one regex call per path)."""
    pat = _ANY.get(globs)
    if pat is None:
        pat = re.compile("|".join(f"(?:{pattern(g).pattern})" for g in globs) or r"(?!)")
        _ANY[globs] = pat
    return pat
