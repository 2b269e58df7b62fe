"""`advance` (step 7): advance the parity pin from the measured oracle, or stall the cycle."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any, NoReturn

from sync.cli.context import Context, add_json
from sync.infra import txn
from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.port import Port
from sync.records import events
from sync.steps.advance import advance, synccommit
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advance", help="step 7: advance the parity pin to the target (all or "
                       "nothing), or stall the cycle", description="Check every "
                       "precondition; then rewrite every pin surface from the measured oracle "
                       "(the PARITY PIN paragraph from what was measured), carry the open items "
                       "over, fast-forward the reference checkout, append a state event and mark "
                       "the report ADVANCED. A refused advance writes nothing (exit 6); "
                       "--stall records the cycle as STALLED instead.")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    what.add_argument("--stall", action="store_true",
                      help="stall the cycle: mark its report STALLED with the unmet "
                      "preconditions, carry its open items over, append one stall event")
    p.add_argument("--commit", action="store_true",
                   help="commit the cycle's sync records (refused when other paths are staged)")
    p.add_argument("--release-label", help="release label for the PARITY PIN paragraph "
                   "(default: the target's tag, else the oracle's measured version)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if args.commit:
        synccommit.require_git(port)
    # Preconditions, plan and writes under one lock: what is written is what was read.
    with contextlib.nullcontext() if args.dry_run else port.lock():
        return _advance(args, ctx, port)


def _advance(args: argparse.Namespace, ctx: Context, port: Port) -> int:
    unmet, measured = advance.preconditions(port, ctx, release_label=args.release_label)
    if args.stall:
        return _stall(ctx, unmet, commit=args.commit)
    if unmet:
        _refuse(ctx, unmet + _commit_owed(port, commit=args.commit),
                _left_while_unmet(port))
    p = advance.plan(port, measured)
    kept = advance.flashinfer_kept(measured)
    if kept is not None:
        ctx.note(f"flashinfer_version stays {kept}: the oracle at the target has no "
                 "FlashInfer to measure")
    left = advance.left_behind(port, p.old.commit, p.new.commit)
    _warn(ctx, left, p.new.commit)
    if args.dry_run:
        return _dry_run(ctx, p, measured, left)
    synccommit.refuse(port, args.commit, p.writes)
    with port.lock():
        if events.staged(port, "advance")[0] != p.event:
            raise BlockedCycle("another run appended a state event meanwhile", "run again")
        txn.commit(port.sync_dir, p.writes)
    how = advance.fast_forward(port, p.new.commit)
    done = _git_commit(port, p) if args.commit else None
    _print(ctx, p, done, how, left)
    return 0


def _commit_owed(port: Port, *, commit: bool) -> list[str]:
    """With `--commit`, the advance to the pin whose records a killed run wrote and never
    committed: the refusal says what commits them (running again only said the cycle had
    advanced)."""
    evs = events.load_all(port) if commit else []
    last = evs[-1] if evs else None
    if last is None or last.kind != "advance" or last.pin_after != port.pin_record().pin.commit:
        return []
    line = synccommit.owed(port, last.path)
    return [] if line is None else [f"the advance to {short(last.pin_after)}: {line}"]


def _dry_run(ctx: Context, p: advance.Plan, m: advance.Measured,
             left: advance.LeftBehind) -> int:
    diff = advance.diff(p, ctx.port)
    said = (f"dry run: would advance {short(p.old.commit)} → {short(p.new.commit)}; nothing "
            "written")
    rw = m.rewrite
    ctx.emit_json({"advanced": False, "dry_run": True, "pin_before": p.old.commit,
                   "pin_after": p.new.commit, "runtime_version": p.new.runtime_version,
                   "report": ctx.port.rel(p.report),
                   "files": sorted(ctx.port.rel(k) for k in p.writes), "diff": diff,
                   "paragraph": rw.paragraph if rw else None,
                   "dropped": list(rw.dropped) if rw else [], "left_behind": left.doc()})
    if not ctx.json:
        ctx.text.write(diff)
        for claim in rw.dropped if rw else ():
            ctx.say(f"dropped from the PARITY PIN paragraph: {claim}")
        ctx.say(said)
    return 0


def _print(ctx: Context, p: advance.Plan, done: synccommit.Committed | None, how: str,
           left: advance.LeftBehind) -> None:
    port = ctx.port
    ctx.emit_json({"advanced": True, "pin_before": p.old.commit, "pin_after": p.new.commit,
                   "runtime_version": p.new.runtime_version, "report": port.rel(p.report),
                   "event": port.rel(p.event), **synccommit.as_doc(done), "reference": how,
                   "files": sorted(port.rel(k) for k in p.writes), "left_behind": left.doc()})
    if ctx.json:
        return
    ctx.say(f"advanced the parity pin {short(p.old.commit)} → {short(p.new.commit)} "
            f"({p.new.runtime_version}); {len(p.writes)} files; event {port.rel(p.event)}; "
            f"reference checkout {how}")
    synccommit.tell(done, ctx.say, ctx.note)


def _warn(ctx: Context, left: advance.LeftBehind, target: str, *, listed: bool = True) -> None:
    for line in left.lines(target, listed=listed):
        ctx.note(line)


def _left_while_unmet(port: Port) -> tuple[advance.LeftBehind, str] | None:
    """What the open cycle's advance would leave behind, said with the unmet lines too: it
    is work for the same session as theirs (walk-s13 U6). None when there is no open
    cycle, or its checkout cannot be read (an unmet line then says why)."""
    c = port.live_cycle()
    if c is None:
        return None
    try:
        return advance.left_behind(port, c.pin, c.target), c.target
    except SyncError:
        return None


def _refuse(ctx: Context, unmet: list[str],
            left: tuple[advance.LeftBehind, str] | None = None) -> NoReturn:
    """Report what is unmet (after what the advance would leave behind) and exit 6; nothing
    is written (stalling is `--stall`)."""
    doc: dict[str, object] = {"advanced": False, "unmet": unmet}
    if left is not None:
        _warn(ctx, *left, listed=False)
        doc["left_behind"] = left[0].doc()
    ctx.emit_json(doc)
    for line in unmet:
        ctx.say(f"unmet: {line}")
    raise BlockedCycle(f"the advance is refused: {len(unmet)} unmet precondition(s)",
                       "fix each 'unmet' line, then run advance again (or 'advance --stall' "
                       "to record the cycle as stalled with them)")


def _stall(ctx: Context, unmet: list[str], *, commit: bool) -> int:
    port = ctx.port
    if not unmet:
        raise UsageError("every precondition holds: there is nothing to stall",
                         "run 'upstream-sync advance'")
    synccommit.refuse(port, commit, {})
    s = advance.stall(port, ctx, unmet)
    if s is None:
        raise UsageError("nothing to stall: " + unmet[0], "fetch a new target and sync")
    done = None
    if commit:
        done = synccommit.commit(port, {}, wrote=s.writes, message=synccommit.Commit(
            f"sync(upstream): stall the cycle to {short(port.open_cycle().target)}",
            f"Report: {port.rel(s.report)}\nUnmet: {len(unmet)}\nCarried over: {s.carried}"))
    doc: dict[str, Any] = {"stalled": True, "report": port.rel(s.report), "unmet": unmet,
                           "event": port.rel(s.event) if s.event else None,
                           "carried": s.carried, **synccommit.as_doc(done)}
    ctx.emit_json(doc)
    for line in unmet:
        ctx.say(f"unmet: {line}")
    ctx.say(f"stalled the cycle: {port.rel(s.report)} is STALLED with {len(unmet)} unmet "
            f"precondition(s); {s.carried} item(s) carried over; "
            + (f"event {port.rel(s.event)}" if s.event else "its stall was recorded already"))
    synccommit.tell(done, ctx.say, ctx.note)
    return 0


def _git_commit(port: Port, p: advance.Plan) -> synccommit.Committed | None:
    gates_line = ", ".join(f"{g.name} {g.status}" for g in port.gates(p.target))
    return synccommit.commit(port, p.writes, synccommit.Commit(
        f"sync(upstream): advance parity pin {short(p.old.commit)} → {short(p.new.commit)}",
        f"Range: {p.old.commit}..{p.new.commit}\nReport: {port.rel(p.report)}\n"
        f"Gates: {gates_line or 'none configured'}"))
