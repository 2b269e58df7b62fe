"""A command's cost against its floor: the least any tool could spend on the same job.

The floor of a command is a Python process that does only what the job cannot avoid: it
reads, once, every file the command itself read (found by running the command once with
an `open` audit hook), runs the one git process the job needs (for `sync`, the range's
`git log -z --no-merges -M --name-status`; otherwise `git rev-parse HEAD` in the
reference checkout) and, for `sync`, writes the two report files. Both are timed the same
way (wall and CPU of the child, min and median over repetitions), so their ratio is the
overhead of the tool itself: start-up, parsing, classification, rendering.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.infra import fanout

# Every timed child runs the installed package: `-P` keeps the current folder (the bench
# runs from the checkout, as nox does) off `sys.path`, where the source tree would shadow
# it and, without `__pycache__` (PYTHONDONTWRITEBYTECODE), be compiled anew on every run.
PYTHON = (sys.executable, "-P")

# Runs the command in process with an `open` audit hook; prints the files it read, the
# package's modules it imported and what its `ast.parse` calls cost.
_TRACE = """
import ast, json, os, sys, time
seen = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        mode = args[1] or "r"
        if not any(c in mode for c in "wax+") and not (args[2] or 0) & (os.O_WRONLY | os.O_RDWR):
            seen.append(os.fsdecode(args[0]))
parsed = [0, 0.0]
plain_parse = ast.parse
def parse(*args, **kwargs):
    start = time.perf_counter()
    try:
        return plain_parse(*args, **kwargs)
    finally:
        parsed[0] += 1
        parsed[1] += time.perf_counter() - start
ast.parse = parse
before = set(sys.modules)
sys.addaudithook(hook)
from sync import cli
code = cli.main(sys.argv[2:], out=open(os.devnull, "w"), err=open(os.devnull, "w"))
out = sorted({os.path.realpath(p) for p in seen if os.path.isfile(p)})
mods = [m for m in sys.modules if m not in before and (m == "sync" or m.startswith("sync."))]
open(sys.argv[1], "w").write(json.dumps({"code": code, "files": out, "modules": mods,
                                         "parses": parsed[0], "parse_s": parsed[1]}))
"""

# The floor itself: read each file once, one git process, write the outputs.
_FLOOR = """
import json, subprocess, sys
spec = json.load(open(sys.argv[1]))
for path in spec["files"]:
    with open(path, "rb") as fh:
        fh.read()
subprocess.run(spec["git"], stdout=subprocess.DEVNULL, check=True)
for path, source in spec["writes"]:
    with open(source, "rb") as fh, open(path, "wb") as out:
        out.write(fh.read())
"""


@dataclass(frozen=True)
class Timing:
    wall: tuple[float, ...]
    cpu: tuple[float, ...]
    peak_rss_mb: float

    @property
    def wall_min(self) -> float:
        return min(self.wall)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


def child_env() -> dict[str, str]:
    """The environment a user's shell would give: no inherited git, sync or vLLM settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "SYNC_", "VLLM_"))}


def timed(argv: Sequence[str], runs: int, *, env: dict[str, str] | None = None,
          before: Callable[[], None] | None = None) -> Timing:
    """Wall, CPU (user + system) and peak RSS of `argv` as a child process, `runs` times.

    `os.wait4` gives each child's own usage (RUSAGE_CHILDREN would report the largest
    child this process ever had, across inputs).
    """
    walls, cpus, rss = [], [], 0.0
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), env=env or child_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        rss = max(rss, usage.ru_maxrss / 1024)
        if proc.returncode not in (0, 7):  # check's findings (7) are a result, not a failure
            raise SystemExit(f"bench: {' '.join(argv[:6])} failed ({proc.returncode}): "
                             f"{err.decode(errors='replace')[-400:]}")
    return Timing(tuple(walls), tuple(cpus), rss)


@dataclass(frozen=True)
class Trace:
    """One run of a command with the cache off, in process: what it read and loaded."""

    files: tuple[str, ...]  # every file it opened for reading (the job's, not Python's)
    modules: tuple[str, ...]  # this package's modules it imported, in import order
    parses: int  # `ast.parse` calls (the symbol pass)
    parse_s: float  # their time


def trace(args: Sequence[str], env: dict[str, str]) -> Trace:
    """`upstream-sync ARGS` traced: its reads (an audit hook), imports and `ast.parse` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        # Traced without the cache: the floor reads every file a run must scan at least once;
        # in one process, so that the hook sees every read and parse (`infra.fanout`).
        subprocess.run([*PYTHON, "-c", _TRACE, str(out), *args],
                       env={**env, "SYNC_CACHE_DIR": "off", "SYNC_JOBS": "1"}, check=True)
        doc = json.loads(out.read_text())
    # The interpreter's own modules are start-up, not the job: count only the job's files.
    prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})
    here = os.path.realpath(Path(__file__).resolve().parents[1])
    files = tuple(p for p in doc["files"] if not p.startswith((*prefixes, here)))
    return Trace(files, tuple(doc["modules"]), doc["parses"], doc["parse_s"])


@dataclass(frozen=True)
class Floor:
    files: int
    megabytes: float
    timing: Timing
    trace: Trace


@dataclass(frozen=True)
class Job:
    """What a command's floor does: the command's arguments (for its reads), the one git
    process, the files it writes, and the environment both run in."""

    args: tuple[str, ...]
    git: tuple[str, ...]
    writes: tuple[Path, ...]
    env: dict[str, str]


def floor(job: Job, runs: int) -> Floor:
    """The floor of `upstream-sync ARGS`: its reads once, one git process, its writes."""
    traced = trace(job.args, job.env)
    files = list(traced.files)
    git, writes = job.git, job.writes
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        targets = [(str(Path(tmp) / f"out{i}"), str(w)) for i, w in enumerate(writes)]
        spec.write_text(json.dumps({"files": files, "git": list(git), "writes": targets}))
        timing = timed([sys.executable, "-I", "-c", _FLOOR, str(spec)], runs)
    size = sum(os.path.getsize(f) for f in files) / 1e6
    return Floor(len(files), size, timing, traced)


def command(port: Path, *args: str) -> list[str]:
    return [*PYTHON, "-m", "sync", "--port", str(port), *args]


@dataclass(frozen=True)
class Result:
    """One command on one input against its floor, and the bar it is held to."""

    input: str
    name: str
    timing: Timing
    floor: Floor
    bar: float  # the highest allowed ratio of wall medians

    @property
    def ratio(self) -> float:
        return self.timing.wall_median / max(self.floor.timing.wall_median, 1e-9)

    @property
    def ok(self) -> bool:
        return self.ratio <= self.bar

    def as_doc(self) -> dict[str, Any]:
        t, f = self.timing, self.floor.timing
        return {"input": self.input, "command": self.name, "wall_min_s": t.wall_min,
                "wall_median_s": t.wall_median, "cpu_median_s": t.cpu_median,
                "peak_rss_mb": t.peak_rss_mb, "floor_wall_median_s": f.wall_median,
                "floor_files": self.floor.files, "floor_mb": self.floor.megabytes,
                "ratio": self.ratio, "bar": self.bar, "ok": self.ok}


def row(r: Result) -> str:
    t, f = r.timing, r.floor.timing
    return (f"| {r.input} | `{r.name}` | {t.wall_min:.2f} / {t.wall_median:.2f} | "
            f"{t.cpu_median:.2f} | {f.wall_median:.2f} ({r.floor.files} files, "
            f"{r.floor.megabytes:.0f} MB) | {r.ratio:.1f}x | {r.bar:g}x | "
            f"{'met' if r.ok else 'NOT MET'} |")


HEADER = ("| input | command | wall min / median s | CPU s | floor s | ratio | bar | |\n"
          "|---|---|---|---|---|---|---|---|")


def forget_runs(cache: Path) -> None:
    """No memo of an earlier run (`infra/memo.py`, under `cache`, a SYNC_CACHE_DIR): the
    next run computes, with the cache of content as the last run left it."""
    shutil.rmtree(cache / "runs", ignore_errors=True)


def reset_sync(port: Path, cache: Path) -> None:
    """A first run: no report, and an empty cache (`cache`, the run's SYNC_CACHE_DIR)."""
    shutil.rmtree(port / ".agents/sync", ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)


@dataclass(frozen=True)
class Bound:
    """What Python spends on a command before any work of the tool's own: start-up and the
    imports of the package's modules the command loads (one child that only imports them),
    and, on a first run, the symbol pass's `ast.parse` calls, shared among the processes
    the pass is split across (`infra.fanout`). Set against the bar in seconds (the bar's
    ratio times the floor), it says whether a bar is reachable at all."""

    result: Result
    imports: Timing
    io_s: float  # the floor's own reads, git process and writes (its time less a bare start-up)
    parse_s: float  # 0 where the run parses nothing (a re-run reads the cache)
    parses: int
    jobs: int = 1  # the processes a large pass is split across here
    modules: int = 0  # this package's modules it imports

    @property
    def parse_share_s(self) -> float:
        return self.parse_s / self.jobs

    @property
    def bar_s(self) -> float:
        return self.result.bar * self.result.floor.timing.wall_median

    @property
    def seconds(self) -> float:
        return self.imports.wall_median + self.io_s + self.parse_share_s

    def as_doc(self) -> dict[str, Any]:
        return {"input": self.result.input, "command": self.result.name, "bar_s": self.bar_s,
                "startup_and_imports_s": self.imports.wall_median,
                "modules": self.modules, "floor_io_s": self.io_s,
                "parse_s": self.parse_s, "parses": self.parses, "jobs": self.jobs,
                "lower_bound_s": self.seconds}


UNCHANGED = "(unchanged tree)"  # a result's name for the same command again
REPLAY_MODULES = ("sync.launch",)  # what a replayed run imports (`infra/memo.py`), and
REPLAYED = ("sync", "sync.launch", "sync.infra", "sync.infra.memo", "sync.infra.cachedir")


def bounds(results: Sequence[Result], runs: int) -> list[Bound]:
    """The lower bound of each result (the import child timed once per set of modules)."""
    bare = timed([sys.executable, "-I", "-c", "pass"], runs).wall_median
    jobs = fanout.jobs(fanout.WORTH)  # as many as a pass worth splitting gets here
    timed_imports: dict[tuple[str, ...], Timing] = {}
    out = []
    for r in results:
        # A run over an unchanged tree is replayed by the entry and its memo alone.
        replay = r.name.endswith(UNCHANGED)
        mods = REPLAY_MODULES if replay else r.floor.trace.modules
        count = len(REPLAYED) if replay else len(mods)
        if mods not in timed_imports:
            timed_imports[mods] = timed([*PYTHON, "-c", "import " + ", ".join(mods)],
                                        runs)
        first = r.name == "sync"  # the re-run's parses come from the cache
        io = max(0.0, r.floor.timing.wall_median - bare)
        out.append(Bound(r, timed_imports[mods], io, r.floor.trace.parse_s if first else 0.0,
                         r.floor.trace.parses if first else 0, jobs, count))
    return out


BOUND_HEADER = ("| input | command | bar s | start-up + imports s | floor's I/O s | "
                "`ast.parse` s | lower bound s | |\n|---|---|---|---|---|---|---|---|")


def bound_row(b: Bound) -> str:
    r = b.result
    share = f", {b.parse_share_s:.2f} on each of {b.jobs} cores" if b.jobs > 1 else ""
    parse = f"{b.parse_s:.2f} ({b.parses} sources{share})" if b.parses else "—"
    verdict = "over the bar" if b.seconds > b.bar_s else "under the bar"
    return (f"| {r.input} | `{r.name}` | {b.bar_s:.2f} | {b.imports.wall_median:.2f} "
            f"({b.modules} modules) | {b.io_s:.2f} | {parse} | "
            f"{b.seconds:.2f} | {verdict} |")
