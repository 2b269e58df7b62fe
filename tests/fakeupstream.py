"""A small pip-installable fake upstream (and a fake port) for the oracle, golden and gate tests.

The fake package's setup.py computes its version from git the way setuptools-scm
does for vLLM: `<tag>.dev<distance>+g<sha9>` past a `v<tag>` tag, the bare tag on
the tagged commit (a released-wheel shape), `0.1.dev<count>+g<sha9>` with no tag
in sight (a shallow clone). `VLLM_USE_PRECOMPILED=1` appends `.precompiled` to
the distribution metadata only, as vLLM's precompiled builds do.
`FAKE_UPSTREAM_TOUCH=<file>` makes the build append to that file: how a test
plays an omni build that writes into the core environment.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from sync import cli
from sync.dev.fastimport import History, git

SETUP_PY = '''\
import os
import subprocess

from setuptools import setup

PACKAGE = {package!r}
DIST = {dist!r}


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def runtime_version():
    sha = git("rev-parse", "--short=9", "HEAD")
    try:
        desc = git("describe", "--tags", "--long", "--match", "v*")
    except subprocess.CalledProcessError:
        return "0.1.dev%s+g%s" % (git("rev-list", "--count", "HEAD"), sha)
    tag, distance, _ = desc.rsplit("-", 2)
    return tag[1:] if distance == "0" else "%s.dev%s+g%s" % (tag[1:], distance, sha)


version = runtime_version()
with open(os.path.join(PACKAGE, "_version.py"), "w") as fh:
    fh.write("__version__ = %r\\n" % version)
dist_version = version
if os.environ.get("VLLM_USE_PRECOMPILED") == "1":
    dist_version += ".precompiled" if "+" in version else "+precompiled"
touch = os.environ.get("FAKE_UPSTREAM_TOUCH")
if touch:
    with open(touch, "a") as fh:
        fh.write("touched by the %s build\\n" % DIST)
setup(name=DIST, version=dist_version, packages=[PACKAGE])
'''

PYPROJECT = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'

INIT = '''\
try:
    from ._version import __version__
except ImportError:  # a source checkout that was never built
    __version__ = "0+unknown"
from .ops import add
'''


@dataclass(frozen=True)
class Upstream:
    path: Path
    released: str  # the tagged commit: builds as the bare tag
    middle: str
    pin: str  # the tip of main
    tag: str

    def runtime(self, commit: str, distance: int) -> str:
        return f"{self.tag}.dev{distance}+g{commit[:9]}"


def make_upstream(path: Path, *, package: str = "vllm", dist: str = "vllm",
                  tag: str = "0.2.1rc1") -> Upstream:
    h = History()
    h.modify("setup.py", SETUP_PY.format(package=package, dist=dist))
    h.modify("pyproject.toml", PYPROJECT)
    h.modify(f"{package}/__init__.py", INIT)
    h.modify(f"{package}/ops.py", "def add(a, b):\n    return a + b\n")
    one = h.commit("Initial import (#1)")
    h.modify(f"{package}/ops.py", "def add(a, b):\n    return b + a\n")
    two = h.commit("[Core] Commute add (#2)")
    h.modify(f"{package}/ops.py", "def add(a, b):\n    return int(a) + int(b)\n")
    three = h.commit("[Core] Coerce add (#3)")
    marks = h.write(path)
    git(path, "tag", f"v{tag}", marks[one])
    git(path, "branch", "side", marks[two])
    return Upstream(path, marks[one], marks[two], marks[three], tag)


PIN_DOC = """\
# Upstream sync protocol

The pin, as a running oracle reports itself.

```parity-pin
vllm_commit = {commit}
vllm_runtime_version = {runtime}
vllm_distribution_version = {dist}
flashinfer_version = {flashinfer}
```
"""

ORACLE_DOC = """\
# Oracle {id}

```oracle-pin
id = {id}
role = {role}
upstream = https://example.invalid/{id}
scope = tests
pin = {pin}
pin_label = {label}
pinned_on = 2026-01-01
gateable = no
evidence = #1 (no gate host yet)
```
"""

FLASHINFER = "0.6.15.post1"

DUMP_PY = '''\
import json, os, sys

import vllm

out = sys.argv[1]
# DUMP_SALT=case=text,... changes the bytes of the named cases only.
salts = dict(item.split("=", 1) for item in os.environ.get("DUMP_SALT", "").split(",") if item)
for case in sys.argv[2:]:
    salt = salts.get(case, "")
    d = os.path.join(out, case)
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "values.txt"), "w") as fh:
        fh.write("%s %s %s %s%s\\n" % (case, vllm.__version__, vllm.add(2, 3), sys.prefix, salt))
    with open(os.path.join(d, "sub", "raw.bin"), "wb") as fh:
        fh.write(bytes(range(16)))
    with open(os.path.join(d, "golden-extra.json"), "w") as fh:
        json.dump({"device": "cpu", "pid": os.getpid()}, fh)
'''


def pin_doc(commit: str, runtime: str, dist: str, flashinfer: str = FLASHINFER) -> str:
    return PIN_DOC.format(commit=commit, runtime=runtime, dist=dist, flashinfer=flashinfer)


def oracle_doc(oracle_id: str, role: str, pin: str, label: str) -> str:
    role = {"core": "primary", "omni": "secondary"}.get(role, role)  # the port's two roles
    return ORACLE_DOC.format(id=oracle_id, role=role, pin=pin, label=label)


def make_port(path: Path, up: Upstream, *, config: str, omni: tuple[str, str] | None = None,
              precompiled: bool = True) -> Path:
    """A port (git repo) pinned to `up.pin`; `omni` = (omni commit, omni label)."""
    runtime = up.runtime(up.pin, 2)
    h = History()
    h.modify(".agents/upstream-sync.md",
             pin_doc(up.pin, runtime, runtime + (".precompiled" if precompiled else "")))
    h.modify(".agents/upstream-sync.toml", config)
    h.modify(".agents/oracles/vllm.md", oracle_doc("vllm", "core", up.pin, runtime.split("+")[0]))
    if omni is not None:
        h.modify(".agents/oracles/vllm-omni.md", oracle_doc("vllm-omni", "omni", *omni))
    h.modify("tools/dump.py", DUMP_PY)
    h.commit("Port skeleton")
    h.write(path)
    return path


def site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def add_distribution(site: Path, name: str, version: str) -> Path:
    """A hand-made installed distribution (metadata only), as a dependency would leave it."""
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (d / "INSTALLER").write_text("test\n")
    (d / "RECORD").write_text(f"{d.name}/METADATA,,\n{d.name}/INSTALLER,,\n{d.name}/RECORD,,\n")
    return d


def copy_env(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def uv_install(env: Path, source: Path, *, editable: bool = False,
               extra_env: dict[str, str] | None = None) -> None:
    """Install `source` into `env` directly (what a hand-made oracle would be)."""
    import os

    from sync.steps.verify.build import find_uv

    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed here: `nox -s tests` installs it (the test dependency "
                    "group), or `pip install uv` in this environment")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("GIT_")}
    environ.update(extra_env or {})
    if not (env / "bin" / "python").exists():
        subprocess.run([str(uv), "venv", "--quiet", str(env)], check=True, env=environ)
    subprocess.run([str(uv), "pip", "install", "--quiet", "--python",
                    str(env / "bin" / "python"), *(["-e"] if editable else []), str(source)],
                   check=True, env=environ)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The real CLI boundary (sync.cli.main), output captured."""
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(argv, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def load_json(text: str) -> object:
    return json.loads(text)
