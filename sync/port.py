"""The port and its read model: where the records are, each loaded at most once per process.

Found from `--port`, `$SYNC_PORT`, or the directory we were started from
(`$SYNC_INVOKED_FROM`, set by the nox sessions, which run from the noxfile's folder).
Inside this repository with no port configured, commands run on the bundled
example (materialised by `dev/example.py`) and say so on stderr.

A command locates the port once and hands the `Port` to the steps; the records they
read (pin block, preferences, ledger, inventory, decisions, the cycle, reports) are
parsed on first use and kept, so one run opens each record file once. Whoever
rewrites a record updates what the port holds (`keep`) or drops it (`forget`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sync.infra import atomic, paths
from sync.infra.atomic import port_lock, read_record
from sync.infra.errors import BlockedCycle, EnvironmentUnresolved, SyncError, UsageError
from sync.infra.notes import Notes
from sync.records import carryover as carryover_mod
from sync.records import config as config_mod
from sync.records import decisions as decisions_mod
from sync.records import pins
from sync.records import prefs as prefs_mod
from sync.upstream import gitio

if TYPE_CHECKING:
    # These read the port's paths from a Port, so they are imported where they are loaded.
    # The header parser and the ledger reader too: they are the heaviest modules to import
    # (their patterns are compiled at import), and `status` needs neither.
    from sync.headers import citations as citations_mod
    from sync.headers import oracles as oracles_mod
    from sync.records import ledger as ledger_mod
    from sync.records import oraclefile as oraclefile_mod
    from sync.records.cycle import Cycle
    from sync.records.gates import GateResult
    from sync.records.inventory import Inventory

T = TypeVar("T")


@dataclass(frozen=True)
class Port:
    root: Path
    config: config_mod.Config
    example: bool = False
    # What was loaded, by record name: filled on first use (see `_once`).
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock_depth: list[int] = field(default_factory=lambda: [0], init=False, repr=False,
                                   compare=False)

    def __post_init__(self) -> None:
        # Every record the port keeps is reached without a symbolic link, and nothing under
        # the tool's own folder is one: a write can never land outside the port.
        c = self.config
        for rel in (c.protocol, c.ledger, c.inventory, c.preferences, _fixed_part(c.oracles)):
            paths.confined(self.root, rel)
        paths.no_links_below(self.root, c.sync_dir)

    def record_dirs(self) -> list[tuple[Path, bool]]:
        """Where the tool writes records: (folder, recursive). The tool's own folder whole,
        and the folder of each record it edits in place."""
        c = self.config
        around = {c.protocol, c.ledger, c.inventory, c.preferences, config_mod.CONFIG_PATH}
        dirs = {(self.root / rel).parent for rel in around}
        dirs.add(self.root / _fixed_part(c.oracles))
        return [(self.sync_dir, True), *((d, False) for d in sorted(dirs))]

    def sweep(self) -> list[Path]:
        """Remove the temp files killed writers left in the record folders (see
        `infra.atomic.orphans`); `check` reports those anywhere else in the port."""
        return atomic.sweep(self.record_dirs())

    def path(self, rel: str) -> Path:
        """`rel` under the root (refused when it leaves the port or passes a link)."""
        return paths.confined(self.root, rel)

    @property
    def protocol(self) -> Path:
        return self.root / self.config.protocol

    @property
    def sync_dir(self) -> Path:
        return self.root / self.config.sync_dir

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def _once(self, key: str, load: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = load()
        return cast(T, self._cache[key])

    def forget(self, key: str) -> None:
        """Drop a loaded record (after something outside the port object rewrote it).

        `key` names the accessor ("ledger", "inventory", "decisions", "cycle", ...), or
        is "gates:<target>" for `gates(target)` and "text:<path>" for `text(path)`.
        """
        self._cache.pop(key, None)

    def keep(self, key: str, value: object) -> None:
        """Hold `value` as what the record `key` reads now (its writer just wrote it)."""
        self._cache[key] = value

    def pin_record(self) -> pins.PinRecord:
        """The authority: the protocol file's pin block (errors name it port-relative)."""
        return self._once("pin", lambda: pins.load(self.protocol, rel=self.config.protocol))

    def preferences(self) -> prefs_mod.Preferences:
        return self._once("preferences", lambda: prefs_mod.load(
            self.root / self.config.preferences, variables=self.config.preference_variables))

    def reference(self) -> gitio.Reference:
        """The reference checkout the preferences name (refused when unset or shallow)."""
        return self._once("reference", self._reference)

    def _reference(self) -> gitio.Reference:
        ref = self.preferences().reference()
        if ref.path.resolve() == self.root.resolve():
            # Every vLLM commit would be "missing": say the real mistake, not "run fetch".
            raise EnvironmentUnresolved(
                f"the reference checkout {ref.path} is the port itself",
                "point VLLM_SOURCE (or reference_checkout in the preferences) at a clone of "
                "vLLM")
        return ref

    @property
    def upstream_ref(self) -> str:
        """`<remote>/<branch>`: where a cycle's default target comes from."""
        prefs = self.preferences()
        return f"{prefs.remote}/{prefs.branch}"

    def oracle_files(self) -> list[Path]:
        """The oracle files the glob finds; the registry's own README is not one."""
        return self._once("oracle_files", lambda: sorted(
            p for p in self.root.glob(self.config.oracles)
            if p.is_file() and p.name.lower() != "readme.md"))

    def oracle_records(self) -> list[oraclefile_mod.OracleFile]:
        """The oracle files, each parsed (the first that does not parse refuses them all),
        each read once per command whichever steps ask."""
        from sync.records import oraclefile

        got = [self.oracle_record(p) for p in self.oracle_files()]
        for g in got:
            if isinstance(g, SyncError):
                raise g
        return oraclefile.unique(cast("list[oraclefile_mod.OracleFile]", got))

    def oracle_record(self, path: Path) -> oraclefile_mod.OracleFile | SyncError:
        """One oracle file parsed, or why it does not parse."""
        from sync.records import oraclefile

        cache: dict[Path, oraclefile_mod.OracleFile | SyncError] = self._cache.setdefault(
            "oracle_file", {})
        if path not in cache:
            try:
                cache[path] = oraclefile.load(path, self.root)
            except SyncError as exc:
                cache[path] = exc
        return cache[path]

    def upstreams(self) -> oracles_mod.Upstreams:
        """The oracles citations are attributed to: the oracle files (a file that does not
        parse still names its id: `check` says what is wrong with it) and the configured
        names and path prefixes; and how to tell the port's own paths."""
        return self._once("upstreams", self._upstreams)

    def _upstreams(self) -> oracles_mod.Upstreams:
        from sync.headers import oracles as oracles_mod

        found: dict[str, oracles_mod.Oracle] = {}
        for path in self.oracle_files():
            of = self.oracle_record(path)
            if isinstance(of, SyncError):
                found[path.stem] = oracles_mod.Oracle(path.stem, oracles_mod.names_of(path.stem))
                continue
            pin = of.pin if len(of.pin) == 40 else None
            found[of.id] = oracles_mod.Oracle(of.id, oracles_mod.names_of(of.id, of.upstream),
                                              pin=pin)
        for oc in self.config.oracle_configs:
            base = found.get(oc.id) or oracles_mod.Oracle(oc.id, oracles_mod.names_of(oc.id))
            found[oc.id] = oracles_mod.Oracle(
                oc.id, base.names | {n.lower() for n in oc.names}, oc.paths, base.pin)
        parent = Path(self.config.protocol).parent.as_posix()
        records = ".agents" if parent in ("", ".") else parent
        return oracles_mod.Upstreams(tuple(found.values()), self.config.rewrite_prefixes,
                                     self._local, records.rstrip("/") + "/")

    def _local(self, path: str) -> bool:
        """Whether the port itself holds `path` (at its root, under a ported root, or among
        its records): such a "citation" names the port's own file."""
        cache: dict[str, bool] = self._cache.setdefault("local", {})
        if path not in cache:
            bases = self._once("local_bases", self._local_bases)
            first = path.split("/", 1)[0]
            try:
                cache[path] = any(self._holds(b, first) and os.path.exists(os.path.join(b, path))
                                  for b in bases)
            except (OSError, ValueError):
                cache[path] = False
        return cache[path]

    def _local_bases(self) -> list[str]:
        return [str(self.root), str(self.root / Path(self.config.protocol).parent),
                *(str(self.root / r) for r in self.config.port_roots)]

    def _holds(self, base: str, first: str) -> bool:
        """Whether `base` can hold a path starting `first`: one listing of each base, not a
        `stat` per base for each of a thousand cited paths (nearly all of them upstream's)."""
        if first in ("", ".", "..") or os.sep in first:
            return True
        names: dict[str, frozenset[str]] = self._cache.setdefault("local_names", {})
        if base not in names:
            try:
                names[base] = frozenset(os.listdir(base))
            except OSError:
                names[base] = frozenset()
        return first in names[base]

    def header(self, rel: str, text: str) -> citations_mod.Header:
        """The per-file pin header of port file `rel`, its citations attributed to their
        oracles and the port's own paths moved to its mentions."""
        from sync.headers import citations as citations_mod
        from sync.headers import oracles as oracles_mod

        return oracles_mod.attribute(citations_mod.parse_header(text, rel), self.upstreams(),
                                     rel)

    def ledger_read(self) -> ledger_mod.Read:
        """The parity ledger as read: its table (malformed rows read as well as they can
        be), or why it could not be read at all. Never treat an unreadable one as empty."""
        return self._once("ledger", lambda: self.ledger_of(None))

    def ledger_of(self, data: bytes | None) -> ledger_mod.Read:
        """The parity ledger read from `data`, the bytes it is about to hold (None: from its
        file): what `ledger_read` returns once a command's staged write lands (`keep`)."""
        from sync.infra.cache import Store
        from sync.records import ledger as ledger_mod

        return ledger_mod.read(self.root / self.config.ledger, rel=self.config.ledger,
                               kept=Store(self.root, "ledger"), data=data)

    def ledger(self) -> ledger_mod.Table | None:
        """The parity ledger's table; None when it cannot be read (`ledger_read().problem`
        says why)."""
        return self.ledger_read().table

    def inventory(self) -> Inventory | None:
        """The porting inventory, or None when the port has none."""
        from sync.records import inventory

        return self._once("inventory", lambda: inventory.load(self))

    @property
    def decisions_path(self) -> Path:
        return self.sync_dir / decisions_mod.FILE

    def decisions(self) -> dict[str, decisions_mod.Decision]:
        """The recorded decisions by full SHA (a copy: changing it changes no record)."""
        path = self.decisions_path
        return dict(self._once("decisions",
                               lambda: decisions_mod.load(path, rel=self.rel(path))))

    @property
    def carry_over_path(self) -> Path:
        return carryover_mod.path(self.sync_dir)

    def carried(self) -> dict[str, carryover_mod.Carried]:
        """The carry-over record by full SHA (a copy: changing it changes no record)."""
        path = self.carry_over_path
        return dict(self._once("carried",
                               lambda: carryover_mod.load(path, rel=self.rel(path))))

    def cycle(self) -> Cycle | None:
        """The cycle record (`cycle.toml`): the open cycle, or the last one when an advance
        closed it (its pin is then no longer the pin); None when there is none."""
        from sync.records import cycle

        return self._once("cycle", lambda: cycle.load(self))

    def last_cycle(self) -> Cycle:
        """The cycle record, open or closed; refused when there is none."""
        from sync.records import cycle

        # No cycle means no cycle.toml, so `require` only finds it absent and says so.
        return self.cycle() or cycle.require(self)

    def live_cycle(self) -> Cycle | None:
        """The open cycle: the record, when it is from the pin (after an advance it is the
        closed cycle's until the next is frozen); None otherwise."""
        c = self.cycle()
        return c if c is not None and c.pin == self.pin_record().pin.commit else None

    def open_cycle(self) -> Cycle:
        """The open cycle; refused when there is none (or only a closed one)."""
        c = self.last_cycle()
        pin = self.pin_record().pin.commit
        if c.pin != pin:
            how = ("an advance moved the pin to its target" if c.target == pin else
                   f"it is from {c.pin[:10]}, and the pin is {pin[:10]}")
            raise UsageError(f"no sync cycle is open: the last one, to {c.target[:10]}, is "
                             f"closed ({how})", "run 'upstream-sync fetch' or 'upstream-sync "
                             "sync' to open the next")
        return c

    def gates(self, target: str) -> list[GateResult]:
        """The gate results recorded for `target` (full SHA), sorted by name."""
        from sync.records import gates

        return list(self._once(f"gates:{target}", lambda: gates.load(self, target)))

    def text(self, path: Path) -> str | None:
        """A record file's text (a report, its JSON), None when it does not exist."""
        return self._once(f"text:{path}", lambda: read_record(path, rel=self.rel(path))
                          if path.exists() else None)

    def wrote(self, path: Path, text: str) -> None:
        """`path` now holds `text` (written through `infra.atomic`)."""
        self.keep(f"text:{path}", text)

    @contextlib.contextmanager
    def lock(self, wait_s: float = 0.0) -> Iterator[None]:
        """The port-wide lock; re-entrant within one process (a step under a command's lock).

        Taking it drops every record this object holds: what was read before may have been
        rewritten by the run that held the lock until now, and a read-modify-write must
        read under the lock it writes under. `wait_s` > 0 waits that long for another
        holder (a gate result measured over hours); 0 refuses at once.
        """
        if self._lock_depth[0]:
            self._lock_depth[0] += 1
            try:
                yield
            finally:
                self._lock_depth[0] -= 1
            return
        with _acquired(self.sync_dir / ".lock", wait_s):
            self._cache.clear()
            self._lock_depth[0] = 1
            try:
                yield
            finally:
                self._lock_depth[0] = 0


@contextlib.contextmanager
def _acquired(lock_path: Path, wait_s: float) -> Iterator[None]:
    deadline = time.monotonic() + wait_s
    with contextlib.ExitStack() as stack:
        while True:
            try:
                stack.enter_context(port_lock(lock_path))
                break
            except BlockedCycle:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        yield


def _fixed_part(glob: str) -> str:
    """The folders of a glob before its first wildcard (`.agents/oracles` of `*.md` in it)."""
    parts = []
    for part in PurePosixPath(glob).parts[:-1]:
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    return "/".join(parts) or "."


def is_port(path: Path) -> bool:
    return (path / config_mod.CONFIG_PATH).exists() or (path / ".agents/upstream-sync.md").exists()


def this_repository(start: Path) -> Path | None:
    """The upstream-sync source checkout containing `start`, if any."""
    for d in (start, *start.parents):
        if (d / "examples/port").is_dir() and (d / "sync/cli/__init__.py").exists():
            return d
    return None


def locate(arg: str | None, notes: Notes | None = None) -> Port:
    chosen = arg or os.environ.get("SYNC_PORT")
    if chosen:
        root = Path(chosen).expanduser().resolve()
        if not root.is_dir():
            raise UsageError(f"port {root} is not a directory", "pass --port DIR or set SYNC_PORT")
        if not is_port(root):
            raise UsageError(f"{root} has no .agents/upstream-sync.md",
                             "point --port at the port's root, or run 'upstream-sync init' there")
        return Port(root, config_mod.load(root))
    cwd = Path(os.environ.get("SYNC_INVOKED_FROM") or Path.cwd()).resolve()
    for d in (cwd, *cwd.parents):
        if is_port(d):
            return Port(d, config_mod.load(d))
    repo = this_repository(cwd)
    if repo is not None:
        from sync.dev import example

        root = example.materialise(repo, notes=notes)
        return Port(root, config_mod.load(root), example=True)
    raise UsageError("no port found here", "run inside the port, pass --port DIR or set SYNC_PORT")
