"""`advance-omni` (step 7): move the omni oracle's pin, only with a proof of isolation
(see `sync.steps.advance.omni`)."""

from __future__ import annotations

import argparse
import contextlib

from sync.cli.context import Context, add_json
from sync.infra import txn
from sync.infra.errors import IdentityMismatch, UsageError
from sync.port import Port
from sync.steps.advance import omni
from sync.steps.verify import isolation, oracle
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advance-omni", help="step 7: advance the omni oracle's pin (needs the "
                       "isolation proof)", description="Move .agents/oracles/vllm-omni.md to "
                       "COMMIT from the measured omni oracle, after proving it never touched the "
                       "core environment or $VLLM_SOURCE; otherwise refuse it as a core cycle.")
    p.add_argument("commit", help="the omni commit (SHA or ref in $VLLM_OMNI_SOURCE)")
    p.add_argument("--oracle", default=omni.OMNI, help=f"omni oracle id (default: {omni.OMNI})")
    p.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    p.add_argument("--allow-behind", action="store_true",
                   help="move the pin back to a commit behind it (an ancestor of it); without "
                   "it such a commit is refused")
    p.add_argument("--allow-divergent", action="store_true",
                   help="accept a commit off the pin's line (neither after it nor behind it: "
                   "a side branch, a force-push); without it such a commit is refused")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if oracle.is_core(args.oracle):
        raise UsageError("advance-omni moves an omni oracle, not the core pin",
                         "use 'upstream-sync advance' for the core pin")
    # Measured, planned and written under one lock: what is written is what was read.
    with contextlib.nullcontext() if args.dry_run else port.lock():
        return _advance(args, ctx, port)


def _advance(args: argparse.Namespace, ctx: Context, port: Port) -> int:
    m = omni.measure(port, args.oracle, args.commit, store=not args.dry_run,
                     allow_behind=args.allow_behind, allow_divergent=args.allow_divergent)
    if not m.verification.ok:
        ctx.emit_json({"advanced": False, "oracle": args.oracle, "commit": m.commit,
                       "mismatches": [str(x) for x in m.verification.mismatches]})
        for mismatch in m.verification.mismatches:
            ctx.say(f"mismatch: {mismatch}")
        raise IdentityMismatch(f"oracle {args.oracle} at {short(m.commit)} fails verification",
                               "rebuild it, then run advance-omni again")
    a = omni.plan(port, m)
    before, commit = a.before, a.commit
    vllm = a.labels["vllm_commit"]
    ran_against = short(vllm) if vllm else "absent"  # no vLLM in the omni env: as verify says
    if args.dry_run:
        check = m.verification.isolation_check
        ctx.emit_json({"advanced": False, "dry_run": True, "oracle": args.oracle,
                       "pin_before": before.pin, "pin_after": commit, "pin_label": a.label,
                       **a.labels, "file": port.rel(before.path),
                       "would_record": {"isolation": _check_doc(check)}})
        ctx.say(f"dry run: would record isolation check {_check_line(check)}")
        ctx.say(f"dry run: would move {port.rel(before.path)} {short(before.pin)} → "
              f"{short(commit)} ({a.label}); ran against vLLM {ran_against}")
        return 0
    ev_path, writes = a.staged(port)
    with port.lock():
        txn.commit(port.sync_dir, writes)
    if ctx.json:
        ctx.emit_json({"advanced": True, "oracle": args.oracle, "pin_before": before.pin,
                       "pin_after": commit, "pin_label": a.label, **a.labels,
                       "isolation_checks": list(a.checks),
                       "event": port.rel(ev_path)})
    else:
        ctx.say(f"advanced {args.oracle} {short(before.pin)} → {short(commit)} ({a.label}); "
              f"isolation proven ({', '.join(a.checks)}); labelled with omni "
              f"{short(commit)} and vLLM {ran_against}")
    return 0


def _check_doc(check: isolation.Check | None) -> dict[str, object] | None:
    """The isolation check a dry run measured and did not record (JSON)."""
    if check is None:
        return None
    return {"op": check.op, "status": check.status, "core_envs": list(check.core_after),
            "problems": list(check.problems)}


def _check_line(check: isolation.Check | None) -> str:
    """The isolation check a dry run measured and did not record (text)."""
    if check is None:
        return "none (no omni watch)"
    if check.problems:
        return f"{check.op}: {check.status} ({check.problems[0]})"
    noun = "environment" if len(check.core_after) == 1 else "environments"
    return f"{check.op}: {check.status} (core {noun} {', '.join(check.core_after)} unchanged)"
