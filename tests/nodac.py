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


def closed_to_us(path: Path) -> bool:
    """Whether `path` cannot be read without the DAC capabilities (a folder above it closed,
    or the file itself)."""
    probe = subprocess.run([*NO_DAC, "test", "-r", str(path)], capture_output=True,
                           check=False)
    return probe.returncode != 0


def run_closed(closed: Path, inside: Path, port: Path,
               argvs: list[tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Each command run without the DAC capabilities while `closed` is mode 0 (skipped
    where that does not close `inside` to us)."""
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    mode = closed.stat().st_mode & 0o7777
    closed.chmod(0)
    try:
        if not closed_to_us(inside):
            pytest.skip("dropping the DAC capabilities does not close a mode-0 folder here")
        return [subprocess.run([*NO_DAC, sys.executable, "-m", "sync", "--port", str(port),
                                *argv], capture_output=True, text=True, env=environ,
                               check=False)
                for argv in argvs]
    finally:
        closed.chmod(mode)
