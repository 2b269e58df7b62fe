"""`parity`: run the configured parity suites (op, behavioral, model) as gates.

Each suite is an external command from `[parity.suites.<name>]` in the port's
config, run without a shell from the port root. Its arguments may use `{port}`
(the port root), `{target}` and `{target7}` (the gate target). The result is
recorded as gate `parity:<name>`: PASS or FAIL with the duration and the command,
or PENDING with a handoff where this host may not run it.
"""

from __future__ import annotations

import shlex
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sync.infra import proc
from sync.infra.errors import BlockedCycle, CheckFailed, SyncError, UsageError
from sync.port import Port
from sync.records import gates
from sync.records.config import Suite
from sync.records.prefs import Preferences

PLACEHOLDERS = ("port", "target", "target7")
Note = Callable[[str], None]


def gate_name(suite: Suite) -> str:
    return f"parity:{suite.name}"


def command(suite: str, target: str, *, strict: bool) -> str:
    argv = ["upstream-sync", "parity", "--suite", suite, "--target", target]
    return shlex.join(argv + (["--strict"] if strict else []))


def expand(arg: str, values: Mapping[str, str]) -> str:
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise UsageError(f"parity suite argument {arg[:60]!r}: {exc}",
                         "write literal braces as {{ and }}") from None
    for _, name, spec, conv in parsed:
        if name is not None and (name not in PLACEHOLDERS or spec or conv):
            raise UsageError(f"parity suite argument {arg[:60]!r} uses {{{name}}}",
                             f"use only {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
    return arg.format_map(dict(values))


NONE_CONFIGURED = ("no parity suites are configured: nothing to gate (add "
                   "[parity.suites.<name>] command = [...] to the port's config to gate on one)")


def chosen(port: Port, name: str | None) -> list[Suite]:
    """The suites to run: all of them, or the one named. None configured is nothing to
    run, not a refusal: an advance needs no parity gate, and the gates workflow runs
    `parity --strict` on every port (walk-s13 U5)."""
    suites = list(port.config.suites)
    if name is None:
        return suites
    for s in suites:
        if s.name == name:
            return [s]
    have = (f"configured suites: {', '.join(s.name for s in suites)}" if suites else
            "none is configured: add [parity.suites.<name>] command = [...] to the port's config")
    raise UsageError(f"no parity suite named {name!r}", have)


@dataclass(frozen=True)
class SuiteRun:
    result: gates.GateResult
    output_tail: tuple[str, ...] = ()


def argv_of(port: Port, suite: Suite, target: str, *, recorded: bool = False) -> list[str]:
    """The suite's command line. `recorded`: as the gate record keeps it, `{port}` as `.`
    (suites run from the port root): a record names no path of this machine."""
    values = {"port": "." if recorded else str(port.root), "target": target,
              "target7": target[:7]}
    return [expand(a, values) for a in suite.command]


def run_suite(port: Port, suite: Suite, target: str) -> SuiteRun:
    argv = argv_of(port, suite, target)
    started = time.monotonic()
    try:
        done = proc.Command(tuple(argv), cwd=port.root).run()
        rc: int | None = done.returncode
        text = (done.stdout + done.stderr).decode("utf-8", "replace").splitlines()
    except proc.ProcessFailed as exc:
        rc, text = None, [f"could not start {argv[0]}: {exc.cause}"]
    duration = round(time.monotonic() - started, 3)
    status: gates.Status = "PASS" if rc == 0 else "FAIL"
    detail = None if rc == 0 else (f"exit {rc}" if rc is not None else text[0])
    shown = shlex.join(argv_of(port, suite, target, recorded=True))
    return SuiteRun(gates.GateResult(gate_name(suite), status, shown, duration,
                                     gates.hostname(), gates.now(), None, detail),
                    tuple(text[-proc.TAIL:]) if rc != 0 else ())


def run(port: Port, prefs: Preferences, *, suite: str | None = None,
        target: str | None = None, say: Note = lambda _: None,
        store: gates.Store | None = None) -> list[gates.GateResult]:
    """Run (or mark PENDING) each chosen suite and record each through `store`
    (`gates.record`'s: the CLI's writes the report with it, as each suite ends); `refusal`
    says what the results refuse (a FAIL, a PENDING under `strict`)."""
    suites = chosen(port, suite)
    tgt = gates.check_target(port, target)
    results: list[gates.GateResult] = []
    for s in suites:
        ok, why = gates.eligible(prefs, s.needs_gpu)
        if ok:
            say(f"{gate_name(s)}: running {shlex.join(argv_of(port, s, tgt))}")
            done = run_suite(port, s, tgt)
        else:
            done = SuiteRun(_pending(port, s, tgt, why))
        gates.record(port, tgt, done.result, store=store)
        _tell(done, why, say)
        results.append(done.result)
    return results


def _pending(port: Port, s: Suite, target: str, why: str) -> gates.GateResult:
    return gates.GateResult(gate_name(s), "PENDING",
                            shlex.join(argv_of(port, s, target, recorded=True)), None,
                            gates.hostname(), gates.now(), command(s.name, target, strict=True),
                            why)


def _tell(done: SuiteRun, why: str, say: Note) -> None:
    r = done.result
    if r.status == "PENDING":
        say(f"{r.name} PENDING — {why}")  # the summary line after the run gives its handoff
        return
    for line in done.output_tail:
        say(f"  | {line}")
    say(f"{r.name} {r.status} ({r.duration_s:.1f} s)")


def refusal(results: list[gates.GateResult], *, strict: bool) -> SyncError | None:
    """CheckFailed when a suite failed; BlockedCycle when one is PENDING under --strict."""
    failed = [r.name for r in results if r.status == "FAIL"]
    if failed:
        return CheckFailed(f"{len(failed)} parity suite(s) failed: {', '.join(failed)}",
                           "see the output above; fix the port and run parity again")
    pending = [r for r in results if r.status == "PENDING"]
    if pending and strict:
        return BlockedCycle(f"{len(pending)} parity suite(s) PENDING under --strict: "
                            + ", ".join(r.name for r in pending),
                            f"run on a gate host: {pending[0].handoff}")
    return None
