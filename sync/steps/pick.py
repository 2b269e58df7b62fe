"""Which commit a person names on the command line: a SHA prefix or `#N` (its PR number).

One reader for every command that takes one (`explain`, `decide`), so that a key is read
the same way and every refusal reads alike: what is wrong with the key, then what to give.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sync.infra.errors import UsageError
from sync.port import Port
from sync.upstream import history
from sync.upstream.gitio import short
from sync.upstream.history import Commit

MIN_PREFIX = 4  # hex digits: shorter prefixes name too many commits to be worth reading
_PR = re.compile(r"#([0-9]{1,12})")
_HEX = re.compile(r"[0-9a-f]+")
_NUMBER = re.compile(r"[0-9]{1,12}")
GIVE = f"give a SHA prefix (at least {MIN_PREFIX} hex digits) or #N (a PR number)"
NOT_FOUND_FIX = "pick an entry from the cycle's report ('upstream-sync sync' writes it)"


class Named(Protocol):
    """What a key names: a commit, or a report's entry of one."""

    @property
    def sha(self) -> str: ...

    @property
    def pr(self) -> int | None: ...


def index(commits: Sequence[Named], key: str, *, carried: bool = False) -> int:
    """The index in `commits` of the one commit `key` names; refused unless exactly one.
    `carried`: `commits` holds those carried over into the cycle too, as its refusal says."""
    scope = "the cycle's range" + (" (nor carried over into it)" if carried else "")
    text = key.strip().lower()
    pr = _PR.fullmatch(text)
    if pr is not None:
        n = int(pr.group(1))
        return _one(commits, [i for i, c in enumerate(commits) if c.pr == n], f"PR #{n}",
                    scope, "give the SHA of the one you mean")
    by_pr = [i for i, c in enumerate(commits)
             if _NUMBER.fullmatch(text) and c.pr == int(text)]
    hits = [i for i, c in enumerate(commits)
            if len(text) >= MIN_PREFIX and c.sha.startswith(text)]
    if not by_pr:
        _check_prefix(key, text)
    elif not hits:
        raise UsageError(f"{text} is not a SHA prefix of a commit in the cycle's range, but "
                         f"#{text} is a PR of it (`{short(commits[by_pr[0]].sha)}`)",
                         f"give #{text} for the PR")
    else:
        raise UsageError(f"{text} is both a SHA prefix ({short(commits[hits[0]].sha)}) and PR "
                         f"#{text} ({short(commits[by_pr[0]].sha)})",
                         f"give #{text} or more of the SHA")
    return _one(commits, hits, f"commit {text}", scope, "give more of the SHA")


def _check_prefix(key: str, text: str) -> None:
    if not _HEX.fullmatch(text) or len(text) > 40:
        raise UsageError(f"{key!r} is neither a SHA prefix nor #N", GIVE)
    if len(text) < MIN_PREFIX:
        raise UsageError(f"{key!r} is too short for a SHA prefix ({len(text)} hex digit(s), "
                         f"at least {MIN_PREFIX} needed)",
                         f"give at least {MIN_PREFIX} hex digits of the SHA, or #N for a PR")


def _one(commits: Sequence[Named], hits: list[int], what: str, scope: str,
         narrow: str) -> int:
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise UsageError(f"{what} is not in {scope}", NOT_FOUND_FIX)
    shown = ", ".join(short(commits[i].sha) for i in hits[:5])
    more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
    raise UsageError(f"{what} matches {len(hits)} commits: {shown}{more}", narrow)


@dataclass(frozen=True)
class Nameable:
    """The commits a command may name: the cycle's range, then those carried into it."""

    range: list[Commit]
    carried: list[Commit]  # carried over by an earlier cycle, outside the range

    @property
    def all(self) -> list[Commit]:
        return self.range + self.carried


def nameable(port: Port) -> Nameable:
    c = port.open_cycle()
    ref = port.reference()
    commits = history.log_range(ref, port.pin_record().pin.commit, c.target)
    seen = {x.sha for x in commits}
    return Nameable(commits, history.log_commits(ref, [s for s in port.carried()
                                                       if s not in seen]))
