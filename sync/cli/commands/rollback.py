"""`rollback` (step 7): undo the last advance (pin surfaces only), as a superseding event."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sync.cli.context import Context, add_json
from sync.infra.errors import BlockedCycle, SyncError, UsageError
from sync.records import events, oraclefile, paragraph, pins
from sync.steps.advance import advance, txn
from sync.steps.verify import oracle


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("rollback", help="step 7: undo the last advance (pin surfaces only)",
                       description="Restore every pin surface from before the last advance and "
                       "append a rollback event that supersedes it.")
    r.add_argument("--commit", action="store_true", help="commit the sync-owned changes")
    add_json(r)
    r.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
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
    core = oraclefile.core(oraclefile.load_all(port.oracle_files(), port.root), advance.CORE)
    if core is not None:
        writes[core.path] = oraclefile.render(core, pin=before["oracle_pin"],
                                              pin_label=before["oracle_pin_label"],
                                              pinned_on=before["oracle_pinned_on"]).encode()
    writes.update(advance.span_writes(port, writes, old))
    writes.update(advance.reopened(port, last.report))
    prefs = port.preferences()
    try:
        env = oracle.env_path(oracle.oracle_home(port, prefs), advance.CORE, old.commit)
        env_note = str(env) + ("" if env.exists() else " (missing: rebuild it)")
    except SyncError as exc:
        env_note = f"unknown ({exc})"
    ev_path, ev_bytes = events.staged(port, "rollback", pin_before=last.pin_after,
                                      pin_after=old.commit, report=last.report,
                                      supersedes=last.index,
                                      detail=json.dumps({"oracle_env": env_note}))
    writes[ev_path] = ev_bytes
    advance.refuse_foreign_staged(port, args.commit, writes)
    with port.lock():
        txn.commit(port.sync_dir, writes)
    sha = None
    if args.commit:
        sha = advance.git_commit(port, list(writes), f"sync(upstream): roll back parity pin "
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
