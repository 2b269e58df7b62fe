"""The git wrapper: inherited GIT_* variables never redirect us, input never becomes an option."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from portfixture import Fixture, build, run

from sync.dev.fastimport import History
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.upstream import gitio


@pytest.fixture
def fx(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Fixture:
    return build(tmp, monkeypatch)


def test_an_inherited_git_dir_does_not_redirect_the_reference(
        fx: Fixture, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoy = tmp / "decoy"
    h = History()
    h.modify("x", "1\n")
    h.commit("decoy")
    h.write(decoy)
    monkeypatch.setenv("GIT_DIR", str(decoy / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(decoy))
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    assert f'"pin": "{fx.pin}"' in r.out
    assert "GIT_DIR" not in os.environ  # scrubbed for GitPython too


@pytest.mark.parametrize("rev", ["--output=/tmp/pwned", "-p", "", "a..b", "main;rm", "a b"])
def test_revisions_that_could_be_options_are_refused(rev: str) -> None:
    with pytest.raises(UsageError):
        gitio.check_rev(rev)


def test_a_target_that_looks_like_an_option_is_refused(fx: Fixture, tmp: Path) -> None:
    victim = tmp / "pwned"
    r = run(fx.port, "sync", f"--target=--output={victim}")
    assert r.rc == 2 and "not a usable git revision" in r.err
    assert not victim.exists()


def test_a_failed_background_git_is_a_typed_error(fx: Fixture) -> None:
    job = gitio.start(fx.reference, ["log", "--end-of-options", "no-such-revision"])
    with pytest.raises(EnvironmentUnresolved, match="git log failed"):
        job.wait()


def test_a_checkout_opens_at_its_top_and_by_its_git_dir_never_from_inside(fx: Fixture) -> None:
    top = gitio.open_repo(fx.reference)
    assert top.path == fx.reference and top.git_dir == (fx.reference / ".git").resolve()
    assert gitio.open_repo(fx.reference / ".git").path == fx.reference
    inside = fx.reference / "vllm"
    assert inside.is_dir()
    with pytest.raises(EnvironmentUnresolved, match="is not a git repository"):
        gitio.open_repo(inside)
    assert not gitio.is_detached(top) and gitio.head_sha(top) == fx.pin
    gitio.run(fx.reference, ["checkout", "-q", "--detach", "HEAD"])
    assert gitio.is_detached(top)


def test_a_failure_names_the_git_command_past_its_config_options(tmp_path: Path) -> None:
    """walk-s11 nit: `git -c failed in ...` named the option, not the command."""
    with pytest.raises(EnvironmentUnresolved, match=r"^git cat-file failed in "):
        gitio._fail(tmp_path, ["-c", "core.quotepath=off", "cat-file", "-p", "x"],
                    b"fatal: unable to read cc61f1f5\n")
