"""Shared fixtures: hermetic git (no user/system config, fixed identity) for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def hermetic_git(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Port Dev\n\temail = port@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    for var in ("SYNC_PORT", "VLLM_SOURCE", "VLLM_OMNI_SOURCE", "SYNC_FETCH_REMOTE", "SYNC_BRANCH",
                "SYNC_GATE_HOSTS", "SYNC_ORACLE_HOME", "SYNC_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    yield
    os.environ.pop("GIT_TERMINAL_PROMPT", None)


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path
