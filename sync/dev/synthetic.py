"""The synthetic benchmark input: a 10,000-commit upstream of small real-looking Python
modules and a 2,000-file port with one-line headers citing them (by symbol, line range or
whole file). It measures enumeration and the symbol pass at scale; the real-shaped input
(`dev/realshape.py`) measures what a real port's long headers cost.

Each module: a table, a class with methods, a helper; each commit edits inside a method,
adds a row, changes a helper or a comment, with renames.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sync.dev import floors
from sync.dev.fastimport import History, hermetic_env

SUBTREES = ("vllm/v1/core", "vllm/config", "vllm/model_executor/layers", "vllm/entrypoints",
            "vllm/distributed", "docs", "tests", "csrc")


def module_text(i: int, state: tuple[int, int, int, int]) -> str:
    """Module `i` with its edit state: (step multiplier, table rows, helper factor, notes)."""
    mult, rows, factor, notes = state
    table = "".join(f'    "k{r}": {r},\n' for r in range(2 + rows))
    comments = "".join(f"        # note {c}\n" for c in range(notes))
    return (f'"""Module {i}."""\n\nimport logging\n\nlogger = logging.getLogger(__name__)\n\n'
            f"TABLE = {{\n{table}}}\n\n\nclass Worker:\n    \"\"\"Does work {i}.\"\"\"\n\n"
            f"    limit = {i}\n\n    def __init__(self, config):\n        self.config = config\n"
            f"        self.items = []\n\n    def step(self, batch):\n        total = 0\n"
            f"        for item in batch:\n            if item > self.limit:\n"
            f"                total += item * {mult}\n        return total\n\n"
            f"    def reset(self):\n{comments}        self.items.clear()\n\n\n"
            f"def helper(x):\n    return x * {factor}\n")


def _helper_lines() -> str:
    lines = module_text(0, (1, 0, 1, 0)).splitlines()
    start = lines.index("def helper(x):") + 1
    return f"{start}-{start + 1}"


HELPER_LINES = _helper_lines()  # `def helper` at the start (rows added later move it down)


def _edit(state: tuple[int, int, int, int], n: int) -> tuple[int, int, int, int]:
    """The n-th commit's edit: inside Worker.step, a table row, the helper, or a comment."""
    mult, rows, factor, notes = state
    kind = n % 4
    return (n if kind == 0 else mult, rows + (kind == 1), n if kind == 2 else factor,
            notes + (kind == 3))


def build_upstream(root: Path, commits: int) -> tuple[Path, list[str]]:
    h = History()
    files = [f"{SUBTREES[i % len(SUBTREES)]}/mod_{i}.py" for i in range(2400)]
    states = {f: (1, 0, 1, 0) for f in files}
    h.modify("README.md", "synthetic upstream\n")
    for i, f in enumerate(files):
        h.modify(f, module_text(i, states[f]))
    marks = [h.commit("[Init] synthetic upstream (#1)")]
    live = list(files)
    number = {f: i for i, f in enumerate(files)}
    for n in range(1, commits + 1):
        k = (n * 7919) % len(live)
        if n % 97 == 0:
            old = live[k]
            new = old.replace(".py", f"_r{n}.py")
            h.rename(old, new)
            states[new] = states.pop(old)
            number[new] = number.pop(old)
            live[k] = new
            subject = f"[Refactor] rename {Path(old).name} (#{20000 + n})"
        else:
            for j in range(1 + n % 3):
                f = live[(k + j * 131) % len(live)]
                states[f] = _edit(states[f], n + j)
                h.modify(f, module_text(number[f], states[f]))
            tag = ("Core", "Bugfix", "Misc", "Model", "ROCm", "Doc")[n % 6]
            subject = f"[{tag}] change number {n} (#{20000 + n})"
        marks.append(h.commit(subject))
    repo = root / "upstream"
    shas = h.write(repo)
    # As if fetched: the sync resolves <remote>/<branch> for the per-file pin audit.
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/remotes/origin/main",
                    shas[marks[-1]]], env=hermetic_env(), check=True)
    return repo, [shas[m] for m in marks]


def _citation(i: int, path: str, pin: str) -> str:
    """Port file i's header: by symbol, by line range, or the whole file, in turn."""
    anchor = ("::Worker.step", f":{HELPER_LINES}", "")[i % 3]
    return f"// Ported from: {path}{anchor} @ {pin[:8]}\n"


def build_port(root: Path, pin: str, runtime: str, upstream: Path, *,
               every_file: bool = False) -> Path:
    """A 2,000-file port (`every_file`: one port file per upstream module, 2,400)."""
    port = root / "port"
    (port / ".agents/oracles").mkdir(parents=True)
    (port / ".agents/upstream-sync.md").write_text(
        "# Protocol\n\nActive pin (advanced 2026-01-01): current parity pin "
        f"{pin[:9]} (vLLM 0.23.1 + synthetic)\n\n```parity-pin\nvllm_commit = {pin}\n"
        f"vllm_runtime_version = {runtime}\nvllm_distribution_version = {runtime}\n"
        "flashinfer_version = 0.6.15.post1\n```\n")
    public = runtime.split("+")[0]
    (port / ".agents/oracles/vllm.md").write_text(
        f"# vllm\n\n```oracle-pin\nid = vllm\nrole = core\nupstream = {upstream}\nscope = all\n"
        f"pin = {pin}\npin_label = {public}\npinned_on = 2026-01-01\ngateable = no\n"
        "evidence = -\n```\n")
    (port / ".agents/developer-preferences.md").write_text(
        f"```sync-preferences\nreference_checkout = {upstream}\nfetch_remote = origin\n"
        "branch = main\n```\n")
    for i in range(2400 if every_file else 2000):
        sub = SUBTREES[i % (len(SUBTREES) if every_file else 5)]
        f = port / "src" / sub / f"mod_{i}.cpp"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(_citation(i, f"{sub}/mod_{i}.py", pin) + f"int v{i} = {i};\n")
    return port



def shim(root: Path) -> tuple[Path, Path]:
    shim_dir = root / "shim"
    shim_dir.mkdir()
    counter = root / "git-calls"
    real = shutil.which("git") or "/usr/bin/git"
    (shim_dir / "git").write_text(f'#!/bin/sh\necho x >> "{counter}"\nexec "{real}" "$@"\n')
    (shim_dir / "git").chmod(0o755)
    return shim_dir, counter


def run_sync(port: Path, pin: str, target: str, shim: tuple[Path, Path],
             runs: int = 3) -> dict[str, Any]:
    """`sync` on a fresh port `runs` times: wall min/median, CPU, peak RSS, git processes."""
    shim_dir, counter = shim
    env = floors.child_env()
    env["PATH"] = f"{shim_dir}{os.pathsep}{env.get('PATH', '')}"
    cache = port.parent / "cache"
    env["SYNC_CACHE_DIR"] = str(cache)
    argv = floors.command(port, "sync", "--json", "--target", target)
    counter.write_text("")
    timing = floors.timed(argv, runs, env=env, before=lambda: floors.reset_sync(port, cache))
    calls = len(counter.read_text().splitlines()) // runs
    doc = json.loads(subprocess.run(argv, env=env, capture_output=True, check=True).stdout)
    return {"wall_s": timing.wall_median, "wall_min_s": timing.wall_min,
            "cpu_s": timing.cpu_median, "peak_rss_mb": timing.peak_rss_mb,
            "git_processes": calls, "commits": doc["range"]["commits"],
            "counts": doc["counts"]}


def plain_log(repo: Path, base: str, target: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(["git", "-C", str(repo), "log", "-z", "--no-merges", "-M",
                        "--name-status", f"{base}..{target}"], env=hermetic_env(),
                       stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def enumerate_time(repo: Path, base: str, target: str) -> float:
    """The enumeration step alone (one `git log -z` parsed in Python), best of three."""
    from sync.upstream import gitio, history

    ref = gitio.open_repo(repo)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        history.log_range(ref, base, target)
        best = min(best, time.perf_counter() - start)
    return best


def symbol_pass(port_root: Path, repo: Path, base: str, target: str) -> dict[str, Any]:
    """The symbol pass alone, in process and uncached: the commits it reads, its git
    processes, seconds, and the part of them its `ast.parse` calls take."""
    from sync import port as port_mod
    from sync.steps import evidence, surface
    from sync.upstream import gitio, history

    ref = gitio.open_repo(repo)
    commits = history.log_range(ref, base, target)
    with _uncached(), _parse_timer() as parsed:
        surf = surface.build(port_mod.locate(str(port_root)))
        parsed.clear()
        start = time.perf_counter()
        found = evidence.gather(ref, commits, surf, base)
        took = time.perf_counter() - start
    return {"cited_commits": len(found.commits), "seconds": took,
            "git_processes": found.git_processes,
            "files": sum(len(c.files) for c in found.commits.values()),
            "parses": len(parsed), "parse_s": sum(parsed)}


@contextlib.contextmanager
def _uncached() -> Iterator[None]:
    """The cache off (and the user's own cache folder left alone) for an in-process run."""
    old = os.environ.get("SYNC_CACHE_DIR")
    os.environ["SYNC_CACHE_DIR"] = "off"
    try:
        yield
    finally:
        if old is None:
            del os.environ["SYNC_CACHE_DIR"]
        else:
            os.environ["SYNC_CACHE_DIR"] = old


@contextlib.contextmanager
def _parse_timer() -> Iterator[list[float]]:
    """The seconds of each `ast.parse` call made meanwhile."""
    plain, took = ast.parse, []

    def parse(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return plain(*args, **kwargs)
        finally:
            took.append(time.perf_counter() - start)

    ast.parse = parse  # a timing wrapper of the same function
    try:
        yield took
    finally:
        ast.parse = plain


# (range, port citing every upstream module): the bars' ranges, then the symbol pass at work.
def _cases(commits: int) -> list[tuple[int, bool]]:
    return [(150, False), (commits, False), (min(300, commits), True)]


def run_case(root: Path, upstream: Path, shas: list[str], case: tuple[int, bool],
              shim: tuple[Path, Path]) -> dict[str, Any]:
    size, every = case
    pin = shas[-1 - size]
    port = build_port(root / f"r{size}{'-all' if every else ''}", pin,
                      f"0.23.1.dev1+g{pin[:9]}", upstream, every_file=every)
    fig = run_sync(port, pin, shas[-1], shim)
    fig["plain_git_log_s"] = plain_log(upstream, pin, shas[-1])
    fig["ratio_to_git_log"] = fig["wall_s"] / max(fig["plain_git_log_s"], 1e-9)
    fig["enumerate_s"] = enumerate_time(upstream, pin, shas[-1])
    fig["enumerate_ratio"] = fig["enumerate_s"] / max(fig["plain_git_log_s"], 1e-9)
    fig["symbol_pass"] = symbol_pass(port, upstream, pin, shas[-1])
    fig["range"] = size
    fig["every_file_cited"] = every
    fig["target"] = shas[-1]
    return fig


def table(rows: list[dict[str, Any]]) -> None:
    print(f"{'range':>9} {'wall s':>7} {'bar s':>6} {'RSS MB':>7} {'bar':>5} {'git procs':>9} "
          f"{'git log s':>9} {'ratio':>6} {'enum s':>7} {'cited commits':>13} {'symbols s':>9} "
          f"{'ast.parse s':>11}")
    for r in rows:
        b, sp = r["bars"], r["symbol_pass"]
        label = f"{r['range']}{'*' if r['every_file_cited'] else ''}"
        print(f"{label:>9} {r['wall_s']:>7.2f} {b['wall_s'] or '-':>6} "
              f"{r['peak_rss_mb']:>7.0f} {b['peak_rss_mb'] or '-':>5} {r['git_processes']:>9} "
              f"{r['plain_git_log_s']:>9.2f} {r['ratio_to_git_log']:>6.2f} "
              f"{r['enumerate_s']:>7.2f} {sp['cited_commits']:>13} {sp['seconds']:>9.2f} "
              f"{sp['parse_s']:>11.2f}")
    print("bar s: 2x plain git log + 0.3 s (the 10,000-commit range). * every upstream module "
          "cited: the symbol pass over every commit of the range. ast.parse s: the part of the "
          "symbol pass that parses the cited modules' two sides")


