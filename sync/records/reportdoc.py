"""What other commands read of a sync report without rendering one: the cycle state its
markdown says, and its JSON companion (refused typed when it is not what `sync` writes).

`steps/report.py` writes both; this module only reads them, so `status` and `check` need
none of the classification code that writing takes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, cast, get_args

from sync.infra.errors import MalformedRecord

# RETARGETED: a retarget moved the cycle to another target, or a rollback reopened the cycle
# before it; this report is no longer the open cycle's.
State = Literal["ACTIVE", "STALLED", "ADVANCED", "RETARGETED"]
STATE_LINE = re.compile(r"^- Cycle state: (?P<state>[A-Z]+)(?=\r?$)", re.MULTILINE)
_DOC_KEYS = {"state": str, "counts": dict, "carry_over": list}


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
