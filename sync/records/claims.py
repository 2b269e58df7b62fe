"""The values a sentence of the PARITY PIN paragraph names, and which the advance can check.

An advance rewrites the paragraph from what it measured (`records/paragraph.rewrite`);
a sentence of the old narrative it cannot measure is kept only if it names no value it
cannot check. The values: commit SHAs, version numbers, PR references, drift claims
("zero drift", "bit-identical", ...) and dates. A SHA is checkable when it names the new
or the prior pin; a version when it is one the advance measured or is given (the release
labels, the oracle's versions); a PR when it is in the cycle's range; a drift claim when
the golden gate measured zero drift; a date when it is the advance's; a commit count or a
tally of a disposition ("145-commit", "94 `INVENTORY`") when it is this cycle's. A claim
that the pin has not moved ("remains unchanged", "has not advanced") is never true after
an advance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHA = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")
_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+(?:\.?(?:post|dev|rc|a|b)\d+)*)(?![\w.])")
_PR = re.compile(r"(?<![\w#])(?:vllm)?#(\d+)\b")
_DRIFT = re.compile(r"\b(?:zero(?: real)?(?: golden)? drift|no(?: real)?(?: golden)? drift|"
                    r"bit-identical|byte-identical|byte-stable|drift-free|without drift)\b",
                    re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_COUNT = re.compile(r"\b(\d[\d,]*)[- ]commits?\b", re.IGNORECASE)
_TALLY = re.compile(r"\b(\d[\d,]*) `?(PORT-NOW|INVENTORY|IGNORE|UNCLASSIFIED)\b`?")
_STILL = re.compile(r"\b(?:(?:remains?|stays?|is still|was kept) (?:unchanged|unmoved|where it "
                    r"(?:is|was))|(?:has|have|had|was|is) not (?:yet )?(?:been )?(?:advanced|"
                    r"moved)|not yet advanced|unchanged until)\b", re.IGNORECASE)
ZERO = "zero drift"  # how the golden gate's summary starts when nothing drifted


@dataclass(frozen=True)
class Known:
    """What the advance can vouch for."""

    commits: tuple[str, ...]  # full SHAs: the new pin, the prior pin
    versions: frozenset[str]
    prs: frozenset[int]
    drift: str | None  # the golden gate's summary at the target; None: no golden gate ran
    date: str
    # ("commits", 113), ("INVENTORY", 70), ...: this cycle's counts; () when not known
    tallies: tuple[tuple[str, int], ...] = ()


def _is_sha(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def _number(digits: str) -> int | None:
    """A count or PR number as written (`1,234`); None for one of more than 18 digits, which
    no cycle has (int() of one over 4300 digits raised ValueError): nothing vouches for it."""
    plain = digits.replace(",", "")
    return int(plain) if len(plain) <= 18 else None


def _differs(digits: str, want: int | None) -> bool:
    n = _number(digits)
    return n is None or n != want


def unchecked(sentence: str, known: Known) -> list[str]:
    """The values `sentence` names that `known` cannot vouch for, each with why."""
    out = [f"{t!r} (a commit that is neither the new nor the prior pin)"
           for t in _SHA.findall(sentence)
           if _is_sha(t) and not any(c.startswith(t) for c in known.commits)]
    out += [f"{m.group(0)!r} (a version the advance did not measure)"
            for m in _VERSION.finditer(sentence) if m.group(1) not in known.versions]
    out += [f"{m.group(0)!r} (a PR outside the cycle's range)" for m in _PR.finditer(sentence)
            if _number(m.group(1)) not in known.prs]
    out += [f"{d!r} ({_drift_why(known.drift)})" for d in _DRIFT.findall(sentence)
            if known.drift is None or not known.drift.startswith(ZERO)]
    out += [f"{d!r} (a date other than the advance's)" for d in _DATE.findall(sentence)
            if d != known.date]
    # Each value once, as first named (a sentence may name one SHA twice).
    return list(dict.fromkeys(out + _counts(sentence, dict(known.tallies))))


def _counts(sentence: str, tallies: dict[str, int]) -> list[str]:
    """Tallies of another cycle, and claims that the pin stayed: a kept sentence would say
    them of the pin this advance writes."""
    out = [f"{m.group(0)!r} (this cycle's range has {tallies.get('commits', '?')} commits)"
           for m in _COUNT.finditer(sentence)
           if _differs(m.group(1), tallies.get("commits"))]
    out += [f"{m.group(0)!r} (this cycle has {tallies.get(m.group(2), 0)} {m.group(2)})"
            for m in _TALLY.finditer(sentence)
            if _differs(m.group(1), tallies.get(m.group(2), -1))]
    return out + [f"{m.group(0)!r} (the advance moves the pin)"
                  for m in _STILL.finditer(sentence)]


def _drift_why(drift: str | None) -> str:
    if drift is None:
        return "no golden gate measured drift"
    return f"the golden gate measured {drift}"
