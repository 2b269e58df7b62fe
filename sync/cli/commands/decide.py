"""`decide`: record a disposition and reason for one upstream commit, then refresh the report."""

from __future__ import annotations

import argparse
import getpass
import re
from datetime import UTC, datetime

from sync.cli.context import Context, add_json
from sync.infra.errors import UsageError
from sync.records import decisions
from sync.steps.syncrun import CycleRequest, run_cycle
from sync.upstream import gitio, history
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("decide", help="step 4: record a decision for one upstream commit",
                       description="Record DISPOSITION and REASON for an upstream commit (a SHA "
                       "prefix or #N, the PR number) in decisions.toml; it outranks every rule "
                       "and survives re-runs and cycles.")
    p.add_argument("commit", help="SHA (prefix) or #N (PR number within the cycle's range)")
    p.add_argument("disposition", type=str.upper, choices=decisions.ALL)
    p.add_argument("reason", nargs="+", help="one-line reason")
    p.add_argument("--by", help="who decided (default: your login name)")
    add_json(p)
    p.set_defaults(func=run)


def _find(commits: list[history.Commit], ref: gitio.Reference, key: str) -> history.Commit:
    m = re.fullmatch(r"#?(\d+)", key) if key.startswith("#") else None
    if m:
        hits = [c for c in commits if c.pr == int(m.group(1))]
        what = f"PR #{m.group(1)}"
    else:
        if not re.fullmatch(r"[0-9a-fA-F]{4,40}", key):
            raise UsageError(f"{key!r} is neither a SHA nor #N", "give a SHA prefix or #PR")
        hits = [c for c in commits if c.sha.startswith(key.lower())]
        what = f"commit {key}"
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise UsageError(f"{what} matches {len(hits)} commits in the range: "
                         + ", ".join(short(c.sha) for c in hits), "give the SHA instead")
    raise UsageError(f"{what} is not in the cycle's range", "run 'upstream-sync sync' and pick an "
                     "entry from the report")


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    reason = " ".join(" ".join(args.reason).split())
    if not reason:
        raise UsageError("the reason is empty", "say why, in one line")
    c = port.open_cycle()
    ref = port.reference()
    pin = port.pin_record().pin
    commits = history.log_range(ref, pin.commit, c.target)
    commit = _find(commits, ref, args.commit)
    with port.lock():
        table = port.decisions()
        by = args.by or getpass.getuser()
        table[commit.sha] = decisions.Decision(commit.sha, args.disposition, reason, by,
                                               datetime.now(UTC).strftime("%Y-%m-%d"),
                                               commit.subject)
        decisions.save(port.decisions_path, table)
        port.keep("decisions", table)
    result = run_cycle(port, ctx, CycleRequest(decided_now=commit.sha))
    if ctx.json:
        ctx.emit_json({"sha": commit.sha, "disposition": args.disposition, "reason": reason,
                       "by": by, "report": port.rel(result.path)})
    else:
        ctx.say(f"{short(commit.sha)} {args.disposition}: {reason} (report {result.path})")
    return 0
