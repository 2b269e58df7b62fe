"""SHA verification: where each SHA a header cites stands against the parity pin.

A SHA in a header is a claim, not a fact; this checks every one against the
reference checkout with three git processes whatever their number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from sync.infra.errors import EnvironmentUnresolved
from sync.upstream import gitio

ShaStatus = Literal["at-pin", "behind", "ahead", "not-upstream"]

_SHA_WORD = re.compile(r"[0-9a-f]{7,40}")  # a SHA as a header writes it


def classify_shas(ref: gitio.Reference, pin: str, shas: Iterable[str],
                  upstream_ref: str) -> dict[str, ShaStatus]:
    """Where each cited SHA (as written) stands against `pin` on the upstream line.

    Three git processes whatever the number of SHAs: one cat-file to resolve
    them all, one rev-list for the pin's ancestry, one for `pin..upstream_ref`.
    """
    gitio.check_rev(pin)
    gitio.check_rev(upstream_ref)
    wanted = list(dict.fromkeys(shas))
    probe = [s for s in wanted if _SHA_WORD.fullmatch(s)]
    pin_sha, up_sha, commits = _resolve(ref, pin, upstream_ref, probe)
    behind = set(ref.git("rev-list", "--end-of-options", pin_sha).decode().split())
    ahead = set(ref.git("rev-list", "--end-of-options", up_sha, f"^{pin_sha}").decode().split())
    out: dict[str, ShaStatus] = {s: "not-upstream" for s in wanted}
    for s, commit in commits.items():
        if commit == pin_sha:
            out[s] = "at-pin"
        elif commit in behind:
            out[s] = "behind"
        elif commit in ahead:
            out[s] = "ahead"
    return out


def _resolve(ref: gitio.Reference, pin: str, upstream_ref: str,
             probe: list[str]) -> tuple[str, str, dict[str, str]]:
    """(pin commit, upstream commit, cited SHA -> the one commit it names), one cat-file.

    A SHA that is missing, ambiguous, or names a tag, tree or blob names no commit.
    """
    names = [f"{pin}^{{commit}}", f"{upstream_ref}^{{commit}}"]
    for s in probe:
        names += [s, f"{s}^{{commit}}"]  # plain: is it a commit at all; peeled: which commit
    found = gitio.batch_check(ref, names)
    if found[0] is None:
        raise EnvironmentUnresolved(f"the pin {pin} is not a commit in {ref.path}",
                                    "fetch the reference checkout, or fix the pin")
    if found[1] is None:
        raise EnvironmentUnresolved(f"{upstream_ref} does not resolve in {ref.path}",
                                    "run the fetch step first")
    commits = {}
    for i, s in enumerate(probe):
        plain, peeled = found[2 + 2 * i], found[3 + 2 * i]
        if peeled is not None and (plain is None or plain[1] == "commit"):
            commits[s] = peeled[0]
    return found[0][0], found[1][0], commits
