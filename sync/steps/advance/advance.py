"""Step 7: advance the pin (all or nothing), or stall with what is left; and `rollback`.

The pin moves only from a measured oracle: the new block is built from
`oracle verify` at the target, never from a typed version string. Every pin
surface (block, PARITY PIN paragraph, core oracle file, every pin span), the
state event and the report move in one journaled transaction under the lock.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from sync.cli import Context, add_json
from sync.infra.atomic import port_lock, read_text
from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.port import Port
from sync.records import cycle, events, gates, ledger, oraclefile, paragraph, pins, spans
from sync.steps import carry, report, syncrun
from sync.steps.advance import txn
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import oracle
from sync.upstream import gitio
from sync.upstream.fetch import preferences

CORE = "vllm"
_ADVANCED = re.compile(r"^- Cycle state: ADVANCED(?=\r?$)", re.MULTILINE)


@dataclass(frozen=True)
class Plan:
    old: pins.Pin
    new: pins.Pin
    target: str
    report: Path
    writes: dict[Path, bytes]
    olds: dict[Path, bytes]
    detail: dict[str, dict[str, str]]


@dataclass(frozen=True)
class Measured:
    """What the precondition checks measured: complete only when nothing is unmet."""

    cycle: cycle.Cycle
    result: syncrun.Result | None = None
    verification: oracle_verify.Verification | None = None


def _required_gates(port: Port) -> list[str]:
    names = []
    if port.config.golden_scripts:
        names.append("golden")
    names += [f"parity:{s.name}" for s in port.config.suites]
    return names


def preconditions(port: Port, ctx: Context | None) -> tuple[list[str], Measured]:
    """Every unmet precondition, one line each, plus what a passing check measured."""
    unmet: list[str] = []
    c = cycle.require(port)
    path = syncrun.report_path(port, c)
    if not path.exists():
        unmet.append(f"no sync report for the target {c.target[:10]} — run 'upstream-sync sync'")
        return unmet, Measured(c)
    if _advanced(read_text(path)):
        finish_fast_forward(port, c.target, ctx)
        unmet.append(f"the cycle to {c.target[:10]} already advanced — fetch a new target")
        return unmet, Measured(c)
    result = syncrun.run_cycle(port, ctx, write_report=False)
    verification = None
    counts = result.model.counts()
    if counts["UNCLASSIFIED"]:
        unmet.append(f"{counts['UNCLASSIFIED']} commit(s) UNCLASSIFIED — classify each with "
                     "'upstream-sync decide <sha> <DISPOSITION> <reason>'")
    led = carry.LedgerRefs.of(ledger.rows_text(port.root / port.config.ledger,
                                               rel=port.config.ledger))
    for e in result.model.entries:
        if e.disposition == "PORT-NOW" and not carry.ported(e, led) and not (
                e.reason.lower().startswith("carry-over")):
            pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
            unmet.append(f"PORT-NOW `{e.sha[:10]}` {pr} has no ledger row — port it and run "
                         "'upstream-sync ledger add', or carry it over with 'upstream-sync "
                         f"decide {e.sha[:10]} PORT-NOW \"carry-over: <why>\"'")
    recorded = {g.name: g for g in gates.load(port, c.target)}
    for name in _required_gates(port):
        g = recorded.get(name) or next((r for r in recorded.values()
                                        if r.name.startswith(name + "[")), None)
        if g is None:
            unmet.append(f"gate {name} has not run at {c.target[:10]} — run 'nox -s "
                         f"{name.split(':')[0]}'")
        elif g.status != "PASS":
            unmet.append(f"gate {g.name} is {g.status}" + (f" — run `{g.handoff}` on a gate host"
                                                         if g.handoff else ""))
    for g in recorded.values():
        if g.status != "PASS" and not any(g.name.startswith(n) for n in _required_gates(port)):
            unmet.append(f"gate {g.name} is {g.status}")
    prefs = preferences(port)
    try:
        v = oracle_verify.verify(port, prefs, CORE, c.target)
    except SyncError as exc:
        unmet.append(f"oracle {CORE} at the target cannot be verified: {exc}")
    else:
        if not v.ok:
            unmet.append(f"oracle {CORE} at {c.target[:10]} fails verification: "
                         + "; ".join(str(m) for m in v.mismatches[:3]))
        else:
            verification = v
    ref = prefs.reference()
    if gitio.is_dirty(ref):
        unmet.append(f"the reference checkout {ref.path} has uncommitted changes — commit or "
                     "stash them (it is fast-forwarded, never reset)")
    head = gitio.head_sha(ref)
    if head and not gitio.is_ancestor(ref, head, c.target):
        unmet.append(f"the reference checkout's HEAD {head[:10]} cannot fast-forward to "
                     f"{c.target[:10]} — check out the pin's branch")
    return unmet, Measured(c, result, verification)


def plan(port: Port, m: Measured, *, release_label: str | None) -> Plan:
    c, v, result = m.cycle, m.verification, m.result
    if v is None or result is None:
        raise BlockedCycle("the advance was planned before its preconditions held",
                           "run 'upstream-sync advance' again")
    record = port.pin_record()
    old = record.pin
    probe = v.probe
    if probe.runtime_version is None or probe.distribution_version is None:
        raise BlockedCycle("the oracle measurement has no version strings",
                           "rebuild the oracle at the target")
    new = pins.from_values(c.target, probe.runtime_version, probe.distribution_version,
                           probe.flashinfer_version or old.flashinfer_version,
                           path=port.rel(port.protocol))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    writes: dict[Path, bytes] = {}
    text = pins.render(record, new)
    para = paragraph.find(text, path=port.rel(port.protocol))
    text = paragraph.render(text, para, date=today, sha=new.commit[:9],
                            release_label=release_label or para.release_label
                            or new.public_version)
    writes[port.protocol] = text.encode()
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), CORE)
    if core is None:
        raise UsageError(f"no core oracle file ({CORE}.md) among {port.config.oracles}",
                         "add .agents/oracles/vllm.md")
    writes[core.path] = oraclefile.render(core, pin=new.commit, pin_label=new.public_version,
                                          pinned_on=today).encode()
    writes.update(_span_writes(port, writes, new))
    detail = {
        "before": {**old.fields(), "paragraph_date": para.date, "paragraph_sha": para.sha,
                   "paragraph_label": para.release_label or "", "oracle_pin": core.pin,
                   "oracle_pin_label": core.pin_label, "oracle_pinned_on": core.pinned_on},
        "after": {**new.fields(), "oracle_env": str(probe.env)},
    }
    olds = {p: (p.read_bytes() if p.exists() else b"") for p in writes}
    return Plan(old, new, c.target, result.path, writes, olds, detail)


def _span_writes(port: Port, writes: dict[Path, bytes], pin: pins.Pin) -> dict[Path, bytes]:
    """Every pin span rewritten to `pin` (over `writes` already planned for the same file)."""
    out: dict[Path, bytes] = {}
    for path in spans.files(port.root, port.config.span_globs):
        current = writes.get(path, path.read_bytes()).decode()
        found = spans.scan_text(current, path=path)
        if found:
            out[path] = spans.rewrite(current, found, commit=pin.commit,
                                      label=pin.public_version).encode()
    return out


def _report_bytes(port: Port, result: syncrun.Result, state: report.State) -> dict[Path, bytes]:
    model = replace(result.model, state=state,
                    carry_over=tuple(x for x in result.model.carry_over
                                     if not x.startswith("- unmet: ")))
    doc = report.to_json(model, port.rel(result.path))
    return {result.path: report.render(model).encode(),
            result.json_path: report.dump_json(doc).encode()}


def diff(p: Plan, port: Port) -> str:
    out: list[str] = []
    for path, data in p.writes.items():
        old = p.olds[path].decode("utf-8", "replace").splitlines(keepends=True)
        new = data.decode("utf-8", "replace").splitlines(keepends=True)
        out += difflib.unified_diff(old, new, f"a/{port.rel(path)}", f"b/{port.rel(path)}")
    return "".join(out)


def finish_fast_forward(port: Port, target: str, ctx: Context | None) -> None:
    """Finish an advance that died after its records were written but before the reference
    checkout moved: the pin is the target and the checkout is clean and behind it."""
    if port.pin_record().pin.commit != target:
        return
    ref = preferences(port).reference()
    head = gitio.head_sha(ref)
    if head in (None, target) or gitio.is_dirty(ref) or not gitio.is_ancestor(ref, head or "",
                                                                               target):
        return
    gitio.run(ref.path, ["merge", "--ff-only", "-q", "--end-of-options", target])
    if ctx is not None:
        ctx.note(f"finished the interrupted advance: fast-forwarded {ref.path} to {target[:10]}")


def stall(port: Port, ctx: Context, unmet: list[str]) -> bool:
    """Mark the report STALLED and append one stall event; False when the cycle advanced."""
    c = cycle.require(port)
    path = syncrun.report_path(port, c)
    if path.exists() and _advanced(read_text(path)):
        return False  # a re-run after the advance: nothing stalled
    if not path.exists():
        return False  # nothing was synced yet: no report to stall, no event to link it
    syncrun.run_cycle(port, ctx, state="STALLED", unmet=tuple(unmet))
    evs = events.load_all(port)
    rel = port.rel(path)
    if not (evs and evs[-1].kind == "stall" and evs[-1].report == rel):
        pin = port.pin_record().pin
        with port_lock(port.sync_dir / ".lock"):
            events.append(port, "stall", pin_before=pin.commit, pin_after=pin.commit,
                          report=rel, detail="; ".join(unmet)[:2000])
    return True


def _advanced(report_text: str) -> bool:
    return _ADVANCED.search(report_text) is not None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advance", help="step 7: advance the parity pin to the target (all or "
                       "nothing), or stall", description="Check every precondition; then "
                       "rewrite every pin surface from the measured oracle, fast-forward the "
                       "reference checkout, append a state event and mark the report ADVANCED.")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    p.add_argument("--commit", action="store_true",
                   help="commit the sync-owned changes (refused when other paths are staged)")
    p.add_argument("--release-label", help="release label for the PARITY PIN line (default: "
                   "keep the current one)")
    add_json(p)
    p.set_defaults(func=run)
    r = sub.add_parser("rollback", help="step 7: undo the last advance (pin surfaces only)",
                       description="Restore every pin surface from before the last advance and "
                       "append a rollback event that supersedes it.")
    r.add_argument("--commit", action="store_true", help="commit the sync-owned changes")
    add_json(r)
    r.set_defaults(func=run_rollback)


def _staged_elsewhere(port: Port, own: set[str]) -> list[str]:
    out = gitio.run(port.root, ["diff", "--cached", "--name-only", "-z"]).stdout.decode()
    return [p for p in out.split("\0") if p and p not in own]


def _refuse_foreign_staged(port: Port, commit: bool, writes: dict[Path, bytes]) -> None:
    if not commit:
        return
    if not (port.root / ".git").exists():
        raise UsageError(f"{port.root} is not a git repository", "drop --commit")
    other = _staged_elsewhere(port, {port.rel(k) for k in writes})
    if other:
        raise UsageError(f"other paths are staged: {', '.join(other[:5])}",
                         "unstage them: a sync commit carries sync records only")


def _git_commit(port: Port, paths: list[Path], subject: str, body: str) -> str:
    rels = [port.rel(p) for p in paths]
    gitio.run(port.root, ["add", "--", *rels])
    gitio.run(port.root, ["commit", "-q", "-m", subject, "-m", body, "--", *rels])
    return gitio.run(port.root, ["rev-parse", "HEAD"]).stdout.decode().strip()


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    if args.commit and not (port.root / ".git").exists():
        raise UsageError(f"{port.root} is not a git repository", "drop --commit")
    unmet, measured = preconditions(port, ctx)
    if unmet:
        for line in unmet:
            print(f"unmet: {line}", file=ctx.out)
        stalled = not args.dry_run and stall(port, ctx, unmet)
        raise BlockedCycle(f"the advance is refused: {len(unmet)} unmet precondition(s)",
                           "fix each 'unmet' line above, then run advance again"
                           + ("; the cycle is STALLED with them" if stalled else ""))
    p = plan(port, measured, release_label=args.release_label)
    assert measured.result is not None  # plan() refuses otherwise
    result = measured.result
    ev_path, ev_bytes = events.staged(
        port, "advance", pin_before=p.old.commit, pin_after=p.new.commit,
        report=port.rel(p.report), detail=json.dumps(p.detail, sort_keys=True))
    writes = {**p.writes, **_report_bytes(port, result, "ADVANCED"), ev_path: ev_bytes}
    p = Plan(p.old, p.new, p.target, p.report, writes,
             {k: (k.read_bytes() if k.exists() else b"") for k in writes}, p.detail)
    if args.dry_run:
        ctx.out.write(diff(p, port))
        print(f"dry run: would advance {p.old.commit[:10]} → {p.new.commit[:10]}; nothing "
              "written", file=ctx.out)
        return 0
    _refuse_foreign_staged(port, args.commit, writes)
    with port_lock(port.sync_dir / ".lock"):
        again = events.staged(port, "advance")[0]
        if again != ev_path:
            raise BlockedCycle("another run appended a state event meanwhile", "run again")
        txn.commit(port.sync_dir, writes)
    prefs = preferences(port)
    ref = prefs.reference()
    gitio.run(ref.path, ["merge", "--ff-only", "-q", "--end-of-options", p.new.commit])
    sha = None
    if args.commit:
        gates_line = ", ".join(f"{g.name} {g.status}" for g in gates.load(port, p.target))
        sha = _git_commit(port, list(writes), f"sync(upstream): advance parity pin "
                          f"{p.old.commit[:10]} → {p.new.commit[:10]}",
                          f"Range: {p.old.commit}..{p.new.commit}\nReport: "
                          f"{port.rel(p.report)}\nGates: {gates_line or 'none configured'}")
    if ctx.json:
        ctx.emit_json({"advanced": True, "pin_before": p.old.commit, "pin_after": p.new.commit,
                       "runtime_version": p.new.runtime_version, "report": port.rel(p.report),
                       "event": port.rel(ev_path), "commit": sha,
                       "files": sorted(port.rel(k) for k in writes)})
    else:
        print(f"advanced the parity pin {p.old.commit[:10]} → {p.new.commit[:10]} "
              f"({p.new.runtime_version}); {len(writes)} files; event {port.rel(ev_path)}",
              file=ctx.out)
        if sha:
            print(f"committed {sha[:10]}", file=ctx.out)
    return 0


def _reopened(port: Port, rel: str) -> dict[Path, bytes]:
    """The rolled-back cycle's report and JSON marked ACTIVE again: its target is open anew.

    Left ADVANCED, the report would refuse every later advance to the same target.
    """
    path = port.root / rel
    if not path.is_file():
        return {}
    text = read_text(path)
    out = {path: _ADVANCED.sub("- Cycle state: ACTIVE", text, count=1).encode()}
    jpath = path.with_suffix(".json")
    if jpath.is_file():
        try:
            doc = json.loads(read_text(jpath))
        except ValueError:
            doc = None  # the next 'sync' rewrites it from the report
        if isinstance(doc, dict) and doc.get("state") == "ADVANCED":
            doc["state"] = "ACTIVE"
            out[jpath] = report.dump_json(doc).encode()
    return out


def run_rollback(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    evs = events.load_all(port)
    superseded = {e.supersedes for e in evs if e.kind == "rollback"}
    last = next((e for e in reversed(evs) if e.kind == "advance"), None)
    if last is None or last.index in superseded:
        raise UsageError("there is no advance to roll back", "nothing to do")
    record = port.pin_record()
    if record.pin.commit != last.pin_after:
        raise BlockedCycle(f"the pin is {record.pin.commit[:10]}, not the last advance's "
                           f"{last.pin_after[:10]}", "roll back only the latest advance")
    before = json.loads(last.detail)["before"]
    old = pins.from_values(before["vllm_commit"], before["vllm_runtime_version"],
                           before["vllm_distribution_version"], before["flashinfer_version"],
                           path=port.rel(port.protocol))
    writes: dict[Path, bytes] = {}
    text = pins.render(record, old)
    para = paragraph.find(text, path=port.rel(port.protocol))
    text = paragraph.render(text, para, date=before["paragraph_date"],
                            sha=before["paragraph_sha"],
                            release_label=before["paragraph_label"] or para.release_label)
    writes[port.protocol] = text.encode()
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), CORE)
    if core is not None:
        writes[core.path] = oraclefile.render(core, pin=before["oracle_pin"],
                                              pin_label=before["oracle_pin_label"],
                                              pinned_on=before["oracle_pinned_on"]).encode()
    writes.update(_span_writes(port, writes, old))
    writes.update(_reopened(port, last.report))
    prefs = preferences(port)
    try:
        env = oracle.env_path(oracle.oracle_home(port, prefs), CORE, old.commit)
        env_note = str(env) + ("" if env.exists() else " (missing: rebuild it)")
    except SyncError as exc:
        env_note = f"unknown ({exc})"
    ev_path, ev_bytes = events.staged(port, "rollback", pin_before=last.pin_after,
                                      pin_after=old.commit, report=last.report,
                                      supersedes=last.index,
                                      detail=json.dumps({"oracle_env": env_note}))
    writes[ev_path] = ev_bytes
    _refuse_foreign_staged(port, args.commit, writes)
    with port_lock(port.sync_dir / ".lock"):
        txn.commit(port.sync_dir, writes)
    sha = None
    if args.commit:
        sha = _git_commit(port, list(writes), f"sync(upstream): roll back parity pin "
                          f"{last.pin_after[:10]} → {old.commit[:10]}",
                          f"Supersedes state event {last.index}.\nOracle: {env_note}")
    if ctx.json:
        ctx.emit_json({"rolled_back": True, "pin_before": last.pin_after,
                       "pin_after": old.commit, "oracle_env": env_note,
                       "event": port.rel(ev_path), "commit": sha})
    else:
        print(f"rolled back the parity pin {last.pin_after[:10]} → {old.commit[:10]}; "
              f"previous oracle environment: {env_note}", file=ctx.out)
        print("note: the reference checkout was not moved back (it is never reset)",
              file=ctx.out)
    return 0
