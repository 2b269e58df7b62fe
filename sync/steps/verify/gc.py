"""`oracle gc`: drop the environments of an oracle that are older than its previous pin.

An environment is kept for rollback while it could be needed: the pin's, the previous
pin's (the pin before the last advance to this one, from the state events) and the
cycle target's are never dropped, nor one whose commit is not an ancestor of the
previous pin (a newer candidate, another branch) or cannot be told. Every other
`<id>-<commit10>` environment goes, with its build log; an adopted environment is a
link, and only the link goes (the venv it names belongs to the port). A dry run asks what
the run asks before it removes anything, so it says what the run would refuse.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from sync.infra.errors import EnvironmentUnresolved, MalformedRecord
from sync.port import Port
from sync.records import events
from sync.records.prefs import Preferences
from sync.steps.verify.build import log_path
from sync.steps.verify.oracle import (
    check_id,
    is_core,
    oracle_home,
    read_marker,
    recorded_commit,
    removal_refusal,
    remove_env,
    source_path,
    usable_env,
)
from sync.upstream import gitio
from sync.upstream.gitio import short


@dataclass(frozen=True)
class Entry:
    env: Path
    commit: str | None
    drop: bool
    why: str
    link: bool  # an adopted environment: only the link is dropped
    # What could not be removed (a run), or could not be (a dry run): `drop` is then whether
    # it went all the same (only its build log stayed).
    failed: EnvironmentUnresolved | None = None

    def line(self, dry_run: bool) -> str:
        verb = ("would drop" if dry_run else "dropped") if self.drop else "kept"
        if self.failed is not None and not self.drop:
            verb = "cannot drop" if dry_run else "could not drop"
        link = " (a link: the environment it names stays)" if self.drop and self.link else ""
        said = f"{verb} {self.env.name}: {self.why}{link}"
        return said if self.failed is None else f"{said}; {self.failed.message}"


def previous_pin(port: Port, oracle_id: str, pin: str) -> str | None:
    """The pin before the last advance that made `pin` the pin (None when none did)."""
    kind = "advance" if is_core(oracle_id) else "omni-advance"
    for e in reversed(events.load_all(port)):
        if e.kind == kind and e.pin_after == pin and e.pin_before and e.pin_before != pin:
            return e.pin_before
    return None


def _recorded(env: Path) -> str | None:
    """The commit the build record names; None without one, or with one that does not
    parse (that only means "ask git"). A record this user may not read is refused: whose
    environment it is cannot be told, so it is not judged (nor dropped) by its name."""
    try:
        record = read_marker(usable_env(env))
    except MalformedRecord:
        return None
    return record.commit if record is not None else None


def _named(env: Path, ref: gitio.Reference | None) -> str | None:
    return gitio.resolve(ref, env.name.rsplit("-", 1)[1]) if ref is not None else None


def plan(port: Port, prefs: Preferences, oracle_id: str) -> list[Entry]:
    check_id(oracle_id)
    home = oracle_home(port, prefs)
    pin = recorded_commit(port, oracle_id)
    previous = previous_pin(port, oracle_id, pin)
    c = port.cycle() if is_core(oracle_id) else None
    # Later keys win: an advanced cycle's record still names its target, which is the pin now.
    keep = {**({c.target: "the cycle's target"} if c is not None else {}),
            **({previous: "the previous pin"} if previous else {}), pin: "the pin"}
    src = source_path(prefs, port.config.oracle(oracle_id))
    ref = gitio.open_repo(src, variable=port.config.oracle(oracle_id).source_variable) \
        if src is not None else None
    floor = previous or pin
    name = re.compile(re.escape(oracle_id) + r"-[0-9a-f]{10}")
    out = []
    for env in sorted(home.glob(f"{oracle_id}-*")):
        if name.fullmatch(env.name):
            out.append(_entry(env, keep, floor, ref))
    return out


def _entry(env: Path, keep: dict[str, str], floor: str, ref: gitio.Reference | None) -> Entry:
    try:
        commit = _recorded(env)
    except EnvironmentUnresolved as exc:  # a listing skips it, saying why, and drops nothing
        return Entry(env, None, False, f"cannot be judged: {exc}", env.is_symlink())
    return _judge(env, commit or _named(env, ref), keep, floor, ref)


def _judge(env: Path, commit: str | None, keep: dict[str, str], floor: str,
           ref: gitio.Reference | None) -> Entry:
    link = env.is_symlink()
    if commit is None or ref is None:
        return Entry(env, commit, False, "its commit cannot be told (no build record, and no "
                     "source checkout that resolves it)", link)
    if commit in keep:
        return Entry(env, commit, False, keep[commit], link)
    if not gitio.has_commit(ref, commit) or not gitio.is_ancestor(ref, commit, floor):
        return Entry(env, commit, False, f"{short(commit)} is not older than {short(floor)}", link)
    return Entry(env, commit, True, f"{short(commit)} is older than {short(floor)}", link)


def run(port: Port, prefs: Preferences, oracle_id: str, *, dry_run: bool) -> list[Entry]:
    entries = plan(port, prefs, oracle_id)
    home = oracle_home(port, prefs)
    act = _foresee if dry_run else _drop
    return [act(e, home, oracle_id) if e.drop else e for e in entries]


def _foresee(e: Entry, home: Path, oracle_id: str) -> Entry:
    """What `_drop` does with `e`, removing nothing: it asks the questions `_drop` asks before
    it removes anything (a dry run that said "would drop" of what the run refuses misled)."""
    refused = removal_refusal(e.env)
    if refused is not None:
        return replace(e, drop=False, failed=refused)
    failed = _log_refusal(e, _log(e, home, oracle_id))
    return e if failed is None else replace(e, failed=failed)


def _drop(e: Entry, home: Path, oracle_id: str) -> Entry:
    """Drop one environment and its build log. One that cannot be removed is said so and the
    others still go: each is an environment of its own."""
    try:
        remove_env(e.env)
    except EnvironmentUnresolved as exc:
        return replace(e, drop=False, failed=exc)
    log = _log(e, home, oracle_id)
    failed = _log_refusal(e, log)
    if failed is None and log is not None:
        try:
            log.unlink(missing_ok=True)
        except OSError as exc:  # what the check cannot foresee (an immutable file, a race)
            failed = _log_not_removed(e, log, exc.strerror)
    return e if failed is None else replace(e, failed=failed)


def _log(e: Entry, home: Path, oracle_id: str) -> Path | None:
    return log_path(home, oracle_id, e.commit) if e.commit is not None else None


def _log_refusal(e: Entry, log: Path | None) -> EnvironmentUnresolved | None:
    """Why the build log cannot be removed, None when it can or there is none."""
    if log is None:
        return None
    try:
        os.lstat(log)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a logs folder this user may not search, or a file in its path
        return _log_not_removed(e, log, exc.strerror)
    if not os.access(log.parent, os.W_OK | os.X_OK):
        return _log_not_removed(e, log, os.strerror(errno.EACCES))
    return None


def _log_not_removed(e: Entry, log: Path, why: str | None) -> EnvironmentUnresolved:
    return EnvironmentUnresolved(
        f"the build log {log} of {e.env.name} cannot be removed ({why})",
        "give this user access to it, or remove it as the user who made it")


def failure(entries: list[Entry]) -> EnvironmentUnresolved | None:
    """The refusal a run ends with when something could not be removed: the first one (the
    listing says each)."""
    return next((e.failed for e in entries if e.failed is not None), None)
