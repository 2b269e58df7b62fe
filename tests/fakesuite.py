"""A copy of the real noxfile over a fake upstream-sync that installs with no index.

The fake package is built by an in-tree PEP 517 backend with no requirements, so pip
and uv install it hermetically (`PIP_NO_INDEX`, `UV_OFFLINE`). Its `upstream-sync`
records each call (arguments, `SYNC_INVOKED_FROM`, the installed code's version) in
`calls.jsonl`, prints `$FAKE_STDOUT` and exits with `$FAKE_EXIT`; each build appends to
`builds.log`. Tests
run the real `nox` on it as a person or a CI job would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[build-system]
requires = []
build-backend = "fakebackend"
backend-path = ["backend"]

[project]
name = "upstream-sync"
version = "0.1.0"

[dependency-groups]
test = []
lint = []
"""

BACKEND = '''\
import base64
import hashlib
import os
import pathlib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
INFO = "upstream_sync-0.1.0.dist-info"
WHEEL = "upstream_sync-0.1.0-py3-none-any.whl"


def _files():
    files = {f"sync/{p.name}": p.read_bytes() for p in sorted((ROOT / "sync").glob("*.py"))}
    files[f"{INFO}/METADATA"] = b"Metadata-Version: 2.1\\nName: upstream-sync\\nVersion: 0.1.0\\n"
    files[f"{INFO}/WHEEL"] = (b"Wheel-Version: 1.0\\nGenerator: fakebackend\\n"
                              b"Root-Is-Purelib: true\\nTag: py3-none-any\\n")
    files[f"{INFO}/entry_points.txt"] = b"[console_scripts]\\nupstream-sync = sync.fake:main\\n"
    return files


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(ROOT / "builds.log", "a") as fh:
        fh.write("built\\n")
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, WHEEL), "w") as zf:
        for path, data in _files().items():
            zf.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
        record.append(f"{INFO}/RECORD,,")
        zf.writestr(f"{INFO}/RECORD", "\\n".join(record) + "\\n")
    return WHEEL
'''

FAKE_CLI = '''\
import json
import os
import sys

VERSION = {version!r}


def main():
    with open(os.environ["FAKE_CALLS"], "a") as fh:
        fh.write(json.dumps({{"argv": sys.argv[1:], "version": VERSION,
                             "invoked_from": os.environ.get("SYNC_INVOKED_FROM")}}) + "\\n")
    sys.stdout.write(os.environ.get("FAKE_STDOUT", ""))
    return int(os.environ.get("FAKE_EXIT", "0"))
'''


@dataclass(frozen=True)
class Suite:
    root: Path

    @property
    def noxfile(self) -> Path:
        return self.root / "noxfile.py"

    def set_version(self, version: str) -> None:
        (self.root / "sync" / "fake.py").write_text(FAKE_CLI.format(version=version))

    def builds(self) -> int:
        log = self.root / "builds.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def calls(self) -> list[dict[str, object]]:
        log = self.root / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [json.loads(line) for line in lines]

    def environ(self, **extra: str) -> dict[str, str]:
        """The caller's environment, with every installer kept off the network."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "UV_", "VIRTUALENV_", "NOX_"))
               and k not in ("VIRTUAL_ENV", "FAKE_EXIT", "FAKE_STDOUT")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   UV_OFFLINE="1", UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never",
                   VIRTUALENV_NO_PERIODIC_UPDATE="1", FAKE_CALLS=str(self.root / "calls.jsonl"))
        env.update(extra)
        return env

    def nox(self, *args: str, cwd: Path, backend: str | None = None,
            **env: str) -> subprocess.CompletedProcess[str]:
        """`nox -f <suite>/noxfile.py ARGS` from `cwd`, as a person inside a port runs it."""
        forced = ["--force-venv-backend", backend] if backend else []
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(self.noxfile), "--envdir",
                               str(self.root / ".nox"), *forced, *args], cwd=cwd,
                              env=self.environ(**env), capture_output=True, text=True,
                              check=False)


def make_suite(path: Path) -> Suite:
    (path / "backend").mkdir(parents=True)
    (path / "sync").mkdir()
    shutil.copy(ROOT / "noxfile.py", path / "noxfile.py")
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "backend" / "fakebackend.py").write_text(BACKEND)
    (path / "sync" / "__init__.py").write_text("")
    suite = Suite(path)
    suite.set_version("1")
    return suite


def nox_backends() -> list[str]:
    """The venv backends nox can use here without a network: uv where nox finds it."""
    from sync.steps.verify.build import find_uv

    return ["virtualenv", *(["uv"] if find_uv() is not None else [])]
