"""The one git wrapper.

GitPython handles repositories (open, fetch with progress, rev resolution,
ancestry, worktrees); bulk history goes through single `git` invocations whose
output is parsed in Python, never one process per commit. Every revision that came
from input is validated and placed after `--end-of-options` so it can never be read
as an option.

Every git process, ours and GitPython's, runs with one hardened environment (`environ`):

- inherited `GIT_*` variables are dropped but for what authentication needs (`_KEPT`), so
  a hook's or a caller's `GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`,
  `GIT_OBJECT_DIRECTORY`... can never redirect us;
- `GIT_NO_REPLACE_OBJECTS=1`: a `git replace` object never stands in for a commit;
- configuration that would run a command for the commands we use is overridden on the
  command-line level (`GIT_CONFIG_COUNT`, which outranks every config file):
  `core.fsmonitor` (status, diff, add, commit), `core.hooksPath` (hooks: the port's
  commit, a merge's post-merge, a fetch's reference-transaction), `log.showSignature`
  (gpg for every logged commit), `core.pager`, `protocol.ext.allow` (a remote URL that is
  a command), submodule recursion (git in other repositories), a fetch's
  `remote.<name>.uploadpack`, and every clean/smudge/process filter the repository's
  configuration defines (`_filters`: run when a work tree file is compared or checked
  out). Diff drivers (`diff.external`, textconv) are switched off by `--no-ext-diff
  --no-textconv` on every diff and log that makes patches or stats.
- What stays: a fetch's transport and credentials (`core.sshCommand`, credential helpers,
  `http.*`): fetch is the one command that reaches the remote, and it must reach it as
  `git fetch` there would. The port's own commit (`advance --commit`) is signed as the
  port's configuration says.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sync.infra.errors import EnvironmentUnresolved, SyncError, UsageError

if TYPE_CHECKING:
    import git

# Counted so the benchmark can prove the number of git processes is constant.
PROCESS_COUNT = 0
FILTER_PROBES = 0  # the `git config` reads of each repository's filter drivers (`_filters`)

_REV_OK = re.compile(r"^[A-Za-z0-9_./@{}^~:+-]+$")

SHA_LEN = 10  # how much of a SHA a person is shown: reports, notes, errors


def short(sha: str) -> str:
    """`sha` as a person is shown it (its first SHA_LEN characters)."""
    return sha[:SHA_LEN]


# Inherited GIT_* variables that are kept, and why: each is how an authenticated fetch
# reaches its remote (ssh, a password prompt program, a proxy, TLS client certificates and
# CAs, HTTP proxy authentication and timeouts) or where the user's own global and system
# configuration (credential helpers) lives. None of them names a repository.
_KEPT = frozenset({"GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS",
                   "GIT_PROXY_COMMAND", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                   "GIT_CONFIG_NOSYSTEM"})
_KEPT_PREFIXES = ("GIT_SSL_", "GIT_HTTP_", "GIT_PROXY_SSL_")
# Configuration a caller passes in GIT_CONFIG_COUNT/KEY_<n>/VALUE_<n> (how CI hands a
# fetch its token: an http extraheader, a url insteadOf, a credential helper): kept for
# these keys only, before our own entries, which therefore win where both set a key.
_KEPT_KEYS = re.compile(r"(?i)(?:credential|http|url)\..+|core\.(?:sshcommand|askpass)"
                        r"|ssh\.variant")
# Configuration that runs a command for the git commands we use, overridden for all.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("core.pager", "cat"),
    ("log.showSignature", "false"), ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"), ("fetch.recurseSubmodules", "false"),
    ("status.submoduleSummary", "false"),
)


def _kept(key: str) -> bool:
    return key in _KEPT or key.startswith(_KEPT_PREFIXES)


def _inherited_config(source: Mapping[str, str]) -> list[tuple[str, str]]:
    """The caller's GIT_CONFIG_KEY_<n>/VALUE_<n> pairs that authentication needs."""
    try:
        count = int(source.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return []
    pairs = [(source.get(f"GIT_CONFIG_KEY_{i}", ""), source.get(f"GIT_CONFIG_VALUE_{i}", ""))
             for i in range(min(max(count, 0), 1000))]
    ours = {k.lower() for k, _ in HARDENING}
    return [(k, v) for k, v in pairs if _KEPT_KEYS.fullmatch(k) and k.lower() not in ours]


def environ(source: Mapping[str, str] | None = None,
            config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment of a git process: `source` (default os.environ) without the GIT_*
    variables it may not pass, with the hardening, then `config`, as command-line config."""
    base = os.environ if source is None else source
    env = {k: v for k, v in base.items() if not k.startswith("GIT_") or _kept(k)}
    pairs = [*_inherited_config(base), *HARDENING, *config]
    # No optional locks: `git status` in a reference checkout does not rewrite its index
    # (as editors run it in the background), so reading never writes the user's checkout.
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1",
                "GIT_OPTIONAL_LOCKS": "0", "GIT_CONFIG_COUNT": str(len(pairs))})
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def scrub_environ() -> None:
    """Make this process's environment the hardened one (GitPython reads os.environ)."""
    env = environ()
    for key in [k for k in os.environ if k.startswith("GIT_") and k not in env]:
        del os.environ[key]
    os.environ.update(env)


# The filter drivers each repository's configuration defines, by repository (one `git
# config` process per repository and run, whatever the number of commits).
_FILTERS: dict[Path, tuple[tuple[str, str], ...]] = {}


def _filters(repo: Path) -> tuple[tuple[str, str], ...]:
    """Config entries that switch off every filter driver `repo`'s configuration defines:
    a clean or smudge filter runs a command whenever git compares or checks out a file."""
    key = repo.resolve() if repo.exists() else repo
    if key not in _FILTERS:
        # Counted apart: one per repository and process, whatever the run does, so what
        # PROCESS_COUNT measures (the work's processes) reads the same on a warm or cold run.
        global FILTER_PROBES
        FILTER_PROBES += 1
        proc = subprocess.run(["git", "-C", str(repo), "config", "-z", "--name-only",
                               "--get-regexp", r"^filter\."], capture_output=True,
                              env=environ(), check=False)
        names = {n.rsplit(".", 1)[0] for n in proc.stdout.decode("utf-8", "replace").split("\0")
                 if n.count(".") >= 2}
        _FILTERS[key] = tuple((f"{name}.{what}", value) for name in sorted(names)
                              for what, value in (("clean", ""), ("smudge", ""),
                                                  ("process", ""), ("required", "false")))
    return _FILTERS[key]


def clean_env(repo: Path | None = None,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The hardened environment for a git process in `repo` (its filters switched off)."""
    env = environ(config=_filters(repo) if repo is not None else ())
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
        env=clean_env(repo, env),
        check=False,
    )
    if check and proc.returncode != 0:
        _fail(repo, args, proc.stderr)
    return proc


def work_tree_prefix(root: Path) -> str | None:
    """Where `root` lies in its git work tree: "" at the root of its repository (or of a
    worktree), "services/port/" in a subfolder of a bigger one (a monorepo); None when
    `root` is in no work tree. git names paths from the repository's root: this comes off."""
    proc = run(root, ["rev-parse", "--is-inside-work-tree", "--show-prefix"], check=False)
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    if proc.returncode != 0 or lines[0] != "true":
        return None
    return lines[1] if len(lines) > 1 else ""


# "Could not read <id>": a walk (rev-list, merge-base) that met a commit it cannot read;
# "could not fetch <id> from promisor remote": a partial clone's lazy fetch that failed.
_MISSING_OBJECT = re.compile(r"unable to read|bad object|missing (?:blob|tree|commit)|"
                             r"did not receive expected object|could not parse object|"
                             r"[Cc]ould not read [0-9a-f]{40}|from promisor remote")
_PROMISOR = re.compile(r"could not fetch \S+ from promisor remote")


def partial_clone(repo: Path) -> tuple[str, str] | None:
    """(promisor remote, filter) of a partial clone (`clone --filter`), None for a whole one:
    one `git config`, asked only once something is found missing."""
    proc = run(repo, ["config", "--get-regexp", r"^(extensions\.partialclone|remote\..*\."
                      r"(promisor|partialclonefilter))$"], check=False)
    pairs = [ln.partition(" ") for ln in proc.stdout.decode("utf-8", "replace").splitlines()]
    named = {key: value for key, _, value in pairs}  # git lowercases all but the remote
    promisors = [key[len("remote."):-len(".promisor")] for key, value in named.items()
                 if key.endswith(".promisor") and value.lower() in ("true", "yes", "on", "1")]
    remote = named.get("extensions.partialclone") or next(iter(promisors), None)
    if not remote:
        return None
    return remote, named.get(f"remote.{remote}.partialclonefilter") or "?"


# The remote each checkout is fetched from, where the developer preferences name one (their
# fetch_remote, for the reference checkout: `fetches_from`): advice to fetch a checkout again
# names it. One no preference names is told git's own default name, origin.
_REMOTES: dict[Path, str] = {}


def fetches_from(path: Path, remote: str) -> None:
    """Say that the checkout at `path` is fetched from `remote` (what `refetch` names)."""
    _REMOTES[Path(path)] = remote


def refetch(repo: Path) -> str:
    """How to get back objects a checkout cannot read: fetch again from its remote. A partial
    clone's `fetch --refetch` re-applies its filter and leaves them missing: it fetches
    without it (from its promisor remote, which the filter belongs to), and drops it."""
    partial = partial_clone(repo)
    if partial is not None:
        remote, filt = partial
        return (f"it is a partial clone (--filter={filt} from {remote!r}): fetch everything "
                f"with 'git -C {repo} fetch --refetch --no-filter {remote}' and keep it whole "
                f"with 'git -C {repo} config --unset remote.{remote}.partialclonefilter' (or "
                "re-clone it without --filter), then run the command again")
    remote = _REMOTES.get(Path(repo), "origin")
    return (f"re-fetch them with 'git -C {repo} fetch --refetch {remote}' (or re-clone it), "
            "then run the command again")


def refetch_fix(repo: Path) -> str:
    """What to do about a checkout that cannot read objects it has refs to."""
    return "the checkout is missing objects: " + refetch(repo)


def _verdicts(stderr: bytes) -> list[str]:
    """git's own verdict lines ("fatal: ...", "error: ..."), not the advice it adds."""
    return [line for line in stderr.decode("utf-8", "replace").strip().splitlines()
            if line.startswith(("fatal:", "error:"))]


def _fail(repo: Path, args: Sequence[str], stderr: bytes) -> None:
    msg = stderr.decode("utf-8", "replace").strip().splitlines()
    said = _verdicts(stderr)
    last = said[0] if said else msg[-1] if msg else "no message"
    fix = "check the repository and the revisions given"
    if any(_MISSING_OBJECT.search(line) for line in msg):
        fix = refetch_fix(repo)
    lazy = [line for line in said if _PROMISOR.search(line)]
    if lazy and lazy[0] != last:
        last = f"{lazy[0]} ({last})"  # the object first, then why its remote did not answer
    raise EnvironmentUnresolved(f"git {_subcommand(args)} failed in {repo}: {last}", fix)


def _subcommand(args: Sequence[str]) -> str:
    """The git command `args` run: past the `-c key=value` options before it."""
    i = 0
    while i + 1 < len(args) and args[i] == "-c":
        i += 2
    return args[i] if i < len(args) else "(no command)"


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
                                      env=clean_env(repo))

    def wait(self, check: bool = True) -> bytes:
        """The process's stdout; EnvironmentUnresolved when it failed (`check`)."""
        try:
            code = self._proc.wait()
            self._err.seek(0)
            err = self._err.read()
            if code != 0 and check:
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

    path: Path  # its work tree (the repository itself when it is bare)
    git_dir: Path
    bare: bool = False  # no work tree: nothing to check out, status or fast-forward

    @property
    def repo(self) -> git.Repo:
        """GitPython's view of it, opened on first use: importing GitPython costs about a
        tenth of a second and two `git version` processes, which most commands never need."""
        return _gitpython(self.path)

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        return run(self.path, args, input=input, check=check).stdout


@functools.cache
def _gitpython(path: Path) -> git.Repo:
    import git  # imported on first use: see Reference.repo

    repo = git.Repo(path)
    # GitPython's own git processes (status, fetch) get our hardened environment.
    repo.git.update_environment(**{k: v for k, v in clean_env(path).items()
                                   if k.startswith("GIT_")})
    return repo


def open_repo(path: Path, *, what: str = "reference checkout", variable: str = "VLLM_SOURCE",
              allow_shallow: bool = False, source: str = "", fix: str = "") -> Reference:
    """Open a git work tree, refusing missing, non-git and (by default) shallow ones.
    `source` says where the path came from (`env VLLM_SOURCE`, a preferences file) and
    `fix` how to point it elsewhere there: the refusal names both."""
    named = f"{what} {path}" + (f" (from {source})" if source else "")
    fix = fix or f"set {variable} to a full clone of the upstream"
    if not path.exists():
        raise EnvironmentUnresolved(f"{named} does not exist", fix)
    scrub_environ()
    ref = _locate(path)
    if ref is None:
        raise EnvironmentUnresolved(f"{named} is not a git repository", fix)
    if not allow_shallow and is_shallow(ref):
        raise EnvironmentUnresolved(
            f"{what} {path} is a shallow clone: history before its cut is invisible",
            f"run 'git -C {path} fetch --unshallow'",
        )
    return ref


def _locate(path: Path) -> Reference | None:
    """`path` as a repository: its work tree's top (or the bare repository, or the work tree
    whose git directory it is), never a folder inside some other repository."""
    proc = run(path, ["rev-parse", "--is-bare-repository", "--absolute-git-dir",
                      "--show-prefix"], check=False)
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    if proc.returncode != 0 or len(lines) < 3 or lines[2]:
        return None
    here, git_dir = Path(os.path.abspath(path)), Path(lines[1])
    if lines[0] == "true":
        return Reference(here, git_dir, bare=True)
    if here.resolve() == git_dir.resolve():
        return Reference(here.parent, git_dir)  # the work tree's .git itself
    return Reference(here, git_dir)


def is_shallow(ref: Reference) -> bool:
    return (ref.git_dir / "shallow").exists()


# What a full SHA names, and which of two full SHAs is an ancestor of the other, never
# change (objects are immutable, replace objects are off): asked by several steps of one
# command, they are answered by git once. Only what was found is kept: an object may
# arrive (a fetch) later in the same command.
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_KNOWN: dict[tuple[Path, str, str, str], str | bool] = {}


def resolve(ref: Reference, rev: str) -> str | None:
    """Full SHA of the commit `rev` names, or None when it does not resolve."""
    check_rev(rev)
    key = (ref.path, "commit", rev, "")
    if key in _KNOWN:
        return str(_KNOWN[key])
    proc = run(ref.path, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{rev}^{{commit}}"], check=False)
    if proc.returncode != 0:
        return None
    sha = proc.stdout.decode().strip()
    if _FULL_SHA.fullmatch(rev):
        _KNOWN[key] = sha
    return sha


def has_commit(ref: Reference, sha: str) -> bool:
    return resolve(ref, sha) is not None


def is_ancestor(ref: Reference, ancestor: str, descendant: str) -> bool:
    check_rev(ancestor)
    check_rev(descendant)
    key = (ref.path, "ancestor", ancestor, descendant)
    if key in _KNOWN:
        return bool(_KNOWN[key])
    proc = run(ref.path, ["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant],
               check=False)
    said = _verdicts(proc.stderr)
    if proc.returncode == 1 and said:
        # git exits 1 ("no") also when a commit between the two cannot be read: that is no
        # answer, and taking it for "no" sent a corrupt checkout to --allow-divergent.
        raise EnvironmentUnresolved(
            f"cannot tell whether {short(ancestor)} is an ancestor of {short(descendant)} in "
            f"{ref.path}: {said[0]}", refetch_fix(ref.path))
    if proc.returncode not in (0, 1):
        raise EnvironmentUnresolved(
            f"cannot compare {short(ancestor)} and {short(descendant)} in {ref.path}",
            "make sure both commits exist in the reference checkout",
        )
    if _FULL_SHA.fullmatch(ancestor) and _FULL_SHA.fullmatch(descendant):
        _KNOWN[key] = proc.returncode == 0
    return proc.returncode == 0


def is_dirty(ref: Reference) -> bool:
    return bool(ref.repo.is_dirty(untracked_files=False))


def head_sha(ref: Reference) -> str | None:
    """The commit HEAD is at; None on an unborn branch."""
    proc = run(ref.path, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def is_detached(ref: Reference) -> bool:
    return run(ref.path, ["symbolic-ref", "--quiet", "HEAD"], check=False).returncode != 0


def head_branch(ref: Reference) -> tuple[str, str | None] | None:
    """(the branch HEAD is on, the remote-tracking branch it tracks: `origin/main`, None when
    none); None when HEAD is detached."""
    proc = run(ref.path, ["symbolic-ref", "--quiet", "--short", "HEAD"], check=False)
    name = proc.stdout.decode("utf-8", "surrogateescape").strip()
    if proc.returncode != 0 or not name:
        return None
    up = run(ref.path, ["rev-parse", "--quiet", "--abbrev-ref", "--symbolic-full-name",
                        "HEAD@{upstream}"], check=False)
    tracked = up.stdout.decode("utf-8", "surrogateescape").strip()
    return name, tracked if up.returncode == 0 and tracked else None


REMOTE_FIX = ("set fetch_remote in the developer preferences (or SYNC_FETCH_REMOTE) to the "
              "remote that fetches the upstream")


def no_remote(ref: Reference, upstream_ref: str) -> EnvironmentUnresolved | None:
    """The refusal for an upstream ref (`origin/main`) whose remote the checkout does not
    have (a clone made with `-o upstream`), naming those it has: None when it has it. One
    `git remote`, asked only once the ref did not resolve."""
    remote = upstream_ref.partition("/")[0]
    names = run(ref.path, ["remote"], check=False).stdout.decode("utf-8", "replace").split()
    if remote in names:
        return None
    have = f"its remotes: {', '.join(names)}" if names else "it has no remote"
    return EnvironmentUnresolved(
        f"the reference checkout {ref.path} has no remote {remote!r} ({have}), so "
        f"{upstream_ref} does not resolve", REMOTE_FIX)


def fetch(ref: Reference, remote: str, branch: str,
          progress: Callable[[str], None] | None = None, *, live: bool = False,
          tag: str | None = None) -> None:
    """Fetch `remote branch` into the remote-tracking ref; never touches the work tree.

    `progress` hears git's progress: every update when `live` (a terminal, where the
    lines overwrite each other), else only the line that ends each stage (a handful
    however large the fetch: a log gets no line per percent). `tag`, when the checkout
    does not have it yet, is fetched too (a release tag off the fetched branch).
    """
    import git  # imported on first use: see Reference.repo

    check_rev(remote)
    check_rev(branch)
    try:
        rem = ref.repo.remote(remote)
    except ValueError:
        raise no_remote(ref, f"{remote}/{branch}") or EnvironmentUnresolved(
            f"the reference checkout has no remote named {remote!r}", REMOTE_FIX) from None
    # The remote's upload-pack is git's own, never a command the clone's config names.
    env = clean_env(ref.path)
    n = int(env["GIT_CONFIG_COUNT"])
    env.update({"GIT_CONFIG_COUNT": str(n + 1), f"GIT_CONFIG_KEY_{n}":
                f"remote.{remote}.uploadpack", f"GIT_CONFIG_VALUE_{n}": "git-upload-pack"})
    try:
        rem.fetch(f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
                  progress=_progress(progress, live), env=env)
    except git.GitCommandError as exc:
        raise _fetch_failed(remote, branch, exc.stderr or "", exc.status) from None
    if tag is not None and _wants_tag(ref, tag):
        # No such tag upstream is the target step's to say ("does not name a commit").
        with contextlib.suppress(git.GitCommandError):
            rem.fetch(f"+refs/tags/{tag}:refs/tags/{tag}", progress=_progress(progress, live),
                      env=env)


# GitPython hands git's stderr back wrapped: "\n  stderr: '<git's lines>'".
_WRAPPED = re.compile(r"\s*stderr: '(.*)'\s*", re.S)


def _fetch_failed(remote: str, branch: str, stderr: str, status: object
                  ) -> EnvironmentUnresolved:
    """The refusal of a failed fetch: git's own first error line (unwrapped), and a fix for
    what failed (a branch the remote lacks is the preferences', not the network's)."""
    m = _WRAPPED.fullmatch(stderr)
    lines = [ln.strip() for ln in (m.group(1) if m else stderr).splitlines() if ln.strip()]
    said = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))),
                lines[-1] if lines else f"git exited {status}")
    if "couldn't find remote ref" in said:
        fix = (f"the remote has no branch {branch!r}: set branch in the developer preferences "
               "(or SYNC_BRANCH) to the upstream branch, then run fetch again")
    else:
        fix = "check the remote URL and your network, then run fetch again"
    return EnvironmentUnresolved(f"fetch of {remote} {branch} failed: {said}", fix)


def _wants_tag(ref: Reference, tag: str) -> bool:
    """`tag` may be a tag the checkout lacks: no SHA, nothing it resolves already."""
    check_rev(tag)
    return re.fullmatch(r"[0-9a-f]{7,40}", tag) is None and resolve(ref, tag) is None


def _progress(say: Callable[[str], None] | None, live: bool) -> git.RemoteProgress:
    import git  # imported on first use: see Reference.repo

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


def range_error(ref: Reference, base: str, target: str, exc: SyncError) -> SyncError:
    """What a failed read of base..target means: the end the checkout lacks, named, when it
    lacks one (one more git process, only after a failure); else git's own error."""
    return lacking(ref, base, target) or exc


def lacking(ref: Reference, base: str, target: str) -> EnvironmentUnresolved | None:
    """The refusal for a checkout that lacks an end of base..target (one `git cat-file`),
    None when it has both: for a command whose git reads of the range would not fail but
    answer nothing (`diff-tree --stdin` skips a commit it does not have)."""
    rows = batch_check(ref, [f"{base}^{{commit}}", f"{target}^{{commit}}"])
    missing = [rev for rev, row in zip((base, target), rows, strict=True) if row is None]
    if not missing:
        return None
    return EnvironmentUnresolved(
        f"the reference checkout {ref.path} does not have {', '.join(map(short, missing))} "
        f"(of the range {short(base)}..{short(target)})",
        "fetch it into the checkout ('upstream-sync fetch' fetches the configured remote; a "
        "commit only another remote has needs 'git fetch <remote> <sha>'), or move the "
        "cycle with 'upstream-sync sync --retarget'")


def count_range(ref: Reference, base: str, target: str) -> int:
    check_rev(base)
    check_rev(target)
    try:
        out = run(ref.path, ["rev-list", "--count", "--no-merges", "--end-of-options",
                             f"{base}..{target}"]).stdout
    except EnvironmentUnresolved as exc:
        raise range_error(ref, base, target, exc) from None
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
    return [o[1] if o is not None and o[0] == "blob" else None for o in cat_objects(ref, names)]


def cat_objects(ref: Reference, names: list[str]) -> list[tuple[str, bytes] | None]:
    """(type, content) of each object named (`blob`, `tree`, ...), None where git has none:
    one `git cat-file --batch` whatever the number of names."""
    ok = [bool(n) and "\n" not in n and "\r" not in n for n in names]
    sendable = [n for n, good in zip(names, ok, strict=True) if good]
    if not sendable:
        return [None] * len(names)
    raw = ref.git("cat-file", "--batch", input="".join(f"{n}\n" for n in sendable).encode())
    found = iter(_batch_records(raw, len(sendable), ref))
    return [next(found) if good else None for good in ok]


def _batch_records(raw: bytes, count: int, ref: Reference) -> list[tuple[str, bytes] | None]:
    out: list[tuple[str, bytes] | None] = []
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
            out.append((head[1].decode("ascii", "replace"), body))
        else:
            out.append(None)  # "<name> missing" / "<name> ambiguous"
    return out


def tree_mode(tree: bytes, name: str, oid_size: int) -> str | None:
    """The mode of entry `name` in a raw tree object (`<mode> <name>\\0<oid bytes>` each,
    as `cat-file --batch` prints a tree), None when it has no such entry."""
    want = name.encode("utf-8", "surrogateescape")
    pos = 0
    while pos < len(tree):
        space, nul = tree.find(b" ", pos), tree.find(b"\0", pos)
        if space < 0 or nul < space:
            return None  # not a tree git wrote
        if tree[space + 1:nul] == want:
            return tree[pos:space].decode("ascii", "replace")
        pos = nul + 1 + oid_size
    return None


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
