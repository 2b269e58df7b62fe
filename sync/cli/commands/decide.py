"""`decide`: record a disposition and reason for one upstream commit, then refresh the report.

The commit is one of the cycle's range or one the carry-over record carries into it. An
earlier, different decision for it is never replaced silently: that takes `--force`,
and the command says what it replaced.
"""

from __future__ import annotations

import argparse
import getpass

from sync.cli.context import Context, add_json
from sync.infra import clock
from sync.infra.errors import UsageError
from sync.records import decisions
from sync.steps import pick
from sync.steps.syncrun import CycleRequest, run_cycle
from sync.upstream import history
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("decide", help="step 4: record a decision for one upstream commit",
                       description="Record DISPOSITION and REASON for an upstream commit (a SHA "
                       "prefix or #N, the PR number) in decisions.toml; it outranks every rule "
                       "and survives re-runs and cycles.")
    p.add_argument("commit", help="SHA (prefix) or #N (PR number within the cycle's range)")
    p.add_argument("disposition", type=str.upper, choices=decisions.ALL,
                   help="what the commit is, in any case; a PORT-NOW whose reason starts "
                   "'carry-over:' is carried to the next cycle by the advance")
    p.add_argument("reason", nargs="+", help="one-line reason")
    p.add_argument("--by", help="who decided (default: your login name)")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier, different decision for the commit")
    add_json(p)
    p.set_defaults(func=run)


def _find(commits: list[history.Commit], key: str) -> history.Commit:
    """The one commit `key` names: `#N` a PR, else a SHA prefix (a bare number that is no
    SHA prefix but a PR of the range is refused with `#N` suggested)."""
    return commits[pick.index(commits, key, carried=True)]


def _replaces(old: decisions.Decision | None, new: decisions.Decision,
              force: bool) -> decisions.Decision | None:
    """The earlier decision `new` replaces (refused without `force` when it differs)."""
    if old is None or (old.disposition, old.reason) == (new.disposition, new.reason):
        return None
    if not force:
        raise UsageError(f"{short(new.sha)} is already decided {old.disposition}: "
                         f"{old.reason!r} (by {old.by or '?'} on {old.at or '?'})",
                         "pass --force to replace that decision")
    return old


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    reason = " ".join(" ".join(args.reason).split())
    if not reason:
        raise UsageError("the reason is empty", "say why, in one line")
    # Everything is read under the lock the decision is saved under, and the report is
    # refreshed under it too: a concurrent sync or decide is refused, never overwritten.
    with port.lock():
        commit = _find(pick.nameable(port).all, args.commit)
        table = port.decisions()
        new = decisions.Decision(commit.sha, args.disposition, reason,
                                 args.by or getpass.getuser(),
                                 clock.now().strftime("%Y-%m-%d"), commit.subject)
        replaced = _replaces(table.get(commit.sha), new, args.force)
        table[commit.sha] = new
        port.keep("decisions", table)  # saved with the report it changes, all or nothing
        result = run_cycle(port, ctx, CycleRequest(decided_now=commit.sha,
                                                   save_decisions=True))
        if result.nothing:  # no report to write: the decision alone
            decisions.save(port.decisions_path, table)
    _say(ctx, new, replaced, port.rel(result.path))
    return 0


def _say(ctx: Context, new: decisions.Decision, replaced: decisions.Decision | None,
         report: str) -> None:
    ctx.emit_json({"sha": new.sha, "disposition": new.disposition, "reason": new.reason,
                   "by": new.by, "report": report,
                   "replaced": None if replaced is None else {
                       "disposition": replaced.disposition, "reason": replaced.reason,
                       "by": replaced.by, "at": replaced.at}})
    if replaced is not None:
        ctx.note(f"replaced the earlier decision {replaced.disposition}: {replaced.reason!r} "
                 f"(by {replaced.by or '?'} on {replaced.at or '?'})")
    ctx.say(f"{short(new.sha)} {new.disposition}: {new.reason} (report {report})")
