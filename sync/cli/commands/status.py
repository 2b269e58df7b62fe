"""`status`: the pin, the reference checkout, how far behind upstream, oracle agreement,
disagreeing spans, and the open cycle's blockers."""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from sync.cli import Context, add_json
from sync.infra.atomic import read_text
from sync.infra.errors import EnvironmentUnresolved, SyncError
from sync.records import cycle, oraclefile, spans
from sync.upstream import gitio
from sync.upstream.fetch import preferences


def collect(ctx: Context) -> tuple[dict[str, Any], SyncError | None]:
    port = ctx.port
    record = port.pin_record()
    pin = record.pin
    doc: dict[str, Any] = {"port": str(port.root), "example": port.example,
                           "pin": pin.fields(), "build_suffix": pin.build_suffix}
    problem: SyncError | None = None
    prefs = preferences(port)
    doc["reference"] = None
    doc["behind"] = None
    try:
        ref = prefs.reference()
    except EnvironmentUnresolved as exc:
        problem = exc
        doc["reference"] = {"path": prefs.get("reference_checkout"), "head": None,
                            "shallow": None, "pin_present": None, "error": str(exc)}
        # A refused checkout that is still a git repository (a shallow clone) says what it is.
        with contextlib.suppress(SyncError):
            seen = gitio.open_repo(prefs.path("reference_checkout"), allow_shallow=True)
            doc["reference"].update(path=str(seen.path), head=gitio.head_sha(seen),
                                    shallow=gitio.is_shallow(seen))
    else:
        present = gitio.has_commit(ref, pin.commit)
        doc["reference"] = {"path": str(ref.path), "head": gitio.head_sha(ref),
                            "shallow": gitio.is_shallow(ref), "pin_present": present,
                            "dirty": gitio.is_dirty(ref)}
        upstream = f"{prefs.remote}/{prefs.branch}"
        tip = gitio.resolve(ref, upstream)
        if present and tip is not None:
            doc["behind"] = {"ref": upstream, "tip": tip,
                             "commits": gitio.count_range(ref, pin.commit, tip),
                             "newest_date": gitio.newest_date(ref, pin.commit, tip)}
        elif not present:
            problem = EnvironmentUnresolved(
                f"the pin {pin.commit[:10]} is not in the reference checkout {ref.path}",
                "run 'upstream-sync fetch'")
    oracles = []
    for path in port.oracle_files():
        try:
            of = oraclefile.load(path, port.root)
        except SyncError as exc:
            oracles.append({"id": path.stem, "pin": None, "agrees": False, "problems": [str(exc)]})
            continue
        problems = oraclefile.agreement(of, pin) if of.id == "vllm" else []
        oracles.append({"id": of.id, "pin": of.pin, "pin_label": of.pin_label,
                        "agrees": not problems, "problems": problems})
    doc["oracles"] = oracles
    doc["spans"] = spans.check(port.root, port.config.span_globs, pin)
    c = cycle.load(port)
    doc["cycle"] = None
    if c is not None:
        rpath = (port.sync_dir / cycle.report_name(c)).with_suffix(".json")
        rep = json.loads(read_text(rpath)) if rpath.exists() else None
        doc["cycle"] = {
            "target": c.target, "target_ref": c.target_ref, "frozen_at": c.frozen_at,
            "report": port.rel(rpath.with_suffix(".md")) if rep else None,
            "state": rep["state"] if rep else None,
            "counts": rep["counts"] if rep else None,
            "carry_over": rep["carry_over"] if rep else None,
        }
    return doc, problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="how far behind upstream the port is, and what blocks "
                       "the advance", description="Show the pin, the reference checkout, the "
                       "distance to <remote>/<branch>, oracle agreement and the open cycle.")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    doc, problem = collect(ctx)
    if ctx.json:
        ctx.emit_json(doc)
    else:
        _print(doc, ctx)
    if problem is not None:
        raise problem
    return 0


def _print(doc: dict[str, Any], ctx: Context) -> None:
    def say(line: str = "") -> None:
        print(line, file=ctx.out)

    pin = doc["pin"]
    say(f"port: {doc['port']}" + (" (bundled example)" if doc["example"] else ""))
    say(f"pin: {pin['vllm_commit']}")
    say(f"  runtime version:      {pin['vllm_runtime_version']}")
    say(f"  distribution version: {pin['vllm_distribution_version']}"
        + (f" (build mode: {doc['build_suffix']})" if doc["build_suffix"] else ""))
    say(f"  flashinfer:           {pin['flashinfer_version']}")
    r = doc["reference"]
    if r and r.get("error"):
        say(f"reference checkout: unresolved ({r['error']})")
    elif r:
        say(f"reference checkout: {r['path']} at {str(r['head'])[:10]}"
            f"{', SHALLOW' if r['shallow'] else ''}{', dirty' if r.get('dirty') else ''}; "
            f"pin {'present' if r['pin_present'] else 'MISSING'}")
    b = doc["behind"]
    if b:
        say(f"behind {b['ref']}: {b['commits']} commits"
            + (f", newest {b['newest_date']}" if b["newest_date"] else ""))
    for o in doc["oracles"]:
        verdict = "agrees" if o["agrees"] else "DISAGREES: " + "; ".join(o["problems"])
        say(f"oracle {o['id']}: pin {o['pin']} — {verdict}")
    for s in doc["spans"]:
        say(f"span: {s}")
    c = doc["cycle"]
    if c:
        say(f"cycle: target {c['target'][:10]} ({c['target_ref']}), frozen {c['frozen_at']}")
        if c["report"]:
            counts = ", ".join(f"{v} {k}" for k, v in c["counts"].items())
            say(f"  report {c['report']} [{c['state']}]: {counts}")
            for line in c["carry_over"] or []:
                say(f"  carry-over: {line.removeprefix('- ')}")
    else:
        say("cycle: none open (run 'upstream-sync fetch' or 'nox -s sync')")
