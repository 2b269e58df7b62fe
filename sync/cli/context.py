"""What a command needs besides its arguments: the port, the output streams, the flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sync.port import Port, locate

if TYPE_CHECKING:
    from sync.records.gates import Store


@dataclass
class Context:
    """One per command run; it locates the port once (and finishes an interrupted advance)."""

    port_arg: str | None
    json: bool = False
    debug: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    _port: Port | None = None
    # The one JSON document of a `--json` run: the boundary (`cli.main`) prints it, with
    # the refusal merged in when the command raised after setting it.
    document: Any = None

    @property
    def port(self) -> Port:
        if self._port is None:
            self._port = locate(self.port_arg, notes=self)
            if self._port.example:
                self.note(f"no port configured: running on the bundled example at "
                          f"{self._port.root}")
            from sync.infra.txn import recover

            done = recover(self._port.sync_dir, self._port.root)
            if done:
                self.note(f"note: {done}")
            swept = self._port.sweep()
            if swept:
                self.note(f"note: removed {len(swept)} temp file(s) an interrupted write left "
                          f"({', '.join(self._port.rel(p) for p in swept[:3])}"
                          + (", ..." if len(swept) > 3 else "") + ")")
        return self._port

    def note(self, message: str) -> None:
        """Progress and notices go to stderr so stdout stays parseable."""
        print(message, file=self.err, flush=True)

    def on_terminal(self) -> bool:
        """stderr is a terminal (progress may then redraw; a log gets bounded progress)."""
        isatty = getattr(self.err, "isatty", None)
        return bool(isatty is not None and isatty())

    def progress(self, message: str) -> None:
        """Progress of a slow step: on a terminal only, so logs and pipes keep one-line errors."""
        if self.on_terminal():
            self.note(message)

    @property
    def text(self) -> TextIO:
        """Where the command's text goes: stdout, or stderr under `--json` (stdout then
        holds exactly one JSON document)."""
        return self.err if self.json else self.out

    def say(self, line: str = "") -> None:
        """One line of the command's own text output."""
        print(line, file=self.text)

    def emit_json(self, doc: dict[str, Any]) -> None:
        """Set the command's JSON document; the boundary prints it under `--json` (merged
        with the refusal, should the command raise after this)."""
        self.document = doc


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")


def add_gate_args(p: argparse.ArgumentParser) -> None:
    """The options every gate command shares (golden, parity)."""
    p.add_argument("--strict", action="store_true",
                   help="a gate this host cannot run is an error (exit 6), never a skip")
    p.add_argument("--target", metavar="SHA", default=None,
                   help="refuse unless this checkout's gate target is SHA (handoffs pass it)")
    add_json(p)


def _not_rewritten(ctx: Context, exc: Exception) -> None:
    """A refresh that could not run is said, never an error of the write before it."""
    ctx.note(f"note: the report was not rewritten ({exc}) — run 'upstream-sync sync'")


@dataclass(frozen=True)
class Rewrite:
    """A record a command rewrites: its file, the bytes it is to hold, and what the port's
    accessor for it returns once it holds them (`key` as `Port.keep` names it; `load`
    builds the value from the new bytes, never from the file)."""

    path: Path
    data: bytes
    key: str
    load: Callable[[], object]


def refreshed_with(port: Port, ctx: Context, change: Rewrite) -> str | None:
    """Write `change` and the open cycle's report refreshed to read it, in one transaction
    (a kill between the two left the record new and the report old, which neither `check`
    nor a re-run repaired); the report's path, or None. The refresh runs staged, with the
    port holding the record as it will be written; the record is written alone when no
    cycle is open, its report was never written, or the refresh cannot run (said, as
    `_not_rewritten` says it)."""
    from sync.infra.errors import SyncError
    from sync.steps import syncrun

    with port.lock():
        result = None
        try:
            port.keep(change.key, change.load())
            result = syncrun.staged_refresh(port, ctx)
        except SyncError as exc:
            port.forget(change.key)  # read from the file once it is written
            _not_rewritten(ctx, exc)
        try:
            syncrun.commit_writes(port, result.writes if result else {},
                                  {change.path: change.data},
                                  result.decided if result else None)
        except BaseException:
            port.forget(change.key)  # not written: the file still holds the old bytes
            raise
    return None if result is None else port.rel(result.path)


def gate_store(port: Port, ctx: Context) -> Store:
    """How a gate command writes the gate record: with the open cycle's report refreshed to
    show it (its Gates section and Carry-over, its JSON's gates), in one transaction, as
    `refreshed_with` writes any record the report reads; one for `gates.record(store=)`
    (golden, parity, oracle verify) and `gates merge` alike."""
    from sync.records import gates

    def store(target: str, text: str) -> None:
        record = gates.path(port, target)
        refreshed_with(port, ctx, Rewrite(
            record, text.encode("utf-8"), f"gates:{target}",
            lambda: gates.parse(text, target, rel=port.rel(record))))
    return store
