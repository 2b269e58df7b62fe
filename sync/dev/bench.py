"""`nox -s bench`: the speed and memory bars of DESIGN §5, measured, never asserted in tests.

Builds (with one `git fast-import`) a synthetic upstream of 10,000 commits over
several subtrees with renames and a 2,000-file port citing it, then runs
`upstream-sync sync` as a child process on a 150-commit and a 10,000-commit
range. Each run's git processes are counted through a `git` shim on PATH, so
GitPython's own calls are counted too. Prints wall time, peak RSS, git process
count and the ratio to plain `git log -z --no-merges -M --name-status`. Then what a
warm `nox -s sync` adds to the command on the 150-commit range (`dev/warmnox.py`).
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


def build_upstream(root: Path, commits: int) -> tuple[Path, list[str]]:
    h = History()
    files = [f"{SUBTREES[i % len(SUBTREES)]}/mod_{i}.py" for i in range(2400)]
    h.modify("README.md", "synthetic upstream\n")
    for i, f in enumerate(files):
        h.modify(f, f"# module {i}\nVALUE = {i}\n")
    marks = [h.commit("[Init] synthetic upstream (#1)")]
    live = list(files)
    for n in range(1, commits + 1):
        k = (n * 7919) % len(live)
        if n % 97 == 0:
            old = live[k]
            new = old.replace(".py", f"_r{n}.py")
            h.rename(old, new)
            live[k] = new
            subject = f"[Refactor] rename {Path(old).name} (#{20000 + n})"
        else:
            for j in range(1 + n % 3):
                f = live[(k + j * 131) % len(live)]
                h.modify(f, f"# module\nVALUE = {n}\n# change {n}.{j}\n")
            tag = ("Core", "Bugfix", "Misc", "Model", "ROCm", "Doc")[n % 6]
            subject = f"[{tag}] change number {n} (#{20000 + n})"
        marks.append(h.commit(subject))
    repo = root / "upstream"
    shas = h.write(repo)
    # As if fetched: the sync resolves <remote>/<branch> for the per-file pin audit.
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/remotes/origin/main",
                    shas[marks[-1]]], env=hermetic_env(), check=True)
    return repo, [shas[m] for m in marks]


def build_port(root: Path, pin: str, runtime: str, upstream: Path) -> Path:
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
    for i in range(2000):
        sub = SUBTREES[i % 5]
        f = port / "src" / sub / f"mod_{i}.cpp"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"// Ported from: {sub}/mod_{i}.py @ {pin[:8]}\nint v{i} = {i};\n")
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
        for size in (150, args.commits):
            pin = shas[-1 - size]
            port = build_port(root / f"r{size}", pin, f"0.23.1.dev1+g{pin[:9]}", upstream)
            fig = run_sync(port, pin, shas[-1], shim)
            fig["plain_git_log_s"] = plain_log(upstream, pin, shas[-1])
            fig["ratio_to_git_log"] = fig["wall_s"] / max(fig["plain_git_log_s"], 1e-9)
            fig["enumerate_s"] = enumerate_time(upstream, pin, shas[-1])
            fig["enumerate_ratio"] = fig["enumerate_s"] / max(fig["plain_git_log_s"], 1e-9)
            fig["range"] = size
            wall_bar, rss_bar = BARS.get(size, (None, None))
            fig["bars"] = {"wall_s": wall_bar, "peak_rss_mb": rss_bar, "ratio": 3.0}
            fig["ok"] = ((wall_bar is None or fig["wall_s"] < wall_bar)
                         and (rss_bar is None or fig["peak_rss_mb"] < rss_bar)
                         and fig["enumerate_ratio"] < 3.0)
            rows.append(fig)
            print(f"bench: range {size}: {fig['wall_s']:.2f}s", file=sys.stderr, flush=True)
        warm = _warm(args, root, shas)
    constant = len({r["git_processes"] for r in rows}) == 1
    if args.json:
        print(json.dumps({"runs": rows, "git_processes_constant": constant,
                          "warm_session": warmnox.as_doc(warm)}, indent=2))
    else:
        print(f"{'range':>7} {'wall s':>7} {'bar':>5} {'RSS MB':>7} {'bar':>5} {'git procs':>9} "
              f"{'git log s':>9} {'ratio':>6} {'enum s':>7} {'enum ratio':>10}")
        for r in rows:
            b = r["bars"]
            print(f"{r['range']:>7} {r['wall_s']:>7.2f} {b['wall_s'] or '-':>5} "
                  f"{r['peak_rss_mb']:>7.0f} {b['peak_rss_mb'] or '-':>5} {r['git_processes']:>9} "
                  f"{r['plain_git_log_s']:>9.2f} {r['ratio_to_git_log']:>6.2f} "
                  f"{r['enumerate_s']:>7.2f} {r['enumerate_ratio']:>10.2f}")
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
