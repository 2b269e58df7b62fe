"""`status`: the pin, the reference checkout, how far behind upstream, oracle agreement,
disagreeing spans, and the open cycle's blockers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sync.cli.context import Context, add_json
from sync.infra.notes import counted
from sync.steps.advance import blockers
from sync.steps.status import collect
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="how far behind upstream the port is, and what blocks "
                       "the advance", description="Show the pin, the reference checkout, the "
                       "distance to <remote>/<branch>, oracle agreement and the open cycle.")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    doc, problem = collect(ctx.port)
    if ctx.json:
        ctx.emit_json(doc)
    else:
        _print(doc, ctx)
    if problem is not None:
        raise problem
    return 0


def _print(doc: dict[str, Any], ctx: Context) -> None:
    lines = [*_pin_lines(doc), *_reference_lines(doc)]
    for o in doc["oracles"]:
        verdict = "agrees" if o["agrees"] else "DISAGREES: " + "; ".join(o["problems"])
        lines.append(f"oracle {o['id']}: pin {o['pin']} — {verdict}")
    if not any(o["id"] == "vllm" for o in doc["oracles"]):
        # An advance rewrites it: without it every cycle ends refused, so say it up front.
        where = (Path(ctx.port.config.oracles).parent / "vllm.md").as_posix()
        lines.append(f"oracle vllm: no oracle file ({where}) — an advance needs one; "
                     "'upstream-sync advance --dry-run' says what it holds")
    lines += _build_lines(doc["oracle_build"])
    lines += [f"span: {s}" for s in doc["spans"]]
    lines += _cycle_lines(doc["cycle"], doc["oracle_build"].get("home_error")) + _moved_line(doc)
    lines += [f"record: {r}" for r in doc["records"]]
    for line in lines:
        ctx.say(line)


def _pin_lines(doc: dict[str, Any]) -> list[str]:
    pin = doc["pin"]
    return [
        f"port: {doc['port']}" + (" (bundled example)" if doc["example"] else ""),
        f"pin: {pin['vllm_commit']}",
        f"  runtime version:      {pin['vllm_runtime_version']}",
        f"  distribution version: {pin['vllm_distribution_version']}"
        + (f" (build mode: {doc['build_suffix']})" if doc["build_suffix"] else ""),
        f"  flashinfer:           {pin['flashinfer_version']}",
    ]


def _reference_lines(doc: dict[str, Any]) -> list[str]:
    lines = []
    r = doc["reference"]
    if r and r.get("error"):
        lines.append(f"reference checkout: unresolved: {r['error']}")
    elif r:
        state = r.get("state") or ("dirty" if r.get("dirty") else "")
        lines.append(f"reference checkout: {r['path']} at {short(str(r['head']))}"
                     f"{', SHALLOW' if r['shallow'] else ''}{', ' + state if state else ''}; "
                     f"pin {'present' if r['pin_present'] else 'MISSING'}")
        lines += [f"  {p}" for p in r.get("problems", ())]
    b = doc["behind"]
    if b and b["relation"] == "ahead":
        lines.append(f"behind {b['ref']}: {b['commits']} commits"
                     + (f", newest {b['newest_date']}" if b["newest_date"] else ""))
    elif b and b["relation"] == "at-pin":
        lines.append(f"behind {b['ref']}: 0 commits (it is at the pin)")
    return lines


def _build_lines(b: dict[str, Any]) -> list[str]:
    if b.get("error"):
        return [f"oracle build: REFUSED ({b['error']})"]
    flashinfer = "FlashInfer required" if b["require_flashinfer"] else "FlashInfer not required"
    lines = [f"oracle build: mode {b['build_mode']} (from {b['said_by']}); {flashinfer}"]
    return lines + _env_lines(b)


def _env_lines(b: dict[str, Any]) -> list[str]:
    """The core oracle's environment at the pin: where it is, how it was built, and what
    its precompiled binaries are."""
    env = b["env"]
    if env is None and b.get("home_error"):
        return [f"  no environment can be looked up: {b['home_error']}"]
    if env is None:
        return ["  no environment at the pin (upstream-sync oracle build, or adopt)"]
    if env.get("error") or env["record"] is None:
        return [f"  environment at the pin: {env['path']}: "
                f"{env.get('error') or 'no build record (adopt it or rebuild it)'}"]
    r = env["record"]
    link = f" -> {env['link']}" if env["link"] else ""
    lines = [f"  environment at the pin: {env['path']}{link} ({r['origin']} "
             f"{r['built_at']}, mode {r['build_mode']}, {r['installer']})"]
    if not env["mode_agrees"]:
        lines.append(f"  MISMATCH: built in mode {r['build_mode']!r}, but {b['said_by']} says "
                     f"{b['build_mode']!r}: rebuild it")
    bins = r["binaries"]
    if bins:
        lines.append(f"  binaries: {bins.get('wheel') or bins.get('location') or 'unknown'} "
                     f"(version {bins.get('version') or 'unknown'}, commit "
                     f"{'g' + bins['commit'] if bins.get('commit') else 'unknown'})")
        if bins.get("warning"):
            lines.append(f"  warning: {bins['warning']}")
    return lines


def _cycle_lines(c: dict[str, Any] | None, home_error: str | None = None) -> list[str]:
    if not c:
        return ["cycle: none open (run 'upstream-sync fetch' or 'upstream-sync sync')"]
    if not c["open"]:
        last = f"; the last one, to {short(c['target'])}, is {c['state'] or 'without a report'}"
        return [f"cycle: none open{last} (run 'upstream-sync fetch' or 'upstream-sync sync' "
                "for the next)"]
    lines = [f"cycle: target {short(c['target'])} ({c['target_ref']}), frozen {c['frozen_at']}"
             + (", NOT in the reference checkout" if c.get("target_present") is False else "")]
    if c["report"]:
        counts = ", ".join(f"{v} {k}" for k, v in c["counts"].items())
        lines.append(f"  report {c['report']} [{c['state']}]: {counts}")
        lines += _carry_line(c)
    lines += [f"  unmet: {_unmet(u, home_error)}" for u in c["unmet"]]
    lines.append("  the full list, with the gates and the oracle at the target checked: "
                 "'upstream-sync advance --dry-run'")
    return lines


def _unmet(line: str, home_error: str | None) -> str:
    """An unmet line as shown; the oracle home's refusal is said whole under 'oracle build:'
    above, so its unmet line points there instead of saying it twice (the JSON keeps both)."""
    if home_error and line == blockers.unverifiable(home_error):
        return blockers.unverifiable("no oracle home here (see 'oracle build:' above)")
    return line


def _moved_line(doc: dict[str, Any]) -> list[str]:
    """The remote past the open cycle's frozen target: `sync` keeps the target, and says so."""
    c, b = doc["cycle"], doc["behind"]
    if not c or not c["open"] or not b or b["relation"] != "ahead" or b["tip"] == c["target"]:
        return []
    if c.get("moved"):
        return [f"  {c['moved']}"]  # a force-push, not a plain move past it: as fetch says it
    return [f"  {b['ref']} moved to {short(b['tip'])}; this cycle keeps its target "
            f"{short(c['target'])} ('upstream-sync sync --retarget' moves it)"]


def _carry_line(c: dict[str, Any]) -> list[str]:
    """The carry-over folded to counts and a pointer: the report lists every item."""
    counts = dict(c.get("carry_over_counts") or {})
    if not counts:
        return ["  carry-over: nothing owed"]
    # A stall's other unmet preconditions apart from what the cycle owes (walk-s13 N5).
    unmet = counts.pop("unmet", 0)
    folded = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    if unmet:
        more = "+" + counted(unmet, "other unmet precondition")
        folded = f"{folded} ({more})" if folded else more
    return [f"  carry-over: {folded} — each item in {c['report']} (## Carry-over); the "
            "PORT-NOW diffs in 'upstream-sync queue'"]
