"""A command's result, replayed when it is run again over inputs that have not changed.

`status`, `check`, `audit`, `queue` and `sync` read a port, its records and git
repositories, and print; a re-run over the same bytes would print the same again (a `sync`
over an unchanged tree rewrites nothing). A run of one of them is recorded: an audit hook
and tracing wrappers of `os.stat`, `os.lstat`, `os.access` and `os.readlink` note every
file and folder it opened, listed or looked at, each with its signature (`signature`:
type, inode, size, modification and change times) taken before it was read, and every
git repository it ran git in, with the files that hold that repository's state (its refs,
configuration, index and object folders, and for a command that reads the work tree, the
tracked files). The output is kept chunk by chunk, in order, with the exit code. A later
run with the same invocation (`Plan.key`: the arguments, the folder, the environment,
whether the streams are terminals, this package's sources and the Python running it)
whose every noted signature is unchanged prints that output and exits with that code
without importing the rest of the tool: about what starting Python and reading the
port's file metadata cost.

Nothing is kept unless it is certain to be repeatable. A run is not recorded when it
wrote anything (a record, a report: files created and removed within the run, the port
lock and the cache aside), ran a program other than git or forked, read the clock
(`unrepeatable`, called by `infra.clock`), met the port lock held by another run, ended
in an internal error or an interruption, or when an input was modified less than
`RACY_NS` before it began (a later edit within the file system's timestamp granularity
could leave its signature as it was). An input that changes while the run reads it needs
no second look: its signature was taken before it was read, and any change since moves
its change time, so that memo never replays (the run is computed again). Anything
unreadable or unexpected here means the command simply runs. `SYNC_CACHE_DIR=off` turns
this off, as it does the cache; memos live in the cache's folder, under `runs/`, and are
safe to delete.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import zlib

from sync.infra import cachedir

# The standard library's lightest modules only: a replay costs little more than starting
# Python (typing, collections, contextlib and hashlib would each add milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

COMMANDS = frozenset({"status", "check", "audit", "queue", "sync"})
RACY_NS = 2_000_000_000
KEEP = 24  # memos kept (a real port's are a megabyte or two): the oldest beyond go
_FORMAT = 1
# Set by shells between two commands; neither this tool nor git reads them.
_SHELL_ONLY = frozenset({"OLDPWD", "_"})
_CODES = frozenset({0, 2, 3, 4, 5, 6, 7})  # results (1 is an internal error, 130 a ^C)
# Git subcommands that read the work tree: its files (status), or the attributes its
# `.gitattributes` files give (a diff's binary files, rename detection).
_WORKTREE = frozenset({"status", "diff", "diff-files", "diff-index", "diff-tree", "log",
                       "show", "whatchanged", "format-patch", "blame", "grep", "ls-files",
                       "add", "update-index", "check-ignore", "check-attr", "stash",
                       "checkout", "reset", "apply", "am"})
# The files of a git directory whose state a read-only git command depends on.
_GIT_STATE = ("HEAD", "config", "config.worktree", "packed-refs", "shallow", "index",
              "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "commondir", "objects/info/alternates",
              "objects/info/packs", "info", "info/attributes", "info/exclude", "info/grafts",
              "worktrees")
_LISTED = frozenset({"os.listdir", "os.scandir"})
_CHANGES = frozenset({"os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir",
                      "os.chmod", "os.chown", "os.utime", "os.truncate", "os.link",
                      "os.symlink", "os.chflags", "os.lchflags", "os.lchmod", "os.lchown",
                      "shutil.rmtree", "shutil.copyfile", "shutil.copymode",
                      "shutil.copystat", "shutil.copytree", "shutil.move",
                      "shutil.chown", "os.removexattr", "os.setxattr"})
_UNREPEATABLE = {"os.fork": "it forked", "os.forkpty": "it forked",
                 "os.posix_spawn": "it spawned a process", "os.spawn": "it spawned a process",
                 "os.exec": "it ran a program", "os.system": "it ran a shell command",
                 "socket.connect": "it used the network",
                 "socket.getaddrinfo": "it used the network"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_stat, _lstat, _access, _readlink = os.stat, os.lstat, os.access, os.readlink

Signature = list[int]


def signature(path: str, probe: bool = False) -> Signature:
    """What changes when a file or folder does: type and mode, inode, device, size and the
    modification and change times (of a symbolic link, its own and its target's); for a
    path that cannot be looked at, the error's number, negated. A folder only looked at
    (`probe`: it exists, it is a folder), not listed, by its type, mode and inode: its
    times change with every entry made in it (`/tmp`, a home folder)."""
    try:
        st = _lstat(path)
    except OSError as exc:
        return [-(exc.errno or 1)]
    if probe and stat.S_ISDIR(st.st_mode):
        return [st.st_mode, st.st_ino, st.st_dev]
    out = _fields(st)
    if stat.S_ISLNK(st.st_mode):
        try:
            out += _fields(_stat(path))
        except OSError as exc:
            out.append(-(exc.errno or 1))
    return out


def _is_dir(path: str) -> bool:
    return stat.S_ISDIR(max(signature(path)[0], 0))  # a negative errno is no mode


def _fields(st: os.stat_result) -> Signature:
    return [st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


_ACTIVE: list[_Recorder] = []  # the run being recorded, if any (one per process)


def unrepeatable(why: str) -> None:
    """Said by the code that makes a run's result depend on something no file holds (the
    clock, a lock another run holds): the run being recorded, if any, is not kept."""
    if _ACTIVE:
        _ACTIVE[0].refuse(why)


def transient(path: str) -> None:
    """A file the run writes that is neither an input nor a result (the port lock)."""
    if _ACTIVE:
        rec, path = _ACTIVE[0], os.path.abspath(path)
        rec.transient.add(path)
        rec.inputs.pop(path, None)  # looked at before it was known for what it is


def command_word(argv: list[str]) -> str | None:
    """The command word in `argv` after the global options, if there is one (a replay is
    looked for by it; the CLI builds the parser of it alone)."""
    words = iter(argv)
    for word in words:
        if word == "--port":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


class Plan:
    """This invocation's memo: where it is kept, and its key."""

    def __init__(self, folder: str, key: str, *, name: str = "", debug: bool = False) -> None:
        self.folder = folder
        self.key = key
        self.path = os.path.join(folder, f"{name or key}.json")
        # A `--debug` run is never replayed and never kept: it says whether it would be.
        self.debug = debug

    def replay(self, out: TextIO, err: TextIO) -> int | None:
        """Print the kept output and give its exit code; None when there is no memo of this
        invocation, it is not one this version wrote, or an input changed since (then the
        command runs, and nothing was printed)."""
        kept = None if self.debug else self._load()
        if kept is None:
            return None
        inputs, chunks, code = kept
        if any(signature(path, probe) != sig for path, sig, probe in inputs):
            return None
        streams = (out, err)
        for which, text in chunks:
            streams[which].write(text)
        out.flush()
        err.flush()
        return code

    def _load(self) -> tuple[list[tuple[str, Signature, bool]], list[tuple[int, str]],
                             int] | None:
        """The memo's inputs, output and exit code, each checked for its shape."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT \
                or doc.get("key") != self.key or doc.get("code") not in _CODES:
            return None
        inputs, chunks = doc.get("inputs"), doc.get("output")
        if not isinstance(inputs, list) or not isinstance(chunks, list):
            return None
        if not all(isinstance(i, list) and len(i) == 3 and isinstance(i[0], str)
                   and isinstance(i[1], list) and isinstance(i[2], bool) for i in inputs):
            return None
        if not all(isinstance(c, list) and len(c) == 2 and c[0] in (0, 1)
                   and isinstance(c[1], str) for c in chunks):
            return None
        return ([(p, s, b) for p, s, b in inputs], [(w, t) for w, t in chunks],
                int(doc["code"]))

    def recording(self) -> _Recording:
        """Trace the run inside (its output through `sys.stdout` and `sys.stderr`); then
        `finish` keeps it when it proved repeatable."""
        return _Recording(_Recorder(self))


class _Recording:
    """`with plan.recording() as rec:` (a class: contextlib is not imported for a replay)."""

    def __init__(self, rec: _Recorder) -> None:
        self.rec = rec
        self.real = sys.stdout, sys.stderr

    def __enter__(self) -> _Recorder:
        self.real = sys.stdout, sys.stderr
        sys.stdout = _Tee(self.real[0], 0, self.rec)
        sys.stderr = _Tee(self.real[1], 1, self.rec)
        _ACTIVE.append(self.rec)
        _install()
        return self.rec

    def __exit__(self, *exc: object) -> None:
        _uninstall()
        _ACTIVE.clear()
        sys.stdout, sys.stderr = self.real


def plan(argv: list[str], environ: dict[str, str] | None = None) -> Plan | None:
    """The memo of running `argv` here, or None: not a command whose runs are kept, asked
    for help, or the cache is off."""
    env = dict(os.environ if environ is None else environ)
    if command_word(argv) not in COMMANDS or {"-h", "--help", "--version"} & set(argv):
        return None
    base = cachedir.base(env)
    if base is None:
        return None
    streams = [_isatty(s) for s in (sys.stdin, sys.stdout, sys.stderr)]
    try:
        where = os.getcwd()
    except OSError:
        return None
    # The whole invocation is the key, kept in the memo and compared exactly: its checksum
    # only names the file (hashlib's import would cost a replay more than the comparison).
    key = json.dumps([_FORMAT, sys.executable, sys.version, argv, where, streams,
                      sorted((k, v) for k, v in env.items() if k not in _SHELL_ONLY),
                      _sources(), _paths()])
    name = f"{zlib.crc32(key.encode('utf-8', 'surrogatepass')):08x}-{len(key)}"
    return Plan(os.path.join(base, "runs"), key, name=name, debug="--debug" in argv)


def _paths() -> list[tuple[str, Signature]]:
    """Where Python imports from: a package installed or removed changes a site folder
    (the others, the current folder among them, only by their type and inode)."""
    import site

    sites = {*site.getsitepackages(), site.getusersitepackages()}
    return [(p, signature(p, probe=p not in sites)) for p in sys.path if p]


def _isatty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def _sources() -> list[tuple[str, Signature]]:
    """This package's sources, each with its signature (a code change is a new key)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out: list[tuple[str, Signature]] = []
    todo = [root]
    while todo:
        folder = todo.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    todo.append(entry.path)
                elif entry.name.endswith(".py"):
                    out.append((entry.path, signature(entry.path)))
    return sorted(out)


class _Tee:
    """A text stream that passes every write on and keeps it, in order with the other's."""

    def __init__(self, real: TextIO, which: int, rec: _Recorder) -> None:
        self.real, self.which, self.rec = real, which, rec

    def write(self, text: str) -> int:
        self.rec.output.append((self.which, text))
        try:
            return self.real.write(text)
        except OSError:
            self.rec.refuse("its output could not be written")  # a closed pipe: cut short
            raise

    def __getattr__(self, name: str) -> Any:
        if name in ("buffer", "fileno"):
            # Bytes written past the text layer would not be kept.
            self.rec.refuse("it wrote to a stream's bytes")
        return getattr(self.real, name)


class _Recorder:
    """What one run read, where it ran git, what it printed, and why it cannot be kept."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.started_ns = time.time_ns()
        self.inputs: dict[str, Signature] = {}
        self.probed: set[str] = set()  # inputs only looked at (`signature`'s probe)
        self.output: list[tuple[int, str]] = []
        self.why: str | None = None
        self.transient: set[str] = {os.devnull}
        self.created: set[str] = set()  # files and folders the run made (temp files)
        self.repos: set[str] = set()
        self.worktrees: set[str] = set()
        self.busy = False  # inside the hook, or looking at a repository: not the run's own
        # The cache only saves work: what it holds never changes a result.
        cache = cachedir.base()
        self.cache = cache or "\0"
        self._within_cache = os.path.join(self.cache, "")

    def skipped(self, path: str) -> bool:
        """The cache's folder, or anything in it."""
        return path == self.cache or path.startswith(self._within_cache)

    def refuse(self, why: str) -> None:
        if self.why is None:
            self.why = why

    def see(self, path: str, probe: bool = False) -> None:
        """Note `path` as read (opened, listed), or looked at (`probe`)."""
        known = path in self.inputs
        if path in self.transient or path in self.created or self.skipped(path) or (
                known and (probe or path not in self.probed)):
            return  # not an input (its own temp file, the cache), or noted already
        self.inputs[path] = signature(path, probe)
        if probe:
            self.probed.add(path)
        else:
            self.probed.discard(path)

    def look(self, path: str) -> None:
        self.see(path, probe=True)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.busy:
            return  # an event of the hook's own looking
        self.busy = True
        try:
            self._event(event, args)
        finally:
            self.busy = False

    def _event(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._open(args[0], args[1], args[2])
        elif event in _LISTED:
            self._path(args[0], self.see)
        elif event == "os.mkdir":
            self._path(args[0], self._made)
        elif event in _CHANGES:
            self._path(args[0], self._change)
            if event in ("os.rename", "os.replace", "shutil.move", "shutil.copyfile",
                         "shutil.copytree"):
                self._path(args[1], self._change)
        elif event == "subprocess.Popen":
            self._popen(args[1], args[2])
        elif event in _UNREPEATABLE:
            self.refuse(_UNREPEATABLE[event])

    def _path(self, raw: Any, then: Callable[[str], None]) -> None:
        if isinstance(raw, int):
            return  # an open file: judged where it was opened
        if raw is None:
            raw = "."
        then(os.path.abspath(os.fsdecode(raw)))

    def _open(self, raw: Any, mode: str | None, flags: int | None) -> None:
        if isinstance(raw, int):
            return
        path = os.path.abspath(os.fsdecode(raw))
        writes = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & _WRITE_FLAGS)
        if not writes:
            self.see(path)
        elif not _is_dir(path):
            self._change(path)
        # else a folder "opened for writing": an unnamed file in it (`O_TMPFILE`, as
        # tempfile.TemporaryFile makes one), or an error

    def _made(self, path: str) -> None:
        if not _is_dir(path):
            self._change(path)  # `makedirs(exist_ok=True)` of a folder there: no change

    def _change(self, path: str) -> None:
        if (path in self.transient or path in self.created or self.skipped(path)
                or f"{os.sep}__pycache__{os.sep}" in path):
            return  # bytecode caches, like this tool's, never change a result
        if signature(path)[0] < 0:
            self.created.add(path)  # kept only if it is gone again when the run ends
        else:
            self.refuse(f"it wrote {path}")

    def _popen(self, argv: Any, cwd: Any) -> None:
        words = [os.fsdecode(a) for a in argv] if isinstance(argv, (list, tuple)) else []
        if not words or os.path.basename(words[0]) != "git":
            self.refuse(f"it ran {words[0] if words else 'a program'}")
            return
        repo = os.getcwd() if cwd is None else os.fsdecode(cwd)
        rest = words[1:]
        while len(rest) >= 2 and rest[0] == "-C":
            repo = os.path.join(repo, rest[1])
            rest = rest[2:]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] == "-c" else rest[1:]
        self._repository(os.path.abspath(repo), bool(rest) and rest[0] in _WORKTREE)

    def _repository(self, repo: str, worktree: bool) -> None:
        """Note what a git command in `repo` depends on besides objects (immutable)."""
        first = repo not in self.repos
        self.repos.add(repo)
        gitdir, top = _git_dir(repo, self.look)
        if gitdir is None:
            return
        if first:
            for name in _GIT_STATE:
                self.see(os.path.join(gitdir, name))
            _walk(os.path.join(gitdir, "refs"), self.see)
            _walk(os.path.join(gitdir, "objects"), self.see, depth=1)  # packs, loose folders
            for config in _user_git_configs():
                self.see(config)
        if worktree and top is not None and top not in self.worktrees:
            self.worktrees.add(top)
            self._worktree(top)

    def _worktree(self, top: str) -> None:
        """Every tracked file, and every folder holding one: a file appearing among them
        (an untracked `.gitattributes`) changes its folder."""
        import subprocess

        try:
            listed = subprocess.run(["git", "-C", top, "ls-files", "-z"], capture_output=True,
                                    check=False, timeout=60)
        except (OSError, subprocess.SubprocessError):
            self.refuse("its repository's tracked files could not be listed")
            return
        if listed.returncode != 0:
            self.refuse("its repository's tracked files could not be listed")
            return
        folders = {top}
        for name in os.fsdecode(listed.stdout).split("\0"):
            if name:
                path = os.path.join(top, name)
                self.see(path)
                folders.add(os.path.dirname(path))
        for folder in folders:
            self.see(folder)

    def finish(self, code: int) -> str:
        """Keep the run (traced no more) when it proved repeatable; what was done, in
        words."""
        if self.why is None and code not in _CODES:
            self.why = f"it exited {code}"
        if self.why is None:
            self.why = self._unsettled()
        if self.why is not None:
            return f"not kept: {self.why}"
        if self.plan.debug:
            return "would be kept"
        doc = {"format": _FORMAT, "key": self.plan.key, "code": code,
               "inputs": sorted([p, sig, p in self.probed] for p, sig in self.inputs.items()),
               "output": self.output}
        return _store(self.plan, doc)

    def _unsettled(self) -> str | None:
        """Why the inputs cannot stand for what the run read, if they cannot: it left a
        file it wrote, or one was modified just before it ran.

        The inputs are not signed a second time (that was a fifth of a computing `status`
        on a real checkout): one that changed since it was signed no longer matches its
        signature, and a replay signs every input before it trusts the memo."""
        left = sorted(p for p in self.created if signature(p)[0] >= 0)
        if left:
            return f"it wrote {left[0]}"
        for path, sig in self.inputs.items():
            # A later change sets the modification time anew: one well before the run
            # cannot come back; one as recent as the file system's granularity could (of
            # a link and of its target).
            if any(t >= self.started_ns - RACY_NS for t in sig[4::6]):
                return f"{path} was modified moments before it ran"
        return None


def _store(plan: Plan, doc: dict[str, Any]) -> str:
    tmp = f"{plan.path}.{os.getpid()}.tmp"
    try:
        os.makedirs(plan.folder, exist_ok=True)
        # dumps, not dump: only the one-shot encoder is the C one (dump streams in Python).
        text = json.dumps(doc)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, plan.path)
    except OSError as exc:
        _unlink(tmp)
        return f"not kept: {exc.strerror}"
    _prune(plan.folder)
    return "kept"


def _prune(folder: str) -> None:
    """Remove the oldest memos beyond `KEEP` (one is kept per invocation, and invocations
    differ by folder, arguments and environment)."""
    try:
        with os.scandir(folder) as entries:
            memos = sorted((e.stat().st_mtime_ns, e.path) for e in entries
                           if e.name.endswith(".json"))
    except OSError:
        return
    for _mtime, path in memos[:-KEEP]:
        _unlink(path)


def _unlink(path: str) -> None:
    try:  # noqa: SIM105 (contextlib is not imported for a replay)
        os.unlink(path)
    except OSError:
        pass  # gone already, or not ours to remove: a memo is only ever a saving


def _git_dir(repo: str, look: Callable[[str], None]) -> tuple[str | None, str | None]:
    """The git directory git finds from `repo` (walking up as it does) and the work tree's
    top; each `.git` looked at is an input (one appearing above changes what git finds)."""
    here = repo
    while True:
        dot = os.path.join(here, ".git")
        look(dot)
        if os.path.isdir(dot):
            return dot, here
        if os.path.isfile(dot):
            return _gitfile(dot, look), here
        if os.path.isfile(os.path.join(here, "HEAD")) and os.path.isdir(
                os.path.join(here, "objects")):
            return here, None  # a bare repository
        up = os.path.dirname(here)
        if up == here:
            return None, None
        here = up


def _gitfile(dot: str, see: Callable[[str], None]) -> str | None:
    """The git directory a `.git` file names (a linked work tree or a submodule)."""
    try:
        with open(dot, encoding="utf-8") as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = os.path.join(os.path.dirname(dot), text[len("gitdir:"):].strip())
    common = os.path.join(gitdir, "commondir")
    see(common)
    try:
        with open(common, encoding="utf-8") as fh:
            shared = os.path.join(gitdir, fh.read().strip())
    except (OSError, UnicodeDecodeError):
        return gitdir  # no common directory: the git directory holds it all
    for name in _GIT_STATE:
        see(os.path.join(shared, name))
    _walk(os.path.join(shared, "refs"), see)
    return gitdir


def _user_git_configs() -> list[str]:
    """The global and system configuration files git reads (where the environment points,
    as `gitio` passes it on)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    named = [os.environ.get(v, "") for v in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM")]
    return [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"),
            "/etc/gitconfig", *(os.path.abspath(n) for n in named if n)]


def _walk(folder: str, see: Callable[[str], None], depth: int = 64) -> None:
    """`folder` and everything below it, `depth` levels down."""
    see(folder)
    if depth <= 0:
        return
    try:
        with os.scandir(folder) as entries:
            found = [(e.path, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return  # not there, or not a folder: its signature says which
    for path, is_dir in found:
        if is_dir:
            _walk(path, see, depth - 1)
        else:
            see(path)


# -- the tracing --------------------------------------------------------------------------

_HOOKED: list[bool] = []


def _install() -> None:
    if not _HOOKED:
        # An audit hook cannot be removed: one is added per process, and it passes events
        # to the run being recorded, if any.
        sys.addaudithook(_dispatch)
        _HOOKED.append(True)
    os.stat = _traced(_stat)
    os.lstat = _traced(_lstat)
    os.access = _traced(_access)
    os.readlink = _traced(_readlink)


def _uninstall() -> None:
    os.stat, os.lstat, os.access, os.readlink = _stat, _lstat, _access, _readlink


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    if _ACTIVE:
        _ACTIVE[0].hook(event, args)


def _traced(real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, noting the path it looks at (a look that finds nothing is an input too: the
    file may appear)."""

    def traced(path: Any, *args: Any, **kwargs: Any) -> Any:
        if _ACTIVE and not isinstance(path, int):
            rec = _ACTIVE[0]
            if kwargs.get("dir_fd") is not None:
                rec.refuse("it looked at a path relative to an open folder")
            elif not rec.busy:
                rec.look(os.path.abspath(os.fsdecode(path)))
        return real(path, *args, **kwargs)

    traced.__name__ = real.__name__
    return traced
