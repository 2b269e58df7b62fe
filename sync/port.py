"""Finding the port: `--port`, `$SYNC_PORT`, or the directory we were started from
(`$SYNC_INVOKED_FROM`, set by the nox sessions, which run from the noxfile's folder).

Inside this repository with no port configured, commands run on the bundled
example (materialised by `example.py`) and say so on stderr.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sync.infra.errors import UsageError
from sync.records import config as config_mod
from sync.records import pins


@dataclass(frozen=True)
class Port:
    root: Path
    config: config_mod.Config
    example: bool = False

    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def protocol(self) -> Path:
        return self.root / self.config.protocol

    @property
    def sync_dir(self) -> Path:
        return self.root / self.config.sync_dir

    def pin_record(self) -> pins.PinRecord:
        """The authority: the protocol file's pin block (errors name it port-relative)."""
        return pins.load(self.protocol, rel=self.config.protocol)

    def oracle_files(self) -> list[Path]:
        return sorted(self.root.glob(self.config.oracles))

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def is_port(path: Path) -> bool:
    return (path / config_mod.CONFIG_PATH).exists() or (path / ".agents/upstream-sync.md").exists()


def this_repository(start: Path) -> Path | None:
    """The upstream-sync source checkout containing `start`, if any."""
    for d in (start, *start.parents):
        if (d / "examples/port").is_dir() and (d / "sync/cli/__init__.py").exists():
            return d
    return None


def locate(arg: str | None) -> Port:
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

        root = example.materialise(repo)
        return Port(root, config_mod.load(root), example=True)
    raise UsageError("no port found here", "run inside the port, pass --port DIR or set SYNC_PORT")
