"""Git as the reference checkout's configuration and the caller's environment would have it.

A replaced commit's fake subject was reported and classified, and a repo-local
`core.fsmonitor` ran a command during `status` and `sync`. Each test plants one such
thing in the reference checkout (or the environment) and proves it has no effect: no
marker file appears, and what is reported is the real history. The inherited-variable
tests also prove the other side: what an authenticated fetch needs still reaches git.
"""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path

import pytest
from portfixture import Fixture, build, run

from sync.dev.fastimport import git
from sync.upstream import gitio

from .generators import FRAGMENTS, sample


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def script(path: Path, marker: Path, tail: str = "") -> str:
    path.write_text(f"#!/bin/sh\necho ran >> '{marker}'\n{tail}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def entries(r_out: str) -> dict[str, str]:
    return {e["sha"]: e["subject"] for e in json.loads(r_out)["entries"]}


def test_replace_objects_are_not_honoured(fx: Fixture) -> None:
    real = fx.marks["change_a"]
    tree = git(fx.reference, "rev-parse", f"{real}^{{tree}}").strip()
    parent = git(fx.reference, "rev-parse", f"{real}^").strip()
    fake = git(fx.reference, "-c", "user.name=X", "-c", "user.email=x@example.invalid",
               "commit-tree", tree, "-p", parent, "-m",
               "[ROCm] a fake subject (#999)").strip()
    git(fx.reference, "replace", real, fake)
    assert "[ROCm] a fake" in git(fx.reference, "log", "-1", "--format=%s", real)
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    subjects = entries(r.out)
    assert subjects[real] == "[Core] Change a (#101)"
    assert all("fake" not in s for s in subjects.values())


def test_a_repo_local_fsmonitor_never_runs(fx: Fixture, tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    git(fx.reference, "config", "core.fsmonitor", script(tmp_path / "fsmonitor.sh", marker))
    (fx.reference / "vllm/a.py").touch()  # stat-dirty: git must look at the work tree
    for argv in (("status",), ("sync",), ("status", "--json")):
        r = run(fx.port, *argv)
        assert r.rc in (0, 3), r.err
    assert not marker.exists(), "core.fsmonitor ran"


def test_repo_local_filters_never_run(fx: Fixture, tmp_path: Path) -> None:
    marker = tmp_path / "filter-ran"
    clean = script(tmp_path / "clean.sh", marker, "cat\n")
    git(fx.reference, "config", "filter.evil.clean", clean)
    git(fx.reference, "config", "filter.evil.smudge", clean)
    git(fx.reference, "config", "filter.evil.required", "true")
    (fx.reference / ".git/info").mkdir(exist_ok=True)
    (fx.reference / ".git/info/attributes").write_text("* filter=evil\n")
    for p in ("vllm/a.py", "vllm/b.py", "README.md"):
        os.utime(fx.reference / p, (1, 1))  # stat-dirty: compared through the clean filter
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    assert json.loads(r.out)["reference"]["dirty"] is False
    assert not marker.exists(), "a clean filter ran"


@pytest.mark.parametrize("hook", ["post-merge", "reference-transaction"])
def test_hooks_never_run(fx: Fixture, tmp_path: Path, hook: str) -> None:
    marker = tmp_path / f"{hook}-ran"
    script(fx.reference / ".git/hooks" / hook, marker)
    # What advance does to the reference checkout (a fast-forward), and what fetch does.
    gitio.run(fx.reference, ["merge", "--ff-only", "-q", "--end-of-options", fx.tip])
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err
    assert not marker.exists(), f"the {hook} hook ran"


# Inherited variables that would redirect git, or switch on what runs a command.
REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
               "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_COMMON_DIR",
               "GIT_REPLACE_REF_BASE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
               "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
               "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_TRACE")


def test_inherited_variables_never_redirect_or_run(
        fx: Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoy = tmp_path / "decoy"
    git(tmp_path, "init", "-q", str(decoy))
    marker = tmp_path / "env-ran"
    cmd = script(tmp_path / "cmd.sh", marker)
    for var in REDIRECTING:
        monkeypatch.setenv(var, str(decoy / ".git") if "DIR" in var or var == "GIT_TRACE"
                           else cmd)
    monkeypatch.setenv("GIT_WORK_TREE", str(decoy))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={cmd}'")
    # Config a caller injects that is not authentication is dropped too.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", cmd)
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", str(tmp_path))
    (fx.reference / "vllm/a.py").touch()
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    assert json.loads(r.out)["pin"] == fx.pin
    assert not marker.exists()
    assert not any(os.environ.get(v) for v in REDIRECTING if v != "GIT_TRACE")


def test_what_an_authenticated_fetch_needs_is_kept(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI hands a fetch its remote through GIT_CONFIG_COUNT (a url insteadOf with a token,
    here the local remote behind an https URL that does not exist): it must reach git."""
    git(fx.reference, "remote", "set-url", "origin", "https://example.invalid/vllm.git")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.{fx.remote}.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://example.invalid/vllm.git")
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err


def test_git_ssh_command_reaches_the_fetch(fx: Fixture, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ssh = tmp_path / "ssh.sh"
    ssh.write_text(f"#!/bin/sh\nexec git upload-pack '{fx.remote}'\n")
    ssh.chmod(0o755)
    git(fx.reference, "remote", "set-url", "origin", "ssh://example.invalid/vllm.git")
    monkeypatch.setenv("GIT_SSH_COMMAND", str(ssh))
    r = run(fx.port, "fetch")
    assert r.rc == 0, r.err


def test_the_environment_allowlist() -> None:
    hostile = dict.fromkeys(REDIRECTING, "x")
    hostile.update({"GIT_SSH_COMMAND": "ssh -i key", "GIT_ASKPASS": "pass",
                    "GIT_SSL_CAINFO": "ca.pem", "GIT_HTTP_PROXY_AUTHMETHOD": "basic",
                    "GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "http.extraHeader",
                    "GIT_CONFIG_VALUE_0": "AUTHORIZATION: bearer t",
                    "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "evil",
                    "GIT_CONFIG_KEY_2": "credential.helper", "GIT_CONFIG_VALUE_2": "store",
                    "PATH": "/bin"})
    env = gitio.environ(hostile)
    assert not set(REDIRECTING) & set(env)
    assert {k: env[k] for k in ("GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_SSL_CAINFO",
                                "GIT_HTTP_PROXY_AUTHMETHOD", "PATH")} == {
        "GIT_SSH_COMMAND": "ssh -i key", "GIT_ASKPASS": "pass", "GIT_SSL_CAINFO": "ca.pem",
        "GIT_HTTP_PROXY_AUTHMETHOD": "basic", "PATH": "/bin"}
    pairs = [(env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"])
             for i in range(int(env["GIT_CONFIG_COUNT"]))]
    assert pairs[:2] == [("http.extraHeader", "AUTHORIZATION: bearer t"),
                         ("credential.helper", "store")]
    assert ("core.fsmonitor", "false") in pairs and ("core.fsmonitor", "evil") not in pairs
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_OPTIONAL_LOCKS"] == "0"  # `git status` never rewrites a checkout's index
    assert gitio.environ(env) == env  # applying it twice changes nothing


TARGETS = [*sample(random.Random(4), 6, size=3), "--output=/tmp/x", "-c", "@{-1}", "HEAD:../x",
           FRAGMENTS[0], "main\n--output=x", "--end-of-options", "-", "a" * 5000]


def test_option_looking_or_hostile_targets_never_reach_git(fx: Fixture) -> None:
    for target in TARGETS:
        r = run(fx.port, "sync", f"--target={target}")
        # Refused as input, or named as no commit of the checkout: never a crash, never git.
        assert r.rc in (2, 3) and "internal error" not in r.err, (target, r.err)
        assert not (fx.port / "x").exists() and not Path("/tmp/x").exists()
