"""Gate results of a cycle: `<sync_dir>/gates/<target7>.json`, one entry per gate.

A gate is a re-verification step (golden regeneration, a parity suite) that must
PASS before the pin can advance. Results are keyed by gate name (`golden`,
`golden[1/2]`, `parity:op`, `oracle:vllm`) and recorded against the cycle's
frozen target, so a result measured at another target can never satisfy this one.
A host that may not run a gate records it PENDING with the exact command line
that a gate host runs instead (the handoff).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from sync.infra import clock, proc
from sync.infra.atomic import Unreadable, read_record, write_text
from sync.infra.errors import BlockedCycle, MalformedRecord, UsageError
from sync.records import cycle, schema
from sync.records.layout import Layout
from sync.records.mdtext import code, escape
from sync.records.prefs import Preferences
from sync.records.schema import DERIVED
from sync.upstream.gitio import short

SCHEMA = 1
DIR = "gates"
Status = Literal["PASS", "FAIL", "PENDING"]
STATUSES: tuple[Status, ...] = get_args(Status)
# `golden`, `golden[1/2]`, `parity:<suite>`, `oracle:<id>`, `golden:<oracle>`.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+\[\]-]{0,99}")
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class GateResult:
    """One gate's entry; its stored fields are the entry's keys in file order, every one
    present (null where a value does not apply)."""

    name: str = field(metadata=DERIVED)  # the entry's key in `gates`
    status: Status
    command: str
    duration_s: float | None
    host: str
    time: str
    handoff: str | None = None  # PENDING only: what to run on a gate host
    detail: str | None = None  # one line: drift summary, failure reason, why PENDING
    oracle: dict[str, str | None] | None = None  # the oracle identity the gate ran with

    def as_doc(self) -> dict[str, Any]:
        return {"name": self.name, **schema.as_doc(self)}


TIME = "%Y-%m-%dT%H:%M:%SZ"  # how a gate writes its time (UTC)
# A gate host's clock may run a little ahead of this one's.
SKEW = timedelta(minutes=10)


def now() -> str:
    return clock.now().strftime(TIME)


def _parsed_time(text: str) -> datetime | None:
    """The time a gate wrote, or None when `text` is not one."""
    try:
        return datetime.strptime(text, TIME).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def future(result: GateResult, at: datetime | None = None) -> bool:
    """Dated later than now (beyond clock skew): no run wrote that, a hand did."""
    t = _parsed_time(result.time)
    return t is not None and t > (at or clock.now()) + SKEW


def hostname() -> str:
    return socket.gethostname()


def path(port: Layout, target: str) -> Path:
    return port.sync_dir / DIR / f"{target[:7]}.json"


def current_target(port: Layout) -> str:
    """What gates are recorded against: the cycle's frozen target, else the pin."""
    c = cycle.load(port)
    return c.target if c is not None else port.pin_record().pin.commit


def check_target(port: Layout, given: str | None) -> str:
    """The current target; a handoff's `--target` must name the same commit."""
    target = current_target(port)
    if given is not None and not (len(given) >= 7 and target.startswith(given.lower())):
        raise BlockedCycle(
            f"this checkout's gate target is {short(target)}, but --target names {short(given)}",
            "bring the port checkout to the commit the handoff was made from, then run it "
            "again")
    return target


# Deleting the port's record would drop every valid gate in it too: restore or rerun first.
_RESTORE = ("restore the file from git (or from the gate run's artifact), or fix the entry "
            "named by hand; deleting the file drops every gate it records")
# A gate run's artifact (`gates merge FILE`): the port's record is not the broken file.
_REFETCH = ("download the gate run's artifact again, or run the gate again; nothing was "
            "merged")


def _bad(rel: str, message: str, fix: str = _RESTORE, line: int | None = None
         ) -> MalformedRecord:
    return MalformedRecord(message, fix, path=rel, line=line)


def _parse_gate(name: str, raw: object, rel: str, fix: str = _RESTORE) -> GateResult:
    if not NAME.fullmatch(name):
        # Names are reported and carried over as they are: only the shapes gates write.
        raise _bad(rel, f"gate name {name[:40]!r} is not a gate's name", fix)
    if not isinstance(raw, dict):
        raise _bad(rel, f"gate {name!r} is not an object", fix)
    keys = set(schema.keys(GateResult))
    if set(raw) != keys:
        absent, extra = sorted(keys - set(raw)), sorted(set(raw) - keys)
        raise _bad(rel, f"gate {name!r}: " + (f"missing key {absent[0]!r}" if absent
                                               else f"unknown key {extra[0]!r}"), fix)
    problem = schema.mistyped(raw, GateResult)
    if problem is not None:
        raise _bad(rel, f"gate {name!r}: {problem.text}", fix)
    if raw["status"] == "PENDING" and not raw["handoff"]:
        raise _bad(rel, f"gate {name!r} is PENDING without a handoff", fix)
    if _parsed_time(raw["time"]) is None:
        # Merges keep the later run by this time: one in another shape would sort anywhere.
        raise _bad(rel, f"gate {name!r} has time {str(raw['time'])[:40]!r}, not one a gate "
                   "writes (UTC, as 2026-01-02T03:04:05Z)", fix)
    if raw["status"] != "PENDING" and not raw["oracle"] and name.startswith(_WITH_ORACLE):
        # These gates run a verified oracle and record its identity; a result without one
        # was not produced by them (a hand-made PASS must not satisfy an advance).
        raise _bad(rel, f"gate {name!r} is {raw['status']} with no oracle identity: golden "
                   "and oracle gates record the verified oracle they ran", fix)
    duration = raw["duration_s"]
    return GateResult(name=name, **{**raw, "duration_s": None if duration is None
                                    else float(duration)})


_WITH_ORACLE = ("golden", "oracle:")  # gates that run with a verified oracle


def parse(text: str, target: str, *, rel: str, fix: str = _RESTORE) -> list[GateResult]:
    """The gates of a record file for `target`; `fix`: what to do when it is malformed."""
    doc = _document(text, rel=rel, fix=fix)
    if doc["target"] != target:
        raise _bad(rel, f"recorded for target {str(doc['target'])[:40]!r}, not {target}", fix)
    return _gates(doc, rel, fix)


def _document(text: str, *, rel: str, fix: str) -> dict[str, Any]:
    """A gate record's JSON with its three keys and this schema; its target is unchecked."""
    try:
        doc = json.loads(text, object_pairs_hook=_unique)
    except _Twice as exc:
        raise _bad(rel, f"key {exc.key[:40]!r} appears twice in one object (a merge conflict "
                   "resolved by keeping both sides?): which one holds cannot be told",
                   fix) from None
    except json.JSONDecodeError as exc:
        raise _bad(rel, f"not valid JSON ({exc.msg} at column {exc.colno})", fix,
                   exc.lineno) from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, deep nesting
        raise _bad(rel, f"not valid JSON ({type(exc).__name__})", fix) from None
    if not isinstance(doc, dict) or set(doc) != {"schema", "target", "gates"}:
        raise _bad(rel, "expected an object with exactly schema, target and gates", fix)
    if doc["schema"] != SCHEMA:
        raise _bad(rel, f"schema {doc['schema']!r}, expected {SCHEMA}", fix)
    return doc


class _Twice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are distinct: `json` keeps the last of two silently, and a
    gate's FAIL was lost to a PASS after it."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


def _gates(doc: dict[str, Any], rel: str, fix: str) -> list[GateResult]:
    gates = doc["gates"]
    if not isinstance(gates, dict):
        raise _bad(rel, "gates must be an object keyed by gate name", fix)
    return [_parse_gate(name, raw, rel, fix) for name, raw in sorted(gates.items())]


def load(port: Layout, target: str) -> list[GateResult]:
    """Every recorded gate for `target` (full SHA), sorted by name; [] when none ran yet."""
    p = path(port, target)
    if not p.exists():
        return []
    rel = port.rel(p)
    return parse(read_record(p, rel=rel), target, rel=rel)


def render_doc(target: str, results: list[GateResult]) -> str:
    doc = {"schema": SCHEMA, "target": target,
           "gates": {r.name: schema.as_doc(r) for r in sorted(results, key=lambda r: r.name)}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def locked(port: Layout, wait_s: float = 60.0) -> AbstractContextManager[None]:
    """The port lock, waited for: a result measured over hours must not be lost to a
    concurrent `sync` that holds the lock for a second."""
    return port.lock(wait_s=wait_s)


def portable(port: Layout, result: GateResult) -> GateResult:
    """`result` naming no path of this machine: the port root as `.`, the home as `~`.

    A gate record is committed with the cycle and read on other hosts; a command line or
    a failure's last line that names `/home/me/port/...` would be true only here.
    """
    roots = [(str(port.root.resolve()), "."), (str(port.root), ".")]
    home = os.environ.get("HOME")
    if home and len(home) > 1:
        roots.append((home.rstrip("/"), "~"))

    def clean(text: str | None) -> str | None:
        if text is None:
            return None
        for root, alias in roots:
            text = text.replace(root + "/", alias + "/").replace(root, alias)
        return text

    return replace(result, command=clean(result.command) or "", handoff=clean(result.handoff),
                   detail=clean(result.detail))


# How a command writes a record's new text for a target: the CLI's writes the open cycle's
# report with it, in one transaction (`cli.context.gate_store`); a step alone writes the file.
Store = Callable[[str, str], None]


def write(port: Layout) -> Store:
    """The plain store: the record file alone, atomically."""
    return lambda target, text: write_text(path(port, target), text)


def record(port: Layout, target: str, result: GateResult, *, keep_same: bool = False,
           store: Store | None = None) -> None:
    """Replace `result.name`'s entry for `target`, atomically and under the port lock,
    through `store` (default: the file alone, `write`).

    With `keep_same`, an entry that `result` would only re-date (`same_outcome`) stays as
    it is and the file is not written: the record is committed with the cycle, and a
    measurement run again that found the same must not leave the port's tree dirty.
    """
    result = portable(port, result)
    with locked(port):
        held = load(port, target)
        old = next((r for r in held if r.name == result.name), None)
        # One dated in the future is rewritten all the same: the advance refuses it, and
        # running the gate again is what its refusal says to do.
        if keep_same and old is not None and not future(old) and same_outcome(old, result):
            return
        kept = [r for r in held if r.name != result.name]
        (store or write(port))(target, render_doc(target, [*kept, result]))
        port.forget(f"gates:{target}")


def same_outcome(a: GateResult, b: GateResult) -> bool:
    """Whether `a` and `b` differ at most in when they ran and for how long (the time in
    their oracle identities too)."""
    def undated(r: GateResult) -> GateResult:
        oracle = None if r.oracle is None else {**r.oracle, "time": None}
        return replace(r, time="", duration_s=None, oracle=oracle)

    return undated(a) == undated(b)


def gpu_visible() -> tuple[bool, str]:
    """Whether this host shows an NVIDIA GPU, and how we know."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            done: proc.Completed | None = proc.Command((smi, "-L"), timeout=30).run()
        except proc.ProcessFailed:
            done = None
        if done is not None and done.ok and done.stdout.strip():
            return True, done.stdout.decode("utf-8", "replace").splitlines()[0].strip()
    if Path("/dev/nvidia0").exists():
        return True, "/dev/nvidia0 exists"
    return False, "no GPU visible ('nvidia-smi -L' lists none and /dev/nvidia0 is absent)"


def eligible(prefs: Preferences, needs_gpu: bool) -> tuple[bool, str]:
    """(may this host run the gate, one-line reason)."""
    host = hostname()
    hosts = prefs.gate_hosts
    if not hosts:
        return False, (f"no gate hosts are configured (set SYNC_GATE_HOSTS or gate_hosts in "
                       f"{prefs.file.name})")
    names = {host, host.split(".")[0]}
    if not names & set(hosts):
        return False, f"host {host} is not a gate host ({', '.join(hosts)})"
    if needs_gpu:
        ok, why = gpu_visible()
        if not ok:
            return False, f"host {host} is a gate host but {why}"
        return True, f"host {host} is a gate host with a GPU ({why})"
    return True, f"host {host} is a gate host"


def _oracle_label(oracle: dict[str, str | None]) -> str:
    commit = short(oracle.get("commit") or "?")
    label = f"oracle {escape(oracle.get('oracle') or '?')} @ {code(commit)}"
    runtime = oracle.get("runtime_version")
    if runtime:
        label += f" ({escape(runtime)})"
    against = oracle.get("vllm_commit")
    if against and against != oracle.get("commit"):
        label += f" against vLLM {code(short(against))}"
    return label


def render_section(results: list[GateResult]) -> str:
    """Lines for the report's Gates section ('' when no gate has run for the target)."""
    lines = []
    for r in sorted(results, key=lambda r: r.name):
        # Every value comes from a record (a gate host's, a CI artifact merged in).
        head = f"- {code(r.name)} **{r.status}**"
        if r.status == "PENDING":
            lines.append(f"{head} — {escape(r.detail or 'not run here', reason=True)}; "
                         f"handoff: {code(r.handoff or '')}")
            continue
        parts = [f"{r.duration_s:.1f} s" if r.duration_s is not None else None,
                 f"on {escape(r.host)}", f"at {escape(r.time)}"]
        text = f"{head} — " + " ".join(p for p in parts if p)
        if r.oracle:
            text += f"; {_oracle_label(r.oracle)}"
        if r.detail:
            text += f"; {escape(r.detail, reason=True)}"
        text += f"; command: {code(r.command)}"
        lines.append(text)
    return "".join(line + "\n" for line in lines)


def _newer(a: GateResult, b: GateResult) -> GateResult:
    """The result to keep of two for one gate: a run beats PENDING, then the later run; of
    a PASS and a FAIL of the same second, the FAIL (which ran last cannot be told, and the
    order the files were named in must not decide a gate)."""
    if (a.status == "PENDING") != (b.status == "PENDING"):
        return b if a.status == "PENDING" else a
    if a.time != b.time:
        return b if b.time > a.time else a
    return a if a.status == "FAIL" != b.status else b


def _incoming(f: Path, target: str, whose: str) -> list[GateResult]:
    """The gates of a file the command line names (a gate run's artifact): one that cannot
    be read, or of another target (`whose`: what `target` is), is a usage error, one that
    is malformed is refused with the artifact's fix."""
    try:
        text = read_record(f, rel=str(f))
    except Unreadable as exc:
        raise UsageError(exc.message, "name a gate record file from a gate run's artifact "
                         "(.agents/sync/gates/<target7>.json)") from None
    doc = _document(text, rel=str(f), fix=_REFETCH)
    if doc["target"] != target:
        # A well-formed record of another cycle (an earlier one's, committed beside this
        # one's): downloading it again would not help (walk N5a).
        raise UsageError(
            f"{f} records gates for target {_named(doc['target'])}, but this port's gates "
            f"are for {short(target)} ({whose})",
            f"name only gate records of runs at {short(target)} (gates/{target[:7]}.json in a "
            "gate run's artifact); nothing was merged")
    found = _gates(doc, str(f), _REFETCH)
    ahead = next((r for r in found if future(r)), None)
    if ahead is not None:
        # A later time wins a merge: one from the future would beat every real run.
        raise MalformedRecord(f"gate {ahead.name!r} is dated {ahead.time}, in the future",
                              "check the gate host's clock and run the gate again",
                              path=str(f))
    return found


def _named(target: object) -> str:
    """A record's target as a refusal names it: a SHA shortened, anything else quoted."""
    if isinstance(target, str) and _SHA.fullmatch(target):
        return short(target)
    return repr(str(target)[:40])


def _whose(port: Layout) -> str:
    """What the gate target is, as a refusal names it (`current_target`'s two cases)."""
    return "the open cycle's target" if cycle.load(port) is not None else "the pin"


@dataclass(frozen=True)
class Merged:
    changes: tuple[str, ...]  # one line per gate that changed
    names: tuple[str, ...]  # every gate the files hold, changed or not, sorted
    files: int = 0  # the files merged, each once however often it was named
    text: str | None = None  # the record's new text; None when no gate changed


def _distinct(files: list[Path]) -> list[Path]:
    """The files named, each once (by the file it is, however it was spelled)."""
    seen: dict[str, Path] = {}
    for f in files:
        seen.setdefault(os.path.realpath(f), f)
    return list(seen.values())


@dataclass(frozen=True)
class Incoming:
    """The gate results the files named hold, every file parsed."""

    results: tuple[GateResult, ...]
    files: int  # the files, each once however often it was named


def incoming(port: Layout, target: str, files: list[Path]) -> Incoming:
    """Every file must be a gate record for the same target; nothing is merged unless all
    parse."""
    whose = _whose(port)
    named = _distinct(files)
    return Incoming(tuple(r for f in named for r in _incoming(f, target, whose)), len(named))


def merging(port: Layout, target: str, got: Incoming) -> Merged:
    """What merging `got` into the port's record changes, and its new text; nothing written
    (the caller holds the lock, `locked`, and writes it).

    Each gate's result is decided over every file first, so a gate two files change is one
    change, from what the port held to what it holds now.
    """
    before = {r.name: r for r in load(port, target)}
    kept = dict(before)
    for r in got.results:
        old = kept.get(r.name)
        kept[r.name] = r if old is None else _newer(old, r)
    changes = [_change(before.get(name), new) for name, new in sorted(kept.items())
               if new != before.get(name)]
    text = render_doc(target, list(kept.values())) if changes else None
    return Merged(tuple(changes), tuple(sorted({r.name for r in got.results})), got.files,
                  text)


def _change(old: GateResult | None, new: GateResult) -> str:
    return (f"{new.name}: {old.status if old else 'none'} → {new.status} "
            f"({new.host}, {new.time})")
