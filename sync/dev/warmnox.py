"""What a warm nox session adds to its command, measured for `nox -s bench`.

The suite's sources (the noxfile, `pyproject.toml`, `README.md`, `sync/`) are copied
into a temporary directory, so the measurement never touches the checkout's own
`.nox/`. One cold `nox -s SESSION` there creates the session's virtualenv and installs
the package (from the package index, as any first run does). Then warm runs of
`nox -s SESSION -- ARGS` alternate with runs of that virtualenv's own
`upstream-sync SESSION ARGS`, and the overhead is the difference of the medians.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BAR_S = 0.5
SOURCES = ("noxfile.py", "pyproject.toml", "README.md")


@dataclass(frozen=True)
class Warm:
    session: str
    backend: str
    nox_s: tuple[float, ...]  # warm `nox -s SESSION -- ARGS`, wall
    command_s: tuple[float, ...]  # the session venv's `upstream-sync SESSION ARGS`, wall

    @property
    def runs(self) -> int:
        return len(self.nox_s)

    @property
    def overhead_s(self) -> float:
        return statistics.median(self.nox_s) - statistics.median(self.command_s)

    @property
    def ok(self) -> bool:
        return self.overhead_s <= BAR_S

    def as_doc(self) -> dict[str, object]:
        return {"session": self.session, "backend": self.backend, "runs": self.runs,
                "nox_min_s": min(self.nox_s), "nox_median_s": statistics.median(self.nox_s),
                "command_min_s": min(self.command_s),
                "command_median_s": statistics.median(self.command_s),
                "overhead_s": self.overhead_s, "bar_s": BAR_S, "ok": self.ok}

    def line(self) -> str:
        d = self.as_doc()
        return (f"warm `nox -s {self.session}` ({self.backend}, {self.runs} runs): "
                f"nox {d['nox_min_s']:.2f}/{d['nox_median_s']:.2f} s, command "
                f"{d['command_min_s']:.2f}/{d['command_median_s']:.2f} s (min/median): "
                f"overhead {self.overhead_s:.2f} s, bar {BAR_S} s: "
                f"{'ok' if self.ok else 'OVER'}")


class Skipped(Exception):
    """The measurement could not be made here (said why)."""


def copy_suite(suite: Path, dest: Path) -> Path:
    if not (suite / "noxfile.py").is_file() or not (suite / "sync").is_dir():
        raise Skipped(f"{suite} is not an upstream-sync checkout (no noxfile.py or sync/)")
    dest.mkdir(parents=True)
    for name in SOURCES:
        if (suite / name).is_file():
            shutil.copy2(suite / name, dest / name)
    shutil.copytree(suite / "sync", dest / "sync",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GIT_", "SYNC_", "VLLM_", "NOX_")) and k != "VIRTUAL_ENV"}


def _timed(argv: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_environ(), capture_output=True, text=True,
                          check=False)
    return time.perf_counter() - start, proc


def _fail(what: str, proc: subprocess.CompletedProcess[str]) -> Skipped:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return Skipped(f"{what} exited {proc.returncode}: {' | '.join(tail)}")


def measure(suite: Path, work: Path, session: str, args: list[str], runs: int) -> Warm:
    """Cold once, then `runs` warm nox runs alternating with the bare command."""
    copy = copy_suite(suite, work / "suite")
    nox = [sys.executable, "-m", "nox", "-f", str(copy / "noxfile.py"), "-s", session, "--",
           *args]
    _, cold = _timed(nox, work)
    if cold.returncode != 0:
        raise _fail(f"the cold `nox -s {session}`", cold)
    found = re.search(r"Creating virtual environment \((\w+)\)", cold.stderr)
    command = [str(copy / ".nox" / session / "bin" / "upstream-sync"), session, *args]
    nox_s, command_s = [], []
    for _ in range(runs):
        wall, proc = _timed(nox, work)
        if proc.returncode != 0 or "nothing to install" not in proc.stderr:
            raise _fail(f"a warm `nox -s {session}` (expected to install nothing)", proc)
        nox_s.append(wall)
        wall, proc = _timed(command, work)
        if proc.returncode != 0:
            raise _fail(f"`upstream-sync {session}`", proc)
        command_s.append(wall)
    return Warm(session, found.group(1) if found else "?", tuple(nox_s), tuple(command_s))


# The bench reports a measurement or why there is none (a string): both print, and only
# a measurement over the bar fails the bench.
def as_doc(result: Warm | str) -> dict[str, object]:
    return result.as_doc() if isinstance(result, Warm) else {"skipped": result}


def line(result: Warm | str) -> str:
    if isinstance(result, Warm):
        return result.line()
    return f"warm nox session: not measured: {result}"


def ok(result: Warm | str) -> bool:
    return not isinstance(result, Warm) or result.ok
