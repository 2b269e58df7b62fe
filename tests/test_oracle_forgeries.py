"""Real oracles on the fake upstream: build modes, forged identities, adopt, gc, release tags.

The port's pin block records a Python-only build (`.empty`, as the real case's does) and
its config names no build mode, so the mode comes from the pin's suffix. Every forgery is
really built the way a forger would build it (with the variable set, from another commit,
from a shallow or dirty clone), by hand, then offered to `oracle adopt`: each is refused
with one line naming it, and nothing is written.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakeupstream import (
    Upstream,
    binary_wheel,
    copy_env,
    hand_install,
    make_port,
    make_upstream,
    pin_doc,
    run_cli,
    site_packages,
)
from nodac import need_setpriv, run_closed

from sync.dev.fastimport import git
from sync.infra.errors import EnvironmentUnresolved
from sync.port import Port
from sync.records import config, cycle, events
from sync.steps.verify import build as oracle_build
from sync.steps.verify import oracle

# No [oracles.vllm]: the build mode is the pin block's suffix (.empty). The schema line is
# what keeps it a configuration: a file that sets nothing is refused.
CONFIG = "schema = 1\n"


@dataclass(frozen=True)
class World:
    up: Upstream
    port: Path
    home: Path
    env: Path  # the genuine empty-mode oracle at the pin, built by the tool
    base: Path

    @property
    def runtime(self) -> str:
        return self.up.runtime(self.up.pin, 2)

    def environ(self) -> dict[str, str]:
        return {"VLLM_SOURCE": str(self.up.path), "SYNC_ORACLE_HOME": str(self.home)}


def _pin_empty(port: Path, up: Upstream) -> None:
    runtime = up.runtime(up.pin, 2)
    (port / ".agents/upstream-sync.md").write_text(pin_doc(up.pin, runtime, runtime + ".empty"))
    git(port, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-am",
        "Pin an empty build")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("forgeries")
    mp = pytest.MonkeyPatch()
    home_dir = base / "userhome"
    home_dir.mkdir()
    (home_dir / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n"
                                         "[protocol \"file\"]\n\tallow = always\n")
    mp.setenv("HOME", str(home_dir))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("SYNC_PORT", "SYNC_GATE_HOSTS"):
        mp.delenv(var, raising=False)
    try:
        up = make_upstream(base / "vllm")
        port = make_port(base / "port", up, config=CONFIG)
        _pin_empty(port, up)
        home = base / "venvs"
        w = World(up, port, home, home / f"vllm-{up.pin[:10]}", base)
        for k, v in w.environ().items():
            mp.setenv(k, v)
        p = Port(port, config.load(port))
        oracle_build.build(p, p.preferences(), "vllm")
        yield w
    finally:
        mp.undo()


@pytest.fixture
def env(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    for k, v in world.environ().items():
        monkeypatch.setenv(k, v)
    return world


@pytest.fixture
def port_copy(world: World, tmp_path: Path) -> Path:
    dst = tmp_path / "port"
    shutil.copytree(world.port, dst)
    return dst


def checkout(w: World, tmp: Path, commit: str, *, depth: int | None = None) -> Path:
    """A clone of the fake upstream at `commit` (shallow with `depth`)."""
    dst = tmp / f"src-{commit[:7]}-{depth or 'full'}"
    if depth is None:
        subprocess.run(["git", "clone", "-q", str(w.up.path), str(dst)], check=True)
        subprocess.run(["git", "-C", str(dst), "checkout", "-q", commit], check=True)
    else:
        branch = "main" if commit == w.up.pin else "side"
        subprocess.run(["git", "clone", "-q", "--depth", str(depth), "--branch", branch,
                        f"file://{w.up.path}", str(dst)], check=True)
    return dst


def hand_env(w: World, tmp: Path, source: Path, name: str, **variables: str) -> Path:
    """An environment a person built by hand from `source`, with `variables` set."""
    env = tmp / "envs" / name
    hand_install(env, source, extra_env={"VLLM_TARGET_DEVICE": "empty", **variables})
    return env


def adopt(w: World, path: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["--port", str(w.port), "oracle", "adopt", str(path), *extra])


def refused_once(rc: int, out: str, err: str, names: str) -> str:
    """The refusal: exit 5, nothing on stdout, exactly one line naming the forgery."""
    assert (rc, out) == (5, ""), err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert names in lines[0], lines[0]
    return lines[0]


# -- build modes -----------------------------------------------------------------------------


def test_empty_mode_from_the_pin_suffix_builds_and_verifies(env: World) -> None:
    rec = oracle.read_marker(env.env)
    assert rec is not None and rec.build_mode == "empty" and rec.origin == "built"
    assert rec.not_in_tree == ["vllm/_version.py"]  # a Python-only build ships no binaries
    assert rec.binaries is None
    log = Path(rec.log or "").read_text()
    assert "== wheel: " in log and "== install: " in log
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert rc == 0, err + out
    assert out == (f"oracle vllm at {env.up.pin[:10]} verified: runtime {env.runtime}, "
                   f"distribution {env.runtime}.empty, commit id g{env.up.pin[:9]}, FlashInfer "
                   "absent, Torch absent, build mode empty\n")
    rc, out, _ = run_cli(["--port", str(env.port), "status"])
    assert "oracle build: mode empty (from the pin block's distribution version (.empty)); " \
        "FlashInfer not required" in out
    assert f"  environment at the pin: {env.env} (built " in out


def test_build_progress_is_phased_on_stderr(env: World, port_copy: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build"])
    assert rc == 0, err
    phases = [line.split("]")[0] + "]" for line in err.splitlines() if line.startswith("[")]
    assert phases == ["[checkout]", "[venv]", "[wheel]", "[install]", "[record]"]
    assert out.startswith(f"built oracle vllm at {env.up.pin[:10]}: ")
    # pip or uv, whichever the machine has (the test session installs uv)
    assert re.search(rf"\(build mode empty, (pip|uv); log {re.escape(str(tmp_path))}/venvs/logs/",
                     out), out


@pytest.mark.parametrize(("suffix", "mode", "binaries"), [
    ("cpu", "cpu", ["vllm/_C.abi3.so", "vllm/_version.py"]),
    (None, "source", ["vllm/_version.py"]),
])
def test_cpu_and_source_modes(env: World, port_copy: Path, monkeypatch: pytest.MonkeyPatch,
                              suffix: str | None, mode: str, binaries: list[str]) -> None:
    tmp_path = port_copy.parent
    dist = env.runtime + (f".{suffix}" if suffix else "")
    (port_copy / ".agents/upstream-sync.md").write_text(pin_doc(env.up.pin, env.runtime, dist))
    (port_copy / ".agents/upstream-sync.toml").write_text(
        "[oracles.vllm]\nrequire_flashinfer = false\n")
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    p = Port(port_copy, config.load(port_copy))
    built = oracle_build.build(p, p.preferences(), "vllm")
    assert (built.record.build_mode, built.record.not_in_tree) == (mode, binaries)
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 0, err + out
    assert out.endswith(f"build mode {mode}\n")


def test_flashinfer_is_required_by_default_only_where_the_mode_installs_it(
        env: World, port_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (port_copy / ".agents/upstream-sync.md").write_text(
        pin_doc(env.up.pin, env.runtime, env.runtime))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    p = Port(port_copy, config.load(port_copy))
    oracle_build.build(p, p.preferences(), "vllm")
    rc, out, _ = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 5 and out == ("mismatch: flashinfer: FlashInfer is not installed (a source "
                               "build has it)\n")


def test_torch_version_checked_where_config_names_it(env: World, port_copy: Path) -> None:
    (port_copy / ".agents/upstream-sync.toml").write_text(
        '[oracles.vllm]\ntorch_version = "2.13.0"\n')
    rc, out, _ = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 5 and out == "mismatch: torch: Torch is not installed (config requires it)\n"


# -- refused before building -----------------------------------------------------------------


FORGERS = ["SETUPTOOLS_SCM_PRETEND_VERSION", "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM",
           "SETUPTOOLS_SCM_PRETEND_METADATA", "SETUPTOOLS_SCM_PRETEND_METADATA_FOR_VLLM",
           "SETUPTOOLS_SCM_OVERRIDES", "VCS_VERSIONING_PRETEND_VERSION",
           "VCS_VERSIONING_PRETEND_METADATA", "VLLM_VERSION_OVERRIDE",
           "VLLM_SKIP_PRECOMPILED_VERSION_SUFFIX"]


@pytest.mark.parametrize("variable", FORGERS)
@pytest.mark.parametrize("where", ["environment", "build_env"])
def test_forging_variables_refused_before_building(env: World, port_copy: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   variable: str, where: str) -> None:
    if where == "environment":
        monkeypatch.setenv(variable, "0.2.1")
        said, drop = "the environment", f"unset {variable}"
    else:
        (port_copy / ".agents/upstream-sync.toml").write_text(
            f'[oracles.vllm]\nbuild_env = {{ {variable} = "0.2.1" }}\n')
        said = "oracles.vllm.build_env"
        drop = f"remove {variable} from {said}"
    before = (env.env / oracle.MARKER).read_bytes()
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build", "--rebuild"])
    assert (rc, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"upstream-sync: error: {variable} is set in {said}: ")
    assert line.endswith(f"— {drop}; the version must come from the git checkout")
    assert line.count(", so ") == 1, line  # one reason, said once
    assert (env.env / oracle.MARKER).read_bytes() == before


@pytest.mark.parametrize(("build_env", "says"), [
    ('{ VLLM_USE_PRECOMPILED = "1" }', "vLLM would extract precompiled binaries while its "
                                       "version still says .empty"),
    ('{ VLLM_PRECOMPILED_WHEEL_LOCATION = "/w.whl" }', "would extract precompiled binaries"),
    ('{ VLLM_TARGET_DEVICE = "cuda" }', "sets VLLM_TARGET_DEVICE=cuda, but build mode 'empty' "
                                        "sets it to 'empty'"),
])
def test_build_env_that_fights_the_mode_refused(env: World, port_copy: Path, build_env: str,
                                                says: str) -> None:
    (port_copy / ".agents/upstream-sync.toml").write_text(
        f"[oracles.vllm]\nbuild_env = {build_env}\n")
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "build", "--rebuild"])
    assert rc == 2 and says in err


def _lossy(w: World, tmp: Path) -> tuple[Path, str]:
    """A copy of the reference with one blob of the pin's tree deleted."""
    lossy = tmp / "lossy"
    shutil.copytree(w.up.path, lossy, symlinks=True)
    objects = lossy / ".git" / "objects"
    for pack in sorted((objects / "pack").glob("*.pack")):  # loose objects, to delete one
        with open(pack, "rb") as fh:
            subprocess.run(["git", "-C", str(lossy), "unpack-objects", "-q"], stdin=fh,
                           check=True)
    for packed in (objects / "pack").glob("*"):
        packed.unlink()
    blob = git(w.up.path, "rev-parse", f"{w.up.pin}:vllm/ops.py").strip()
    (objects / blob[:2] / blob[2:]).unlink()
    return lossy, blob


def test_missing_objects_named_before_building(env: World, port_copy: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lossy, blob = _lossy(env, tmp_path)
    monkeypatch.setenv("VLLM_SOURCE", str(lossy))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "build"])
    assert rc == 3
    assert err.splitlines()[1:] == [
        f"upstream-sync: error: the checkout of {env.up.pin[:10]} is incomplete: 1 object is "
        f"missing from {lossy}: vllm/ops.py ({blob[:12]}) — repair the source checkout (git -C "
        f"{lossy} fsck; fetch the commit again), then build again"]
    assert not (tmp_path / "venvs" / env.env.name).exists()


def test_a_dirty_throwaway_checkout_is_refused(env: World, tmp_path: Path) -> None:
    clone = checkout(env, tmp_path, env.up.pin)
    (clone / "vllm" / "ops.py").write_text("def add(a, b):\n    return 0\n")
    with pytest.raises(EnvironmentUnresolved, match=r"is not clean \(1 entries: ' M vllm/ops.py'"
                       r"\): it would not build the commit's tree"):
        oracle_build.verify_checkout(clone, env.up.pin, env.up.path)
    (clone / "vllm" / "ops.py").write_text(git(clone, "show", "HEAD:vllm/ops.py"))
    (clone / "vllm" / "stale.py").write_text("")  # untracked: shipped, yet invisible to scm
    with pytest.raises(EnvironmentUnresolved, match=r"'\?\? vllm/stale.py'"):
        oracle_build.verify_checkout(clone, env.up.pin, env.up.path)


def test_a_failed_build_names_its_log_and_first_error(env: World, port_copy: Path,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A precompiled build with no per-commit wheel to reach fails as vLLM does offline."""
    (port_copy / ".agents/upstream-sync.md").write_text(
        pin_doc(env.up.pin, env.runtime, env.runtime + ".precompiled"))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "build"])
    log = tmp_path / "venvs" / "logs" / f"{env.env.name}.log"
    assert rc == 3
    # The installer's exit code is its own (pip 1, uv 2): the rest of the line is the tool's.
    assert re.fullmatch(re.escape("upstream-sync: error: wheel failed (exit ") + r"[12]"
                        + re.escape("): urllib.error.URLError: <urlopen error [Errno -2] Name or "
                                    f"service not known> (full log: {log}) — fix what the log "
                                    "says, then run 'upstream-sync oracle build' again"),
                        err.splitlines()[-1]), err
    # The tool asked for the pinned commit's binaries, never "nightly".
    assert f"Using precompiled wheel commit {env.up.pin} with variant None" in log.read_text()
    assert not (tmp_path / "venvs" / env.env.name).exists()


def test_precompiled_binaries_from_another_commit_warned(env: World, port_copy: Path,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The per-commit index serves a wheel built at another commit: recorded, and warned."""
    index = tmp_path / "index"
    other = f"{env.up.tag}.dev1+g{env.up.middle[:9]}"
    wheel = binary_wheel(index / env.up.pin, "vllm", other)
    (index / env.up.pin / "metadata.json").write_text(json.dumps([{
        "package_name": "vllm", "version": other, "filename": wheel.name, "path": wheel.name,
        "platform_tag": "manylinux1_x86_64"}]))
    (port_copy / ".agents/upstream-sync.md").write_text(
        pin_doc(env.up.pin, env.runtime, env.runtime + ".precompiled"))
    (port_copy / ".agents/upstream-sync.toml").write_text(
        f'[oracles.vllm]\nrequire_flashinfer = false\nbuild_env = {{ FAKE_WHEEL_INDEX = '
        f'"{index}" }}\n')
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "build"])
    assert rc == 0, err
    warning = (f"the precompiled binaries come from {wheel.name} (commit g{env.up.middle[:9]}), "
               f"not from {env.up.pin[:10]}: the Python is the commit's, the compiled code is "
               "not")
    assert f"warning: {warning}" in out.splitlines()
    rc, out, err = run_cli(["--port", str(port_copy), "status"])
    assert f"  binaries: {wheel.name} (version {other}, commit g{env.up.middle[:9]})" in out
    assert f"  warning: {warning}" in out
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 0, err + out
    gate = json.loads((port_copy / f".agents/sync/gates/{env.up.pin[:7]}.json").read_text())
    assert gate["gates"]["oracle:vllm"]["oracle"]["binaries"] == (
        f"{wheel.name} (version {other}, commit g{env.up.middle[:9]}); warning: {warning}")


# -- forgeries offered to adopt: one line each, nothing written ------------------------------


def _forged(w: World, tmp: Path, case: str) -> Path:
    pin9 = w.up.pin[:9]
    metadata = f'{{node="g{pin9}", distance=2}}'
    if case == "pretend version":
        return hand_env(w, tmp, checkout(w, tmp, w.up.middle), case,
                        SETUPTOOLS_SCM_PRETEND_VERSION=w.runtime)
    if case == "version override":
        return hand_env(w, tmp, checkout(w, tmp, w.up.middle), case,
                        VLLM_VERSION_OVERRIDE=w.runtime + ".empty")
    if case in ("pretend metadata", "vcs-versioning metadata"):
        var = ("SETUPTOOLS_SCM_PRETEND_METADATA" if case == "pretend metadata"
               else "VCS_VERSIONING_PRETEND_METADATA")
        return hand_env(w, tmp, checkout(w, tmp, w.up.middle), case, **{var: metadata})
    if case == "shallow":
        return hand_env(w, tmp, checkout(w, tmp, w.up.pin, depth=1), case)
    if case == "dirty":
        src = checkout(w, tmp, w.up.pin)
        (src / "vllm" / "ops.py").write_text("def add(a, b):\n    return a - b\n")
        return hand_env(w, tmp, src, case)
    assert case == "foreign"
    return hand_env(w, tmp, checkout(w, tmp, w.up.middle), case)


FORGERIES = [
    ("version override", "a version override (VLLM_VERSION_OVERRIDE)"),
    ("pretend version", "a pretended version (SETUPTOOLS_SCM_PRETEND_VERSION)"),
    ("pretend metadata", "files that are not the commit's tree (SETUPTOOLS_SCM_PRETEND_METADATA"),
    ("vcs-versioning metadata", "files that are not the commit's tree"),
    ("shallow", "a shallow-clone build"),
    ("dirty", "a dirty checkout"),
    ("foreign", "a foreign commit"),
]


@pytest.mark.parametrize(("case", "names"), FORGERIES)
def test_each_forgery_is_refused_by_adopt_with_one_line(env: World, tmp_path: Path, case: str,
                                                        names: str) -> None:
    forged = _forged(env, tmp_path, case)
    link = tmp_path / "behind-a-link"
    link.symlink_to(forged)
    line = refused_once(*adopt(env, link), names)
    assert line.startswith(f"upstream-sync: error: oracle vllm at {env.up.pin[:10]} refused (")
    assert not (forged / oracle.MARKER).exists()
    assert oracle.read_marker(env.env) is not None  # the home's own oracle is untouched


def test_pretended_identities_really_name_the_pin(env: World, tmp_path: Path) -> None:
    """Positive control: the metadata forgery gets both version measurements right."""
    forged = _forged(env, tmp_path, "pretend metadata")
    rc, out, _ = adopt(env, forged, "--json")
    assert rc == 5
    doc = json.loads(out)
    assert doc["probe"]["runtime_version"] == env.runtime
    assert doc["probe"]["distribution_version"] == env.runtime + ".empty"
    assert doc["probe"]["commit_id"] == f"g{env.up.pin[:9]}"
    assert [m["kind"] for m in doc["mismatches"]] == ["tree"]
    assert doc["recorded"] is False


def test_a_version_override_loses_the_build_mode_suffix(env: World, tmp_path: Path) -> None:
    """The real case's override (`P.empty` set whole): every measurement says what is wrong."""
    forged = _forged(env, tmp_path, "version override")
    rc, out, _ = adopt(env, forged, "--json")
    assert rc == 5
    doc = json.loads(out)
    assert (doc["probe"]["runtime_version"], doc["probe"]["commit_id"]) == (
        env.runtime + ".empty", None)
    said = {m["kind"]: m["message"] for m in doc["mismatches"] if m["field"] == "build mode"}
    assert said == {"mode": "the distribution version adds no suffix, an empty build adds "
                            ".empty (build mode from the pin block's distribution version "
                            "(.empty))"}


def test_a_copied_build_record_is_refused(env: World, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A second, genuine install given the first one's record: bound to another RECORD."""
    other = hand_env(env, tmp_path, checkout(env, tmp_path, env.up.pin), "genuine")
    shutil.copy(env.env / oracle.MARKER, other / oracle.MARKER)
    home = tmp_path / "venvs"
    home.mkdir()
    (home / env.env.name).symlink_to(other)
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert rc == 5
    assert out.splitlines() == [out.splitlines()[0]]
    assert out.startswith("mismatch: build record: upstream-sync-oracle.json names another "
                          "installation: its vllm RECORD is sha256 ")
    refused_once(rc, "", err, "a copied or hand-written build record")


def test_a_copied_environment_is_named(env: World, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy still runs the original's Python from its scripts (what adopt must notice)."""
    home = tmp_path / "venvs"
    copy_env(env.env, home / env.env.name, relocate=False)
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert out == (f"mismatch: scripts: bin/vllm-add runs {env.env}/bin/python, another "
                   "environment's Python: this environment was copied or moved\n")
    refused_once(rc, "", err, "a copied environment: scripts: bin/vllm-add")


def test_files_modified_after_the_install(env: World, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "venvs"
    copied = copy_env(env.env, home / env.env.name)
    (site_packages(copied) / "vllm" / "ops.py").write_text("def add(a, b):\n    return 42\n")
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert out.splitlines() == [
        "mismatch: installed files: 1 installed files differ from the RECORD written at the "
        "install: vllm/ops.py",
        f"mismatch: tree: 1 installed files differ from the tree of {env.up.pin[:10]}: "
        "vllm/ops.py"]
    refused_once(rc, "", err, "files modified after the install: installed files: ")


def test_a_script_gone_since_the_install(env: World, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A script the RECORD lists outside site-packages (its hash is not checked: a
    relocation rewrites its shebang) was skipped when it was gone, and verify passed an
    environment missing bin/vllm-add: it is an installed file that differs."""
    home = tmp_path / "venvs"
    copied = copy_env(env.env, home / env.env.name)
    (copied / "bin" / "vllm-add").unlink()
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    rc, out, err = run_cli(["--port", str(env.port), "oracle", "verify"])
    assert out == ("mismatch: installed files: 1 installed files differ from the RECORD "
                   "written at the install: ../../../bin/vllm-add\n")
    refused_once(rc, "", err, "files modified after the install: installed files: ")


# -- adopt, gc, verify's commits -------------------------------------------------------------


def test_adopt_a_genuine_env_behind_a_symlink(env: World, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    real = hand_env(env, tmp_path, checkout(env, tmp_path, env.up.pin), "vllm-oracle-next")
    link = tmp_path / "venvs-of-the-port" / "current"
    link.parent.mkdir()
    link.symlink_to(real)
    home = tmp_path / "venvs"
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    rc, out, err = adopt(env, link)
    assert rc == 0, err
    assert out.startswith(f"adopted {real} as oracle vllm at {env.up.pin[:10]}: "
                          f"{home / env.env.name}; runtime {env.runtime}")
    assert (home / env.env.name).resolve() == real
    rec = oracle.read_marker(real)
    assert rec is not None and (rec.origin, rec.build_mode, rec.log) == ("adopted", "empty", None)
    assert (real / oracle.FREEZE).is_file() and rec.freeze_sha256 is not None
    assert run_cli(["--port", str(env.port), "oracle", "verify"])[0] == 0
    assert adopt(env, link)[0] == 0  # adopting it again refreshes the record
    other = hand_env(env, tmp_path, checkout(env, tmp_path, env.up.middle), "other")
    rc, _, err = adopt(env, other)
    assert rc == 5  # measured first: a foreign commit, not a name clash
    rc, out, _ = run_cli(["--port", str(env.port), "status"])
    assert f"  environment at the pin: {home / env.env.name} -> {real} (adopted " in out


def test_adopt_of_an_env_the_tool_built_keeps_its_build_record(env: World, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Adopting, into a second oracle home, an environment `oracle build` made (the real case:
    one home per port copy) rewrote its build record as a measurement of its own: origin
    'adopted', no build log, no constraints digest, no installer settings, a new time; the
    build's provenance was lost for every home. It is linked, and its record kept."""
    marker = env.env / oracle.MARKER
    before = marker.read_bytes()
    freeze = (env.env / oracle.FREEZE).read_bytes()
    assert json.loads(before)["origin"] == "built"
    home = tmp_path / "venvs"
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    try:
        rc, out, err = adopt(env, env.env)
        assert rc == 0, err
        assert out.startswith(f"adopted {env.env} as oracle vllm at {env.up.pin[:10]}: "
                              f"{home / env.env.name}; runtime {env.runtime}")
        assert marker.read_bytes() == before
        assert "kept its build record (built " in err
        assert (home / env.env.name).resolve() == env.env.resolve()
        assert (env.env / oracle.FREEZE).read_bytes() == freeze
        assert run_cli(["--port", str(env.port), "oracle", "verify"])[0] == 0
    finally:
        marker.write_bytes(before)
        (env.env / oracle.FREEZE).write_bytes(freeze)


def test_adopt_of_an_env_without_vllm_leads_with_the_import_failure(env: World,
                                                                   tmp_path: Path) -> None:
    """walk-s13 U7: before an adoption there is no build record, so "no build record" is no
    refusal's headline; what is wrong with the environment is (here: vllm does not import)."""
    bare = tmp_path / "bare"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    line = refused_once(*adopt(env, bare), "import vllm failed")
    assert line == (f"upstream-sync: error: oracle vllm at {env.up.pin[:10]} refused (5 "
                    "mismatches): module: import vllm failed: ModuleNotFoundError: No module "
                    f"named 'vllm' — it is not the oracle of {env.up.pin[:10]}: build one "
                    f"('upstream-sync oracle build --oracle vllm --commit {env.up.pin}') "
                    "instead (--json lists every mismatch)")
    rc, out, _ = adopt(env, bare, "--json")
    assert rc == 5
    assert "record" not in [m["kind"] for m in json.loads(out)["mismatches"]]
    assert not (bare / oracle.MARKER).exists()


def test_adopt_refuses_a_path_inside_a_checkout_and_a_non_env(env: World,
                                                              tmp_path: Path) -> None:
    rc, _, err = adopt(env, tmp_path)
    assert rc == 3 and "is not a virtualenv (no bin/python)" in err
    inside = env.up.path / "venv"
    (inside / "bin").mkdir(parents=True)
    (inside / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    try:
        rc, _, err = adopt(env, inside)
        assert rc == 2 and "lies inside $VLLM_SOURCE" in err
    finally:
        shutil.rmtree(inside)


def test_verify_at_another_commit_is_refused_or_shape_only(env: World, port_copy: Path,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    rc, _, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--commit",
                          env.up.middle])
    assert rc == 2 and f"{env.up.middle[:10]} is neither the pin of vllm nor the cycle's " \
        "target" in err
    home = tmp_path / "venvs"
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    p = Port(port_copy, config.load(port_copy))
    oracle_build.build(p, p.preferences(), "vllm", env.up.middle)
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify", "--commit",
                            env.up.middle, "--shape-only"])
    assert rc == 0, err + out
    assert out.startswith(f"oracle vllm at {env.up.middle[:10]} verified (shape only: "
                          "compared with no record): runtime ")
    assert not (port_copy / f".agents/sync/gates/{env.up.middle[:7]}.json").exists()


def test_gc_drops_environments_older_than_the_previous_pin(env: World, port_copy: Path,
                                                           tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    home = tmp_path / "venvs"
    adopted = tmp_path / "ports-own-venv"
    copy_env(env.env, adopted)
    for commit in (env.up.released, env.up.middle, env.up.pin):
        target = oracle.env_path(home, "vllm", commit)
        if commit == env.up.released:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(adopted)
        else:
            copy_env(env.env, target)
        marker = target / oracle.MARKER
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "commit": commit}))
    (home / "logs").mkdir()
    (home / "logs" / f"vllm-{env.up.released[:10]}.log").write_text("old\n")
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    p = Port(port_copy, config.load(port_copy))
    rc, out, _ = run_cli(["--port", str(port_copy), "oracle", "gc", "--dry-run"])
    assert rc == 0
    assert sorted(out.splitlines()) == sorted([
        f"would drop vllm-{env.up.released[:10]}: {env.up.released[:10]} is older than "
        f"{env.up.pin[:10]} (a link: the environment it names stays)",
        f"would drop vllm-{env.up.middle[:10]}: {env.up.middle[:10]} is older than "
        f"{env.up.pin[:10]}",
        f"kept vllm-{env.up.pin[:10]}: the pin"])
    events.append(p, "advance", pin_before=env.up.middle, pin_after=env.up.pin)
    rc, out, _ = run_cli(["--port", str(port_copy), "oracle", "gc"])
    assert sorted(out.splitlines()) == sorted([
        f"dropped vllm-{env.up.released[:10]}: {env.up.released[:10]} is older than "
        f"{env.up.middle[:10]} (a link: the environment it names stays)",
        f"kept vllm-{env.up.middle[:10]}: the previous pin",
        f"kept vllm-{env.up.pin[:10]}: the pin"])
    assert sorted(x.name for x in home.iterdir()) == sorted(
        ["logs", f"vllm-{env.up.middle[:10]}", f"vllm-{env.up.pin[:10]}"])
    assert list((home / "logs").iterdir()) == []
    # The advance's cycle record stays, its target now the pin: that environment is kept as
    # the pin (it was named "the cycle's target", the cycle that moved the pin there).
    cycle.save(p, env.up.middle, env.up.pin, "origin/main")
    rc, out, _ = run_cli(["--port", str(port_copy), "oracle", "gc", "--dry-run"])
    assert f"kept vllm-{env.up.pin[:10]}: the pin" in out.splitlines(), out
    assert (adopted / "bin" / "python").exists()  # the port's own venv stays


def test_gc_drops_the_others_when_one_environment_cannot_be_removed(
        env: World, port_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment with a folder this user may not change is not removed, nor half
    removed: gc says so in its line and ends with that refusal (rc 3), and drops every other
    environment it drops, each an environment of its own."""
    need_setpriv()
    home = tmp_path / "venvs"
    released, middle = (oracle.env_path(home, "vllm", c) for c in (env.up.released,
                                                                    env.up.middle))
    (home / "logs").mkdir(parents=True)
    for target, commit in ((released, env.up.released), (middle, env.up.middle)):
        copy_env(env.env, target)
        marker = target / oracle.MARKER
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "commit": commit}))
        (home / "logs" / f"{target.name}.log").write_text("old\n")
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home))
    closed = middle / "bin"
    (gc,) = run_closed(closed, closed / "python", port_copy, [("oracle", "gc")])
    refusal = (f"oracle environment {middle} cannot be removed: {closed} cannot be listed "
               "(Permission denied); nothing was removed")
    assert (gc.returncode, gc.stderr.split(" — ")[0]) == (3, f"upstream-sync: error: {refusal}")
    assert sorted(gc.stdout.splitlines()) == [
        f"could not drop {middle.name}: {env.up.middle[:10]} is older than {env.up.pin[:10]}; "
        f"{refusal}",
        f"dropped {released.name}: {env.up.released[:10]} is older than {env.up.pin[:10]}"]
    assert not released.exists() and (middle / oracle.MARKER).is_file()
    assert [p.name for p in (home / "logs").iterdir()] == [f"{middle.name}.log"]


# -- a pin at a release tag ------------------------------------------------------------------


def test_release_tag_pin_in_empty_mode(env: World, port_copy: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """At the tag the version is `0.2.1rc1` (distribution `0.2.1rc1+empty`): measured,
    recorded with vllm_commit_id, verified; the same block without it is refused."""
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(tmp_path / "venvs"))
    released, commit_id = env.up.tag, f"g{env.up.released[:9]}"
    block = pin_doc(env.up.released, released, released + "+empty")
    (port_copy / ".agents/upstream-sync.md").write_text(block)
    assert run_cli(["--port", str(port_copy), "oracle", "probe"])[0] == 4
    with_id = block.replace("flashinfer_version", f"vllm_commit_id = {commit_id}\n"
                            "flashinfer_version")
    (port_copy / ".agents/upstream-sync.md").write_text(with_id)
    p = Port(port_copy, config.load(port_copy))
    built = oracle_build.build(p, p.preferences(), "vllm")
    assert built.record.build_mode == "empty"
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "probe"])
    assert f"  commit id:            {commit_id}" in out.splitlines()
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "probe", "--json"])
    doc = json.loads(out)
    assert (doc["runtime_version"], doc["distribution_version"], doc["commit_id"]) == (
        released, released + "+empty", commit_id)
    rc, out, err = run_cli(["--port", str(port_copy), "oracle", "verify"])
    assert rc == 0, err + out
    assert f"runtime {released}, distribution {released}+empty, commit id {commit_id}" in out


def test_progress_says_how_long_the_log_has_been_silent() -> None:
    said: list[str] = []
    say = oracle_build.progress_line("install", said.append)
    say(15.2, "Collecting torch==2.13.0")
    say(30.4, "Collecting torch==2.13.0")
    say(45.9, "Collecting torch==2.13.0")
    say(61.0, "Installing collected packages: torch\x1b[0m")
    assert said == ["  [install 0:15] Collecting torch==2.13.0",
                    "  [install 0:30] no new log line for 15 s",
                    "  [install 0:45] no new log line for 30 s",
                    "  [install 1:01] Installing collected packages: torch[0m"]
