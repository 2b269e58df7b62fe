"""`inventory annotate` (step 5): record an INVENTORY item's (vllm#N) and tier."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from sync.cli.context import Context, Rewrite, add_json, refreshed_with
from sync.infra.atomic import read_record
from sync.infra.errors import MalformedRecord, UsageError
from sync.port import Port
from sync.records import cycle, inventory
from sync.steps import queue as workqueue
from sync.steps.classify import Entry
from sync.upstream.gitio import short

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("inventory", help="step 5: annotate INVENTORY items in the inventory",
                       description="Porting inventory annotations.")
    isub = p.add_subparsers(dest="inventory_command", metavar="ACTION", required=True)
    a = isub.add_parser("annotate", help="record (vllm#N) and a tier for an INVENTORY item",
                        description="Record '(vllm#N)' on the inventory row citing the same "
                        "upstream path (else the row of the tier sharing the most, and at "
                        "least two, distinctive words with the commit's subject), or else as "
                        "a bullet in this cycle's INVENTORY section (inserted before §9).")
    a.add_argument("--pr", type=int, required=True, metavar="N", help="upstream PR number")
    a.add_argument("--tier", required=True, type=str.upper, choices=inventory.TIERS,
                   help="the tier the item belongs to (T0 first): its rows are the ones "
                   "matched by subject, and a row already recording the PR under another "
                   "tier is refused")
    a.add_argument("--path", action="append", default=[], metavar="P",
                   help="upstream path (repeatable; default: the report entry's paths)")
    a.add_argument("--note", help="a short note kept with the reference")
    a.add_argument("--row", type=int, metavar="LINE",
                   help="annotate the row at LINE (when several rows cite the path)")
    add_json(a)
    a.set_defaults(func=run)


def _report_entry(port: Port, c: cycle.Cycle | None, pr: int) -> Entry | None:
    """The open cycle's report entry for vllm#PR (the last, if a revert re-lands it), or the
    item carried into the cycle that it names."""
    if c is None:
        return None
    jpath = workqueue.report_json(port, c)
    if not jpath.exists():
        return None
    text = read_record(jpath, rel=port.rel(jpath))
    _pin, _target, entries = workqueue.entries_from_json(text, path=port.rel(jpath))
    carried = workqueue.entries_from_json(text, path=port.rel(jpath), key="carried")[2]
    hits = [e for e in entries + carried if e.pr == pr]
    return hits[-1] if hits else None


def _paths(args: argparse.Namespace, entry: Entry | None, *, cycle_open: bool) -> list[str]:
    """The upstream paths to annotate: `--path`, else the report entry's."""
    if entry is not None and entry.disposition != "INVENTORY":
        raise UsageError(f"the cycle's report lists vllm#{args.pr} as {entry.disposition}, "
                         "not INVENTORY", f"decide it INVENTORY first (upstream-sync decide "
                         f"#{args.pr} INVENTORY <reason>)")
    paths: list[str] = list(dict.fromkeys(args.path)) or (
        list(entry.upstream_paths) if entry else [])
    if entry is None and not paths and args.row is None:
        where = "in the open cycle's report" if cycle_open else "in a report: no cycle is open"
        raise UsageError(f"vllm#{args.pr} is not {where}, and no --path was given",
                         "pass --path P (the upstream path it adds or changes)")
    return paths


def _section(port: Port, c: cycle.Cycle | None, file: Path) -> tuple[str | None, str]:
    """(title, intro) of the open cycle's INVENTORY section; (None, "") without a cycle."""
    if c is None:
        return None, ""
    report_md = workqueue.report_json(port, c).with_suffix(".md")
    link = Path(os.path.relpath(report_md, file.parent)).as_posix()
    return inventory.cycle_title(c.frozen_at[:10], c.target), (
        f"INVENTORY items of the sync cycle to `{short(c.target)}` (report: "
        f"[{report_md.name}]({link})), recorded by `upstream-sync inventory annotate`. "
        "Move an item into its tier's list when it is scheduled.")


def _say(ctx: Context, args: argparse.Namespace, rel: str, title: str | None,
         result: inventory.Annotation, report: str | None) -> None:
    if ctx.json:
        ctx.emit_json({"inventory": rel, "pr": args.pr, "tier": args.tier,
                       "where": result.where, "line": result.line, "row": result.row,
                       "report": report})
    elif result.where == "already":
        ctx.say(f"{rel}:{result.line}: vllm#{args.pr} is already recorded: {result.row.strip()}")
    else:
        where = "on the existing row" if result.where == "row" else f"in section '{title}'"
        ctx.say(f"{rel}:{result.line}: recorded vllm#{args.pr} {where}: {result.row.strip()}"
                + (f" (report {report})" if report else ""))


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if args.pr <= 0:
        raise UsageError("--pr must be a positive PR number", "give the upstream PR number")
    with port.lock():  # the cycle, its report and the inventory read under the write's lock
        return _annotate(args, ctx, port)


def _annotate(args: argparse.Namespace, ctx: Context, port: Port) -> int:
    c = cycle.load(port)
    entry = _report_entry(port, c, args.pr)
    paths = _paths(args, entry, cycle_open=c is not None)
    file = port.root / port.config.inventory
    rel = port.rel(file)
    if not file.exists():
        raise MalformedRecord("the porting inventory does not exist",
                              "create it (tiers T0..T3 and a '## 9. Deviations' section)",
                              path=rel)
    title, intro = _section(port, c, file)
    inv = inventory.read(file, rel=rel)
    result = inventory.annotate(inv, inventory.Request(
        pr=args.pr, tier=args.tier, paths=paths, subject=entry.subject if entry else None,
        note=args.note, section_title=title, intro=intro, row_line=args.row))
    if result.where == "already" and result.tier not in (None, args.tier):
        raise UsageError(f"{rel}:{result.line}: vllm#{args.pr} is already recorded under "
                         f"{result.tier}, not {args.tier}: {result.row.strip()}",
                         f"a tier changes by moving the row into {args.tier}'s list by hand")
    report = None
    if result.where != "already":
        # Its carry-over reads the inventory, as decide does: the annotation and the report
        # it changes land together or not at all.
        report = refreshed_with(port, ctx, Rewrite(
            file, result.text.encode("utf-8"), "inventory",
            lambda: inventory.parse(result.text, path=rel)))
    _say(ctx, args, rel, title, result, report)
    return 0
