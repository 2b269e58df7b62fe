"""`nox -s bench`: the speed and memory bars of DESIGN §5, measured in one run, never asserted
in tests.

Three inputs, each built with one `git fast-import`:
- real-shaped (`dev/realshape.py`): a 2,253-file, 38 MB port with long multi-line headers
  (citations in the header forms of DESIGN §3, mentions, ORIGINAL declarations) against an
  upstream of Python modules with classes and methods. `sync` at 300 and 3,000 commits
  (a first run; a second run over the unchanged tree, computing from the cache of content;
  then the same again, replayed by `infra/memo.py`), `check`, `audit` and `status` (each
  run computing, with no memo of an earlier one, then again over the unchanged tree, where
  `infra/memo.py` replays them), each against its floor (`dev/floors.py`): bars 3x (a
  re-run of `sync` 1.5x).
- synthetic (`dev/synthetic.py`): 10,000 commits, a 2,000-file port of one-line headers;
  bars: at most 2x plain `git log -z --no-merges -M --name-status` plus 0.3 s, peak RSS
  under 300 MB, and a number of git processes (counted through a shim on PATH, GitPython's
  included) that does not grow with the range.
- optionally the real case (`--case DIR`, a directory `shared/cases/late-july/prepare.sh`
  made): the same commands, the same bars.
Then what a warm `nox -s sync` adds to its command (`dev/warmnox.py`, bar 0.5 s), and each
command's lower bound (`floors.bounds`): the start-up and imports of the package's modules it
loads, plus a first `sync`'s `ast.parse` calls shared among the cores its symbol pass is
split across, set against its bar in seconds.
Figures are min and median over `--runs` repetitions; CPU is the child's user + system,
its worker processes' included.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.dev import floors, realshape, synthetic, warmnox
from sync.dev.fastimport import hermetic_env
from sync.dev.floors import Result
from sync.infra import memo

SYNTHETIC_RSS_MB = 300.0


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Input:
    """A port and its reference checkout, with the range a cycle syncs."""

    name: str
    port: Path
    reference: Path
    pin: str
    target: str
    cache: Path  # the runs' SYNC_CACHE_DIR (emptied before each first run)


def _git_log(inp: Input) -> list[str]:
    return ["git", "-C", str(inp.reference), "log", "-z", "--no-merges", "-M",
            "--name-status", f"{inp.pin}..{inp.target}"]


def _report(inp: Input) -> list[Path]:
    reports = sorted((inp.port / ".agents/sync").glob("*-*.md"))
    return [reports[-1], reports[-1].with_suffix(".json")]


def measure(inp: Input, runs: int) -> list[Result]:
    """sync (first run, re-run), check, audit, status on `inp`, each against its floor."""
    env = _env(inp)
    sync = floors.command(inp.port, "sync", "--target", inp.target)
    say(f"{inp.name}: sync, first runs")
    first = floors.timed(sync, runs, env=env,
                         before=lambda: floors.reset_sync(inp.port, inp.cache))
    # The first run wrote the report: a run reading it within two seconds is never kept
    # (`infra/memo.py`). Then a second run (no memo of it: it computes, from the cache of
    # content, and is kept), and the same again, replayed.
    time.sleep(memo.RACY_NS / 1e9)
    second = floors.timed(sync, runs, env=env, before=lambda: floors.forget_runs(inp.cache))
    again = floors.timed(sync, runs, env=env)
    out = [Result(inp.name, "sync", first, _floor(inp, sync, _git_log(inp), runs), 3.0)]
    out.append(Result(inp.name, "sync (second run)", second, out[0].floor, 1.5))
    out.append(Result(inp.name, "sync (unchanged tree)", again, out[0].floor, 1.5))
    rev = ["git", "-C", str(inp.reference), "rev-parse", "HEAD"]
    for name in ("check", "audit", "status"):
        say(f"{inp.name}: {name}")
        argv = floors.command(inp.port, name)
        # Each run of the first kind computes (no memo of an earlier run: `infra/memo.py`);
        # then the same command again over the unchanged tree, replayed.
        cold = floors.timed(argv, runs, env=env, before=lambda: floors.forget_runs(inp.cache))
        low = _floor(inp, argv, rev, runs, writes=False)
        out.append(Result(inp.name, name, cold, low, 3.0))
        out.append(Result(inp.name, f"{name} (unchanged tree)",
                          floors.timed(argv, runs, env=env), low, 3.0))
    return out


def _env(inp: Input) -> dict[str, str]:
    return {**floors.child_env(), "VLLM_SOURCE": str(inp.reference),
            "SYNC_CACHE_DIR": str(inp.cache)}


def _floor(inp: Input, argv: list[str], git: list[str], runs: int, *,
           writes: bool = True) -> floors.Floor:
    env = _env(inp)
    args = tuple(argv[argv.index("-m") + 2:])  # after `-m sync`
    job = floors.Job(args, tuple(git), tuple(_report(inp)) if writes else (), env)
    return floors.floor(job, runs)


def real_shaped(root: Path, commits: int, runs: int) -> list[Result]:
    say(f"building a real-shaped upstream of {commits} commits and a 2,253-file port")
    up = realshape.build_upstream(root / "rs", commits)
    out: list[Result] = []
    for size in (300, commits):
        pin = up.shas[-1 - size]
        port = realshape.build_port(root / f"rs-{size}", up, pin)
        out += measure(Input(f"real-shaped, {size} commits", port, up.repo, pin, up.shas[-1],
                             root / f"cache-{size}"), runs)
    return out


def real_case(case: Path, runs: int, cache: Path) -> list[Result]:
    """The shared real case, prepared by its prepare.sh; `init` first when it has no config."""
    import subprocess

    ref, port = case / "vllm", case / "port"
    env = {**floors.child_env(), "VLLM_SOURCE": str(ref)}
    if not (port / ".agents/upstream-sync.toml").exists():
        subprocess.run(floors.command(port, "init"), env=env, check=True, capture_output=True)
    pin = subprocess.run(["git", "-C", str(ref), "rev-parse", "pin^{commit}"], env=hermetic_env(),
                         check=True, capture_output=True, text=True).stdout.strip()
    target = subprocess.run(["git", "-C", str(ref), "rev-parse", "origin/main"],
                            env=hermetic_env(), check=True, capture_output=True,
                            text=True).stdout.strip()
    return measure(Input(f"real case ({case.name})", port, ref, pin, target, cache), runs)


def synthetic_rows(root: Path, commits: int) -> list[dict[str, Any]]:
    say(f"building a synthetic {commits}-commit upstream with git fast-import")
    t0 = time.perf_counter()
    upstream, shas = synthetic.build_upstream(root / "syn", commits)
    say(f"built in {time.perf_counter() - t0:.1f}s")
    shim = synthetic.shim(root)
    rows = []
    for case in ((150, False), (commits, False), (min(300, commits), True)):
        fig = synthetic.run_case(root, upstream, shas, case, shim)
        budget = 2 * fig["plain_git_log_s"] + 0.3
        big = case == (commits, False)
        fig["bars"] = {"wall_s": round(budget, 2) if big else None,
                       "peak_rss_mb": SYNTHETIC_RSS_MB if big else None}
        fig["ok"] = not big or (fig["wall_s"] <= budget
                                and fig["peak_rss_mb"] < SYNTHETIC_RSS_MB)
        rows.append(fig)
        say(f"synthetic range {case[0]}: {fig['wall_s']:.2f}s")
    return rows


def _print(results: list[Result], bounds: list[floors.Bound], rows: list[dict[str, Any]],
           warm: warmnox.Warm | str) -> None:
    print(floors.HEADER)
    for r in results:
        print(floors.row(r))
    print()
    print("Lower bounds: what Python spends before the tool's own work, against each bar")
    print()
    print(floors.BOUND_HEADER)
    for b in bounds:
        print(floors.bound_row(b))
    print()
    synthetic.table(rows)
    line = _synthetic_bound(bounds, rows)
    if line:
        print(line)
    constant = len({r["git_processes"] for r in rows}) == 1
    print(f"git processes independent of commit count: {'yes' if constant else 'NO'}")
    print(warmnox.line(warm))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sync.dev.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=10_000, help="the synthetic long range")
    ap.add_argument("--real-commits", type=int, default=3_000,
                    help="the real-shaped long range")
    ap.add_argument("--runs", type=int, default=5, help="repetitions of each timed command")
    ap.add_argument("--case", type=Path, help="also measure this prepared real case")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--warm-runs", type=int, default=5, metavar="N",
                    help="warm `nox -s sync` runs to time (0: skip that measurement)")
    ap.add_argument("--suite", type=Path, default=Path.cwd(),
                    help="the upstream-sync checkout whose noxfile is timed (default: here, "
                    "where nox runs the bench session)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="upstream-sync-bench-") as tmp:
        root = Path(tmp)
        results = real_shaped(root, args.real_commits, args.runs)
        if args.case is not None:
            results += real_case(args.case.resolve(), args.runs, root / "cache-case")
        say("timing the lower bounds (start-up and imports)")
        bounds = floors.bounds(results, args.runs)
        rows = synthetic_rows(root, args.commits)
        warm = _warm(args, root, rows)
    constant = len({r["git_processes"] for r in rows}) == 1
    if args.json:
        print(json.dumps({"commands": [r.as_doc() for r in results],
                          "lower_bounds": [b.as_doc() for b in bounds], "synthetic": rows,
                          "git_processes_constant": constant,
                          "warm_session": warmnox.as_doc(warm)}, indent=2))
    else:
        _print(results, bounds, rows, warm)
    bars = [*(r.ok for r in results), *(r["ok"] for r in rows), constant, warmnox.ok(warm)]
    return 0 if all(bars) else 1


def _synthetic_bound(bounds: list[floors.Bound], rows: list[dict[str, Any]]) -> str | None:
    """The long synthetic range's lower bound: start-up and imports (as the real-shaped
    `sync` measured them), the plain `git log` and the symbol pass's `ast.parse` calls."""
    imports = next((b.imports.wall_median for b in bounds if b.result.name == "sync"), None)
    big = next((r for r in rows if r["bars"]["wall_s"] is not None), None)
    if imports is None or big is None:
        return None
    bar, parse = big["bars"]["wall_s"], big["symbol_pass"]["parse_s"]
    total = imports + big["plain_git_log_s"] + parse
    return (f"lower bound at {big['range']:,} commits: start-up + imports {imports:.2f} s + "
            f"git log {big['plain_git_log_s']:.2f} s + ast.parse {parse:.2f} s = "
            f"{total:.2f} s, against the bar {bar:.2f} s ({'over' if total > bar else 'under'})")


def _warm(args: argparse.Namespace, root: Path, rows: list[dict[str, Any]]) -> warmnox.Warm | str:
    """The warm-session overhead on the synthetic 150-commit port, or why it was not measured."""
    if args.warm_runs <= 0:
        return "--warm-runs 0"
    say(f"timing warm `nox -s sync` ({args.warm_runs} runs, after one cold install)")
    try:
        return warmnox.measure(args.suite.resolve(), root / "warm", "sync",
                               ["--port", str(root / "r150" / "port"), "--target",
                                rows[0]["target"], "--json"], args.warm_runs)
    except warmnox.Skipped as exc:
        return str(exc)


if __name__ == "__main__":
    raise SystemExit(main())
