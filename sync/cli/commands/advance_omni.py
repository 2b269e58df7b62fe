"""`advance-omni`: move the omni oracle's pin, only with a proof of isolation.

Advancing the omni pin leaves the vLLM-side binding grids alone PROVIDED the omni
oracle lives in its own virtualenv and touched neither `$VLLM_SOURCE` nor the
core environment (protocol §Rules). The proof is the one `oracle build`/`verify`
recorded for that omni commit; without it, or with a failed check, the advance is
refused and reported as a core sync cycle.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from sync.cli.context import Context, add_json
from sync.infra.errors import BlockedCycle, IdentityMismatch, UsageError
from sync.records import events, oraclefile
from sync.steps.advance import txn
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import isolation, oracle

OMNI = "vllm-omni"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advance-omni", help="step 7: advance the omni oracle's pin (needs the "
                       "isolation proof)", description="Move .agents/oracles/vllm-omni.md to "
                       "COMMIT from the measured omni oracle, after proving it never touched the "
                       "core environment or $VLLM_SOURCE; otherwise refuse it as a core cycle.")
    p.add_argument("commit", help="the omni commit (SHA or ref in $VLLM_OMNI_SOURCE)")
    p.add_argument("--oracle", default=OMNI, help=f"omni oracle id (default: {OMNI})")
    p.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if oracle.is_core(args.oracle):
        raise UsageError("advance-omni moves an omni oracle, not the core pin",
                         "use 'upstream-sync advance' for the core pin")
    prefs = port.preferences()
    commit = oracle.resolve_commit(port, prefs, args.oracle, args.commit)
    proof = isolation.require(port, args.oracle, commit)
    v = oracle_verify.verify(port, prefs, args.oracle, commit)
    if not v.ok:
        for m in v.mismatches:
            print(f"mismatch: {m}", file=ctx.out)
        raise IdentityMismatch(f"oracle {args.oracle} at {commit[:10]} fails verification",
                               "rebuild it, then run advance-omni again")
    runtime = v.probe.runtime_version
    if runtime is None:
        raise BlockedCycle("the omni oracle reports no version", "rebuild it")
    of = oracle.oracle_file(port, args.oracle)
    core_pin = port.pin_record().pin.commit
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    label = runtime.partition("+")[0]
    new_text = oraclefile.render(of, pin=commit, pin_label=label, pinned_on=today)
    checks = [c.op for c in proof.checks]
    both = {"omni_commit": commit, "vllm_commit": v.identity.get("vllm_commit"),
            "core_pin": core_pin}
    if args.dry_run:
        print(f"dry run: would move {port.rel(of.path)} {of.pin[:10]} → {commit[:10]} "
              f"({label}); ran against vLLM {both['vllm_commit']}", file=ctx.out)
        return 0
    ev_path, ev_bytes = events.staged(port, "omni-advance", pin_before=of.pin, pin_after=commit,
                                      report="", detail=json.dumps({**both, "isolation_checks":
                                                                    checks}, sort_keys=True))
    with port.lock():
        txn.commit(port.sync_dir, {of.path: new_text.encode(), ev_path: ev_bytes})
    if ctx.json:
        ctx.emit_json({"advanced": True, "oracle": args.oracle, "pin_before": of.pin,
                       "pin_after": commit, "pin_label": label, **both,
                       "isolation_checks": checks,
                       "event": port.rel(ev_path)})
    else:
        print(f"advanced {args.oracle} {of.pin[:10]} → {commit[:10]} ({label}); isolation "
              f"proven ({', '.join(checks)}); labelled with omni "
              f"{commit[:10]} and vLLM {str(both['vllm_commit'])[:10]}", file=ctx.out)
    return 0
