"""The bundled example: a reproducible upstream history, a consistent port, a real install."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync.dev import example, fastimport
from sync.infra.atomic import read_text
from sync.infra.errors import UsageError
from sync.records import blocks, prefs
from sync.upstream import gitio

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
MARKS = example.marks(EXAMPLES)
PIN = MARKS["pin"]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_generate",
                                                  EXAMPLES / "upstream" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pin_block() -> dict[str, str]:
    path = EXAMPLES / "port" / ".agents" / "upstream-sync.md"
    block = blocks.exactly_one(read_text(path), "parity-pin", path=str(path))
    return block.as_dict()


def _oracle_block(name: str) -> dict[str, str]:
    path = EXAMPLES / "port" / ".agents" / "oracles" / name
    return blocks.exactly_one(read_text(path), "oracle-pin", path=str(path)).as_dict()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of examples/ materialised once: tests must not touch <repo>/.example."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(EXAMPLES, root / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    example.materialise(root)
    return root


def test_regenerating_the_history_is_byte_identical(tmp: Path) -> None:
    history, names = _generator().build()
    assert history.stream() == (EXAMPLES / "upstream" / "history.fi").read_bytes()
    shas = history.write(tmp / "upstream.git", bare=True)
    assert {name: shas[mark] for name, mark in names.items()} == MARKS


def test_history_has_the_shapes_a_cycle_must_handle(built: Path) -> None:
    upstream = built / ".example" / "upstream.git"
    log = fastimport.git(upstream, "log", "--format=%H%x00%s%x00%b%x1e", f"{PIN}..main")
    commits = [c.strip("\n").split("\0") for c in log.split("\x1e") if c.strip()]
    assert len(commits) == 40
    subjects = [s for _, s, _ in commits]
    by_sha = {sha: s for sha, s, _ in commits}
    assert "(#" not in by_sha.pop(MARKS["no_pr"])
    assert all(re.search(r"\(#(3\d{4}|40\d{3})\)$", s) for s in by_sha.values())
    assert any("|" in s and "`" in s for s in subjects)
    bodies = {sha: b for sha, _, b in commits}
    assert f"This reverts commit {MARKS['minp_fix']}." in bodies[MARKS["minp_revert"]]
    assert f"(cherry picked from commit {MARKS['minp_fix']})" in bodies[MARKS["minp_reland"]]
    status = fastimport.git(upstream, "log", "-M", "--format=", "--name-status", f"{PIN}..main")
    assert ("R100\tvllm/v1/sample/ops/topk_topp_sampler.py\tvllm/v1/sample/ops/topk_topp.py"
            in status)
    assert "D\tvllm/model_executor/guided_decoding/xgrammar_decoding.py" in status
    ids = fastimport.git(upstream, "show", MARKS["minp_fix"], MARKS["minp_reland"])
    patch_ids = fastimport.git(upstream, "patch-id", "--stable", input=ids.encode()).split()
    assert patch_ids[0] == patch_ids[2]


def test_materialise_builds_the_reference_checkout_at_the_pin(built: Path) -> None:
    root = built / ".example"
    ref = gitio.open_repo(root / "vllm")  # refuses a shallow clone
    assert fastimport.git(root / "vllm", "rev-parse", "--is-shallow-repository").strip() == "false"
    assert gitio.head_sha(ref) == PIN
    assert fastimport.git(root / "vllm", "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert fastimport.git(root / "vllm", "rev-parse", "origin/main").strip() == MARKS["tip"]
    assert fastimport.git(root / "upstream.git", "rev-parse", "main").strip() == MARKS["tip"]
    assert fastimport.git(root / "vllm", "status", "--porcelain") == ""
    url = fastimport.git(root / "vllm", "remote", "get-url", "origin").strip()
    assert Path(url) == root / "upstream.git"


def test_materialise_builds_a_clean_port_with_preferences(built: Path) -> None:
    port = built / ".example" / "port"
    assert fastimport.git(port, "status", "--porcelain") == ""
    assert fastimport.git(port, "rev-list", "--count", "HEAD").strip() == "1"
    fastimport.git(port, "check-ignore", "-q", ".agents/developer-preferences.md")
    p = prefs.load(port / ".agents" / "developer-preferences.md", environ={})
    assert p.path("reference_checkout") == built / ".example" / "vllm"
    assert p.path("oracle_home") == built / ".example" / "oracles"
    assert (p.remote, p.branch, p.gate_hosts) == ("origin", "main", ())
    assert p.reference().path == built / ".example" / "vllm"


def test_materialise_is_idempotent_and_rebuilds_on_change(built: Path) -> None:
    port = built / ".example" / "port"
    marker = port / "left-by-a-command"
    marker.write_text("state\n")
    assert example.materialise(built) == port
    assert marker.exists()  # same stamp: nothing rebuilt, state kept
    readme = built / "examples" / "port" / "README.md"
    readme.write_text(readme.read_text() + "\nOne more line.\n")
    assert example.materialise(built) == port
    assert not marker.exists()
    assert (port / "README.md").read_text().endswith("One more line.\n")
    assert not list(built.glob(".example.*"))  # no build directory left behind
    assert fastimport.git(built / ".example" / "vllm", "rev-parse", "HEAD").strip() == PIN


def test_port_records_carry_the_pin_of_marks_json() -> None:
    block = _pin_block()
    runtime = block["vllm_runtime_version"]
    assert block["vllm_commit"] == PIN
    assert re.fullmatch(r"0\.23\.1rc1\.dev\d+\+g" + PIN[:9], runtime)
    assert block["vllm_distribution_version"] == runtime + ".precompiled"
    assert block["flashinfer_version"] == "0.6.15.post1"
    core = _oracle_block("vllm.md")
    assert list(core) == ["id", "role", "upstream", "scope", "pin", "pin_label", "pinned_on",
                          "gateable", "evidence"]
    assert (core["id"], core["pin"], core["pin_label"]) == ("vllm", PIN, runtime.split("+")[0])
    omni = _oracle_block("vllm-omni.md")
    assert (omni["pin"], omni["pin_label"], omni["gateable"]) == ("UNPINNED", "-", "no")
    text = read_text(EXAMPLES / "port" / ".agents" / "upstream-sync.md")
    line = re.search(r"^Active pin \(advanced \d{4}-\d\d-\d\d\): current parity pin ([0-9a-f]+) "
                     r"\(vLLM [^ ]+ \+", text, re.M)
    assert line is not None and line.group(1) == PIN[:9]
    spans = re.findall(r"(.?)<!--pin:(commit|label)-->([^<]*)<!--/pin-->",
                       text + read_text(EXAMPLES / "port" / "docs" / "BENCHMARKS.md"))
    assert {kind for _, kind, _ in spans} == {"commit", "label"}
    for before, kind, value in spans:
        assert before not in ("", "\n")
        assert PIN.startswith(value) if kind == "commit" else value == core["pin_label"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=200),
                 st.dictionaries(st.text(max_size=8), st.text(max_size=44)).map(
                     lambda d: json.dumps(d).encode())))
def test_marks_reader_refuses_garbage_with_a_typed_error(tmp: Path, data: bytes) -> None:
    (tmp / "upstream").mkdir(exist_ok=True)
    (tmp / "upstream" / "marks.json").write_bytes(data)
    try:
        got = example.marks(tmp)
    except UsageError:
        return
    assert re.fullmatch("[0-9a-f]{40}", got["pin"])


def _header_shas() -> dict[str, set[str]]:
    """Each hex run of 7..40 in a leading comment -> the files citing it."""
    found: dict[str, set[str]] = {}
    for path in sorted((EXAMPLES / "port").glob("*/**/*")):
        if path.suffix not in (".h", ".cpp", ".py"):
            continue
        head = "\n".join(path.read_text().splitlines()[:6])
        for sha in re.findall(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])", head):
            found.setdefault(sha, set()).add(path.relative_to(EXAMPLES / "port").as_posix())
    return found


def test_header_citations_name_known_commits() -> None:
    named: dict[str, str] = {}
    for sha, files in _header_shas().items():
        match = [name for name, full in MARKS.items() if full.startswith(sha)]
        assert len(match) <= 1
        for f in files:
            named[f] = match[0] if match else "not upstream"
    assert sorted(set(named.values())) == ["not upstream", "pin", "prior_pin", "qwen3_port",
                                           "sampler_nan"]
    assert named["src/vllm/distributed/parallel_state.cpp"] == "not upstream"
    assert named["src/vllm/v1/sample/sampler.cpp"] == "sampler_nan"  # ahead of the pin
    assert sum(v == "pin" for v in named.values()) >= 12
    lengths = {len(sha) for sha in _header_shas()}
    assert min(lengths) == 7 and max(lengths) == 40


# ---------------------------------------------------------------------- building it


@pytest.fixture(scope="module")
def upstream_at_pin(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src") / "vllm"
    fastimport.git(built, "clone", "-q", str(built / ".example" / "upstream.git"), str(src))
    fastimport.git(src, "checkout", "-q", "--detach", PIN)
    return src


def _build_env(**extra: str) -> dict[str, str]:
    env = fastimport.hermetic_env()
    env.pop("VLLM_USE_PRECOMPILED", None)
    env.update(extra)
    return env


def _setup_version(src: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", "--version"], cwd=src, text=True,
                          capture_output=True, env=_build_env(**extra))


def test_setup_version_in_a_full_clone(upstream_at_pin: Path) -> None:
    runtime = _pin_block()["vllm_runtime_version"]
    assert _setup_version(upstream_at_pin).stdout.splitlines()[-1] == runtime
    dist = _setup_version(upstream_at_pin, VLLM_USE_PRECOMPILED="1").stdout.splitlines()[-1]
    assert dist == _pin_block()["vllm_distribution_version"]
    version_py = (upstream_at_pin / "vllm" / "_version.py").read_text()
    assert version_py == (f'__version__ = "{runtime}"\n'
                          f'__commit_id__ = "g{runtime.split("+g")[1]}"\n')
    assert fastimport.git(upstream_at_pin, "status", "--porcelain") == ""  # ignored outputs


def test_setup_version_in_a_shallow_clone_and_without_git(built: Path, tmp: Path) -> None:
    url = (built / ".example" / "upstream.git").as_uri()
    fastimport.git(tmp, "clone", "-q", "--depth", "1", url, "shallow")
    assert _setup_version(tmp / "shallow").stdout.splitlines()[-1] == (
        f"0.1.dev1+g{MARKS['tip'][:9]}")
    export = tmp / "export"
    export.mkdir()
    archive = subprocess.run(["git", "-C", str(built / ".example" / "upstream.git"), "archive",
                              PIN], capture_output=True, env=_build_env(), check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(export)], input=archive, check=True)
    assert _setup_version(export).stdout.splitlines()[-1] == f"0.1.dev1+g{PIN[:9]}"
    (export / ".git_archival.txt").write_text("node: $Format:%H$\n")
    failed = _setup_version(export)
    assert failed.returncode != 0 and "cannot determine the version" in failed.stderr


def _host_pip() -> bool:
    """Whether this interpreter's pip can drive another environment (`pip --python`, 22.3+)."""
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= (22, 3)


def _modern_setuptools(python: Path) -> bool:
    code = "import setuptools; print(setuptools.__version__)"
    proc = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True)
    parts = re.findall(r"\d+", proc.stdout)[:2]
    # 70.1 builds wheels by itself: no `wheel` package, no isolated build environment.
    return proc.returncode == 0 and tuple(int(p) for p in parts) >= (70, 1)


@pytest.fixture(scope="module")
def oracle_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """One real virtualenv for the module (python, pip command): creating it is the slow part."""
    env = tmp_path_factory.mktemp("oracle") / "venv"
    host = _host_pip()
    venv.EnvBuilder(with_pip=not host, clear=True).create(env)
    python = env / "bin" / "python"
    pip = ([sys.executable, "-m", "pip", "--python", str(python)] if host
           else [str(python), "-m", "pip"])
    if not _modern_setuptools(python):
        _run_pip(pip, "install", "-q", "setuptools>=70.1")
    return python, pip


def _run_pip(pip: list[str], *args: str, **extra: str) -> None:
    proc = subprocess.run([*pip, *args], capture_output=True, text=True, env=_build_env(**extra))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _install(pip: list[str], src: Path, **extra: str) -> None:
    _run_pip(pip, "install", "-q", "--no-deps", "--no-build-isolation", "--force-reinstall",
             str(src), **extra)


def _probe(python: Path, cwd: Path) -> tuple[str, str, str]:
    out = subprocess.run(
        [str(python), "-I", "-c", "import importlib.metadata as m, json, vllm; "
         "print(json.dumps([vllm.__version__, m.version('vllm'), vllm.__file__]))"],
        cwd=cwd, capture_output=True, text=True, check=True,
    ).stdout
    runtime, dist, where = json.loads(out)
    return runtime, dist, where


def test_installed_oracle_reports_the_pin_block_versions(
    oracle_env: tuple[Path, list[str]], upstream_at_pin: Path, tmp: Path,
) -> None:
    python, pip = oracle_env
    block = _pin_block()
    _install(pip, upstream_at_pin)
    runtime, dist, where = _probe(python, tmp)
    assert runtime == dist == block["vllm_runtime_version"]
    assert Path(where).is_relative_to(python.parents[1])  # installed, not the source tree
    _install(pip, upstream_at_pin, VLLM_USE_PRECOMPILED="1")
    runtime, dist, _ = _probe(python, tmp)
    assert runtime == block["vllm_runtime_version"]
    assert dist == block["vllm_distribution_version"]


def test_generator_runs_as_a_plain_script(tmp: Path) -> None:
    # `python examples/upstream/generate.py` must work without the package installed.
    script = EXAMPLES / "upstream" / "generate.py"
    proc = subprocess.run([sys.executable, "-I", "-c",
                           f"import runpy; runpy.run_path({str(script)!r}, run_name='check')"],
                          capture_output=True, text=True, cwd=tmp)
    assert proc.returncode == 0, proc.stderr


def test_the_first_run_says_it_is_building_the_example(tmp: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from sync import cli

    root = tmp / "upstream-sync"
    shutil.copytree(EXAMPLES, root / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "sync" / "cli").mkdir(parents=True)
    (root / "sync" / "cli" / "__init__.py").write_text("")  # what marks the suite's checkout
    monkeypatch.setenv("SYNC_INVOKED_FROM", str(root))

    def notes() -> list[str]:
        out, err = io.StringIO(), io.StringIO()
        cli.main(["status"], out=out, err=err)
        return err.getvalue().splitlines()

    first = notes()
    assert first[:2] == [
        f"building the bundled example in {root.resolve() / '.example'} (first run): its upstream"
        " history with git fast-import, a reference checkout and the example port",
        f"no port configured: running on the bundled example at {root.resolve()}/.example/port"]
    assert not any(line.startswith("building") for line in notes())  # built once
    readme = root / "examples" / "port" / "README.md"
    readme.write_text(readme.read_text() + "\nOne more line.\n")
    assert notes()[0].startswith(f"building the bundled example in {root.resolve()}/.example"
                                 " (examples/ changed): ")
