"""Where this tool keeps what it can compute again (`infra.cache`, `infra.memo`).

`$SYNC_CACHE_DIR`, else `$XDG_CACHE_HOME/upstream-sync`, else `~/.cache/upstream-sync`;
`SYNC_CACHE_DIR=off` turns both off. Standard library only: a replayed command reads this
before it imports anything else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

OFF = "off"


def base(environ: Mapping[str, str] | None = None) -> str | None:
    """The folder every port's cache and every memo live under; None when turned off."""
    env = os.environ if environ is None else environ
    chosen = env.get("SYNC_CACHE_DIR")
    if chosen == OFF:
        return None
    if not chosen:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        chosen = os.path.join(xdg, "upstream-sync")
    return os.path.abspath(os.path.expanduser(chosen))
