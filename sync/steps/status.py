"""What `status` reports: the pin, the reference checkout, how far behind upstream, oracle
agreement, disagreeing spans, and the open cycle's blockers."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from sync.infra.atomic import read_text
from sync.infra.errors import EnvironmentUnresolved, SyncError
from sync.port import Port
from sync.records import cycle, oraclefile, spans
from sync.upstream import gitio


def collect(port: Port) -> tuple[dict[str, Any], SyncError | None]:
    """What `status` shows, as one document, and the problem that makes it exit non-zero."""
    record = port.pin_record()
    pin = record.pin
    doc: dict[str, Any] = {"port": str(port.root), "example": port.example,
                           "pin": pin.fields(), "build_suffix": pin.build_suffix}
    problem: SyncError | None = None
    prefs = port.preferences()
    doc["reference"] = None
    doc["behind"] = None
    try:
        ref = port.reference()
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
