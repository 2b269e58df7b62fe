"""`ledger add` (step 5): append one parity-ledger row; rows are never edited."""

from __future__ import annotations

import argparse
import re
from datetime import datetime

from sync.cli.context import Context, Rewrite, add_json, refreshed_with
from sync.infra import clock
from sync.infra.errors import UsageError
from sync.port import Port
from sync.records import cycle, ledger
from sync.upstream import gitio, history
from sync.upstream.gitio import short

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ledger", help="step 5: append a parity-ledger row",
                       description="Parity ledger: rows are appended, never edited.")
    lsub = p.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    a = lsub.add_parser("add", help="append one row to the ledger table",
                        description="Append one row: 'DATE / `COMMIT`' | WHAT | "
                        "'vllm#N, ... (`path`, ...) TEXT' | STATUS. '|' and newlines in values "
                        "are escaped; existing rows are never touched.")
    a.add_argument("--commit", required=True, help="the port commit that ports it (7-40 hex)")
    a.add_argument("--what", required=True, help="what the port change does")
    a.add_argument("--pr", type=int, action="append", default=[], metavar="N",
                   help="upstream PR number (repeatable): written as vllm#N")
    a.add_argument("--path", action="append", default=[], metavar="P",
                   help="upstream path (repeatable)")
    a.add_argument("--upstream", metavar="TEXT",
                   help="further upstream-equivalent text (e.g. '@ `sha`')")
    a.add_argument("--status", required=True, help="parity status (e.g. '✅ goldens "
                   "bit-identical')")
    a.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    a.add_argument("--outside-range", action="store_true",
                   help="accept a --pr (or a SHA in --upstream) that is not in the open "
                   "cycle's range (nor carried into it): a deliberate row, e.g. a hot-fix "
                   "port ahead of the pin")
    add_json(a)
    a.set_defaults(func=run)


def upstream_cell(prs: list[int], paths: list[str], text: str | None) -> str:
    """`vllm#1, vllm#2 (`a.py`, `b.py`) text`: the shape of the real ledger's column (a PR
    the text names already is not written twice)."""
    parts = []
    prs = [n for n in prs if n not in ledger.pr_refs(text or "")]
    if prs:
        parts.append(", ".join(f"vllm#{n}" for n in dict.fromkeys(prs)))
    if paths:
        quoted = ", ".join(f"`{p}`" for p in dict.fromkeys(paths))
        parts.append(f"({quoted})" if prs else quoted)
    if text and text.strip():
        parts.append(" ".join(text.split()))
    return " ".join(parts)


def _date(given: str | None) -> str:
    date = given or clock.now().strftime("%Y-%m-%d")
    if not _DATE.fullmatch(date):
        raise UsageError(f"--date {date!r} is not YYYY-MM-DD", "give a date like 2026-08-13")
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise UsageError(f"--date {date!r} is not a calendar date", "give a real date") from None
    return date


def _cells(args: argparse.Namespace) -> tuple[str, str, str, str]:
    """The new row's four cells, from the command line (refused when one is unusable)."""
    date = _date(args.date)
    commit = args.commit.strip()
    if not _COMMIT.fullmatch(commit):
        raise UsageError(f"--commit {commit!r} is not a commit SHA (7-40 lowercase hex)",
                         "give the port commit that ports the change")
    if any(n <= 0 for n in args.pr):
        raise UsageError("--pr must be a positive PR number", "give the upstream PR number")
    up = upstream_cell(args.pr, args.path, args.upstream)
    if not up:
        raise UsageError("the upstream equivalent is empty",
                         "give --pr N and/or --path P (and optionally --upstream TEXT)")
    return (f"{date} / `{commit}`", args.what, up, args.status)


def _in_range(port: Port, prs: list[int], shas: list[str]) -> None:
    """Every PR, and every commit the text names by a SHA, is one of the open cycle's range
    or carried into it (a SHA may be the pin or the target too); else refused: a row is
    never edited, and what it names is what it ports."""
    c = port.live_cycle()
    if c is None:
        named = f"vllm#{prs[0]}" if prs else f"`{shas[0]}`"
        last = port.cycle()
        closed = f" (the last one, to {short(last.target)}, is closed)" if last else ""
        raise UsageError(f"no sync cycle is open{closed}, so {named} is in no cycle's range",
                         "run 'upstream-sync sync' to open one, or pass --outside-range for "
                         "a deliberate row")
    missing = _unknown(port, c, prs, shas)
    if missing:
        listed = ", ".join(missing)
        raise UsageError(f"{listed} {'is' if len(missing) == 1 else 'are'} not in the cycle's "
                         f"range {short(c.pin)}..{short(c.target)} (nor carried into it)",
                         "check the PR number or SHA against the report, or pass "
                         "--outside-range for a deliberate row")


def _unknown(port: Port, c: cycle.Cycle, prs: list[int], shas: list[str]) -> list[str]:
    """The PRs (`vllm#N`) and SHAs (`` `sha` ``) that name no commit of the range, none
    carried into it, and (a SHA) neither the pin nor the target."""
    pin = port.pin_record().pin.commit
    commits = history.log_range(port.reference(), pin, c.target)
    carried = port.carried()
    known = {x.pr for x in commits} | {x.pr for x in carried.values()}
    full = [x.sha for x in commits] + list(carried) + [pin, c.target]
    return ([f"vllm#{n}" for n in dict.fromkeys(prs) if n not in known]
            + [f"`{s}`" for s in _commit_words(port, shas)
               if not any(f.startswith(s) for f in full)])


def _commit_words(port: Port, words: list[str]) -> list[str]:
    """Of the hex words a text holds, those that name commits: each that resolves to one in
    the reference checkout, and each short one (7-12, with a letter: the form rows write a
    SHA in) that resolves to nothing, a mistyped SHA. A number or a digest is neither."""
    words = list(dict.fromkeys(words))
    rows = gitio.batch_check(port.reference(), words)
    return [w for w, row in zip(words, rows, strict=True)
            if (row is not None and row[1] == "commit")
            or (row is None and len(w) <= 12 and not w.isdigit())]


def _port_has(port: Port, commit: str) -> bool:
    """Whether the port's own repository has `commit` (True when the port is not one)."""
    if gitio.work_tree_prefix(port.root) is None:  # a monorepo's subfolder is in one
        return True
    probe = gitio.run(port.root, ["cat-file", "-e", f"{commit}^{{commit}}"], check=False)
    return probe.returncode == 0


def _notes(port: Port, commit: str, bad: list[str], earlier: set[int]) -> list[str]:
    """What to check about the row just appended (rows are never edited)."""
    out = []
    if bad:
        out.append(f"note: {len(bad)} earlier ledger row(s) are malformed (first: "
                   f"{bad[0].split(': ledger row')[0]}); 'upstream-sync check' lists them")
    if not _port_has(port, commit):
        out.append(f"warning: {commit} is not a commit of the port repository: the row names "
                   "the port commit that ports the change (a typo, or not committed yet?) — "
                   "rows are never edited, so check it before committing the ledger")
    if earlier:
        out.append(f"note: earlier ledger rows already name these PRs (lines "
                   f"{', '.join(str(x) for x in sorted(earlier))}); rows are never edited")
    return out


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    cells = _cells(args)
    text = args.upstream or ""
    prs = [*args.pr, *sorted(ledger.pr_refs(text))]  # a PR in the text is a PR the row ports
    shas = ledger.sha_words(text)
    if (prs or shas) and not args.outside_range:
        _in_range(port, prs, shas)
    path = port.root / port.config.ledger
    rel = port.rel(path)
    with port.lock():
        table = ledger.load(path, rel=rel)
        earlier = {r.line for n in args.pr for r in table.rows
                   if re.search(rf"vllm#{n}\b", r.text)}
        text, row = ledger.appending(path, cells, rel=rel)
        data = text.encode("utf-8")
        # Its carry-over reads the ledger, as decide does: the row and the report it changes
        # land together or not at all.
        report = refreshed_with(port, ctx, Rewrite(path, data, "ledger",
                                                   lambda: port.ledger_of(data)))
    for line in _notes(port, args.commit.strip(), ledger.malformed_findings(table, rel=rel),
                       earlier):
        ctx.note(line)
    if ctx.json:
        ctx.emit_json({"ledger": rel, "row": row, "cells": list(cells), "report": report})
    else:
        ctx.say(f"{rel}: appended {row}" + (f" (report {report})" if report else ""))
    return 0
