"""What other commands read of a sync report without rendering one: the cycle state its
markdown says, and its JSON companion (refused typed when it is not what `sync` writes).

`steps/report.py` writes both; this module only reads them, so `status` and `check` need
none of the classification code that writing takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal, cast, get_args

from sync.infra.errors import MalformedRecord

# RETARGETED: a retarget moved the cycle to another target, or a rollback reopened the cycle
# before it; this report is no longer the open cycle's.
State = Literal["ACTIVE", "STALLED", "ADVANCED", "RETARGETED"]
STATE_LINE = re.compile(r"^- Cycle state: (?P<state>[A-Z]+)(?=\r?$)", re.MULTILINE)
_DOC_KEYS = {"state": str, "counts": dict, "carry_over": list}
NOTES = "Notes"  # the title of a report's last section


def refuse_cut_short(text: str, rel: str) -> None:
    """Refuses a report's text that ends before its last section (a truncated file: its last
    entry line, cut, would read back as a hand edit). Every report ends with `## Notes`."""
    if text.strip() and not re.search(rf"^## {NOTES}[ \t]*\r?$", text, re.MULTILINE):
        raise MalformedRecord(
            f"the report ends before its last section ('## {NOTES}'): cut short?",
            "restore it from git, or delete it (and its .json) and run 'upstream-sync sync' "
            "to write it afresh", path=rel)


def state_of(text: str) -> State | None:
    """The cycle state a report's markdown says it is in (None when it says none we know)."""
    m = STATE_LINE.search(text)
    return cast(State, m["state"]) if m is not None and m["state"] in get_args(State) else None


def load_doc(text: str, rel: str) -> dict[str, Any]:
    """A report's JSON companion, refused typed when it is not what `sync` writes."""
    fix = "run 'upstream-sync sync' to rewrite it"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise MalformedRecord("not valid JSON", fix, path=rel) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), t)
                                            for k, t in _DOC_KEYS.items()):
        raise MalformedRecord("not a sync report's JSON (state, counts, carry_over)", fix,
                              path=rel)
    return doc


CarryKind = Literal["PORT-NOW open", "PORT-NOW carried over", "INVENTORY unannotated",
                    "UNCLASSIFIED", "gate", "unmet", "carried in"]

# A stall's unmet line for an unported PORT-NOW commit stands for its "PORT-NOW open" line
# (`syncrun._carry_over` drops that one): counted as what it is, not as one more "unmet"
# (walk-s13 N5: after a stall status said "21 unmet" for 17 PORT-NOW and 4 preconditions).
_KINDS: tuple[tuple[str, CarryKind], ...] = (
    ("- PORT-NOW open: ", "PORT-NOW open"), ("- PORT-NOW carried over: ", "PORT-NOW carried over"),
    ("- INVENTORY unannotated: ", "INVENTORY unannotated"), ("- UNCLASSIFIED: ", "UNCLASSIFIED"),
    ("- gate ", "gate"), ("- unmet: PORT-NOW `", "PORT-NOW open"), ("- unmet: ", "unmet"),
    ("- carried ", "carried in"),
)


def carry_counts(carry_lines: Iterable[str]) -> dict[str, int]:
    """How many carry-over lines of each kind (for a short `status`)."""
    out: dict[str, int] = {}
    for line in carry_lines:
        kind = next((k for prefix, k in _KINDS if line.startswith(prefix)), None)
        if kind is not None:
            out[kind] = out.get(kind, 0) + 1
    return out
