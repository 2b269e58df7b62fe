"""Commands run as root without the capabilities that pass over file modes.

The tests run as root, for whom a closed folder or file is no bar; EACCES is what it gives
any other user. `setpriv` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH for one command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NO_DAC = ("setpriv", "--bounding-set=-dac_override,-dac_read_search",
          "--inh-caps=-dac_override,-dac_read_search")


def need_setpriv() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to drop the DAC capabilities")


def closed_to_us(path: Path, test: str = "-r") -> bool:
    """Whether `path` cannot be read (`test -w`: written) without the DAC capabilities (a
    folder above it closed, or the path itself)."""
    probe = subprocess.run([*NO_DAC, "test", test, str(path)], capture_output=True,
                           check=False)
    return probe.returncode != 0


def run_closed(closed: Path, inside: Path, port: Path, argvs: list[tuple[str, ...]], *,
               mode: int = 0) -> list[subprocess.CompletedProcess[str]]:
    """Each command run without the DAC capabilities while `closed` has `mode` (0: closed;
    skipped where that does not close `inside` to us, or another mode `closed` to writes)."""
    was = closed.stat().st_mode & 0o7777
    closed.chmod(mode)
    try:
        if not (closed_to_us(closed, "-w") if mode else closed_to_us(inside)):
            pytest.skip(f"dropping the DAC capabilities does not close a mode-{mode:o} folder "
                        "here")
        return run_without(port, argvs)
    finally:
        closed.chmod(was)


def run_without(port: Path, argvs: list[tuple[str, ...]], also: tuple[str, ...] = ()
                ) -> list[subprocess.CompletedProcess[str]]:
    """Each command run without the DAC capabilities and the capabilities `also` names."""
    caps = ",".join(f"-{c}" for c in ("dac_override", "dac_read_search", *also))
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    return [subprocess.run(["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}",
                            sys.executable, "-m", "sync", "--port", str(port), *argv],
                           capture_output=True, text=True, env=environ, check=False)
            for argv in argvs]
