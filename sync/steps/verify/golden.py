"""`golden`: regenerate golden dumps with a verified oracle, and say what drifted.

Configured in `[golden]` of the port's config:

    [golden]
    dir = "goldens"                   # where cases live, relative to the port
    oracle = "vllm"                   # default --oracle
    needs_gpu = true                  # gate hosts must show a GPU
    scripts = [["{python}", "tools/parity/dump_ops.py", "--out", "{out}"]]

Each script is an argument list run without a shell, from the port root. The
first argument must be `{python}`: dumps are only worth anything when the
oracle's interpreter produced them. Placeholders (`{{`/`}}` for literal braces):

    {python}  the oracle's bin/python      {env}     the oracle environment
    {out}     a fresh directory to write   {port}    the port root
    {oracle}  the oracle id                {commit}  the oracle's commit
    {target}  the gate target (full SHA)   {shard} {shards}  this shard, e.g. 1 and 2

A script writes one directory per case under `{out}` (`{out}/<case>/...`).
`manifest.json` is reserved; a `golden-extra.json` object in a case directory
(device name, timings) goes into the manifest's `extra` instead of the golden
bytes, so volatile facts never show up as drift. Every case gets
`<dir>/<case>/manifest.json` in one shape: schema, case, gate, target, script,
oracle identity (id, commit, runtime and distribution versions, FlashInfer,
Torch, build mode, the vLLM commit it ran against, host, time), files and extra.

Sharding (`--shard i/n`): a script whose arguments use `{shard}`/`{shards}`
shards itself and runs in every shard; the others are dealt round-robin.

Drift is measured against the committed goldens (the port's HEAD; the files on
disk when the port is not a git checkout): a case drifted when any byte of it
changed, appeared or went away.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sync.infra import proc
from sync.infra.errors import BlockedCycle, CheckFailed, IdentityMismatch, UsageError
from sync.port import Port
from sync.records import gates
from sync.records.prefs import Preferences
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify import oracle
from sync.steps.verify import watch as oracle_watch
from sync.upstream import gitio

MANIFEST = "manifest.json"
EXTRA = "golden-extra.json"
SCHEMA = 1
PLACEHOLDERS = ("python", "env", "out", "port", "oracle", "commit", "target", "shard",
                "shards")
_CASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_SHARD = re.compile(r"([0-9]{1,6})/([0-9]{1,6})")
_DROP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONSAFEPATH",
         "VIRTUAL_ENV", "CONDA_PREFIX", "VLLM_SOURCE", "VLLM_OMNI_SOURCE")
Drift = Literal["unchanged", "changed", "new"]


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    m = _SHARD.fullmatch(text)
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageError(f"--shard {text[:40]!r} is not i/n with 1 <= i <= n",
                         "give e.g. --shard 1/2")
    return Shard(int(m.group(1)), int(m.group(2)))


def missing_shards(name: str, have: list[str]) -> list[str]:
    """The shards of `name` a sharded run should have recorded and did not (`golden[2/3]`
    when only `golden[1/3]` and `golden[3/3]` are there): the advance waits for them, and
    `gates merge` names them."""
    counts = {s.count for n in have if (s := _shard_of(name, n)) is not None}
    want = {f"{name}[{i}/{c}]" for c in counts for i in range(1, c + 1)}
    return sorted(want - set(have))


def _shard_of(name: str, gate: str) -> Shard | None:
    """The shard a gate record's name says it is (`golden[2/3]`), as `--shard` reads it."""
    inner = gate.removeprefix(name)
    if inner == gate or not (inner.startswith("[") and inner.endswith("]")):
        return None
    try:
        return parse_shard(inner[1:-1])
    except UsageError:
        return None


def fields(arg: str) -> list[str]:
    """The placeholder names `arg` uses; UsageError for anything but a plain known name."""
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise UsageError(f"golden script argument {arg[:60]!r}: {exc}",
                         "write literal braces as {{ and }}") from None
    names = []
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conv:
            raise UsageError(f"golden script argument {arg[:60]!r} uses {{{name}}}",
                             f"use only {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        names.append(name)
    return names


def expand(arg: str, values: Mapping[str, str]) -> str:
    fields(arg)
    return arg.format_map(dict(values))


def validate(scripts: Sequence[Sequence[str]]) -> None:
    if not scripts:
        raise UsageError("no golden scripts are configured",
                         "add [golden] scripts = [[\"{python}\", ...]] to the port's config")
    for i, script in enumerate(scripts, 1):
        if not script or script[0] != "{python}":
            raise UsageError(f"golden script {i} does not start with {{python}}",
                             "run dump scripts with the oracle's interpreter: "
                             "[\"{python}\", \"path/to/dump.py\", ...]")
        for arg in script:
            fields(arg)


def self_sharding(script: Sequence[str]) -> bool:
    return any(n in ("shard", "shards") for arg in script for n in fields(arg))


def select(scripts: Sequence[Sequence[str]], shard: Shard | None
           ) -> list[tuple[int, tuple[str, ...]]]:
    """(1-based script number, script) for the scripts this shard runs."""
    out = []
    dealt = 0
    for i, script in enumerate(scripts, 1):
        if shard is None or self_sharding(script):
            out.append((i, tuple(script)))
            continue
        if dealt % shard.count == shard.index - 1:
            out.append((i, tuple(script)))
        dealt += 1
    return out


def gate_name(port: Port, oracle_id: str, shard: Shard | None) -> str:
    name = "golden" if oracle_id == port.config.golden_oracle else f"golden:{oracle_id}"
    return name + (f"[{shard}]" if shard else "")


def command(oracle_id: str, target: str, shard: Shard | None, *, strict: bool) -> str:
    argv = ["upstream-sync", "golden", "--oracle", oracle_id, "--target", target]
    argv += ["--shard", str(shard)] if shard else []
    argv += ["--strict"] if strict else []
    return shlex.join(argv)


def script_environ(env: Path) -> dict[str, str]:
    """Our environment without anything that redirects Python, oracle env first on PATH."""
    venv = os.environ.get("VIRTUAL_ENV")
    out = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith("GIT_")}
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (venv and (d == venv or d.startswith(venv.rstrip("/") + "/")))]
    out["PATH"] = os.pathsep.join([str(env / "bin"), *dirs])
    out["VIRTUAL_ENV"] = str(env)
    out["PYTHONNOUSERSITE"] = "1"
    return out


@dataclass(frozen=True)
class Case:
    name: str
    script: tuple[str, ...]
    source: Path  # the staged directory
    files: tuple[str, ...]  # posix paths inside the case (golden bytes only)
    extra: dict[str, Any] | None


@dataclass(frozen=True)
class CaseResult:
    name: str
    drift: Drift
    changed: tuple[str, ...]  # files that differ, appeared or went away


@dataclass(frozen=True)
class Outcome:
    gate: gates.GateResult
    cases: tuple[CaseResult, ...] = ()
    # A PENDING gate under --strict: the command raises it after its document (the gate, its
    # handoff), as `parity --strict` does, so `--json` prints both in one document.
    refused: BlockedCycle | None = None

    @property
    def summary(self) -> str:
        return self.gate.detail or ""


class _ScriptFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _collect(out: Path, number: int, script: tuple[str, ...]) -> list[Case]:
    """The cases script `number` wrote under `out`, one directory each."""
    cases = []
    for entry in sorted(out.iterdir(), key=lambda p: p.name):
        if entry.is_symlink() or not entry.is_dir():
            raise _ScriptFailed(f"golden script {number} wrote {entry.name!r} directly under "
                                "{out}: write each case into its own directory")
        if not _CASE.fullmatch(entry.name):
            raise _ScriptFailed(f"golden script {number} wrote case {entry.name!r}: case names "
                                "are letters, digits, '.', '_', '+', '-'")
        cases.append(_case(entry, number, script))
    return cases


def _case(entry: Path, number: int, script: tuple[str, ...]) -> Case:
    """One case directory: its golden files, and its extra facts when it has any."""
    files: list[str] = []
    extra: dict[str, Any] | None = None
    for p in sorted(entry.rglob("*")):
        rel = p.relative_to(entry).as_posix()
        if p.is_symlink():
            raise _ScriptFailed(f"golden script {number}: {entry.name}/{rel} is a symlink")
        if not p.is_file():
            continue
        if rel == MANIFEST:
            raise _ScriptFailed(f"golden script {number}: {entry.name}/{MANIFEST} is "
                                "reserved for upstream-sync")
        if rel == EXTRA:
            extra = _extra(p, f"golden script {number}: {entry.name}/{EXTRA}")
        else:
            files.append(rel)
    return Case(entry.name, script, entry, tuple(files), extra)


def _extra(path: Path, where: str) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        loaded = None
    if not isinstance(loaded, dict):
        raise _ScriptFailed(f"{where} is not a JSON object")
    return loaded


def _committed(port: Port, root: str) -> tuple[str, dict[str, str]] | None:
    """(object format, path relative to the port -> blob id at HEAD); None without HEAD."""
    fmt = gitio.run(port.root, ["rev-parse", "--show-object-format"], check=False)
    head = gitio.run(port.root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
                     check=False)
    if fmt.returncode != 0 or head.returncode != 0:
        return None
    listing = gitio.run(port.root, ["ls-tree", "-r", "-z", "HEAD", "--", root], check=False)
    if listing.returncode != 0:
        return None
    out: dict[str, str] = {}
    for item in listing.stdout.split(b"\0"):
        meta, _, name = item.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob":
            out[name.decode("utf-8", "surrogateescape")] = parts[2].decode()
    return fmt.stdout.decode().strip(), out


def _digest(path: Path, h: Any, header: bytes = b"") -> str:
    h.update(header)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return str(h.hexdigest())


def blob_id(path: Path, fmt: str) -> str:
    """The git object id `path` would have (compared with HEAD without reading blobs)."""
    h = hashlib.sha256() if fmt == "sha256" else hashlib.sha1()  # noqa: S324 - git's id
    return _digest(path, h, b"blob %d\0" % path.stat().st_size)


def sha256(path: Path) -> str:
    return _digest(path, hashlib.sha256())


def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and sha256(a) == sha256(b)


def drift(port: Port, cases: Sequence[Case]) -> list[CaseResult]:
    root = port.config.golden_dir.rstrip("/")
    committed = _committed(port, root)
    results = []
    for case in cases:
        if committed is not None:
            old, same = _against_head(case, f"{root}/{case.name}/", *committed)
        else:
            old, same = _against_disk(case, port.root / root / case.name)
        old.discard(MANIFEST)
        old.discard(EXTRA)
        changed = sorted((set(case.files) | old) - same)
        kind: Drift = "new" if not old else "changed" if changed else "unchanged"
        results.append(CaseResult(case.name, kind, tuple(changed)))
    return results


def _against_head(case: Case, prefix: str, fmt: str, listing: dict[str, str]
                  ) -> tuple[set[str], set[str]]:
    """(the case's files at HEAD, those of its new files with the same bytes)."""
    old = {k[len(prefix):]: v for k, v in listing.items() if k.startswith(prefix)}
    same = {rel for rel in case.files if old.get(rel) == blob_id(case.source / rel, fmt)}
    return set(old), same


def _against_disk(case: Case, base: Path) -> tuple[set[str], set[str]]:
    """`_against_head` for a port that is not a git checkout: the files on disk."""
    old = {p.relative_to(base).as_posix() for p in base.rglob("*")
           if p.is_file()} if base.is_dir() else set()
    same = {rel for rel in case.files if rel in old and _same_bytes(base / rel, case.source / rel)}
    return old, same


def summary(results: Sequence[CaseResult]) -> str:
    """What the run measured: a new case has no golden to drift from, so it is counted
    apart from the cases compared (and never as drift)."""
    changed = [r.name for r in results if r.drift == "changed"]
    new = [r.name for r in results if r.drift == "new"]
    compared = len(results) - len(new)
    if not new:
        cases = _cases(compared)
        return (f"drift in {len(changed)} of {cases}: changed {', '.join(changed)}" if changed
                else f"zero drift ({cases})")
    fresh = f"{len(new)} new: {', '.join(new)}"
    if not compared:
        return f"nothing to compare: {_cases(len(new), 'new ')} ({', '.join(new)})"
    cases = _cases(compared, "compared ")
    return (f"drift in {len(changed)} of {cases}: changed {', '.join(changed)}; {fresh}"
            if changed else f"zero drift ({cases}; {fresh})")


def _cases(n: int, kind: str = "") -> str:
    return f"{n} {kind}case{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class Request:
    """What a golden run is asked for (the command's options)."""

    oracle_id: str | None = None  # default: [golden] oracle in the config
    shard: Shard | None = None
    strict: bool = False  # PENDING is an error
    target: str | None = None  # the handoff's target, checked against this checkout's


@dataclass(frozen=True)
class Gate:
    """The gate a golden run records: its name, oracle, target and shard."""

    name: str
    oracle: str
    target: str
    shard: Shard | None

    def command(self, *, strict: bool) -> str:
        return command(self.oracle, self.target, self.shard, strict=strict)

    def pending(self, why: str) -> gates.GateResult:
        return gates.GateResult(self.name, "PENDING", self.command(strict=False), None,
                                gates.hostname(), gates.now(), self.command(strict=True), why)


@dataclass(frozen=True)
class ScriptRun:
    """A gate's scripts running with a verified oracle, timed from `started`."""

    port: Port
    prefs: Preferences
    gate: Gate
    commit: str  # the oracle's commit
    home: Path  # the oracle home (scratch space lives under it when TMPDIR is a checkout)
    verified: oracle_verify.Verification
    started: float
    store: gates.Store | None = None  # how the result is recorded (`gates.record`)

    @property
    def env(self) -> Path:
        return Path(self.verified.probe.env)

    def values(self, out: Path) -> dict[str, str]:
        """What the placeholders of a script's arguments stand for."""
        shard = self.gate.shard
        return {"python": str(self.env / "bin" / "python"), "env": str(self.env),
                "out": str(out), "port": str(self.port.root), "oracle": self.gate.oracle,
                "commit": self.commit, "target": self.gate.target,
                "shard": str(shard.index if shard else 1),
                "shards": str(shard.count if shard else 1)}

    def result(self, status: gates.Status, detail: str) -> gates.GateResult:
        return gates.GateResult(
            self.gate.name, status, self.gate.command(strict=False),
            round(time.monotonic() - self.started, 3), gates.hostname(), gates.now(), None,
            detail, oracle_verify.identity_map(self.verified.identity))


def _manifest(case: Case, run: ScriptRun) -> str:
    doc = {
        "schema": SCHEMA, "case": case.name, "gate": run.gate.name, "target": run.gate.target,
        "script": list(case.script), "oracle": dict(run.verified.identity),
        "files": {rel: "sha256:" + sha256(case.source / rel) for rel in case.files},
        "extra": case.extra,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _write(run: ScriptRun, cases: Sequence[Case]) -> None:
    """Replace each case directory whole: a case never mixes two runs' files."""
    root = run.port.root / run.port.config.golden_dir
    root.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    for case in cases:
        final = root / case.name
        fresh = root / f".{case.name}.new-{tag}"
        old = root / f".{case.name}.old-{tag}"
        for rel in case.files:
            dest = fresh / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(case.source / rel, dest)
        fresh.mkdir(parents=True, exist_ok=True)
        (fresh / MANIFEST).write_text(_manifest(case, run), encoding="utf-8")
        if final.exists():
            final.rename(old)
        fresh.rename(final)
        shutil.rmtree(old, ignore_errors=True)


def run(port: Port, prefs: Preferences, request: Request | None = None, *,
        note: oracle.Note = lambda _: None, store: gates.Store | None = None) -> Outcome:
    """Run (or mark PENDING) the golden gate and record its result through `store`
    (`gates.record`'s: the CLI's writes the report with it)."""
    req = request or Request()
    cfg = port.config
    oid = oracle.check_id(req.oracle_id or cfg.golden_oracle)
    if not oracle.is_core(oid):
        oracle.oracle_file(port, oid)  # an id no oracle file declares would stay PENDING forever
    validate(cfg.golden_scripts)
    tgt = gates.check_target(port, req.target)
    gate = Gate(gate_name(port, oid, req.shard), oid, tgt, req.shard)
    selected = select(cfg.golden_scripts, req.shard)
    if not selected:
        # Before a PENDING is recorded: its handoff would be refused on every gate host, and
        # the advance would wait on that shard for ever.
        raise UsageError(f"shard {req.shard} has no golden script ({len(cfg.golden_scripts)} "
                         "configured)", "use fewer shards")
    ok, why = gates.eligible(prefs, cfg.golden_needs_gpu)
    if not ok:
        pending = gate.pending(why)
        gates.record(port, tgt, pending, store=store)
        refused = BlockedCycle(f"gate {gate.name} is PENDING: {why}",
                               f"run on a gate host: {pending.handoff}")
        return Outcome(pending, refused=refused if req.strict else None)
    note(f"{why}: running gate {gate.name}")
    started = time.monotonic()
    commit = tgt if oracle.is_core(oid) else oracle.recorded_commit(port, oid)
    verified = oracle_verify.require(port, prefs, oid, commit, say=note)
    script_run = ScriptRun(port, prefs, gate, commit, oracle.oracle_home(port, prefs), verified,
                           started, store)
    return _run_gate(script_run, selected, note)


def _run_gate(run: ScriptRun, selected: list[tuple[int, tuple[str, ...]]],
              note: oracle.Note) -> Outcome:
    """Run the scripts under the isolation watch (omni) and record the gate's result."""
    gate = run.gate
    with oracle_watch.omni_watch(run.port, run.prefs, run.home, gate.oracle, run.commit,
                                 "golden") as watch:
        try:
            results = _run_scripts(run, selected, note)
        except _ScriptFailed as exc:
            gates.record(run.port, gate.target, run.result("FAIL", exc.message),
                         store=run.store)
            raise CheckFailed(f"gate {gate.name} FAILED: {exc.message}",
                              "fix the cause (the dump script, or the oracle it ran with), "
                              "then run golden again") from None
    if watch is not None and watch.problems:
        for line in watch.problems:
            note(f"isolation: {line}")
        gates.record(run.port, gate.target,
                     run.result("FAIL", f"omni isolation broken: {watch.problems[0]}"),
                     store=run.store)
        raise IdentityMismatch(
            f"gate {gate.name}: the {gate.oracle} run changed what the core pin measures "
            "itself from", "treat the omni advance as a core sync cycle")
    passed = run.result("PASS", summary(results))
    gates.record(run.port, gate.target, passed, store=run.store)
    return Outcome(passed, tuple(results))


def _run_scripts(run: ScriptRun, selected: list[tuple[int, tuple[str, ...]]],
                 note: oracle.Note) -> list[CaseResult]:
    cases: list[Case] = []
    seen: dict[str, int] = {}
    with oracle.scratch(run.port, run.prefs, run.home) as tmp:
        for number, script in selected:
            out = tmp / f"out-{number}"
            out.mkdir()
            found = _run_script(run, number, script, out, note)
            for case in found:
                if case.name in seen:
                    raise _ScriptFailed(f"case {case.name!r} written by golden scripts "
                                        f"{seen[case.name]} and {number}")
                seen[case.name] = number
            cases += found
        results = drift(run.port, cases)
        _write(run, cases)
    return results


def _run_script(run: ScriptRun, number: int, script: tuple[str, ...], out: Path,
                note: oracle.Note) -> list[Case]:
    """Run script `number` (its output goes to `out`) and collect the cases it wrote."""
    argv = [expand(a, run.values(out)) for a in script]
    note(f"golden script {number}: {shlex.join(argv)}")
    try:
        done = proc.Command(tuple(argv), cwd=run.port.root, env=script_environ(run.env),
                            what=f"golden script {number}").run()
    except proc.ProcessFailed as exc:
        raise _ScriptFailed(exc.message) from None
    if not done.ok:
        text = proc.lines(done.stderr)
        for line in text[-proc.TAIL:]:
            note(f"  | {line}")
        raise _ScriptFailed(f"golden script {number} exited {done.returncode}"
                            + (f": {text[-1].strip()}" if text else ""))
    found = _collect(out, number, script)
    if not found and not self_sharding(script):
        raise _ScriptFailed(f"golden script {number} wrote no case under {{out}}")
    return found


def manifests(port: Port) -> list[dict[str, Any]]:
    """Every case manifest under the golden directory as written (unreadable ones left out:
    they then vouch for no gate)."""
    root = port.root / port.config.golden_dir
    out = []
    for path in sorted(root.glob(f"*/{MANIFEST}")) if root.is_dir() else []:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("oracle"), dict):
            out.append(doc)
    return out
