"""A small pip-installable fake upstream (and a fake port) for the oracle, golden and gate tests.

The fake package's setup.py computes its version from git the way setuptools-scm
does for vLLM: `<tag>.dev<distance>+g<sha9>` past a `v<tag>` tag, the bare tag on
the tagged commit (a released version), `0.1.dev<count>+g<sha9>` with no tag in sight
(a shallow clone), `.dYYYYMMDD` over uncommitted changes; it writes `_version.py` with
`__version__` and `__commit_id__` (`g<sha9>`, None for a pretended version). It
honours what forges vLLM's version (`SETUPTOOLS_SCM_PRETEND_VERSION` and `_METADATA`,
their `VCS_VERSIONING_` forms, `VLLM_VERSION_OVERRIDE`) and adds the distribution's
build-mode suffix as vLLM's `setup.py` does (`VLLM_TARGET_DEVICE` `empty` / `cpu`, or
`VLLM_USE_PRECOMPILED=1`: `.precompiled`, extracting `*.so` from the wheel at
`VLLM_PRECOMPILED_WHEEL_LOCATION`, or from `FAKE_WHEEL_INDEX/<commit>/metadata.json` as
the per-commit nightly index; without either it fails as vLLM does offline). A `cpu`
build "compiles" `_C.abi3.so`.
`FAKE_UPSTREAM_TOUCH=<file>` makes the build append to that file: how a test
plays an omni build that writes into the core environment.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sync import cli
from sync.dev.fastimport import History, git

SETUP_PY = '''\
import ast
import json
import os
import subprocess
import time
import urllib.error
import zipfile

from setuptools import setup

PACKAGE = {package!r}
DIST = {dist!r}


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def pretended():
    # What setuptools-scm (through vcs-versioning) takes from the environment.
    for prefix in ("SETUPTOOLS_SCM_", "VCS_VERSIONING_"):
        if os.environ.get(prefix + "PRETEND_VERSION"):
            return os.environ[prefix + "PRETEND_VERSION"], None
    return None


def metadata():
    for prefix in ("SETUPTOOLS_SCM_", "VCS_VERSIONING_"):
        text = os.environ.get(prefix + "PRETEND_METADATA")
        if text:  # {{node="g<sha>", distance=N}}
            pairs = (item.split("=", 1) for item in text.strip("{{}} ").split(","))
            return {{k.strip(): ast.literal_eval(v.strip()) for k, v in pairs}}
    return {{}}


def scm_version():
    forged = pretended()
    if forged:
        return forged
    meta = metadata()
    node = meta.get("node") or "g" + git("rev-parse", "--short=9", "HEAD")
    try:
        desc = git("describe", "--tags", "--long", "--match", "v*")
    except subprocess.CalledProcessError:
        return "0.1.dev%s+%s" % (git("rev-list", "--count", "HEAD"), node), node
    tag, distance, _ = desc.rsplit("-", 2)
    distance = str(meta.get("distance", distance))
    dirty = git("status", "--porcelain", "--untracked-files=no") != ""
    date = ".d" + time.strftime("%Y%m%d") if dirty else ""
    if distance == "0" and not dirty:
        return tag[1:], node
    return "%s%s+%s%s" % (tag[1:], "" if distance == "0" else ".dev" + distance, node,
                          date), node


def extract(location):
    print("Using existing wheel at %s" % location)
    found = []
    with zipfile.ZipFile(location) as wheel:
        for name in wheel.namelist():
            if name.startswith(PACKAGE + "/") and name.endswith(".so"):
                print("[extract] %s" % name)
                with open(name, "wb") as fh:
                    fh.write(wheel.read(name))
                found.append(name)
    return found


def precompiled():
    location = os.environ.get("VLLM_PRECOMPILED_WHEEL_LOCATION")
    if location:
        print("Using user-specified precompiled wheel location: %s" % location)
        return extract(location)
    commit = os.environ.get("VLLM_PRECOMPILED_WHEEL_COMMIT", "") or "nightly"
    print("Using precompiled wheel commit %s with variant None" % commit)
    index = os.environ.get("FAKE_WHEEL_INDEX")
    if not index:
        raise urllib.error.URLError("[Errno -2] Name or service not known")
    with open(os.path.join(index, commit, "metadata.json")) as fh:
        entry = json.load(fh)[0]
    print("Found precompiled wheel metadata: %r" % (entry,))
    url = os.path.join(index, commit, entry["path"])
    print("Using precompiled wheel URL: %s" % url)
    return extract(url)


override = os.environ.get("VLLM_VERSION_OVERRIDE")
if override:  # vLLM's setup.py: the value becomes SETUPTOOLS_SCM_PRETEND_VERSION, no suffix
    version, node = override, None
    dist_version = version
else:
    version, node = scm_version()
    sep = "." if "+" in version else "+"
    device = os.environ.get("VLLM_TARGET_DEVICE", "cuda")
    use_precompiled = os.environ.get("VLLM_USE_PRECOMPILED") == "1"
    suffix = {{"empty": "empty", "cpu": "cpu"}}.get(device)
    if suffix is None and use_precompiled:
        suffix = "precompiled"
    dist_version = version + (sep + suffix if suffix else "")
    if use_precompiled:
        precompiled()
    if device == "cpu":  # what a CPU build compiles
        with open(os.path.join(PACKAGE, "_C.abi3.so"), "wb") as fh:
            fh.write(b"compiled for the CPU")
with open(os.path.join(PACKAGE, "_version.py"), "w") as fh:
    fh.write("# file generated by setuptools-scm\\n")
    fh.write("__version__ = version = %r\\n" % version)
    fh.write("__commit_id__ = commit_id = %r\\n" % node)
touch = os.environ.get("FAKE_UPSTREAM_TOUCH")
if touch:
    with open(touch, "a") as fh:
        fh.write("touched by the %s build\\n" % DIST)
setup(name=DIST, version=dist_version, packages=[PACKAGE], package_data={{PACKAGE: ["*.so"]}},
      entry_points={{"console_scripts": ["%s-add = %s.ops:add" % (DIST, PACKAGE)]}})
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
    wheel: Path  # a wheel of the pin's compiled binaries (what a precompiled build extracts)
    package: str = "vllm"

    def runtime(self, commit: str, distance: int) -> str:
        return f"{self.tag}.dev{distance}+g{commit[:9]}"


def binary_wheel(folder: Path, package: str, version: str) -> Path:
    """A wheel holding only `<package>/_C.abi3.so`, as vLLM's nightly wheels hold binaries."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{package}-{version}-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/_C.abi3.so", f"binaries of {version}")
    return path


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
    wheel = binary_wheel(path.parent / f"{path.name}-wheels", package,
                         f"{tag}.dev2+g{marks[three][:9]}")
    return Upstream(path, marks[one], marks[two], marks[three], tag, wheel, package)


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
    """A port (git repo) pinned to `up.pin`; `omni` = (omni commit, omni label).

    `{wheel}` in `config` names the upstream's binary wheel (precompiled builds)."""
    runtime = up.runtime(up.pin, 2)
    config = config.replace("{wheel}", str(up.wheel))
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


def copy_env(src: Path, dst: Path, *, relocate: bool = True) -> Path:
    """A copy of an environment; `relocate` points its scripts' shebangs at the copy's own
    Python, as a relocation would (without it, they still run the original's)."""
    shutil.copytree(src, dst, symlinks=True)
    for script in (dst / "bin").iterdir() if relocate else ():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(f"#!{src}/".encode()):
                script.write_bytes(data.replace(str(src).encode(), str(dst).encode(), 1))
    return dst


def hand_install(env: Path, source: Path, *, editable: bool = False,
                 extra_env: dict[str, str] | None = None) -> None:
    """Install `source` into `env` directly (what a hand-made oracle would be): with uv where
    it is installed, `python -m venv` + pip otherwise."""
    import os
    import sys

    from sync.steps.verify.build import find_uv

    uv = find_uv()
    environ = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("GIT_")}
    environ.update(extra_env or {})
    python = env / "bin" / "python"
    if uv is None:
        if not python.exists():
            base = getattr(sys, "_base_executable", None) or sys.executable
            subprocess.run([base, "-m", "venv", str(env)], check=True, env=environ)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                        *(["-e"] if editable else []), str(source)], check=True, env=environ,
                       cwd=str(env))
        return
    if not python.exists():
        subprocess.run([str(uv), "venv", "--quiet", str(env)], check=True, env=environ)
    subprocess.run([str(uv), "pip", "install", "--quiet", "--python", str(python),
                    *(["-e"] if editable else []), str(source)], check=True, env=environ)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The real CLI boundary (sync.cli.main), output captured."""
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(argv, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def load_json(text: str) -> object:
    return json.loads(text)
