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
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, get_args

import tomli_w

from sync.infra import clock
from sync.infra.atomic import decode_record, read_record_bytes, write_bytes
from sync.infra.errors import MalformedRecord
from sync.records import schema
from sync.records.layout import Layout
from sync.records.schema import DERIVED
from sync.upstream import gitio
from sync.upstream.gitio import short

Kind = Literal["advance", "rollback", "stall", "omni-advance", "correction"]
KINDS: tuple[Kind, ...] = get_args(Kind)
SCHEMA = 1
_NAME = re.compile(r"^(\d{4})-([a-z-]+)\.toml$")
_RESTORE = "restore it from git: events are immutable"


@dataclass(frozen=True)
class Event:
    """One event file: `schema`, then these stored fields in file order (every one present)."""

    index: int
    kind: Kind
    time: str
    pin_before: str = ""
    pin_after: str = ""
    report: str = ""
    supersedes: int = 0  # index of the event this one supersedes, 0 for none
    previous_hash: str = ""
    detail: str = ""
    path: Path = field(default=Path(), metadata=DERIVED)
    digest: str = field(default="", metadata=DERIVED)  # SHA-256 of this file's bytes


KEYS: tuple[str, ...] = ("schema", *schema.keys(Event))


def directory(port: Layout) -> Path:
    return port.sync_dir / "events"


def _toml(data: bytes, rel: str) -> dict[str, Any]:
    text = decode_record(data, rel=rel)
    return schema.parse_toml(text, rel, _RESTORE)


def _validate(doc: dict[str, Any], rel: str) -> None:
    if set(doc) != set(KEYS):
        wrong = sorted(set(KEYS) - set(doc)) or sorted(set(doc) - set(KEYS))
        raise MalformedRecord(f"state event has wrong keys ({', '.join(wrong)})", _RESTORE,
                              path=rel)
    if doc["kind"] not in KINDS or doc["schema"] != SCHEMA:
        raise MalformedRecord(f"state event kind {str(doc['kind'])[:40]!r} / schema "
                              f"{str(doc['schema'])[:40]!r}", _RESTORE, path=rel)
    # Type checks, not int()/str(): `index = "x"` would escape as a ValueError and
    # `detail = [..]` would pass as text.
    problem = schema.mistyped(doc, Event)
    if problem is not None:
        raise MalformedRecord(f"state event {problem.key} is not {problem.want}", _RESTORE,
                              path=rel)
    # `report` becomes a path (a rollback reopens it): port-relative, never a parent.
    report = PurePosixPath(doc["report"])
    if doc["report"] and (report.is_absolute() or ".." in report.parts or "\\" in doc["report"]
                          or not doc["report"].isprintable()):
        raise MalformedRecord(f"state event report {doc['report'][:60]!r} is not a sync "
                              "report's port-relative path", _RESTORE, path=rel)


def _digest(data: bytes) -> str:
    """An event's hash, over its text with LF line endings: a checkout that gives it CRLF
    (core.autocrlf, `eol=crlf`) holds the same event. The tool writes LF, so the digests
    of every chain written so far are what they were."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def _from_bytes(data: bytes, path: Path, rel: str) -> Event:
    doc = _toml(data, rel)
    _validate(doc, rel)
    return Event(**schema.values(doc, Event), path=path, digest=_digest(data))


def _parse(path: Path, rel: str) -> Event:
    return _from_bytes(read_record_bytes(path, rel=rel), path, rel)


def load_all(port: Layout) -> list[Event]:
    d = directory(port)
    if not d.is_dir():
        return []
    out = []
    for path in sorted(d.iterdir()):
        if path.name.startswith("."):
            continue
        if _NAME.match(path.name) is None:
            raise MalformedRecord("unexpected file among state events",
                                  "events are named NNNN-<kind>.toml; move it away",
                                  path=port.rel(path))
        out.append(_parse(path, port.rel(path)))
    return out


def backs(evs: list[Event], report: str, state: str) -> bool:
    """Whether the events record `state` for `report` (port-relative): ADVANCED by an advance
    no rollback superseded, STALLED by a stall; the other states need no event."""
    if state not in ("ADVANCED", "STALLED"):
        return True
    if state == "STALLED":
        return any(e.kind == "stall" and e.report == report for e in evs)
    undone = {e.supersedes for e in evs if e.kind == "rollback"}
    return any(e.kind == "advance" and e.report == report and e.index not in undone
               for e in evs)


def _link_problems(e: Event, i: int, previous: str, rel: str) -> list[str]:
    """What is wrong with `e` as the chain's `i`th event after one whose digest is `previous`."""
    problems = []
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
    return problems


def verify(port: Layout, events: list[Event] | None = None) -> list[str]:
    """Chain problems, one line each (empty when the chain holds)."""
    evs = load_all(port) if events is None else events
    problems = []
    previous = ""
    for i, e in enumerate(evs, start=1):
        problems += _link_problems(e, i, previous, port.rel(e.path))
        previous = e.digest
    return problems


def append(port: Layout, kind: Kind, **fields: str | int) -> Event:
    """Write the next event (`fields`: any of Event's stored fields after `kind`)."""
    path, data = staged(port, kind, **fields)
    if path.exists():
        raise MalformedRecord("state event already exists", "events are immutable",
                              path=port.rel(path))
    write_bytes(path, data)
    return _parse(path, port.rel(path))


def staged(port: Layout, kind: Kind, **fields: str | int) -> tuple[Path, bytes]:
    """The path and bytes `append` would write, for an all-or-nothing advance.

    Refused on a broken chain, whoever appends: nothing builds on a record that was edited.
    """
    evs = load_all(port)
    problems = verify(port, evs)
    if problems:
        raise MalformedRecord(problems[0], "repair the event chain before appending")
    index = len(evs) + 1
    draft = Event(index, kind, clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                  previous_hash=evs[-1].digest if evs else "")
    # `fields` replace the draft's values in place (the file's key order stays); an unknown
    # one is refused below, as a file with wrong keys.
    doc = {"schema": SCHEMA, **schema.as_doc(draft), **fields}
    path = directory(port) / f"{index:04d}-{kind}.toml"
    data = ("# Immutable state event (upstream-sync). Never edit: append a correction.\n"
            + tomli_w.dumps(doc)).encode()
    _from_bytes(data, path, port.rel(path))  # fail closed: what is written must read back
    return path, data


def git_edits(port: Layout) -> list[str]:
    """Existing event files changed in the work tree or by a later commit (immutability).

    Two git processes whatever the number of events; nothing when the port is not a git
    repository (then only the hash chain guards the events).
    """
    d = directory(port)
    # The port's place in its work tree: a subfolder of a monorepo is guarded as well.
    prefix = gitio.work_tree_prefix(port.root) if d.is_dir() else None
    if prefix is None:
        return []
    rel = port.rel(d)
    return _worktree_edits(port.root, rel, prefix) + _committed_edits(port.root, rel)


def _worktree_edits(root: Path, rel: str, prefix: str) -> list[str]:
    status = gitio.run(root, ["status", "--porcelain", "-z", "--", rel], check=False)
    items = status.stdout.decode("utf-8", "replace").split("\0")
    # A new event (untracked, or added and unchanged since: "A ") is an append; any other
    # change is an edit, an added one edited or deleted before its commit ("AM", "AD")
    # included. git names the paths from the repository's root: the port's prefix comes off.
    return [f"{item[3 + len(prefix):]}:1: state event modified or deleted in the work tree "
            f"({item[:2].strip()}) — events are immutable; restore it and append a correction"
            for item in items
            if len(item) > 3 and item[:2].strip() and item[:2] not in ("??", "A ")]


def pin_problems(port: Layout, evs: list[Event], pin: str) -> list[str]:
    """The pin block must be where the newest pin-moving event left it: otherwise that
    event was deleted or edited (or the pin was moved by hand), which an event not yet
    committed leaves no other trace of."""
    moving = [e for e in evs if e.kind in ("advance", "rollback")]
    if not moving or moving[-1].pin_after == pin:
        return []
    last = moving[-1]
    return [f"{port.rel(last.path)}:1: the newest pin-moving event leaves the pin at "
            f"{short(last.pin_after)}, but the pin block names {short(pin)}: an event was deleted "
            "or edited, or the pin moved without an advance — restore the events from git, "
            "or advance/roll back with upstream-sync"]


def _committed_edits(root: Path, rel: str) -> list[str]:
    log = gitio.run(root, ["log", "--format=%x1e%h", "--diff-filter=MD", "--name-only",
                           "--relative", "-z", "--", rel], check=False)
    out = []
    for record in log.stdout.decode("utf-8", "replace").split("\x1e")[1:]:
        parts = [p.strip("\n") for p in record.split("\0") if p.strip("\n")]
        if parts:
            sha, *paths = parts[0].split("\n") + parts[1:]
            out += [f"{path}:1: state event changed by commit {sha} — events are "
                    "immutable; append a correction instead" for path in paths]
    return out
