"""State events: one immutable TOML file per pin advance, rollback, stall, omni advance or
correction, chained by hash.

`<sync_dir>/events/NNNN-<kind>.toml`. Each event carries the SHA-256 of the
previous event file, so editing any event breaks the chain at the next one; the
newest event is guarded by git (an existing event file modified in the work tree
or in a commit is flagged). Corrections append; nothing is ever rewritten.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypedDict, get_args

import tomli_w

from sync.infra.atomic import write_bytes
from sync.infra.errors import MalformedRecord
from sync.port import Port

Kind = Literal["advance", "rollback", "stall", "omni-advance", "correction"]
KINDS: tuple[Kind, ...] = get_args(Kind)
SCHEMA = 1
_NAME = re.compile(r"^(\d{4})-([a-z-]+)\.toml$")


class EventDoc(TypedDict):
    schema: int
    index: int
    kind: str
    time: str
    pin_before: str
    pin_after: str
    report: str
    supersedes: int
    previous_hash: str
    detail: str


@dataclass(frozen=True)
class Event:
    index: int
    kind: Kind
    time: str
    pin_before: str
    pin_after: str
    report: str
    supersedes: int  # index of the event this one supersedes, 0 for none
    previous_hash: str
    detail: str
    path: Path
    digest: str  # SHA-256 of this file's bytes


def directory(port: Port) -> Path:
    return port.sync_dir / "events"


def _parse(path: Path, rel: str) -> Event:
    data = path.read_bytes()
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise MalformedRecord(f"state event is not valid TOML ({exc})",
                              "restore it from git: events are immutable", path=rel) from None
    keys = set(EventDoc.__annotations__)
    if set(doc) != keys:
        missing = sorted(keys - set(doc)) or sorted(set(doc) - keys)
        raise MalformedRecord(f"state event has wrong keys ({', '.join(missing)})",
                              "restore it from git: events are immutable", path=rel)
    if doc["kind"] not in KINDS or doc["schema"] != SCHEMA:
        raise MalformedRecord(f"state event kind {str(doc['kind'])[:40]!r} / schema "
                              f"{str(doc['schema'])[:40]!r}",
                              "restore it from git: events are immutable", path=rel)
    # Type checks, not int()/str(): `index = "x"` would escape as a ValueError and
    # `detail = [..]` would pass as text.
    ints = ("index", "supersedes")
    for key in keys - {"schema", "kind"}:
        want: type = int if key in ints else str
        if not isinstance(doc[key], want) or isinstance(doc[key], bool):
            what = "an integer" if want is int else "a string"
            raise MalformedRecord(f"state event {key} is not {what}",
                                  "restore it from git: events are immutable", path=rel)
    return Event(doc["index"], doc["kind"], doc["time"], doc["pin_before"], doc["pin_after"],
                 doc["report"], doc["supersedes"], doc["previous_hash"], doc["detail"], path,
                 hashlib.sha256(data).hexdigest())


def load_all(port: Port) -> list[Event]:
    d = directory(port)
    if not d.is_dir():
        return []
    out = []
    for path in sorted(d.iterdir()):
        if path.name.startswith("."):
            continue
        m = _NAME.match(path.name)
        if m is None:
            raise MalformedRecord("unexpected file among state events",
                                  "events are named NNNN-<kind>.toml; move it away",
                                  path=port.rel(path))
        out.append(_parse(path, port.rel(path)))
    return out


def verify(port: Port, events: list[Event] | None = None) -> list[str]:
    """Chain problems, one line each (empty when the chain holds)."""
    evs = load_all(port) if events is None else events
    problems = []
    previous = ""
    for i, e in enumerate(evs, start=1):
        rel = port.rel(e.path)
        if e.index != i:
            problems.append(f"{rel}:1: event index {e.index}, expected {i} (indexes are "
                            "monotonic, no gaps)")
        if not e.path.name.startswith(f"{e.index:04d}-{e.kind}"):
            problems.append(f"{rel}:1: file name does not match index {e.index} / kind {e.kind}")
        if e.previous_hash != previous:
            problems.append(f"{rel}:1: previous_hash does not match the previous event: an "
                            "earlier event was edited (events are immutable; append a correction)")
        if e.supersedes >= e.index or e.supersedes < 0:
            problems.append(f"{rel}:1: supersedes {e.supersedes} is not an earlier event")
        previous = e.digest
    return problems


def append(port: Port, kind: Kind, *, pin_before: str, pin_after: str, report: str,
           supersedes: int = 0, detail: str = "") -> Event:
    path, data = staged(port, kind, pin_before=pin_before, pin_after=pin_after, report=report,
                        supersedes=supersedes, detail=detail)
    if path.exists():
        raise MalformedRecord("state event already exists", "events are immutable",
                              path=port.rel(path))
    write_bytes(path, data)
    return _parse(path, port.rel(path))


def staged(port: Port, kind: Kind, **fields: str | int) -> tuple[Path, bytes]:
    """The path and bytes `append` would write, for an all-or-nothing advance.

    Refused on a broken chain, whoever appends: nothing builds on a record that was edited.
    """
    evs = load_all(port)
    problems = verify(port, evs)
    if problems:
        raise MalformedRecord(problems[0], "repair the event chain before appending")
    index = len(evs) + 1
    doc: dict[str, str | int] = {"schema": SCHEMA, "index": index, "kind": kind,
           "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "pin_before": "", "pin_after": "", "report": "", "supersedes": 0,
           "previous_hash": evs[-1].digest if evs else "", "detail": ""}
    doc.update(fields)
    data = ("# Immutable state event (upstream-sync). Never edit: append a correction.\n"
            + tomli_w.dumps(doc)).encode()
    return directory(port) / f"{index:04d}-{kind}.toml", data


def git_edits(port: Port) -> list[str]:
    """Existing event files changed in the work tree or by a later commit (immutability).

    Two git processes whatever the number of events; nothing when the port is not a git
    repository (then only the hash chain guards the events).
    """
    from sync.upstream import gitio

    d = directory(port)
    if not d.is_dir() or not (port.root / ".git").exists():
        return []
    rel = port.rel(d)
    out = []
    status = gitio.run(port.root, ["status", "--porcelain", "-z", "--", rel], check=False)
    for item in status.stdout.decode("utf-8", "replace").split("\0"):
        if len(item) > 3 and item[:2].strip() and item[:2] != "??" and "A" not in item[:2]:
            out.append(f"{item[3:]}:1: state event modified or deleted in the work tree "
                       f"({item[:2].strip()}) — events are immutable; restore it and append a "
                       "correction")
    log = gitio.run(port.root, ["log", "--format=%x1e%h", "--diff-filter=MD", "--name-only",
                                "-z", "--", rel], check=False)
    for record in log.stdout.decode("utf-8", "replace").split("\x1e")[1:]:
        parts = [p.strip("\n") for p in record.split("\0") if p.strip("\n")]
        if parts:
            sha, *paths = parts[0].split("\n") + parts[1:]
            for path in paths:
                out.append(f"{path}:1: state event changed by commit {sha} — events are "
                           "immutable; append a correction instead")
    return out
