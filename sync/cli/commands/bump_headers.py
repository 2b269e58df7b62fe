"""`bump-headers` (step 5): move files' per-file pins to the target, byte-exact."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sync.cli.context import Context, add_json
from sync.headers.citations import Header
from sync.infra.errors import SyncError, UsageError
from sync.port import Port
from sync.records import carryover, cycle
from sync.steps import bump, carry, queue, surface
from sync.steps.classify import Entry
from sync.upstream import gitio
from sync.upstream.gitio import short

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bump-headers", help="step 5: move files' per-file pins to the target",
                       description="Rewrite only the SHA token(s) of each file's header "
                       "citations to the target (default: the open cycle's target); every "
                       "other byte is kept. Refuses ambiguous headers, citations ahead of the "
                       "target, SHAs that are no upstream commit and paths the target no "
                       "longer has; a refusal writes nothing. Another oracle's citations are "
                       "never rewritten. Naming a FILE says its upstream changes are "
                       "ported; without FILE, every ported file of the surface, and a file "
                       "whose cited upstream file changed is refused.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="ported files to bump (default: every file with a ported-from header, "
                   "refusing those whose cited upstream file changed)")
    p.add_argument("--to", metavar="SHA", help="upstream commit to bump to (default: the cycle "
                   "target; with --unchanged and no open cycle, the parity pin)")
    p.add_argument("--unchanged", action="store_true",
                   help="bump only headers whose cited upstream files are byte-identical at "
                   "the target (safe without porting anything), all of them in one go; the "
                   "others are skipped, not refused")
    p.add_argument("--check", action="store_true",
                   help="list what would change and write nothing")
    add_json(p)
    p.set_defaults(func=run)


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


def _plans(port: Port, plan: Callable[[], list[bump.FilePlan]],
           check: bool) -> tuple[list[bump.FilePlan], int]:
    """(the plans, files written): nothing is written under `--check` or on any refusal."""
    if check:
        return plan(), 0
    # Plan under the lock too: what is written must be what was read.
    with port.lock():
        plans = plan()
        if any(p.status == "refused" for p in plans):
            return plans, 0
        return plans, bump.write(plans, port.sync_dir)


def _as_json(target: str, check: bool, written: int,
             plans: list[bump.FilePlan]) -> dict[str, Any]:
    return {
        "target": target, "check": check, "written": written,
        "files": [{
            "path": p.rel, "status": p.status,
            "reason": None if p.refusal is None else str(p.refusal),
            "changes": [{"line": c.line, "path": c.path, "old": c.old, "new": c.new,
                         "was": c.was, "content": c.content, "paths": list(c.paths),
                         "changed": list(c.changed)} for c in p.changes],
        } for p in plans],
    }


def _say(ctx: Context, plans: list[bump.FilePlan], target: str, verb: str) -> None:
    for p in plans:
        if p.status == "skipped":
            ctx.say(f"skipped: {p.refusal}")
        elif p.refusal is not None:
            ctx.say(f"refused: {p.refusal}")
        elif p.status == "other-oracle":
            only = ", ".join(p.oracles)
            ctx.say(f"{p.rel}: cites no vLLM SHA to move" + (f" (only {only})" if only else ""))
        elif not p.changes:
            ctx.say(f"{p.rel}: already at {short(target)}")
        for c in p.changes:
            # `was` is the audit's word, against the pin; what changed is up to the target.
            ctx.say(f"{p.rel}:{c.line}: {verb} {_named(c)} {c.old} → {c.new} (against the pin: "
                    f"{c.was}{_changed(c)})")
    counts = {s: sum(1 for p in plans if p.status == s)
              for s in ("bump", "unchanged", "other-oracle", "skipped", "refused")}
    done = "bumped" if verb == "bumped" else "to bump"
    ctx.say(f"{len(plans)} file(s): {counts['bump']} {done}, {counts['unchanged']} "
            f"already at {short(target)}, {counts['other-oracle']} citing no vLLM SHA to move, "
            f"{counts['skipped']} skipped, {counts['refused']} refused")


SHOWN = 3  # changed paths named on one line; the rest are counted


def _named(c: bump.Change) -> str:
    """The path a change is named by, and how many more its one SHA token pins."""
    more = len(c.paths) - 1
    return c.path + (f" (+{more} more cited at this SHA)" if more > 0 else "")


def _changed(c: bump.Change) -> str:
    """What changed up to the target: of one cited file, or which of those one SHA pins."""
    if not c.changed:
        return ""
    if len(c.paths) <= 1:
        return "; changed upstream up to the target"
    names = ", ".join(c.changed[:SHOWN])
    rest = f" and {len(c.changed) - SHOWN} more" if len(c.changed) > SHOWN else ""
    return (f"; changed up to the target: {names}{rest}, {len(c.changed)} of the "
            f"{len(c.paths)} paths this SHA pins")


def _refusal(refusals: list[SyncError], plans: list[bump.FilePlan],
             args: argparse.Namespace) -> SyncError:
    """The one error line: how many were refused (each reason was said once, above). Its
    kind, and so the exit code, is the lowest-coded of the refusals (a header to fix by hand
    before one the cycle blocks), whatever order the files were named in."""
    first = min(refusals, key=lambda e: e.exit_code)
    why = "the reason listed" if len(refusals) == 1 else "each reason listed"
    fix = first.fix if len(refusals) == 1 else "fix those headers by hand or leave the files out"
    safe = sum(p.status == "bump" for p in plans)
    if not (args.files or args.unchanged) and safe and fix:
        # Every ported file at once: the safe part of it is one option away.
        fix += (f", or bump the {safe} safe one{'s' if safe > 1 else ''} alone with "
                "'upstream-sync bump-headers --unchanged'")
    return type(first)(f"{len(refusals)} of {len(plans)} file(s) cannot be bumped safely "
                       f"({why}); nothing was written", fix)


def _all_ported(port: Port, found: dict[str, Header]) -> list[tuple[Path, str]]:
    """Every scanned file whose header is a ported-from header."""
    return [(port.root / rel, rel) for rel, h in found.items() if h.kind == "PORTED"]



def _target_rev(port: Port, args: argparse.Namespace) -> str:
    if args.to is not None:
        return str(args.to)
    c = port.cycle()
    if c is None and args.unchanged:
        return port.pin_record().pin.commit
    return (c or cycle.require(port)).target


def _claimed(port: Port, plans: list[bump.FilePlan]) -> list[str]:
    """For files bumped by name over a changed upstream file: the open cycle's PORT-NOW
    commits that change that file and are not ported yet (no ledger row, as `advance`
    counts it). The bump says each is ported (the header then claims every change up to
    the target), so each is named."""
    changed = {p for plan in plans if plan.status == "bump" for ch in plan.changes
               for p in (ch.changed or ((ch.path,) if ch.content == "changed" else ()))}
    if not changed:
        return []
    refs = carry.ledger_refs(port)
    carried = port.carried()
    return [_claim(e, paths, carried.get(e.sha)) for e in _port_now(port)
            if (paths := sorted(changed & set(e.upstream_paths))) and not carry.ported(e, refs)]


def _claim(e: Entry, paths: list[str], carried: carryover.Carried | None) -> str:
    since = f" (carried since {Path(carried.since).name})" if carried is not None else ""
    return (f"warning: this bump says PORT-NOW `{short(e.sha)}`"
            + (f" vllm#{e.pr}" if e.pr is not None else "") + since
            + f" is ported: it changes {', '.join(paths)} and has no ledger row yet — port it "
            "too (and add its row), or bump after it is ported")


def _port_now(port: Port) -> list[Entry]:
    """The open cycle report's PORT-NOW entries and the PORT-NOW items earlier cycles
    carried into it, as its JSON companion has them (read as `queue` reads it); none when
    there is no report, or one `sync` would rewrite."""
    c = port.live_cycle()
    if c is None:
        return []
    path = queue.report_json(port, c)
    text = port.text(path) or ""
    try:
        entries = [e for key in ("entries", "carried")
                   for e in queue.entries_from_json(text, path=port.rel(path), key=key)[2]]
    except SyncError:
        return []
    first: dict[str, Entry] = {}
    for e in entries:
        if e.disposition == "PORT-NOW":
            first.setdefault(e.sha, e)
    return list(first.values())


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = port.reference(), port.upstream_ref
    found, _ = surface.read_headers(port)
    files = ([_file_arg(port, a) for a in dict.fromkeys(args.files)] if args.files
             else _all_ported(port, found))
    c = port.cycle()
    rev = _target_rev(port, args)
    gitio.check_rev(rev)
    target = bump.resolve_target(ref, rev, upstream, c.target if c else None)
    pin = port.pin_record().pin.commit
    how = bump.How(surface.header_reader(port, found), args.unchanged, named=bool(args.files))
    plans, written = _plans(port, lambda: bump.plan(ref, target, upstream, files, pin, how=how),
                            args.check)
    refusals = [p.refusal for p in plans if p.status == "refused" and p.refusal is not None]
    if ctx.json:
        ctx.emit_json(_as_json(target, bool(args.check), written, plans))
    else:
        _say(ctx, plans, target, "would bump" if args.check or refusals else "bumped")
    if args.files and not refusals:
        for line in _claimed(port, plans):
            ctx.note(line)
    if refusals:
        raise _refusal(refusals, plans, args)
    return 0
