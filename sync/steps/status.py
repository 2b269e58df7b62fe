"""What `status` reports: the pin, the reference checkout, how far behind upstream, oracle
agreement, disagreeing spans, and the open cycle's blockers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from sync.infra.errors import EnvironmentUnresolved, MalformedRecord, SyncError
from sync.port import Port
from sync.records import carryover, cycle, oraclefile, pins, reportdoc, spans
from sync.records.prefs import Preferences
from sync.steps.advance import blockers
from sync.steps.verify import oracle
from sync.upstream import gitio, health
from sync.upstream.gitio import short


def collect(port: Port) -> tuple[dict[str, Any], SyncError | None]:
    """What `status` shows, as one document, and the problem that makes it exit non-zero."""
    pin = port.pin_record().pin
    doc: dict[str, Any] = {"port": str(port.root), "example": port.example,
                           "pin": pin.fields(), "build_suffix": pin.build_suffix}
    doc["reference"], doc["behind"], problem = _reference(port, pin)
    doc["oracles"] = _oracles(port, pin)
    doc["oracle_build"] = _oracle_build(port, pin)
    doc["spans"] = spans.check(port.root, port.config.span_globs, pin,
                                 (port.config.sync_dir,))
    doc["cycle"] = _cycle(port, pin.commit)
    doc["records"] = _records(port, doc["reference"])
    missing = _target_missing(port, doc)
    _moved(port, doc)
    stuck = _head_problems(port, doc)
    if stuck:
        doc["reference"]["problems"] += stuck
    return doc, problem or missing


def _head_problems(port: Port, doc: dict[str, Any]) -> list[str]:
    """Where the checkout's HEAD is, when that is a problem: behind the pin (an advance that
    stopped after its records, before it moved the checkout; every other command reads at
    the pin and would not say it), or where it cannot fast-forward to where the cycle goes
    (the open cycle's target, else upstream's tip: local commits on top of the pin, a HEAD
    detached at one, or, at the pin too, a branch the preferences do not name), which the
    advance refuses; said in its words."""
    c, r, b = doc["cycle"], doc["reference"], doc["behind"]
    pin, head = doc["pin"]["vllm_commit"], r.get("head")
    if not r.get("pin_present") or head is None:
        return []
    ref = port.reference()
    if head != pin and gitio.is_ancestor(ref, head, pin):
        return [_behind_pin(ref, head, pin)]
    going = _going(c, b)
    problem = None if going is None else health.move_problem(ref, going, port.upstream_ref)
    return [] if problem is None else [problem]


def _going(c: dict[str, Any] | None, b: dict[str, Any] | None) -> str | None:
    """Where the checkout goes next: the open cycle's target, else upstream's tip ahead of
    the pin; None when neither is known."""
    if c and c["open"]:
        return c["target"] if c.get("target_present") else None
    return b["tip"] if b and b["relation"] == "ahead" else None


def _behind_pin(ref: gitio.Reference, head: str, pin: str) -> str:
    return (f"the reference checkout {ref.path} is at {short(head)}, behind the pin "
            f"{short(pin)} (an advance that stopped before moving it?) — run "
            f"'upstream-sync advance', which finishes the move, or 'git -C {ref.path} "
            f"merge --ff-only {short(pin)}'")


def _moved(port: Port, doc: dict[str, Any]) -> None:
    """The open cycle's `moved`: how the remote moved off its frozen target when that was
    no plain move past it (a force-push back, or off its line), in fetch's and sync's words
    (`target.moved_note`); None otherwise."""
    c, b = doc["cycle"], doc["behind"]
    if not c:
        return
    c["moved"] = None
    if (not c["open"] or not c.get("target_present") or not b or b["relation"] != "ahead"
            or b["tip"] == c["target"]):
        return
    ref = port.reference()
    if not gitio.is_ancestor(ref, c["target"], b["tip"]):
        from sync.steps import target  # only here: it imports the report step, which status,
        # a hot command, otherwise never loads
        c["moved"] = target.moved_note(ref, b["ref"], b["tip"], c["target"],
                                       doc["pin"]["vllm_commit"])


def _target_missing(port: Port, doc: dict[str, Any]) -> SyncError | None:
    """The open cycle's frozen target, when a readable checkout lacks it (every range read
    fails then): said in the cycle's part of the document, and as the problem."""
    c, r = doc["cycle"], doc["reference"]
    if not c or not c["open"] or not r or not r.get("pin_present"):
        return None
    present = gitio.has_commit(port.reference(), c["target"])
    c["target_present"] = present
    if present:
        return None
    return EnvironmentUnresolved(
        f"the cycle's target {short(c['target'])} is not in the reference checkout "
        f"{r['path']}", "fetch it ('upstream-sync fetch'), or move the cycle with "
        "'upstream-sync sync --retarget'")


def _reference(port: Port, pin: pins.Pin
               ) -> tuple[dict[str, Any], dict[str, Any] | None, SyncError | None]:
    """The reference checkout, how far the pin is behind upstream there, and what is wrong."""
    prefs = port.preferences()  # its own refusals are not the checkout's
    try:
        ref = port.reference()
    except EnvironmentUnresolved as exc:
        return _unresolved(prefs, exc), None, exc
    present = gitio.has_commit(ref, pin.commit)
    doc: dict[str, Any] = {"path": str(ref.path), "head": gitio.head_sha(ref),
                           "shallow": gitio.is_shallow(ref), "pin_present": present}
    if not present:
        doc["dirty"] = not health.tree(ref).clean
        return doc, None, EnvironmentUnresolved(
            f"the pin {short(pin.commit)} is not in the reference checkout {ref.path}",
            "run 'upstream-sync fetch'")
    h = health.assess(ref, pin.commit, port.upstream_ref)
    doc.update(_health_doc(h))
    problem = h.error
    u = h.upstream
    if u.tip is None:
        return doc, None, problem
    behind = {"ref": port.upstream_ref, "tip": u.tip, "relation": u.relation,
              "commits": u.commits if u.relation == "ahead" else 0,
              "behind_pin": u.commits if u.relation == "behind" else 0,
              "newest_date": (gitio.newest_date(ref, pin.commit, u.tip)
                              if u.relation == "ahead" else None)}
    return doc, behind, problem


def _health_doc(h: health.Health) -> dict[str, Any]:
    t = h.tree
    return {"dirty": not t.clean, "state": h.summary(),
            "tree": {"staged": t.staged, "staged_deleted": t.staged_deleted,
                     "unstaged": t.unstaged, "unstaged_deleted": t.unstaged_deleted,
                     "index_missing": t.index_missing, "bare": t.bare},
            "objects": None if h.objects is None else {
                "ok": h.objects.ok, "missing": h.objects.missing, "first": h.objects.first},
            "problems": list(h.problems)}


def _unresolved(prefs: Preferences, exc: EnvironmentUnresolved) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": prefs.get("reference_checkout"), "head": None, "shallow": None,
           "pin_present": None, "error": str(exc)}
    # A refused checkout that is still a git repository (a shallow clone) says what it is.
    with contextlib.suppress(SyncError):
        seen = gitio.open_repo(prefs.path("reference_checkout"), allow_shallow=True)
        doc.update(path=str(seen.path), head=gitio.head_sha(seen), shallow=gitio.is_shallow(seen))
    return doc


def _oracles(port: Port, pin: pins.Pin) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in port.oracle_files():
        of = port.oracle_record(path)
        if isinstance(of, SyncError):
            out.append({"id": path.stem, "pin": None, "agrees": False, "problems": [str(of)]})
            continue
        problems = oraclefile.agreement(of, pin) if of.id == "vllm" else []
        out.append({"id": of.id, "pin": of.pin, "pin_label": of.pin_label,
                    "agrees": not problems, "problems": problems})
    return out


def _oracle_build(port: Port, pin: pins.Pin) -> dict[str, Any]:
    """The core oracle's build mode (config or pin suffix) and the pin's environment, if any:
    how it was built and where its precompiled binaries came from."""
    try:
        st = oracle.settings(port, oracle.CORE_ID)
    except SyncError as exc:
        return {"build_mode": None, "said_by": None, "error": str(exc), "env": None}
    doc: dict[str, Any] = {"build_mode": st.mode, "said_by": st.said_by,
                           "require_flashinfer": st.require_flashinfer, "env": None,
                           "home": None, "home_error": None}
    try:
        home = oracle.oracle_home(port, port.preferences())
    except SyncError as exc:
        # No oracle home here: no environment can be looked up, and 'oracle build' refuses
        # the same way (walk-s13 U2: "no environment at the pin" sent people to it).
        doc["home_error"] = str(exc)
        return doc
    doc["home"] = str(home)
    env = oracle.env_path(home, oracle.CORE_ID, pin.commit)
    if not (env.exists() or env.is_symlink()):
        return doc
    try:
        record = oracle.read_marker(oracle.usable_env(env))
    except SyncError as exc:
        doc["env"] = {"path": str(env), "error": str(exc)}
        return doc
    doc["env"] = {"path": str(env), "link": str(env.resolve()) if env.is_symlink() else None,
                  "record": record.as_doc() if record is not None else None,
                  "mode_agrees": record is not None and record.build_mode == st.mode}
    return doc


def _records(port: Port, reference: dict[str, Any] | None) -> list[str]:
    """What is wrong with the records the cycle's commands read (decisions, the carry-over
    record, the open cycle's gate record, a carried SHA that names no commit): each command
    refuses then, so say it here (walk-s14 R1: a broken gate record passed unsaid)."""
    out = []
    loads: list[Callable[[], object]] = [port.decisions, port.carried]
    c = port.live_cycle()
    if c is not None:
        target, report = c.target, port.sync_dir / cycle.report_name(c)
        loads.append(lambda: port.gates(target))
        # Its JSON can be whole while the report was cut short: sync and advance refuse it.
        loads.append(lambda: reportdoc.refuse_cut_short(port.text(report) or "",
                                                        port.rel(report)))
    for load in loads:
        try:
            load()
        except MalformedRecord as exc:
            out.append(str(exc))
    if not out and reference and reference.get("pin_present"):
        path = port.carry_over_path
        out += [str(exc) for exc in carryover.mistyped(path, port.rel(path), port.carried(),
                                                       port.reference())]
    return out


def _cycle(port: Port, pin: str) -> dict[str, Any] | None:
    """The cycle record and what its report's JSON says of it; `open` when it is from the
    pin (after an advance the record is the advanced cycle's until the next one is frozen)."""
    c = port.cycle()
    if c is None:
        return None
    rpath = (port.sync_dir / cycle.report_name(c)).with_suffix(".json")
    text = port.text(rpath)
    rep = reportdoc.load_doc(text, port.rel(rpath)) if text is not None else None
    is_open = c.pin == pin
    return {
        "open": is_open, "pin": c.pin,
        "target": c.target, "target_ref": c.target_ref, "frozen_at": c.frozen_at,
        "report": port.rel(rpath.with_suffix(".md")) if rep else None,
        **_report_part(rep),
        # What blocks the advance that the report does not count and nothing need measure
        # (walk-s13 U1: the PARITY PIN paragraph, an unset oracle home), as advance words it.
        "unmet": blockers.unmeasured(port) if is_open else None,
    }


def _report_part(rep: dict[str, Any] | None) -> dict[str, Any]:
    """What the cycle's part of the document takes from its report's JSON (None: no report)."""
    if rep is None:
        return dict.fromkeys(("state", "counts", "carry_over", "carry_over_counts", "carried"))
    return {
        "state": rep["state"], "counts": rep["counts"], "carry_over": rep["carry_over"],
        # From the lines, not the JSON's own counts: a report written before walk-s13 N5
        # counted a stall's unmet PORT-NOW lines as "unmet".
        "carry_over_counts": reportdoc.carry_counts(
            x for x in rep["carry_over"] if isinstance(x, str)),
        "carried": len(rep.get("carried") or []),
    }
