"""`oracle build|probe|verify|adopt|gc` (step 6): isolated oracle environments, identity
checked fail-closed against the records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sync.cli.context import Context, add_json, gate_store
from sync.infra.errors import IdentityMismatch
from sync.steps.verify import adopt as oracle_adopt
from sync.steps.verify import build as oracle_build
from sync.steps.verify import gc as oracle_gc
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import oracle
from sync.steps.verify import probe as oracle_probe
from sync.upstream.gitio import short


def _oracle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--oracle", default=oracle.CORE_ID, metavar="ID",
                   help=f"oracle id (default {oracle.CORE_ID}; e.g. vllm-omni)")
    p.add_argument("--commit", default=None, metavar="SHA|pin|target",
                   help="the oracle's commit: 'pin' (default: the pin block, or the oracle "
                   "file for omni), 'target' (the cycle's frozen target) or a commit")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("oracle", help="step 6: build, probe and verify an oracle environment",
                       description="Oracle environments live in <oracle_home>/<id>-<commit10>, "
                       "outside every checkout; verify compares a probe with the pin block "
                       "(core) or the oracle file (omni), fail-closed.")
    osub = p.add_subparsers(dest="oracle_command", metavar="ACTION", required=True)
    b = osub.add_parser("build", help="install upstream at a commit into a fresh environment",
                        description="Build from a throwaway clone of the source checkout; the "
                        "previous environments stay for rollback.")
    _oracle_args(b)
    once = b.add_mutually_exclusive_group()
    once.add_argument("--rebuild", action="store_true",
                      help="replace an existing environment for the same oracle and commit")
    once.add_argument("--if-missing", action="store_true",
                      help="keep an existing environment (then verify it) instead of refusing")
    add_json(b)
    b.set_defaults(func=run_build)
    pr = osub.add_parser("probe", help="print the oracle's measured identity",
                         description="Run <env>/bin/python -I from outside every checkout "
                         "and report versions, distributions and module location (all of it "
                         "with --json).")
    _oracle_args(pr)
    add_json(pr)
    pr.set_defaults(func=run_probe)
    v = osub.add_parser("verify", help="compare the probe with the records (exit 5 on mismatch)",
                        description="One line per mismatch, then one line naming what is most "
                        "wrong (a forgery, when the mismatches show one). Only the pin and the "
                        "cycle's target are verified; verifying the core oracle at the gate "
                        "target records gate oracle:<id> with the measured identity.")
    _oracle_args(v)
    v.add_argument("--shape-only", action="store_true",
                   help="check an oracle at any other commit for the shape of its identity "
                   "alone (labelled so; never a gate)")
    add_json(v)
    v.set_defaults(func=run_verify)
    a = osub.add_parser("adopt", help="measure an existing environment, verify it and record "
                        "it without rebuilding", description="The environment (a symlink is "
                        "followed) is verified at the pin (or --commit target) exactly as "
                        "verify does; only then is its build record written into it and "
                        "<oracle_home>/<id>-<commit10> linked to it. A refusal writes nothing.")
    a.add_argument("path", metavar="PATH", help="the virtualenv to adopt")
    _oracle_args(a)
    add_json(a)
    a.set_defaults(func=run_adopt)
    g = osub.add_parser("gc", help="drop environments older than the previous pin",
                        description="Never the pin's, the previous pin's or the cycle "
                        "target's; an adopted environment loses only its link.")
    g.add_argument("--oracle", default=oracle.CORE_ID, metavar="ID",
                   help=f"oracle id (default {oracle.CORE_ID})")
    g.add_argument("--dry-run", action="store_true",
                   help="say what would be dropped and what the run would refuse (exit 3 as "
                   "it would), removing nothing")
    add_json(g)
    g.set_defaults(func=run_gc)


def run_build(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    prefs = port.preferences()
    if args.if_missing:
        env = oracle_build.existing(port, prefs, args.oracle, args.commit)
        if env is not None:
            ctx.note(f"oracle {args.oracle} exists: {env} (not rebuilt)")
            if ctx.json:
                ctx.emit_json({"env": str(env), "build": None, "kept": [], "isolation": [],
                               "warnings": []})
            return 0
    built = oracle_build.build(port, prefs, args.oracle, args.commit, rebuild=args.rebuild,
                         note=ctx.note)
    r = built.record
    if ctx.json:
        ctx.emit_json({"env": str(built.env), "build": dict(r.as_doc()),
                       "kept": [str(p) for p in built.kept],
                       "isolation": list(built.isolation), "warnings": list(built.warnings)})
    else:
        ctx.say(f"built oracle {r.oracle} at {short(r.commit)}: {built.env} (build mode "
                f"{r.build_mode}, {r.installer}; log {r.log})")
        for p in built.kept:
            ctx.say(f"kept for rollback: {p}")
        for line in built.warnings:
            ctx.say(f"warning: {line}")
        for line in built.isolation:
            ctx.say(f"isolation: {line}")
    if built.isolation:
        raise IdentityMismatch(
            f"building {r.oracle} changed what the core pin measures itself from "
            f"({len(built.isolation)} problem(s))",
            "an omni advance with this build is a core sync cycle: rebuild the core oracle "
            "and re-validate it as one")
    return 0


def run_probe(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    p = oracle_probe.probe(port, port.preferences(), args.oracle, args.commit)
    if ctx.json:
        ctx.emit_json(p.as_doc())
        return 0
    ctx.say(f"oracle {p.oracle} at {short(p.commit)}: {p.env}")
    ctx.say(f"  runtime version:      {p.runtime_version or 'absent'}"
            + (f" (import failed: {p.import_error})" if p.import_error else ""))
    ctx.say(f"  distribution version: {p.distribution_version or 'absent'} "
            f"({len(p.distributions)} installed{', editable' if p.editable else ''})")
    ctx.say(f"  commit id:            {p.commit_id or 'absent'}")
    ctx.say(f"  FlashInfer:           {p.flashinfer_version or 'absent'}")
    ctx.say(f"  Torch:                {p.torch_version or 'absent'}")
    ctx.say(f"  module:               {p.module_file or 'absent'}")
    ctx.say(f"  build mode:           {p.build.build_mode if p.build else 'no build record'}")
    return 0


def _describe(ident: oracle_verify.Identity) -> str:
    parts = [f"runtime {ident['runtime_version']}",
             f"distribution {ident['distribution_version']}",
             f"FlashInfer {ident['flashinfer_version'] or 'absent'}",
             f"Torch {ident['torch_version'] or 'absent'}",
             f"build mode {ident['build_mode']}"]
    if ident["commit_id"]:
        parts.insert(2, f"commit id {ident['commit_id']}")
    if ident["binaries"]:
        parts.append(f"binaries {ident['binaries']}")
    if not oracle.is_core(ident["oracle"]):
        parts.append(f"against vLLM {ident['vllm_commit'] or ident['vllm_version'] or 'absent'}")
    return ", ".join(parts)


def run_verify(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    prefs = port.preferences()
    # At the gate target the gate oracle:<id> is recorded, the report refreshed with it.
    v = oracle_verify.verify_gate(port, prefs, args.oracle, args.commit,
                                  shape_only=args.shape_only, store=gate_store(port, ctx))
    if ctx.json:
        ctx.emit_json(_verification_doc(v))
    else:
        for m in v.mismatches:
            ctx.say(f"mismatch: {m}")
        if v.ok:
            label = " (shape only: compared with no record)" if v.role == "shape only" else ""
            ctx.say(f"oracle {args.oracle} at {short(v.probe.commit)} verified{label}: "
                  f"{_describe(v.identity)}")
    if not v.ok:
        raise oracle_verify.refusal(args.oracle, v)
    return 0


def _verification_doc(v: oracle_verify.Verification) -> dict[str, Any]:
    return {"ok": v.ok, "role": v.role, "identity": dict(v.identity),
            "verdict": None if v.ok else v.verdict,
            "mismatches": [{"field": m.field, "message": m.message, "kind": m.kind}
                           for m in v.mismatches],
            "probe": v.probe.as_doc()}


def run_adopt(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    done = oracle_adopt.adopt(port, port.preferences(), args.oracle, Path(args.path),
                              args.commit, note=ctx.note)
    v = done.verification
    if ctx.json:
        ctx.emit_json({"env": str(done.env), "adopted": str(done.real),
                       "recorded": done.record is not None, **_verification_doc(v)})
    elif done.record is not None:
        ctx.say(f"adopted {done.real} as oracle {args.oracle} at {short(v.probe.commit)}: "
                f"{done.env}; {_describe(v.identity)}")
    if done.record is None:
        raise oracle_verify.refusal(args.oracle, v, adopting=True)
    return 0


def run_gc(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    entries = oracle_gc.run(port, port.preferences(), args.oracle, dry_run=args.dry_run)
    if ctx.json:
        ctx.emit_json({"dry_run": args.dry_run, "environments": [
            {"env": str(e.env), "commit": e.commit, "drop": e.drop, "why": e.why,
             "link": e.link, "error": str(e.failed) if e.failed else None} for e in entries]})
    else:
        for e in entries:
            ctx.say(e.line(args.dry_run))
        if not entries:
            ctx.say(f"no environments of oracle {args.oracle}")
    failed = oracle_gc.failure(entries)
    if failed is not None:
        raise failed
    return 0


