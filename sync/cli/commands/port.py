"""Step 5 commands: `queue`, `bump-headers`, `ledger add`, `inventory annotate`, `audit`.

The protocol's rules become commands here: ledger and inventory updates are part
of the cycle, per-file pins move to the target only by rewriting their SHA
tokens, and a per-file pin is never behind without a ledger note.
"""

from __future__ import annotations

import argparse
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sync.cli import Context, add_json
from sync.headers import citations as headers
from sync.infra.atomic import port_lock, read_text, write_text
from sync.infra.errors import CheckFailed, MalformedRecord, UsageError
from sync.port import Port
from sync.records import cycle, inventory, ledger
from sync.steps import audit, bump, surface
from sync.steps import queue as workqueue
from sync.steps.classify import Entry
from sync.upstream import gitio
from sync.upstream.fetch import preferences

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("queue", help="step 5: the PORT-NOW worklist with per-file pins and diffs",
                       description="List the open cycle's PORT-NOW items in upstream order: the "
                       "port files, their per-file pins, and per upstream path the diff to read "
                       "(git diff <file-pin>..TARGET -- <path>) with its diffstat.")
    p.add_argument("--patch", metavar="DIR", type=Path,
                   help="also write each item's upstream diff to DIR/NNN-<sha>-vllm<PR>.patch")
    add_json(p)
    p.set_defaults(func=run_queue)

    p = sub.add_parser("bump-headers", help="step 5: move files' per-file pins to the target",
                       description="Rewrite only the SHA token(s) of each file's header "
                       "citations to the target (default: the open cycle's target); every "
                       "other byte is kept. Refuses ambiguous headers, citations ahead of the "
                       "target and paths the target no longer has; a refusal writes nothing.")
    p.add_argument("files", nargs="+", metavar="FILE", help="ported files to bump")
    p.add_argument("--to", metavar="SHA", help="upstream commit to bump to (default: the cycle "
                   "target)")
    p.add_argument("--check", action="store_true",
                   help="list what would change and write nothing")
    add_json(p)
    p.set_defaults(func=run_bump)

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
    add_json(a)
    a.set_defaults(func=run_ledger_add)

    p = sub.add_parser("inventory", help="step 5: annotate INVENTORY items in the inventory",
                       description="Porting inventory annotations.")
    isub = p.add_subparsers(dest="inventory_command", metavar="ACTION", required=True)
    a = isub.add_parser("annotate", help="record (vllm#N) and a tier for an INVENTORY item",
                        description="Record '(vllm#N)' on the inventory row citing the same "
                        "upstream path, or else as a bullet in this cycle's INVENTORY section "
                        "(inserted before §9).")
    a.add_argument("--pr", type=int, required=True, metavar="N", help="upstream PR number")
    a.add_argument("--tier", required=True, type=str.upper, choices=inventory.TIERS)
    a.add_argument("--path", action="append", default=[], metavar="P",
                   help="upstream path (repeatable; default: the report entry's paths)")
    a.add_argument("--note", help="a short note kept with the reference")
    a.add_argument("--row", type=int, metavar="LINE",
                   help="annotate the row at LINE (when several rows cite the path)")
    add_json(a)
    a.set_defaults(func=run_annotate)

    p = sub.add_parser("audit", help="step 5: every ported file's per-file pin status",
                       description="Audit per-file pins against the parity pin: at-pin, behind, "
                       "ahead, not-upstream, original, no-header; behind without a ledger note "
                       "is a finding. Counts come with a positive control.")
    add_json(p)
    p.set_defaults(func=run_audit)


def _upstream(port: Port) -> tuple[gitio.Reference, str]:
    prefs = preferences(port)
    return prefs.reference(), f"{prefs.remote}/{prefs.branch}"


# -- queue ------------------------------------------------------------------------------------


def run_queue(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = _upstream(port)
    if gitio.resolve(ref, upstream) is None:
        upstream = cycle.require(port).target
    patch_dir: Path | None = args.patch
    if patch_dir is not None:
        patch_dir = patch_dir.expanduser().resolve()
        if patch_dir.exists() and not patch_dir.is_dir():
            raise UsageError(f"--patch {patch_dir} is not a directory", "give a directory")
    q = workqueue.build(port, ref, upstream, patch_dir=patch_dir)
    for n in q.notes:
        ctx.note(f"note: {n}")
    if ctx.json:
        ctx.emit_json(workqueue.to_json(q))
    else:
        for line in workqueue.render(q):
            print(line, file=ctx.out)
    return 0


# -- bump-headers -----------------------------------------------------------------------------


def _file_arg(port: Port, arg: str) -> tuple[Path, str]:
    given = Path(arg).expanduser()
    candidates = [given] if given.is_absolute() else [Path.cwd() / given, port.root / given]
    for c in candidates:
        if c.is_file():
            real = c.resolve()
            try:
                rel = real.relative_to(port.root.resolve()).as_posix()
            except ValueError:
                raise UsageError(f"{arg} is not inside the port {port.root}",
                                 "bump only the port's own files") from None
            return real, rel
    raise UsageError(f"no such file: {arg}", "give paths to ported files (relative to the "
                     "current directory or the port root)")


def run_bump(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = _upstream(port)
    files = [_file_arg(port, a) for a in dict.fromkeys(args.files)]
    rev = args.to
    if rev is None:
        rev = cycle.require(port).target
    gitio.check_rev(rev)
    target = bump.resolve_target(ref, rev, upstream)
    written = 0
    if args.check:
        plans = bump.plan(ref, target, upstream, files)
    else:
        # Plan under the lock too: what is written must be what was read.
        with port_lock(port.sync_dir / ".lock"):
            plans = bump.plan(ref, target, upstream, files)
            if not any(p.refusal is not None for p in plans):
                written = bump.write(plans)
    refused = [p for p in plans if p.refusal is not None]
    if ctx.json:
        ctx.emit_json({
            "target": target, "check": bool(args.check), "written": written,
            "files": [{
                "path": p.rel, "status": p.status,
                "reason": None if p.refusal is None else str(p.refusal),
                "changes": [{"line": c.line, "path": c.path, "old": c.old, "new": c.new,
                             "was": c.was} for c in p.changes],
            } for p in plans],
        })
    else:
        verb = "would bump" if args.check or refused else "bumped"
        for p in plans:
            if p.refusal is not None:
                print(f"refused: {p.refusal}", file=ctx.out)
            elif not p.changes:
                print(f"{p.rel}: already at {target[:10]}", file=ctx.out)
            for c in p.changes:
                print(f"{p.rel}:{c.line}: {verb} {c.path} {c.old} → {c.new} (was {c.was})",
                      file=ctx.out)
    if refused:
        first = refused[0].refusal
        assert first is not None
        if len(refused) == 1:
            raise type(first)(f"{first.message}; nothing was written", first.fix)
        raise type(first)(f"{len(refused)} of {len(plans)} files cannot be bumped safely "
                          "(reasons above); nothing was written",
                          "fix those headers by hand or leave the files out")
    return 0


# -- ledger add -------------------------------------------------------------------------------


def upstream_cell(prs: list[int], paths: list[str], text: str | None) -> str:
    """`vllm#1, vllm#2 (`a.py`, `b.py`) text`: the shape of the real ledger's column."""
    parts = []
    if prs:
        parts.append(", ".join(f"vllm#{n}" for n in dict.fromkeys(prs)))
    if paths:
        quoted = ", ".join(f"`{p}`" for p in dict.fromkeys(paths))
        parts.append(f"({quoted})" if prs else quoted)
    if text and text.strip():
        parts.append(" ".join(text.split()))
    return " ".join(parts)


def run_ledger_add(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    date = args.date or datetime.now(UTC).strftime("%Y-%m-%d")
    if not _DATE.fullmatch(date):
        raise UsageError(f"--date {date!r} is not YYYY-MM-DD", "give a date like 2026-08-13")
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise UsageError(f"--date {date!r} is not a calendar date", "give a real date") from None
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
    cells = (f"{date} / `{commit}`", args.what, up, args.status)
    path = port.root / port.config.ledger
    rel = port.rel(path)
    with port_lock(port.sync_dir / ".lock"):
        table = ledger.load(path, rel=rel)
        earlier = [r.line for n in args.pr for r in table.rows
                   if re.search(rf"vllm#{n}\b", r.text)]
        row = ledger.append(path, cells, rel=rel)
    if earlier:
        ctx.note(f"note: earlier ledger rows already name these PRs (lines "
                 f"{', '.join(str(x) for x in sorted(set(earlier)))}); rows are never edited")
    if ctx.json:
        ctx.emit_json({"ledger": rel, "row": row, "cells": list(cells)})
    else:
        print(f"{rel}: appended {row}", file=ctx.out)
    return 0


# -- inventory annotate -----------------------------------------------------------------------


def _report_entry(port: Port, c: cycle.Cycle | None, pr: int) -> Entry | None:
    """The open cycle's report entry for vllm#PR (the last, if a revert re-lands it)."""
    if c is None:
        return None
    jpath = workqueue.report_json(port, c)
    if not jpath.exists():
        return None
    try:
        text = read_text(jpath)
    except UnicodeDecodeError:
        raise MalformedRecord("not UTF-8", "run 'upstream-sync sync' to rewrite it",
                              path=port.rel(jpath)) from None
    _pin, _target, entries = workqueue.entries_from_json(text, path=port.rel(jpath))
    hits = [e for e in entries if e.pr == pr]
    return hits[-1] if hits else None


def run_annotate(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if args.pr <= 0:
        raise UsageError("--pr must be a positive PR number", "give the upstream PR number")
    c = cycle.load(port)
    entry = _report_entry(port, c, args.pr)
    if entry is not None and entry.disposition != "INVENTORY":
        raise UsageError(f"the cycle's report lists vllm#{args.pr} as {entry.disposition}, "
                         "not INVENTORY", f"decide it INVENTORY first (upstream-sync decide "
                         f"#{args.pr} INVENTORY <reason>)")
    paths: list[str] = list(dict.fromkeys(args.path)) or (
        list(entry.upstream_paths) if entry else [])
    if entry is None and not paths and args.row is None:
        raise UsageError(f"vllm#{args.pr} is not in the open cycle's report and no --path was "
                         "given", "pass --path P (the upstream path it adds or changes)")
    file = port.root / port.config.inventory
    rel = port.rel(file)
    if not file.exists():
        raise MalformedRecord("the porting inventory does not exist",
                              "create it (tiers T0..T3 and a '## 9. Deviations' section)",
                              path=rel)
    title: str | None = None
    intro = ""
    if c is not None:
        title = inventory.cycle_title(c.frozen_at[:10], c.target)
        report_md = workqueue.report_json(port, c).with_suffix(".md")
        link = Path(os.path.relpath(report_md, file.parent)).as_posix()
        intro = (f"INVENTORY items of the sync cycle to `{c.target[:10]}` (report: "
                 f"[{report_md.name}]({link})), recorded by `upstream-sync inventory annotate`. "
                 "Move an item into its tier's list when it is scheduled.")
    with port_lock(port.sync_dir / ".lock"):
        inv = inventory.read(file, rel=rel)
        result = inventory.annotate(inv, pr=args.pr, tier=args.tier, paths=paths,
                                    subject=entry.subject if entry else None, note=args.note,
                                    section_title=title, intro=intro, row_line=args.row)
        if result.where != "already":
            write_text(file, result.text)
    if ctx.json:
        ctx.emit_json({"inventory": rel, "pr": args.pr, "tier": args.tier,
                       "where": result.where, "line": result.line, "row": result.row})
    elif result.where == "already":
        print(f"{rel}:{result.line}: vllm#{args.pr} is already recorded: {result.row.strip()}",
              file=ctx.out)
    else:
        where = "on the existing row" if result.where == "row" else f"in section '{title}'"
        print(f"{rel}:{result.line}: recorded vllm#{args.pr} {where}: {result.row.strip()}",
              file=ctx.out)
    return 0


# -- audit ------------------------------------------------------------------------------------


def citation_doc(c: headers.Citation, status: str | None) -> dict[str, Any]:
    return {"path": c.path, "sha": c.sha, "status": status, "line": c.line, "lines": c.lines,
            "symbol": c.symbol}


def run_audit(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = _upstream(port)
    pin = port.pin_record().pin.commit
    result = audit.run_audit(port, ref, pin, upstream, surface.build(port))
    summary = audit.summary_lines(result)
    severity = port.config.behind_without_note
    if ctx.json:
        ctx.emit_json({
            "pin": pin, "upstream_ref": upstream,
            "control": {"ok": result.control_ok, "path": audit.CONTROL_PATH},
            "counts": result.counts(),
            "files": [{"path": f.path, "status": f.status, "noted": f.noted,
                       "finding": f.finding,
                       "citations": [citation_doc(c, dict(f.sha_status).get(c.sha or ""))
                                     for c in f.citations]} for f in result.files],
            "findings": [f.path for f in result.findings], "severity": severity,
        })
    else:
        for line in summary.lines:
            print(line, file=ctx.out)
        for f in result.findings:
            print(f"{'error' if severity == 'error' else 'warning'}: {f.path}: behind the parity "
                  "pin with no ledger note — bump the header or add a ledger row naming it",
                  file=ctx.out)
    if not result.control_ok:
        raise CheckFailed("the per-file pin audit's positive control failed (a header citing the "
                          "pin was not counted at-pin): the counts are not trustworthy",
                          "report this; the header probe is broken")
    if severity == "error" and result.findings:
        raise CheckFailed(f"{len(result.findings)} file(s) behind the pin without a ledger note",
                          "bump their headers or add ledger rows naming them")
    return 0
