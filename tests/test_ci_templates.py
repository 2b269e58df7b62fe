"""The CI workflow templates under ci/github/: structure, pinning, permissions, and that
every session and command they call exists.

The templates are loaded with PyYAML (a test-only dependency) and normalised to text
scalars, the way GitHub reads them (`on` stays `on`). The workflow linters (zizmor, the
workflow schema) run in `nox -s lint`; why actionlint does not is in ci/README.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakesuite import Suite, make_suite

from sync.cli import build_parser
from sync.dev.fastimport import History, git
from sync.infra.errors import SyncError

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "ci" / "github"
CYCLE, CHECK, GATES = "upstream-sync.yml", "upstream-sync-check.yml", "upstream-sync-gates.yml"
GATE_LABELS = ["self-hosted", "gpu", "gate"]
PINNED = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[0-9a-f]{40}")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s+(\S+)\s+#\s+v[0-9]+\.[0-9]+\.[0-9]+\s*$")


# --- the reader -------------------------------------------------------------------------

def _normalise(value: Any) -> Any:
    # PyYAML resolves YAML 1.1 types (`on` is True, `0` is 0); GitHub keeps the text.
    if isinstance(value, dict):
        return {("on" if k is True else str(k)): _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def read_yaml(text: str) -> Any:
    return _normalise(yaml.safe_load(text))


# --- loading the templates ----------------------------------------------------------------

def templates() -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for path in sorted(TEMPLATES.glob("*.yml")):
        text = path.read_text(encoding="utf-8")
        out[path.name] = (text, read_yaml(text))
    return out


LOADED = templates()


def doc(name: str) -> dict[str, Any]:
    return LOADED[name][1]


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps") or [])


def all_steps(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in doc(name)["jobs"].items():
        for step in steps(job):
            yield job_id, step


def scripts(name: str) -> list[str]:
    return [step["run"] for _, step in all_steps(name) if "run" in step]


def step_named(name: str, job: str, prefix: str) -> dict[str, Any]:
    found = [s for s in steps(doc(name)["jobs"][job]) if str(s.get("name", "")).startswith(prefix)]
    assert len(found) == 1, f"{name}: job {job} has {len(found)} steps named {prefix!r}..."
    return found[0]


def test_the_three_templates_are_there() -> None:
    assert sorted(LOADED) == sorted([CYCLE, CHECK, GATES])


# --- structure -----------------------------------------------------------------------------

def test_cycle_is_weekly_and_manual_with_one_pull_request() -> None:
    d = doc(CYCLE)
    assert [list(e) for e in d["on"]["schedule"]] == [["cron"]]
    assert d["on"]["schedule"][0]["cron"].split()[2:] == ["*", "*", "1"]  # weekly
    assert "workflow_dispatch" in d["on"]
    assert list(d["jobs"]) == ["cycle", "pull-request"]
    pr = d["jobs"]["pull-request"]
    assert pr["needs"] == "cycle"
    creates = [s for s in steps(pr)
               if s.get("uses", "").startswith("peter-evans/create-pull-request@")]
    assert len(creates) == 1
    # One fixed branch: every run updates the same pull request instead of opening another.
    assert creates[0]["with"]["branch"] == "${{ env.PR_BRANCH }}"
    assert d["env"]["PR_BRANCH"] and "$" not in d["env"]["PR_BRANCH"]


def test_cycle_runs_fetch_then_sync_on_a_full_reference_clone() -> None:
    cycle = doc(CYCLE)["jobs"]["cycle"]
    runs = [s.get("run", "") for s in steps(cycle)]
    fetch = next(k for k, r in enumerate(runs) if "-s fetch" in r)
    sync = next(k for k, r in enumerate(runs) if "-s sync" in r)
    assert fetch < sync
    assert "--json" in runs[sync]
    assert cycle["env"]["VLLM_SOURCE"] and cycle["env"]["SYNC_PORT"]
    clone = step_named(CYCLE, "cycle", "Reference checkout")["run"]
    assert "git clone" in clone
    for name, (text, _) in LOADED.items():
        assert "--depth" not in text and "--shallow" not in text, name
        assert "fetch-depth: 1" not in text, name


def test_only_the_cycle_workflow_writes_a_cache() -> None:
    for name in LOADED:
        for _, step in all_steps(name):
            uses = step.get("uses", "")
            if uses.startswith("actions/cache@"):
                assert name == CYCLE
            if uses.startswith("actions/cache/restore@"):
                assert step["with"]["restore-keys"] == "upstream-reference-"


def test_concurrency_keeps_two_cycles_apart() -> None:
    for name in (CYCLE, GATES):
        group = doc(name)["concurrency"]
        assert group["group"].startswith("upstream-sync-")
        assert group["cancel-in-progress"] == "false"
    # The cycle's group names no run or ref: every run of it queues behind the last.
    assert "${{" not in doc(CYCLE)["concurrency"]["group"]


def test_check_runs_check_and_check_commit_over_the_pull_requests_commits() -> None:
    d = doc(CHECK)
    assert list(d["on"]) == ["pull_request"]
    assert list(d["jobs"]) == ["check", "check-commit"]
    job = d["jobs"]["check-commit"]
    checkout = next(s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@")
                    and s["with"].get("path") == "port")
    assert checkout["with"]["fetch-depth"] == "0"
    step = step_named(CHECK, "check-commit", "The pull request's commits")
    assert step["env"] == {"BASE": "${{ github.event.pull_request.base.sha }}",
                           "HEAD_SHA": "${{ github.event.pull_request.head.sha }}"}
    assert step["run"].endswith('-s check-commit -- "$BASE..$HEAD_SHA"')
    assert any("-s check" in r and "check-commit" not in r for r in scripts(CHECK))


def test_gates_run_strict_on_labelled_self_hosted_runners() -> None:
    d = doc(GATES)
    assert list(d["on"]) == ["workflow_dispatch"]
    jobs = d["jobs"]
    assert list(jobs) == ["plan", "oracle", "gate"]
    assert jobs["plan"]["runs-on"] == "ubuntu-latest"
    for job in ("oracle", "gate"):
        assert jobs[job]["runs-on"] == GATE_LABELS
    gate = jobs["gate"]
    assert gate["needs"] == ["plan", "oracle"]
    assert gate["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert gate["strategy"]["fail-fast"] == "false"
    run = step_named(GATES, "gate", "Step 6:")
    assert run["env"]["SHARD"] == "${{ matrix.shard }}"
    assert "args=(--strict)" in run["run"] and 'args+=(--shard "$SHARD")' in run["run"]
    verify = step_named(GATES, "oracle", "Verify the oracle")["run"]
    assert verify.splitlines()[-1] == ('upstream-sync oracle verify --oracle "$ORACLE" --commit '
                                       'target --json > "gate-logs/oracle-$ORACLE.json"')


def test_gates_upload_goldens_and_records_even_when_a_gate_fails() -> None:
    for job in ("oracle", "gate"):
        uploads = [s for s in steps(doc(GATES)["jobs"][job])
                   if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert len(uploads) == 1
        assert uploads[0]["if"] == "always()"
        assert step_named(GATES, job, "Stage this cycle's gate record")["if"] == "always()"
        # The staged record, not the port's folder: that holds earlier cycles' records too,
        # and upload-artifact leaves out hidden folders (.agents). With more than one path
        # the artifact's root is the workspace, so the record is gates/<target7>.json in
        # every artifact, as 'gates merge gate-*/gates/*.json' names it.
        paths = uploads[0]["with"]["path"].split()
        assert paths[0] == "gates/" and len(paths) > 1, paths
        assert not any("SYNC_DIR" in p or "/." in p for p in paths), paths
    paths = step_named(GATES, "gate", "Upload")["with"]["path"]
    assert "${{ env.GOLDEN_DIR }}" in paths and "gate-logs/" in paths


@pytest.mark.parametrize("job", ["oracle", "gate"])
def test_a_gate_job_stages_only_this_cycles_gate_record(tmp: Path, job: str) -> None:
    """From the second cycle on, the port's gates folder holds the records earlier cycles
    committed; uploaded whole, 'gates merge gate-*/gates/*.json' refused them (another
    target). Only the open cycle's record is staged; none (the gate failed before writing
    it) is a warning, not a failure that hides the log's upload."""
    sync_dir = tmp / "port" / ".agents/sync"
    (sync_dir / "gates").mkdir(parents=True)
    target, earlier = "c26fc2f666ef31f04e2400c6bc6ba62b86e1aef4", "5c72d3ac50cba22d41d3"
    (sync_dir / "cycle.toml").write_text(f'schema = 1\ntarget = "{target}"\n')
    script = step_named(GATES, job, "Stage this cycle's gate record")["run"]
    env = _env(tmp, SYNC_DIR=".agents/sync")
    proc = _bash(script, tmp, env)
    assert proc.returncode == 0 and "::warning::no gate record" in proc.stdout, proc.stderr
    assert list((tmp / "gates").iterdir()) == []
    (sync_dir / "gates" / f"{earlier[:7]}.json").write_text("{}\n")
    (sync_dir / "gates" / f"{target[:7]}.json").write_text('{"target": "this"}\n')
    proc = _bash(script, tmp, env)
    assert proc.returncode == 0, proc.stderr
    assert [(p.name, p.read_text()) for p in (tmp / "gates").iterdir()] == [
        (f"{target[:7]}.json", '{"target": "this"}\n')]


def test_self_hosted_runners_never_serve_pull_requests() -> None:
    for name in LOADED:
        d = doc(name)
        assert "pull_request_target" not in d["on"]
        hosted = all(job["runs-on"] != GATE_LABELS for job in d["jobs"].values())
        assert hosted or "pull_request" not in d["on"], name


# --- pinning and permissions -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(LOADED))
def test_every_action_is_pinned_by_full_sha_with_its_version(name: str) -> None:
    text, _ = LOADED[name]
    used = [step["uses"] for _, step in all_steps(name) if "uses" in step]
    assert used
    for uses in used:
        assert PINNED.fullmatch(uses), uses
    lines = [line for line in text.splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert len(lines) == len(used)
    for line in lines:
        assert USES_LINE.match(line), f"{name}: no '# vX.Y.Z' after the SHA: {line.strip()}"


def test_one_sha_per_action_across_templates() -> None:
    shas: dict[str, set[str]] = {}
    for name in LOADED:
        for _, step in all_steps(name):
            if "uses" in step:
                action, _, sha = step["uses"].partition("@")
                shas.setdefault(action, set()).add(sha)
    assert {a: s for a, s in shas.items() if len(s) > 1} == {}


@pytest.mark.parametrize("name", sorted(LOADED))
def test_permissions_are_least_privilege(name: str) -> None:
    text, d = LOADED[name]
    assert d["permissions"] == {"contents": "read"}
    assert "write-all" not in text and "read-all" not in text
    for job_id, job in d["jobs"].items():
        perms = job.get("permissions")
        if perms is None:
            continue
        assert isinstance(perms, dict)
        if (name, job_id) == (CYCLE, "pull-request"):
            assert perms == {"contents": "write", "pull-requests": "write"}
        else:
            assert set(perms.values()) <= {"read", "none"}, (name, job_id)


def test_the_writing_job_runs_nothing_from_the_suite_or_a_registry() -> None:
    job = doc(CYCLE)["jobs"]["pull-request"]
    for step in steps(job):
        run = step.get("run", "")
        assert not re.search(r"\b(nox|pip|upstream-sync|python|npm|uv)\b", run), run
    for step in steps(job):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] == "false"


def test_read_only_checkouts_keep_no_credentials() -> None:
    for name in LOADED:
        for _, step in all_steps(name):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] == "false", name


def test_inputs_reach_scripts_through_the_environment_only() -> None:
    # `${{ inputs.x }}` or `${{ github.event... }}` pasted into a script is a shell injection.
    for name in LOADED:
        for script in scripts(name):
            for expr in re.findall(r"\$\{\{(.*?)\}\}", script):
                assert not re.search(r"\b(inputs|github\.event|matrix)\b", expr), (name, expr)


# --- the sessions and commands they call exist -----------------------------------------------

_NOX = re.compile(r"\bnox\b[^\n]*?\s-s\s+(\"?)(\$?[A-Za-z0-9_-]+)\1(?:\s+--\s+([^\n]*))?")
# An invocation starts a command (a line, `then`, `!`, `&&`); a mention in a message does not.
_CLI = re.compile(r"(?m)(?:^\s*|\bthen\s+|!\s+|&&\s+|\|\|\s+)upstream-sync\s+([^\n]*)")


def nox_calls(name: str) -> list[tuple[str, str, str]]:
    """(session or $VAR, the arguments after --, the whole script) for every nox -s call."""
    out = []
    for script in scripts(name):
        for m in _NOX.finditer(script):
            out.append((m.group(2), m.group(3) or "", script))
    return out


def gate_sessions() -> list[str]:
    return str(doc(GATES)["env"]["GATE_SESSIONS"]).split()


def called_sessions() -> set[str]:
    names: set[str] = set()
    for name in LOADED:
        for session, _, _ in nox_calls(name):
            names.update(gate_sessions() if session == "$SESSION" else [session])
    return names


def test_every_nox_session_called_is_in_the_noxfile() -> None:
    names = called_sessions()
    assert {"fetch", "sync", "check", "check-commit", "oracle", "golden", "parity"} <= names
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-l",
                           "--json", "-s", *sorted(names)], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert {s["session"] for s in json.loads(proc.stdout)} == names


def session_commands() -> dict[str, list[tuple[str, ...]]]:
    """Session -> the upstream-sync words of each command it runs (the noxfile's `_cli` and
    `_run` calls; the session's arguments go to every one of them)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    out: dict[str, list[tuple[str, ...]]] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        name = fn.name
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        name = str(kw.value.value)
        for node in ast.walk(fn):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("_cli", "_run") and fn.name not in ("_cli", "_run")):
                words = tuple(str(a.value) for a in node.args[1:] if isinstance(a, ast.Constant))
                out.setdefault(name, []).append(tuple(w for w in words if not w.startswith("-")))
    return out


def _words(args: str) -> list[str]:
    """The arguments a script line passes, up to a redirection or pipe."""
    out = []
    for token in shlex.split(args):
        if token in ("|", "&&", "||", ";") or token.startswith((">", "2>")):
            break
        out.append(token)
    return out


def _flags(script: str, args: str) -> tuple[list[str], list[str]]:
    """(flags every call passes, flags a script adds conditionally with `args+=(...)`)."""
    always = [w for w in _words(args) if w.startswith("--")]
    for m in re.finditer(r"args=\(([^)]*)\)", script):
        always += [w for w in shlex.split(m.group(1)) if w.startswith("--")]
    added = [w for m in re.finditer(r"args\+=\(([^)]*)\)", script)
             for w in shlex.split(m.group(1)) if w.startswith("--")]
    return always, added


def _options(words: tuple[str, ...]) -> set[str]:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {s for a in parser._actions for s in a.option_strings}


def test_every_flag_passed_to_a_session_is_an_option_of_its_command() -> None:
    commands = session_commands()
    checked = 0
    sharded = str(doc(GATES)["env"]["SHARDED_SESSIONS"]).split()
    for name in LOADED:
        for session, args, script in nox_calls(name):
            always, added = _flags(script, args)
            for s in gate_sessions() if session == "$SESSION" else [session]:
                assert s in commands, f"{name}: session {s} runs no upstream-sync command"
                # The matrix step adds --shard only for sharded sessions (a non-empty shard).
                flags = always + added if session != "$SESSION" or s in sharded else always
                accepted = set.intersection(*(_options(c) for c in commands[s]))
                unknown = set(flags) - accepted
                assert not unknown, f"{name}: nox -s {s} passes {sorted(unknown)}"
                checked += len(flags)
    assert checked >= 6


def test_every_upstream_sync_command_line_parses() -> None:
    lines = [m.group(1) for name in LOADED for script in scripts(name)
             for m in _CLI.finditer(script)]
    assert any(line.startswith("oracle verify") for line in lines)
    for line in lines:
        words = [("vllm" if w.startswith("$") else w) for w in _words(line)]
        try:
            build_parser().parse_args(words)
        except SyncError as exc:
            pytest.fail(f"upstream-sync {line}: {exc}")


# --- the scripts, run -------------------------------------------------------------------------

def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), RUNNER_TEMP=str(tmp),
               GITHUB_OUTPUT=str(tmp / "output"), GITHUB_STEP_SUMMARY=str(tmp / "summary"))
    env.update(extra)
    return env


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # With `shell: bash` (every template's default), GitHub runs `run:` scripts as
    # `bash --noprofile --norc -eo pipefail {0}`.
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _outputs(tmp: Path) -> dict[str, str]:
    text = (tmp / "output").read_text(encoding="utf-8") if (tmp / "output").exists() else ""
    return dict(line.split("=", 1) for line in text.splitlines())


def _plan(tmp: Path, shards: str, sessions: str | None = None) -> subprocess.CompletedProcess[str]:
    env_doc = doc(GATES)["env"]
    script = step_named(GATES, "plan", "Build the matrix")["run"]
    env = _env(tmp, SUITE=str(ROOT), SHARDS=shards,
               GATE_SESSIONS=sessions or env_doc["GATE_SESSIONS"],
               SHARDED_SESSIONS=env_doc["SHARDED_SESSIONS"])
    return _bash(script, tmp, env)


def test_plan_builds_the_matrix_from_nox_list(tmp: Path) -> None:
    proc = _plan(tmp, "3")
    assert proc.returncode == 0, proc.stderr
    matrix = json.loads(_outputs(tmp)["matrix"])
    assert matrix == {"include": [
        {"session": "golden", "shard": "1/3", "label": "golden-1-of-3"},
        {"session": "golden", "shard": "2/3", "label": "golden-2-of-3"},
        {"session": "golden", "shard": "3/3", "label": "golden-3-of-3"},
        {"session": "parity", "shard": "", "label": "parity"},
    ]}
    assert proc.stdout.splitlines() == ["golden 1/3", "golden 2/3", "golden 3/3", "parity"]


@pytest.mark.parametrize("shards", ["0", "65", "x", "2; rm -rf /", "１"])
def test_plan_refuses_a_bad_shard_count(tmp: Path, shards: str) -> None:
    proc = _plan(tmp, shards)
    assert proc.returncode == 2
    assert proc.stdout.startswith("::error::shards = ")
    assert "matrix" not in _outputs(tmp)


def test_plan_refuses_a_gate_session_the_suite_lacks(tmp: Path) -> None:
    proc = _plan(tmp, "2", "golden parity-omni")
    assert proc.returncode == 2
    assert proc.stdout.startswith("::error::the suite's noxfile has no session 'parity-omni'")


def _port(tmp: Path) -> tuple[Path, str]:
    h = History()
    h.modify("README.md", "port\n").modify(".agents/sync/.keep", "")
    h.commit("port")
    marks = h.write(tmp / "port")
    return tmp / "port", marks[1]


REPORT = (
    "# Upstream sync report 2026-01-05 — target cc05d1a\n\n"
    "- Pin: `147b89ac926dabf0d3a3ac630941428c07798a7c`\n\n"
    "## Summary\n\n| disposition | commits |\n|---|---|\n| PORT-NOW | 1 |\n\n"
    "## PORT-NOW\n\n- `7a42bc31b3` vllm#37215 \\[Core\\] x — PORT-NOW: y\n"
)


def test_cycle_summary_writes_the_body_and_the_patch_the_pr_job_applies(tmp: Path) -> None:
    port, _ = _port(tmp)
    rel = ".agents/sync/2026-01-05-cc05d1a.md"
    (port / rel).write_text(REPORT, encoding="utf-8")
    (port / ".agents/sync/.lock").write_text("4242\n")
    (tmp / "sync.json").write_text(json.dumps({"report": rel, "target": "cc05d1a35f" + "0" * 30}))
    script = step_named(CYCLE, "cycle", "Summarise")["run"]
    proc = _bash(script, tmp, _env(tmp))
    assert proc.returncode == 0, proc.stderr
    assert _outputs(tmp) == {"report": rel, "target7": "cc05d1a"}
    body = (tmp / "cycle" / "body.md").read_text(encoding="utf-8")
    assert body.startswith("# Upstream sync report 2026-01-05")
    assert "| PORT-NOW | 1 |" in body and "## PORT-NOW" not in body
    assert f"Full report: `{rel}`" in body
    assert (tmp / "summary").read_text(encoding="utf-8") == body

    # The pull-request job applies the patch to a fresh checkout of the same commit.
    fresh = tmp / "fresh"
    fresh.mkdir()
    git(fresh, "clone", "-q", str(port), "port")
    apply = step_named(CYCLE, "pull-request", "Apply")["run"]
    proc = _bash(apply, fresh, _env(tmp))
    assert proc.returncode == 0, proc.stderr
    assert (fresh / "port" / rel).read_text(encoding="utf-8") == REPORT
    assert not (fresh / "port" / ".agents/sync/.lock").exists()


def test_cycle_summary_with_nothing_to_sync_opens_no_pull_request(tmp: Path) -> None:
    _port(tmp)
    (tmp / "sync.json").write_text(json.dumps({"report": None, "target": "a" * 40}))
    script = step_named(CYCLE, "cycle", "Summarise")["run"]
    proc = _bash(script, tmp, _env(tmp))
    assert proc.returncode == 0, proc.stderr
    assert _outputs(tmp)["report"] == ""
    assert doc(CYCLE)["jobs"]["pull-request"]["if"] == "needs.cycle.outputs.report != ''"
    assert "Nothing to sync" in (tmp / "summary").read_text(encoding="utf-8")


def _ci_env(tmp: Path, suite: Suite, **extra: str) -> dict[str, str]:
    """A runner's environment for a step that calls nox on the fake suite (no index)."""
    runner = {k: v for k, v in _env(tmp).items()
              if k in ("PATH", "RUNNER_TEMP", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    return suite.environ(**runner, SUITE=str(suite.root), **extra)


@pytest.mark.parametrize("name", [CYCLE, CHECK, GATES])
def test_every_run_script_runs_under_pipefail(name: str) -> None:
    # With no shell named, GitHub runs `bash -e {0}`: a gate piped through tee would
    # exit 0 whatever the gate exited with.
    assert doc(name).get("defaults", {}).get("run", {}).get("shell") == "bash"
    for job in doc(name)["jobs"].values():
        for step in steps(job):
            assert step.get("shell", "bash") == "bash", step.get("name")
        assert job.get("defaults", {}).get("run", {}).get("shell", "bash") == "bash"


@pytest.mark.parametrize("code", [3, 6])
def test_a_gate_step_fails_with_the_commands_typed_exit_code(tmp: Path, code: int) -> None:
    # The step pipes nox through tee; with GitHub's pipefail the step's code is nox's,
    # and nox's is the command's: 3 a misconfigured runner, 6 a cycle that is not ready.
    suite = make_suite(tmp / "upstream-sync")
    script = step_named(GATES, "gate", "Step 6")["run"]
    env = _ci_env(tmp, suite, SESSION="golden", SHARD="2/4", LABEL="golden-2-of-4",
                  FAKE_EXIT=str(code))
    proc = _bash(script, tmp, env)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert [c["argv"] for c in suite.calls()] == [["golden", "--strict", "--shard", "2/4"]]
    log = (tmp / "gate-logs" / "golden-2-of-4.log").read_text()
    assert f"upstream-sync exited {code}: nox exits {code} too" in log


def test_the_check_step_fails_with_exit_7_on_violations(tmp: Path) -> None:
    suite = make_suite(tmp / "upstream-sync")
    script = step_named(CHECK, "check", "Every record invariant")["run"]
    proc = _bash(script, tmp, _ci_env(tmp, suite, FAKE_EXIT="7"))
    assert proc.returncode == 7, proc.stdout + proc.stderr


def test_actionlint_config_declares_the_custom_runner_labels() -> None:
    config = read_yaml((TEMPLATES / "actionlint.yaml").read_text(encoding="utf-8"))
    labels = {label for name in LOADED for job in doc(name)["jobs"].values()
              if isinstance(job["runs-on"], list) for label in job["runs-on"]}
    assert sorted(config["self-hosted-runner"]["labels"]) == sorted(labels - {"self-hosted"})


# --- the documentation stays in step ----------------------------------------------------------

def noxfile_sessions() -> list[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    names = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and any(
                "nox.session" in ast.unparse(d) for d in fn.decorator_list):
            name = fn.name
            for dec in fn.decorator_list:
                for kw in getattr(dec, "keywords", []):
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        name = str(kw.value.value)
            names.append(name)
    return names


def test_adopting_guide_lists_every_cycle_session() -> None:
    guide = (ROOT / "docs" / "adopting.md").read_text(encoding="utf-8")
    table = [line for line in guide.splitlines() if line.startswith("| ")]
    sessions = [s for s in noxfile_sessions() if s not in ("tests", "lint", "bench", "real-oracle")]
    assert {"status", "fetch", "sync", "check", "check-commit"} <= set(sessions)
    for s in sessions:
        assert any(f"| `{s}` |" in line for line in table), f"docs/adopting.md lacks {s}"


def test_ci_readme_names_the_pinned_shas() -> None:
    readme = (ROOT / "ci" / "README.md").read_text(encoding="utf-8")
    for name in LOADED:
        for _, step in all_steps(name):
            if "uses" in step:
                action, _, sha = step["uses"].partition("@")
                rows = [line for line in readme.splitlines() if f"`{sha}`" in line]
                assert rows and f"`{action}`" in rows[0], f"ci/README.md: {action}@{sha}"
