"""`nox -s bench`: the speed and memory bars of DESIGN §5, measured, never asserted in tests.

Builds (with one `git fast-import`) a synthetic upstream of 10,000 commits over
several subtrees of real-looking Python modules (a table, a class with methods, a
helper), each commit editing inside a method, adding a row, changing a helper or a
comment, with renames; and a 2,000-file port citing it by symbol (`::Worker.step`),
by line range and as whole files. Then runs `upstream-sync sync` as a child process
on a 150-commit and a 10,000-commit range, and on a 300-commit range whose every
commit touches a cited file (the symbol pass at work on a few hundred cited
commits). Each run's git processes are counted through a `git` shim on PATH, so
GitPython's own calls are counted too. Prints wall time, peak RSS, git process
count, the ratio to plain `git log -z --no-merges -M --name-status`, and the symbol
pass alone (in process: its commits, blobs parsed, seconds). Then what a warm `nox
-s sync` adds to the command on the 150-commit range (`dev/warmnox.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sync.dev import warmnox
from sync.dev.fastimport import History, hermetic_env

SUBTREES = ("vllm/v1/core", "vllm/config", "vllm/model_executor/layers", "vllm/entrypoints",
            "vllm/distributed", "docs", "tests", "csrc")
BARS = {150: (1.5, None), 10_000: (5.0, 300.0)}


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


def _shim(root: Path) -> tuple[Path, Path]:
    shim_dir = root / "shim"
    shim_dir.mkdir()
    counter = root / "git-calls"
    real = shutil.which("git") or "/usr/bin/git"
    (shim_dir / "git").write_text(f'#!/bin/sh\necho x >> "{counter}"\nexec "{real}" "$@"\n')
    (shim_dir / "git").chmod(0o755)
    return shim_dir, counter


def run_sync(port: Path, pin: str, target: str, shim: tuple[Path, Path]) -> dict[str, Any]:
    shim_dir, counter = shim
    counter.write_text("")
    shutil.rmtree(port / ".agents/sync", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "SYNC_", "VLLM_"))}
    env["PATH"] = f"{shim_dir}{os.pathsep}{env.get('PATH', '')}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sync", "--port", str(port), "sync", "--json",
                           "--target", target], env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise SystemExit(f"bench: sync failed: {proc.stderr.decode()[-500:]}")
    doc = json.loads(proc.stdout)
    calls = len(counter.read_text().splitlines())
    return {"wall_s": wall, "peak_rss_mb": max(rss, before) / 1024, "git_processes": calls,
            "commits": doc["range"]["commits"], "counts": doc["counts"]}


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
    """The symbol pass alone, in process: the commits it reads, its git processes, seconds."""
    from sync import port as port_mod
    from sync.steps import evidence, surface
    from sync.upstream import gitio, history

    ref = gitio.open_repo(repo)
    commits = history.log_range(ref, base, target)
    surf = surface.build(port_mod.locate(str(port_root)))
    start = time.perf_counter()
    found = evidence.gather(ref, commits, surf, base)
    took = time.perf_counter() - start
    return {"cited_commits": len(found.commits), "seconds": took,
            "git_processes": found.git_processes,
            "files": sum(len(c.files) for c in found.commits.values())}


# (range, port citing every upstream module): the bars' ranges, then the symbol pass at work.
def _cases(commits: int) -> list[tuple[int, bool]]:
    return [(150, False), (commits, False), (min(300, commits), True)]


def _run_case(root: Path, upstream: Path, shas: list[str], case: tuple[int, bool],
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
    wall_bar, rss_bar = (None, None) if every else BARS.get(size, (None, None))
    fig["bars"] = {"wall_s": wall_bar, "peak_rss_mb": rss_bar, "ratio": 3.0}
    fig["ok"] = ((wall_bar is None or fig["wall_s"] < wall_bar)
                 and (rss_bar is None or fig["peak_rss_mb"] < rss_bar)
                 and fig["enumerate_ratio"] < 3.0)
    return fig


def _table(rows: list[dict[str, Any]]) -> None:
    print(f"{'range':>9} {'wall s':>7} {'bar':>5} {'RSS MB':>7} {'bar':>5} {'git procs':>9} "
          f"{'git log s':>9} {'ratio':>6} {'enum s':>7} {'enum ratio':>10} "
          f"{'cited commits':>13} {'symbols s':>9}")
    for r in rows:
        b, sp = r["bars"], r["symbol_pass"]
        label = f"{r['range']}{'*' if r['every_file_cited'] else ''}"
        print(f"{label:>9} {r['wall_s']:>7.2f} {b['wall_s'] or '-':>5} "
              f"{r['peak_rss_mb']:>7.0f} {b['peak_rss_mb'] or '-':>5} {r['git_processes']:>9} "
              f"{r['plain_git_log_s']:>9.2f} {r['ratio_to_git_log']:>6.2f} "
              f"{r['enumerate_s']:>7.2f} {r['enumerate_ratio']:>10.2f} "
              f"{sp['cited_commits']:>13} {sp['seconds']:>9.2f}")
    print("* every upstream module cited (by symbol, line range or whole file, in turn): the "
          "symbol pass over every commit of the range")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sync.dev.bench", description=__doc__)
    ap.add_argument("--commits", type=int, default=10_000, help="size of the long range")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--warm-runs", type=int, default=5, metavar="N",
                    help="warm `nox -s sync` runs to time (0: skip that measurement)")
    ap.add_argument("--suite", type=Path, default=Path.cwd(),
                    help="the upstream-sync checkout whose noxfile is timed (default: here, "
                    "where nox runs the bench session)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="upstream-sync-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        print(f"bench: building a {args.commits}-commit upstream with git fast-import ...",
              file=sys.stderr, flush=True)
        upstream, shas = build_upstream(root, args.commits)
        print(f"bench: built in {time.perf_counter() - t0:.1f}s; building a 2,000-file port",
              file=sys.stderr, flush=True)
        shim = _shim(root)
        rows = []
        for case in _cases(args.commits):
            rows.append(_run_case(root, upstream, shas, case, shim))
            print(f"bench: range {case[0]}: {rows[-1]['wall_s']:.2f}s", file=sys.stderr,
                  flush=True)
        warm = _warm(args, root, shas)
    constant = len({r["git_processes"] for r in rows}) == 1
    if args.json:
        print(json.dumps({"runs": rows, "git_processes_constant": constant,
                          "warm_session": warmnox.as_doc(warm)}, indent=2))
    else:
        _table(rows)
        print(f"git processes independent of commit count: {'yes' if constant else 'NO'}")
        print(warmnox.line(warm))
    bars_met = [*(r["ok"] for r in rows), constant, warmnox.ok(warm)]
    return 0 if all(bars_met) else 1


def _warm(args: argparse.Namespace, root: Path, shas: list[str]) -> warmnox.Warm | str:
    """The warm-session overhead on the 150-commit port, or why it was not measured."""
    if args.warm_runs <= 0:
        return "--warm-runs 0"
    print(f"bench: timing warm `nox -s sync` ({args.warm_runs} runs, after one cold install)",
          file=sys.stderr, flush=True)
    port = root / "r150" / "port"
    try:
        return warmnox.measure(args.suite.resolve(), root / "warm", "sync",
                               ["--port", str(port), "--target", shas[-1], "--json"],
                               args.warm_runs)
    except warmnox.Skipped as exc:
        return str(exc)


if __name__ == "__main__":
    raise SystemExit(main())
