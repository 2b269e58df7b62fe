"""The bundled example, materialised: a fake upstream, its reference checkout and a port.

`examples/upstream/history.fi` (a fast-import stream) and `examples/port/` are the
sources; `materialise` turns them into real repositories under `<repo>/.example/`:

- `upstream.git`: bare, `main` at the tip of the history;
- `vllm`: the reference checkout, a full clone whose `main` (and work tree) sits at
  the parity pin while `origin/main` is at the tip — the state a sync cycle starts in;
- `port`: `examples/port` as a git repository with one commit, plus untracked
  developer preferences pointing at the two above;
- `oracles`: the oracle home (empty until an oracle is built).

It is built once and rebuilt only when the contents of `examples/` change, so the
state that commands leave behind (reports, decisions, an advance) persists between
runs. A build happens in a temporary directory beside `.example` and is renamed
into place, so an interrupted build never leaves half an example.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sync.dev.fastimport import hermetic_env
from sync.infra.atomic import write_text
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.infra.notes import Notes

EXAMPLE_DIR = ".example"
STAMP_FILE = "stamp"
# Part of the stamp: a change to how the example is assembled rebuilds it too.
_LAYOUT = "2"
_SKIP = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Port Dev", "GIT_AUTHOR_EMAIL": "port@example.invalid",
    "GIT_COMMITTER_NAME": "Port Dev", "GIT_COMMITTER_EMAIL": "port@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-02T12:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-02T12:00:00+0000",
}
_FULL_SHA = re.compile(r"[0-9a-f]{40}")


def _git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    env = hermetic_env()
    env.update(_IDENTITY)
    proc = subprocess.run(["git", "-C", str(cwd), *args], input=input, capture_output=True,
                          env=env, check=False)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EnvironmentUnresolved(
            f"building the bundled example failed: git {args[0]}: "
            f"{err[-1] if err else f'exit {proc.returncode}'}",
            "check that git is installed and the examples/ directory is intact",
        )
    return proc.stdout.decode()


def _files(examples: Path) -> list[Path]:
    return sorted(p for p in examples.rglob("*")
                  if p.is_file() and not _SKIP.intersection(p.relative_to(examples).parts)
                  and p.suffix != ".pyc")


def stamp(examples: Path) -> str:
    """sha256 over every file under `examples/` (path, size, bytes): the rebuild trigger."""
    h = hashlib.sha256(f"layout {_LAYOUT}\0".encode())
    for path in _files(examples):
        data = path.read_bytes()
        h.update(f"{path.relative_to(examples).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def marks(examples: Path) -> dict[str, str]:
    """Readable commit name -> full SHA of the bundled upstream (`pin`, `tip`, ...)."""
    path = examples / "upstream" / "marks.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}",
                         "run 'python examples/upstream/generate.py'") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _FULL_SHA.fullmatch(v)
        for k, v in data.items()
    ) or "pin" not in data:
        raise UsageError(f"{path} is not a name -> 40-hex SHA map with a 'pin' entry",
                         "run 'python examples/upstream/generate.py'")
    return dict(data)


def preferences_text(reference: Path, oracle_home: Path) -> str:
    return (
        "# Developer preferences of the bundled example (machine-specific, untracked)\n\n"
        "```sync-preferences\n"
        f"reference_checkout = {reference}\n"
        "fetch_remote = origin\n"
        "branch = main\n"
        "gate_hosts =\n"
        f"oracle_home = {oracle_home}\n"
        "```\n"
    )


def build(dest: Path, examples: Path, *, final: Path | None = None) -> Path:
    """Build the example at `dest` (which must not exist); return its port root.

    `final` is where the tree will live once renamed into place: every absolute
    path written (clone origin, preferences) names it, not the build directory.
    """
    where = (final or dest).resolve()
    history = examples / "upstream" / "history.fi"
    if not history.is_file() or not (examples / "port").is_dir():
        raise UsageError(f"{examples} has no upstream/history.fi or port/",
                         "restore examples/ from the repository")
    pin = marks(examples)["pin"]
    dest.mkdir(parents=True)
    _git(dest, "init", "-q", "--bare", "-b", "main", "upstream.git")
    _git(dest / "upstream.git", "fast-import", "--quiet", input=history.read_bytes())
    _git(dest, "clone", "-q", "upstream.git", "vllm")
    reference = dest / "vllm"
    _git(reference, "remote", "set-url", "origin", str(where / "upstream.git"))
    _git(reference, "reset", "-q", "--hard", pin)
    port = dest / "port"
    shutil.copytree(examples / "port", port,
                    ignore=shutil.ignore_patterns(*_SKIP, "*.pyc"))
    _git(port, "init", "-q", "-b", "main")
    _git(port, "add", "-A")
    _git(port, "commit", "-q", "--no-verify", "-m", "Import the bundled example port")
    (dest / "oracles").mkdir()
    write_text(port / ".agents" / "developer-preferences.md",
               preferences_text(where / "vllm", where / "oracles"))
    return port


def _current(root: Path) -> str | None:
    if not ((root / "port" / ".git").is_dir() and (root / "vllm" / ".git").is_dir()):
        return None
    try:
        return (root / STAMP_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None


@contextlib.contextmanager
def _lock(repo_root: Path) -> Iterator[None]:
    # Outside the repository so the lock never shows up as an untracked file.
    key = hashlib.sha256(str(repo_root).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"upstream-sync-example-{key}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _building(final: Path, fresh: bool) -> str:
    why = "first run" if not final.exists() else "rebuild" if fresh else "examples/ changed"
    return (f"building the bundled example in {final} ({why}): its upstream history with "
            "git fast-import, a reference checkout and the example port")


def materialise(repo_root: Path, *, fresh: bool = False, notes: Notes | None = None) -> Path:
    """Build (if needed) `<repo_root>/.example` and return the example port's root.

    `fresh=True` rebuilds even when the stamp matches, discarding any state that
    earlier commands left in the example. A build says so first, through `notes`: it
    takes a moment, and it discards what earlier commands left in the example.
    """
    repo_root = repo_root.resolve()
    examples = repo_root / "examples"
    final = repo_root / EXAMPLE_DIR
    want = stamp(examples)
    if not fresh and _current(final) == want:
        return final / "port"
    with _lock(repo_root):
        if not fresh and _current(final) == want:
            return final / "port"
        if notes is not None:
            notes.note(_building(final, fresh))
        for stale in repo_root.glob(f"{EXAMPLE_DIR}.*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed build
        work = Path(tempfile.mkdtemp(prefix=f"{EXAMPLE_DIR}.", suffix=".tmp", dir=repo_root))
        try:
            build(work / "example", examples, final=final)
            write_text(work / "example" / STAMP_FILE, want + "\n")
            if final.exists():
                os.replace(final, work / "old")
            os.replace(work / "example", final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final / "port"
