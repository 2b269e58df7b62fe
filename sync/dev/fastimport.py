"""Build real git repositories from an in-memory history with `git fast-import`.

Used by the bundled example, the benchmark and the tests: deterministic (fixed
authors, dates that advance one minute per commit), hermetic (no user or system
git config), and fast (one `git fast-import` process for any number of commits).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

AUTHOR = "Upstream Dev <dev@example.invalid>"
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z


def hermetic_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C",
               GIT_TERMINAL_PROMPT="0")
    return env


@dataclass
class _Commit:
    mark: int
    branch: str
    message: bytes
    parent: int | str | None
    ops: list[bytes]
    when: int
    merge: list[int] = field(default_factory=list)


class History:
    """Accumulates commits; `write(repo)` imports them all in one process.

    File operations are fast-import's own: `modify(path, text)`, `delete(path)`,
    `rename(old, new)`. Marks returned by `commit` become SHAs after `write`.
    """

    def __init__(self, start: int = EPOCH, author: str = AUTHOR) -> None:
        self._commits: list[_Commit] = []
        self._ops: list[bytes] = []
        self._tips: dict[str, int] = {}
        self._when = start
        self.author = author
        self.marks: dict[int, str] = {}
        self._tags: list[tuple[str, int, bytes]] = []

    def modify(self, path: str, text: str | bytes) -> History:
        data = text.encode() if isinstance(text, str) else text
        self._ops.append(b"M 100644 inline " + _quote(path) + b"\ndata %d\n" % len(data) + data
                         + b"\n")
        return self

    def symlink(self, path: str, target: str) -> History:
        """`path` as a symbolic link to `target` (mode 120000: the blob is the target)."""
        data = target.encode()
        self._ops.append(b"M 120000 inline " + _quote(path) + b"\ndata %d\n" % len(data) + data
                         + b"\n")
        return self

    def delete(self, path: str) -> History:
        self._ops.append(b"D " + _quote(path) + b"\n")
        return self

    def rename(self, old: str, new: str) -> History:
        self._ops.append(b"R " + _quote(old) + b" " + _quote(new) + b"\n")
        return self

    def commit(self, message: str | bytes, branch: str = "main", *, parent: int | None = None,
               merge: list[int] | None = None) -> int:
        mark = len(self._commits) + 1
        self._when += 60
        msg = message.encode() if isinstance(message, str) else message
        base: int | None = parent if parent is not None else self._tips.get(branch)
        self._commits.append(_Commit(mark, branch, msg, base, self._ops, self._when,
                                     list(merge or [])))
        self._ops = []
        self._tips[branch] = mark
        return mark

    def tag(self, name: str, mark: int, message: str) -> History:
        """An annotated tag `name` on commit `mark` (written after every commit)."""
        self._tags.append((name, mark, message.encode()))
        return self

    def stream(self) -> bytes:
        out: list[bytes] = []
        author = self.author.encode()
        for c in self._commits:
            out.append(b"commit refs/heads/" + c.branch.encode() + b"\n")
            out.append(b"mark :%d\n" % c.mark)
            stamp = b"%s %d +0000\n" % (author, c.when)
            out.append(b"author " + stamp + b"committer " + stamp)
            out.append(b"data %d\n" % len(c.message) + c.message + b"\n")
            if c.parent is not None:
                out.append(b"from :%d\n" % c.parent if isinstance(c.parent, int)
                           else b"from " + c.parent.encode() + b"\n")
            for m in c.merge:
                out.append(b"merge :%d\n" % m)
            out.extend(c.ops)
            out.append(b"\n")
        for name, mark, message in self._tags:
            stamp = b"%s %d +0000\n" % (author, self._when)
            out.append(b"tag " + name.encode() + b"\nfrom :%d\ntagger " % mark + stamp)
            out.append(b"data %d\n" % len(message) + message + b"\n")
        return b"".join(out)

    def write(self, repo: Path, *, bare: bool = False,
              checkout: str | None = None) -> dict[int, str]:
        """Create `repo`, import every commit, return mark -> SHA."""
        env = hermetic_env()
        repo.mkdir(parents=True, exist_ok=True)
        init = ["git", "init", "-q", "-b", "main"] + (["--bare"] if bare else [])
        subprocess.run([*init, str(repo)], env=env, check=True)
        marks_file = repo / ("marks" if bare else ".git/marks")
        subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet",
                        f"--export-marks={marks_file}"], input=self.stream(), env=env, check=True)
        for line in marks_file.read_text().splitlines():
            mark, sha = line.split()
            self.marks[int(mark[1:])] = sha
        marks_file.unlink()
        if not bare:
            subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-f", checkout or "main"],
                           env=env, check=True)
        return self.marks


def _quote(path: str) -> bytes:
    # fast-import's R and C take two paths separated by a space, so a space must quote too.
    if any(c in path for c in '"\n\\ ') or path.startswith('"'):
        esc = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return b'"' + esc.encode() + b'"'
    return path.encode()


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    """Hermetic git for fixtures and the example (not for product logic: that is gitio)."""
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env=hermetic_env(), check=True)
    return proc.stdout.decode()
