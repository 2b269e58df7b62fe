"""The isolation watch of omni oracles (every oracle but the core one).

`sync.steps.verify.isolation` proves that an omni oracle's build, verification and goldens
never touch a core environment (the pin's, and an open cycle's target's) or the core
source checkout; the core oracle itself is not watched.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from sync.infra.errors import EnvironmentUnresolved
from sync.port import Port
from sync.records.prefs import Preferences
from sync.steps.verify import isolation
from sync.steps.verify.oracle import CORE_ID, env_path, is_core, source_path, usable_env


def core_env(port: Port, home: Path) -> Path:
    """The environment the core pin measures itself from."""
    return env_path(home, CORE_ID, port.pin_record().pin.commit)


def core_envs(port: Port, home: Path) -> list[Path]:
    """The core environments an omni operation must leave alone: the pin's and, with a
    cycle open, its target's where it is built (the one the advance pins next)."""
    envs = [core_env(port, home)]
    c = port.live_cycle()
    target = env_path(home, CORE_ID, c.target) if c is not None else None
    if target is not None and target not in envs and usable_env(target).is_dir():
        envs.append(target)
    return envs


def forbidden_roots(port: Port, prefs: Preferences, home: Path) -> list[tuple[str, Path]]:
    out = [(f"the core environment {p.name}", p) for p in sorted(home.glob(f"{CORE_ID}-*"))
           if p.is_dir() and re.fullmatch(re.escape(CORE_ID) + "-[0-9a-f]{10}", p.name)]
    src = source_path(prefs, port.config.oracle(CORE_ID))
    if src is not None:
        out.append((f"${port.config.oracle(CORE_ID).source_variable}", src))
    return out


def omni_watch(port: Port, prefs: Preferences, home: Path, oracle_id: str, commit: str,
                op: str) -> AbstractContextManager[isolation.Watch | None]:
    """isolation.watch for omni oracles; a no-op context (yielding None) for the core one."""
    if is_core(oracle_id):
        return nullcontext(None)
    envs, source = _core_side(port, prefs, home, oracle_id)
    return isolation.watch(port, oracle_id, commit, op, core_envs=envs, source=source)


def omni_measure(port: Port, prefs: Preferences, home: Path, oracle_id: str,
                 op: str) -> AbstractContextManager[isolation.Watch | None]:
    """`omni_watch` for a dry run: its check is measured (`Watch.check`), never recorded."""
    if is_core(oracle_id):
        return nullcontext(None)
    envs, source = _core_side(port, prefs, home, oracle_id)
    return isolation.measure(op, core_envs=envs, source=source)


def _core_side(port: Port, prefs: Preferences, home: Path,
               oracle_id: str) -> tuple[list[Path], Path | None]:
    """The core environments and the core source checkout an omni operation must leave
    alone; refused when there is no core environment to prove it against."""
    core = core_env(port, home)
    if not usable_env(core).is_dir():
        raise EnvironmentUnresolved(
            f"the core environment {core} does not exist: isolation of {oracle_id} cannot be "
            "proven against it",
            f"build the core oracle first ('upstream-sync oracle build --oracle {CORE_ID}')")
    return core_envs(port, home), source_path(prefs, port.config.oracle(CORE_ID))

