"""The one git wrapper.

GitPython handles repositories (open, fetch with progress, rev resolution,
ancestry, worktrees); bulk history goes through single `git` invocations whose
output is parsed in Python, never one process per commit. Inherited `GIT_*`
variables are stripped so a hook's or a caller's `GIT_DIR` can never redirect us,
and every revision that came from input is validated and placed after
`--end-of-options` so it can never be read as an option.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from sync.infra.errors import EnvironmentUnresolved, UsageError

# Counted so the benchmark can prove the number of git processes is constant.
PROCESS_COUNT = 0

_REV_OK = re.compile(r"^[A-Za-z0-9_./@{}^~:+-]+$")

SHA_LEN = 10  # how much of a SHA a person is shown: reports, notes, errors


def short(sha: str) -> str:
    """`sha` as a person is shown it (its first SHA_LEN characters)."""
    return sha[:SHA_LEN]


def scrub_environ() -> None:
    """Remove inherited GIT_* variables from this process (GitPython reads os.environ)."""
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[key]
    os.environ["GIT_TERMINAL_PROMPT"] = "0"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("LC_ALL", "C")
    if extra:
        env.update(extra)
    return env


def check_rev(rev: str) -> str:
    """Refuse a revision that could be parsed as an option or is not a plausible rev."""
    if not rev or rev.startswith("-") or not _REV_OK.match(rev) or ".." in rev:
        raise UsageError(f"not a usable git revision: {rev!r}", "give a SHA, branch or tag name")
    return rev


def run(
    repo: Path, args: Sequence[str], *, input: bytes | None = None, check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git process in `repo` (no shell, scrubbed environment)."""
    global PROCESS_COUNT
    PROCESS_COUNT += 1
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input,
        capture_output=True,
        env=clean_env(env),
        check=False,
    )
    if check and proc.returncode != 0:
        _fail(repo, args, proc.stderr)
    return proc


_MISSING_OBJECT = re.compile(r"unable to read|bad object|missing (?:blob|tree|commit)|"
                             r"did not receive expected object|could not parse object")


def _fail(repo: Path, args: Sequence[str], stderr: bytes) -> None:
    msg = stderr.decode("utf-8", "replace").strip().splitlines()
    last = msg[-1] if msg else "no message"
    fix = "check the repository and the revisions given"
    if any(_MISSING_OBJECT.search(line) for line in msg):
        fix = (f"the checkout is missing objects: re-fetch them with 'git -C {repo} fetch "
               "--refetch origin' (or re-clone it), then run the command again")
    raise EnvironmentUnresolved(f"git {args[0]} failed in {repo}: {last}", fix)


class Started:
    """A git process running in the background, its output spooled to a temp file.

    A file rather than a pipe, so git never blocks on a full pipe while we do other work:
    the range's `git log` runs while the port's headers are parsed.
    """

    def __init__(self, repo: Path, args: Sequence[str]) -> None:
        global PROCESS_COUNT
        PROCESS_COUNT += 1
        self.repo, self.args = repo, list(args)
        # Closed in wait(): the files outlive this call by design.
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = subprocess.Popen(["git", "-C", str(repo), *args], stdout=self._out,
                                      stderr=self._err, stdin=subprocess.DEVNULL,
                                      env=clean_env())

    def wait(self) -> bytes:
        """The process's stdout; EnvironmentUnresolved when it failed."""
        try:
            code = self._proc.wait()
            self._err.seek(0)
            err = self._err.read()
            if code != 0:
                _fail(self.repo, self.args, err)
            self._out.seek(0)
            return self._out.read()
        finally:
            self._out.close()
            self._err.close()


def start(repo: Path, args: Sequence[str]) -> Started:
    return Started(repo, args)


@dataclass(frozen=True)
class Reference:
    """A reference checkout (upstream clone) opened for reading."""

    path: Path
    repo: git.Repo

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        return run(self.path, args, input=input, check=check).stdout


def open_repo(path: Path, *, what: str = "reference checkout", variable: str = "VLLM_SOURCE",
              allow_shallow: bool = False) -> Reference:
    """Open a git work tree, refusing missing, non-git and (by default) shallow ones."""
    if not path.exists():
        raise EnvironmentUnresolved(
            f"{what} {path} does not exist", f"set {variable} to a full clone of the upstream"
        )
    try:
        repo = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise EnvironmentUnresolved(
            f"{what} {path} is not a git repository",
            f"set {variable} to a full clone of the upstream",
        ) from None
    ref = Reference(Path(repo.working_tree_dir or path), repo)
    if not allow_shallow and is_shallow(ref):
        raise EnvironmentUnresolved(
            f"{what} {path} is a shallow clone: history before its cut is invisible",
            f"run 'git -C {path} fetch --unshallow'",
        )
    return ref


def is_shallow(ref: Reference) -> bool:
    return Path(ref.repo.git_dir, "shallow").exists()


def resolve(ref: Reference, rev: str) -> str | None:
    """Full SHA of the commit `rev` names, or None when it does not resolve."""
    check_rev(rev)
    proc = run(ref.path, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{rev}^{{commit}}"], check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().strip()


def has_commit(ref: Reference, sha: str) -> bool:
    return resolve(ref, sha) is not None


def is_ancestor(ref: Reference, ancestor: str, descendant: str) -> bool:
    check_rev(ancestor)
    check_rev(descendant)
    proc = run(ref.path, ["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant],
               check=False)
    if proc.returncode not in (0, 1):
        raise EnvironmentUnresolved(
            f"cannot compare {short(ancestor)} and {short(descendant)} in {ref.path}",
            "make sure both commits exist in the reference checkout",
        )
    return proc.returncode == 0


def is_dirty(ref: Reference) -> bool:
    return bool(ref.repo.is_dirty(untracked_files=False))


def head_sha(ref: Reference) -> str | None:
    try:
        return str(ref.repo.head.commit.hexsha)
    except ValueError:
        return None


def fetch(ref: Reference, remote: str, branch: str,
          progress: Callable[[str], None] | None = None, *, live: bool = False,
          tag: str | None = None) -> None:
    """Fetch `remote branch` into the remote-tracking ref; never touches the work tree.

    `progress` hears git's progress: every update when `live` (a terminal, where the
    lines overwrite each other), else only the line that ends each stage (a handful
    however large the fetch: a log gets no line per percent). `tag`, when the checkout
    does not have it yet, is fetched too (a release tag off the fetched branch).
    """
    check_rev(remote)
    check_rev(branch)
    try:
        rem = ref.repo.remote(remote)
    except ValueError:
        raise EnvironmentUnresolved(
            f"the reference checkout has no remote named {remote!r}",
            "set fetch_remote in the developer preferences (or SYNC_FETCH_REMOTE)",
        ) from None
    try:
        rem.fetch(f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
                  progress=_progress(progress, live))
    except git.GitCommandError as exc:
        last = (exc.stderr or "").strip().splitlines()
        raise EnvironmentUnresolved(
            f"fetch of {remote} {branch} failed: {last[-1].strip() if last else exc.status}",
            "check the remote URL and your network, then run fetch again",
        ) from None
    if tag is not None and _wants_tag(ref, tag):
        # No such tag upstream is the target step's to say ("does not name a commit").
        with contextlib.suppress(git.GitCommandError):
            rem.fetch(f"+refs/tags/{tag}:refs/tags/{tag}", progress=_progress(progress, live))


def _wants_tag(ref: Reference, tag: str) -> bool:
    """`tag` may be a tag the checkout lacks: no SHA, nothing it resolves already."""
    check_rev(tag)
    return re.fullmatch(r"[0-9a-f]{7,40}", tag) is None and resolve(ref, tag) is None


def _progress(say: Callable[[str], None] | None, live: bool) -> git.RemoteProgress:
    class _Progress(git.RemoteProgress):
        def update(self, op_code: int, cur_count: str | float,
                   max_count: str | float | None = None, message: str = "") -> None:
            line = (self._cur_line or "").strip()
            if say is not None and line and (live or op_code & git.RemoteProgress.END):
                say(line)

    return _Progress()


def refs_containing(ref: Reference, sha: str, *prefixes: str) -> list[str]:
    """The short names of the refs under `prefixes` whose history holds `sha` (one process)."""
    check_rev(sha)
    out = run(ref.path, ["for-each-ref", "--format=%(refname:short)", f"--contains={sha}",
                         "--end-of-options", *prefixes], check=False)
    if out.returncode != 0:
        return []
    return [line for line in out.stdout.decode("utf-8", "replace").splitlines()
            if line and not line.endswith("/HEAD")]


def count_range(ref: Reference, base: str, target: str) -> int:
    check_rev(base)
    check_rev(target)
    out = run(ref.path, ["rev-list", "--count", "--no-merges", "--end-of-options",
                         f"{base}..{target}"]).stdout
    return int(out.decode().strip() or 0)


def newest_date(ref: Reference, base: str, target: str) -> str | None:
    check_rev(base)
    check_rev(target)
    out = run(ref.path, ["log", "-1", "--format=%cI", "--end-of-options",
                         f"{base}..{target}"]).stdout
    return out.decode().strip() or None


_OBJECT_ID = re.compile(r"[0-9a-f]{40}")


def batch_check(ref: Reference, names: list[str]) -> list[tuple[str, str] | None]:
    """(full object id, type) for each name, None where git finds none or several: one
    `git cat-file --batch-check` whatever the number of names."""
    if not names:
        return []
    raw = ref.git("cat-file", "--batch-check", input="".join(f"{n}\n" for n in names).encode())
    rows = raw.decode("utf-8", "replace").splitlines()
    if len(rows) != len(names):
        raise EnvironmentUnresolved(
            f"git cat-file answered {len(rows)} lines for {len(names)} names in {ref.path}",
            "check the reference checkout with 'git fsck'",
        )
    out: list[tuple[str, str] | None] = []
    for row in rows:
        parts = row.split()
        ok = len(parts) == 3 and _OBJECT_ID.fullmatch(parts[0]) is not None
        out.append((parts[0], parts[1]) if ok else None)
    return out


def tree_paths(ref: Reference, rev: str) -> list[str]:
    """Every file path in `rev`'s tree (one `git ls-tree -r -z`)."""
    check_rev(rev)
    out = ref.git("-c", "core.quotePath=false", "ls-tree", "-r", "-z", "--name-only",
                  "--end-of-options", rev)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def merge_base(ref: Reference, shas: list[str]) -> str | None:
    """The best common ancestor of every commit in `shas` (one `git merge-base --octopus`)."""
    for s in shas:
        check_rev(s)
    if len(shas) == 1:
        return shas[0]
    proc = run(ref.path, ["merge-base", "--octopus", "--end-of-options", *shas], check=False)
    out = proc.stdout.decode().strip()
    return out or None


def cat_blobs(ref: Reference, names: list[str]) -> list[bytes | None]:
    """The content of each blob named (an object id or `rev:path`), None where git has no
    such blob: one `git cat-file --batch` whatever the number of names."""
    ok = [bool(n) and "\n" not in n and "\r" not in n for n in names]
    sendable = [n for n, good in zip(names, ok, strict=True) if good]
    if not sendable:
        return [None] * len(names)
    raw = ref.git("cat-file", "--batch", input="".join(f"{n}\n" for n in sendable).encode())
    found = iter(_batch_records(raw, len(sendable), ref))
    return [next(found) if good else None for good in ok]


def _batch_records(raw: bytes, count: int, ref: Reference) -> list[bytes | None]:
    out: list[bytes | None] = []
    pos = 0
    for _ in range(count):
        eol = raw.find(b"\n", pos)
        if eol < 0:
            raise EnvironmentUnresolved(
                f"git cat-file --batch stopped early in {ref.path}",
                "check the reference checkout with 'git fsck'")
        head = raw[pos:eol].split(b" ")
        pos = eol + 1
        if len(head) == 3 and head[2].isdigit() and _OBJECT_ID.fullmatch(head[0].decode(
                "ascii", "replace")):
            size = int(head[2])
            body, pos = raw[pos:pos + size], pos + size + 1
            out.append(body if head[1] == b"blob" else None)
        else:
            out.append(None)  # "<name> missing" / "<name> ambiguous"
    return out


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str  # blob, tree (never with -r), commit (a submodule)
    object_id: str
    path: str


def tree_entries(repo: Path, commit: str, under: str | None = None) -> list[TreeEntry]:
    """Every entry of `commit`'s tree (recursive, whole tree), optionally only below `under/`:
    one `git ls-tree -r -z`."""
    check_rev(commit)
    args = ["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit]
    if under is not None:
        args += ["--", f"{under}/"]
    out: list[TreeEntry] = []
    for record in run(repo, args).stdout.decode("utf-8", "surrogateescape").split("\0"):
        meta, tab, path = record.partition("\t")
        parts = meta.split()
        if tab and len(parts) == 3:
            out.append(TreeEntry(parts[0], parts[1], parts[2], path))
    return out


def missing_objects(repo: Path, object_ids: list[str]) -> list[str]:
    """The ids among `object_ids` that `repo` cannot read: one `git cat-file --batch-check`."""
    if not object_ids:
        return []
    raw = run(repo, ["cat-file", "--batch-check"],
              input="".join(f"{o}\n" for o in object_ids).encode()).stdout
    return [row.split()[0] for row in raw.decode("utf-8", "replace").splitlines()
            if row.endswith(" missing")]


def porcelain_status(repo: Path) -> list[str]:
    """`git status` of a work tree, ignored and untracked files included (empty: clean)."""
    raw = run(repo, ["status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all"])
    return [e for e in raw.stdout.decode("utf-8", "surrogateescape").split("\0") if e]
