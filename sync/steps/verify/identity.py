"""Oracle verification: the probe against the records, one mismatch per line.

An identity is measured twice, independently: the version strings (the runtime's
`+g<sha>`, the distribution's build-mode suffix) and `__commit_id__` in the
`_version.py` setuptools-scm wrote; both must name the commit. The whole local segment
is matched (`+g<sha>.d20261201`, a dirty build, fails), a shallow clone's
`0.1.devN+g<sha>` is refused, and at a release tag (`0.25.0`, no local segment) the
commit id alone names the commit. Then the installed files are bound to the commit:
the build record must name this installation's RECORD, every RECORD hash must still
hold, and the module's files must be the commit's tree in the source checkout
(`sync.steps.verify.installed`), which no pretended version can fake.

Identities are checked only at the pin (against the pin block, or the oracle file for
omni) and at the cycle's target (the measurement must obey the pin block's rules, and
it is what an advance writes); any other commit is refused, or checked for its shape
alone when asked (`shape only`). Each mismatch may name the forgery it shows; the
refusal names the most telling one in one line (`verdict`).
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from packaging.version import InvalidVersion, Version

from sync.infra.errors import IdentityMismatch, MalformedRecord
from sync.port import Port
from sync.records import gates, modes, pins
from sync.records.config import OracleConfig
from sync.records.prefs import Preferences
from sync.steps.verify import installed, isolation
from sync.steps.verify.oracle import (
    MARKER,
    Note,
    Role,
    Settings,
    check_id,
    checkouts,
    env_path,
    is_core,
    oracle_file,
    oracle_home,
    settings,
    source_path,
    under,
    unreadable,
    verify_commit,
)
from sync.steps.verify.probe import Probe, probe_env
from sync.steps.verify.watch import forbidden_roots, omni_measure, omni_watch
from sync.upstream import gitio
from sync.upstream.gitio import short

_LOCAL_SHA = re.compile(r"g([0-9a-f]{7,40})")
_DIRTY = re.compile(r"d\d{8}")

# The forgeries (and other kinds of wrong) a mismatch can show, most telling first: the
# refusal names the first kind present.
VERDICTS: dict[str, str] = {
    "override": "a version override (VLLM_VERSION_OVERRIDE)",
    "pretend-version": "a pretended version (SETUPTOOLS_SCM_PRETEND_VERSION)",
    "shallow": "a shallow-clone build",
    "dirty": "a dirty checkout",
    "foreign": "a foreign commit",
    "modified": "files modified after the install",
    "tree": "files that are not the commit's tree (SETUPTOOLS_SCM_PRETEND_METADATA, or a "
            "stale build tree)",
    "copied-record": "a copied or hand-written build record",
    "copied-env": "a copied environment",
    "mode": "the wrong build mode",
    "record": "no build record",
}


@dataclass(frozen=True)
class Mismatch:
    field: str
    message: str
    kind: str | None = None  # the VERDICTS key it shows, when it shows one

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def verdict(found: list[Mismatch] | tuple[Mismatch, ...]) -> str:
    """One line naming what is most wrong: the first VERDICTS kind present, with its reason."""
    for kind, said in VERDICTS.items():
        first = next((m for m in found if m.kind == kind), None)
        if first is not None:
            return f"{said}: {first}"
    return str(found[0]) if found else "no mismatch"


class Identity(TypedDict):
    """The uniform oracle identity written into manifests and gate results."""

    oracle: str
    commit: str
    runtime_version: str | None
    distribution_version: str | None
    commit_id: str | None  # __commit_id__ of the runtime's _version.py
    flashinfer_version: str | None
    torch_version: str | None
    build_mode: str | None
    binaries: str | None  # where precompiled binaries came from, when the build used any
    vllm_commit: str | None  # the vLLM commit results ran against (omni: its env's vLLM)
    vllm_version: str | None
    host: str
    time: str


def identity_map(ident: Identity) -> dict[str, str | None]:
    return {k: (v if isinstance(v, str) else None) for k, v in ident.items()}


def local_commit(version: str | None) -> str | None:
    """The hex of a `+g<hex>` local segment (before any build suffix), if any."""
    if not version or "+" not in version:
        return None
    m = _LOCAL_SHA.match(version.partition("+")[2])
    return m.group(1) if m else None


def binaries_line(p: Probe) -> str | None:
    b = p.build.binaries if p.build is not None else None
    if not b:
        return None
    line = (f"{b.get('wheel') or b.get('location') or 'unknown wheel'} (version "
            f"{b.get('version') or 'unknown'}, commit "
            f"{'g' + str(b['commit']) if b.get('commit') else 'unknown'})")
    return line + (f"; warning: {b['warning']}" if b.get("warning") else "")


def identity(p: Probe) -> Identity:
    core = is_core(p.oracle)
    return {
        "oracle": p.oracle, "commit": p.commit, "runtime_version": p.runtime_version,
        "distribution_version": p.distribution_version, "commit_id": p.commit_id,
        "flashinfer_version": p.flashinfer_version, "torch_version": p.torch_version,
        "build_mode": p.build.build_mode if p.build else None, "binaries": binaries_line(p),
        "vllm_commit": p.commit if core else local_commit(p.vllm_version),
        "vllm_version": p.distribution_version if core else p.vllm_version,
        "host": gates.hostname(), "time": gates.now(),
    }


# -- the version strings and the commit id ----------------------------------------------------


def runtime_rule(runtime: str, commit: str) -> list[Mismatch]:
    """Why the runtime version does not name `commit` (empty when it does, or is a release)."""
    try:
        parsed = Version(runtime)
    except InvalidVersion:
        return [Mismatch("commit", f"runtime version {runtime!r} is not a valid version")]
    if pins.is_shallow_shape(parsed):
        return [Mismatch("commit", f"runtime version {runtime!r} is a shallow clone's "
                         "(0.1.devN: setuptools-scm saw no tag)", "shallow")]
    local = runtime.partition("+")[2]
    if not local:
        return []  # a release: only __commit_id__ names the commit
    head, _, rest = local.partition(".")
    m = _LOCAL_SHA.fullmatch(head)
    if m is None:
        return [Mismatch("commit", f"runtime version {runtime!r} has a local segment that is "
                         "not g<7..40 hex>")]
    out = []
    if not commit.startswith(m.group(1)):
        out.append(Mismatch("commit", f"runtime version {runtime!r} names g{m.group(1)}, not "
                            f"{short(commit)}: built at another commit", "foreign"))
    if rest:
        out.append(_rest(runtime, rest))
    return out


def _rest(runtime: str, rest: str) -> Mismatch:
    if _DIRTY.fullmatch(rest.split(".")[0]):
        return Mismatch("commit", f"runtime version {runtime!r} carries .{rest}: setuptools-scm "
                        "marks a checkout with uncommitted changes so", "dirty")
    if modes.from_suffix(rest) is not None:
        return Mismatch("commit", f"runtime version {runtime!r} carries the build-mode suffix "
                        f".{rest}: the version was set whole, not computed from git", "override")
    return Mismatch("commit", f"runtime version {runtime!r} has a local segment that is not "
                    "exactly g<7..40 hex>")


def commit_rule(runtime: str, commit: str) -> str | None:
    """Why `runtime` does not name `commit` (None when it does)."""
    found = runtime_rule(runtime, commit)
    if found:
        return found[0].message
    if "+" not in runtime:
        return (f"runtime version {runtime!r} has no +g<sha> local segment: a released "
                f"version names commit {short(commit)} only through __commit_id__")
    return None


def _commit_id(p: Probe, cfg: OracleConfig, st: Settings) -> list[Mismatch]:
    vf = p.version_file
    where = f"{cfg.module}/_version.py"
    if p.files is None:
        return []  # not exactly one distribution to read it from: reported already
    if vf is None:
        return [Mismatch("commit id", f"{where} is not installed: not written by "
                         "setuptools-scm, so there is no second measurement of the commit")]
    if not vf.has_commit_id:
        return [Mismatch("commit id", f"{where} assigns no __commit_id__ (setuptools-scm "
                         "before 9 writes none): the commit cannot be measured twice")]
    if vf.commit_id is None:
        whole = p.runtime_version == p.distribution_version and not modes.fits(st.mode, None)
        if whole:
            return [Mismatch("commit id", f"{where} has __commit_id__ None and the build added "
                             "no build-mode suffix: the version was set whole, not measured "
                             "from git", "override")]
        return [Mismatch("commit id", f"{where} has __commit_id__ None: setuptools-scm writes "
                         "the commit it measured, a pretended version writes none",
                         "pretend-version")]
    m = _LOCAL_SHA.fullmatch(vf.commit_id)
    if m is None:
        return [Mismatch("commit id", f"__commit_id__ {vf.commit_id!r} is not g<7..40 hex>")]
    if not p.commit.startswith(m.group(1)):
        return [Mismatch("commit id", f"__commit_id__ {vf.commit_id} names another commit than "
                         f"{short(p.commit)}", "foreign")]
    return []


def _versions(p: Probe, cfg: OracleConfig, st: Settings) -> list[Mismatch]:
    """Both measurements name the commit; the distribution adds the build mode's suffix."""
    runtime, dist, vf = p.runtime_version, p.distribution_version, p.version_file
    out = []
    if runtime is None and not p.import_error:
        out.append(Mismatch("runtime version", f"{cfg.module}.__version__ is missing"))
    if runtime is not None and vf is not None and vf.version not in (None, runtime):
        out.append(Mismatch("runtime version", f"{cfg.module}.__version__ is {runtime!r} but "
                            f"{cfg.module}/_version.py says {vf.version!r}"))
    measured = runtime or (vf.version if vf is not None else None)
    if measured is not None:
        out += runtime_rule(measured, p.commit)
    out += _commit_id(p, cfg, st)
    if dist is None:
        out.append(Mismatch("distribution version", f"no {cfg.distribution} metadata"))
    elif measured is not None:
        out += _build_mode(p, dist, measured, st)
    return out


def _build_mode(p: Probe, dist: str, runtime: str, st: Settings) -> list[Mismatch]:
    try:
        suffix = pins.split_distribution(dist, runtime, path="oracle")
    except MalformedRecord as exc:
        return [Mismatch("distribution version", exc.message.removeprefix("oracle: ")
                         .replace("vllm_distribution_version", "distribution version"))]
    out = []
    if not modes.fits(st.mode, suffix):
        added = "." + suffix if suffix else "no suffix"
        out.append(Mismatch("build mode", f"the distribution version adds {added}, "
                            f"{modes.a_build(st.mode)} adds {modes.mode(st.mode).shown} "
                            f"(build mode from {st.said_by})", "mode"))
    b = p.build
    if b is not None and b.build_mode != st.mode:
        out.append(Mismatch("build mode", f"built in mode {b.build_mode!r}, but {st.said_by} "
                            f"says {st.mode!r}", "mode"))
    return out


# -- the environment and its files ------------------------------------------------------------


def _few(items: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(items[:3])
    return shown + (f" (+{len(items) - 3} more)" if len(items) > 3 else "")


def _build_record(p: Probe) -> list[Mismatch]:
    """The env was recorded by upstream-sync, to the end, for this oracle at this commit."""
    b = p.build
    if b is None:
        return [Mismatch("build", f"{MARKER} is missing: not built (or adopted) by "
                         "upstream-sync, or the build did not finish", "record")]
    out = []
    if b.commit != p.commit:
        out.append(Mismatch("build", f"built at {short(b.commit)}, expected {short(p.commit)}",
                            "copied-record"))
    if b.oracle != p.oracle:
        out.append(Mismatch("build", f"built for oracle {b.oracle!r}, not {p.oracle!r}",
                            "copied-record"))
    return out


def _files(port: Port, prefs: Preferences, p: Probe, cfg: OracleConfig,
           st: Settings) -> list[Mismatch]:
    """The record names this installation, its files are intact and are the commit's tree."""
    f = p.files
    if f is None:
        return []  # not exactly one distribution: reported with the interpreter
    out = []
    b = p.build
    if b is not None and b.record_sha256 != f.record_sha256:
        out.append(Mismatch("build record", f"{MARKER} names another installation: its "
                            f"{cfg.distribution} RECORD is sha256 {b.record_sha256[:12]}, this "
                            f"environment's is {f.record_sha256[:12]}", "copied-record"))
    if f.changed:
        out.append(Mismatch("installed files", f"{len(f.changed)} installed files differ from "
                            f"the RECORD written at the install: {_few(f.changed)}", "modified"))
    return out + _tree(prefs, p, cfg, st, f) + _scripts(f, Path(p.env))


def _scripts(f: installed.Installed, env: Path) -> list[Mismatch]:
    """The installed scripts run this environment's Python; one this user may not read is
    refused, as every other unreadable installed file is (whose Python it runs is unknown)."""
    try:
        foreign = installed.foreign_scripts(f, env)
    except OSError as exc:
        raise unreadable(env, exc) from None
    return [Mismatch("scripts", f"bin/{script} runs {interpreter}, another environment's "
                     "Python: this environment was copied or moved", "copied-env")
            for script, interpreter in foreign]


def _tree(prefs: Preferences, p: Probe, cfg: OracleConfig, st: Settings,
          f: installed.Installed) -> list[Mismatch]:
    src = source_path(prefs, cfg)
    if src is None:
        return [Mismatch("tree", "the installed files cannot be checked against the commit's "
                         f"tree: ${cfg.source_variable} (the source checkout) is not set")]
    ref = gitio.open_repo(src, what=f"{cfg.id} source checkout", variable=cfg.source_variable)
    if not gitio.has_commit(ref, p.commit):
        return [Mismatch("tree", f"commit {short(p.commit)} is not in {src}: the installed files "
                         "cannot be checked against its tree (run 'upstream-sync fetch')")]
    t = installed.against_tree(f, cfg.module, ref.path, p.commit)
    version_file = f"{cfg.module}/{installed.VERSION_FILE}"
    recorded = set(p.build.not_in_tree) if p.build is not None else set()
    allowed = {version_file} | (set() if modes.mode(st.mode).python_only else recorded)
    extra = [x for x in t.not_in_tree if x not in allowed]
    gone = sorted(recorded - set(t.not_in_tree) - {version_file})
    out = []
    if t.differ:
        out.append(Mismatch("tree", f"{len(t.differ)} installed files differ from the tree of "
                            f"{short(p.commit)}: {_few(t.differ)}", "tree"))
    if extra:
        why = " (a Python-only build ships none)" if modes.mode(st.mode).python_only else ""
        out.append(Mismatch("tree", f"{len(extra)} installed files are not in the tree of "
                            f"{short(p.commit)}{why}: {_few(extra)}", "tree"))
    if t.not_installed:
        out.append(Mismatch("tree", f"{len(t.not_installed)} .py files of the tree of "
                            f"{short(p.commit)} are not installed: {_few(t.not_installed)}",
                            "tree"))
    if gone:
        out.append(Mismatch("tree", f"{len(gone)} recorded binaries are gone: {_few(gone)}",
                            "modified"))
    return out


def _interpreter(p: Probe, cfg: OracleConfig, env: Path) -> list[Mismatch]:
    """The probe ran isolated in the env's own Python, and sees one distribution."""
    out = []
    if not p.isolated:
        out.append(Mismatch("probe", "the oracle's Python did not run in isolated mode (-I)"))
    if p.import_error:
        out.append(Mismatch("module", f"import {cfg.module} failed: {p.import_error}"))
    if not p.sys_prefix or Path(p.sys_prefix).resolve() != env:
        out.append(Mismatch("sys.prefix", f"{p.sys_prefix!r} is not the oracle env {env}"))
    n = len(p.distributions)
    if n != 1:
        where = "; ".join(f"{d.version} at {d.path}" for d in p.distributions)
        out.append(Mismatch("distributions", f"{n} distributions named {cfg.distribution} on "
                            f"the path, expected exactly one" + (f" ({where})" if where else "")))
    return out


def _module_file(port: Port, prefs: Preferences, p: Probe, cfg: OracleConfig,
                 env: Path) -> list[Mismatch]:
    """The module imports from the env, never from a checkout."""
    if not p.module_file:
        return [] if p.import_error else [Mismatch("module file",
                                                   f"{cfg.module} has no __file__")]
    out = []
    mf = Path(p.module_file).resolve()
    if not under(mf, env):
        out.append(Mismatch("module file", f"{p.module_file} is not under the env {env}"))
    for label, root in checkouts(port, prefs):
        if under(mf, root):
            out.append(Mismatch("module file", f"{p.module_file} is under {label} ({root})"))
    return out


def _required(p: Probe, cfg: OracleConfig, st: Settings) -> list[Mismatch]:
    out = []
    if st.require_flashinfer and p.flashinfer_version is None:
        why = "config requires it" if cfg.require_flashinfer else f"{modes.a_build(st.mode)} has it"
        out.append(Mismatch("flashinfer", f"FlashInfer is not installed ({why})"))
    if (cfg.require_torch or cfg.torch_version) and p.torch_version is None:
        out.append(Mismatch("torch", "Torch is not installed (config requires it)"))
    elif cfg.torch_version and p.torch_version is not None:
        public = p.torch_version.partition("+")[0]
        if public != cfg.torch_version:
            out.append(Mismatch("torch", f"oracle has Torch {p.torch_version}, "
                                f"[oracles.{cfg.id}] torch_version says {cfg.torch_version}"))
    return out


def check(port: Port, prefs: Preferences, p: Probe, role: Role = "pin") -> list[Mismatch]:
    """Every way the probed oracle differs from what the records require."""
    cfg = port.config.oracle(p.oracle)
    st = settings(port, p.oracle)
    env = Path(p.env).resolve()
    out = _build_record(p)
    out += _interpreter(p, cfg, env)
    out += _module_file(port, prefs, p, cfg, env)
    if p.editable:
        out.append(Mismatch("editable", f"{cfg.distribution} is installed editable: the oracle "
                            "must be a non-editable install"))
    out += _versions(p, cfg, st)
    out += _files(port, prefs, p, cfg, st)
    out += _required(p, cfg, st)
    if role == "pin":
        out += _against_pin(port, p) if is_core(p.oracle) else _against_oracle_file(port, p)
    return out


def _same(field: str, got: str | None, want: str, where: str) -> list[Mismatch]:
    if got == want:
        return []
    return [Mismatch(field, f"oracle reports {got!r}, {where} says {want!r}")]


def _against_pin(port: Port, p: Probe) -> list[Mismatch]:
    pin = port.pin_record().pin
    where = f"the pin block ({port.rel(port.protocol)})"
    out = _same("runtime version", p.runtime_version, pin.runtime_version, where)
    out += _same("distribution version", p.distribution_version, pin.distribution_version,
                 where)
    if pin.commit_id is not None:
        out += _same("commit id", p.commit_id, pin.commit_id, f"{where} ({pins.COMMIT_ID})")
    if p.flashinfer_version is not None:  # absent: reported above when it is required
        out += _same("flashinfer", p.flashinfer_version, pin.flashinfer_version, where)
    return out


def _against_oracle_file(port: Port, p: Probe) -> list[Mismatch]:
    of = oracle_file(port, p.oracle)
    if p.runtime_version is None:
        return []
    public = p.runtime_version.partition("+")[0]
    return _same("pin label", public, of.pin_label, f"{port.rel(of.path)} (pin_label)")


# -- verification -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    probe: Probe
    mismatches: tuple[Mismatch, ...]
    identity: Identity
    role: Role = "pin"
    isolation_check: isolation.Check | None = None  # omni: the check its verify measured

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def verdict(self) -> str:
        return verdict(self.mismatches)


def verify(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None, *,
           shape_only: bool = False) -> Verification:
    """Probe and check; omni oracles also prove isolation (recorded either way)."""
    # The oracle first: an id no oracle file declares is the mistake to name, before where
    # its environments would live.
    commit, role = verify_commit(port, prefs, check_id(oracle_id), commit_spec,
                                 shape_only=shape_only)
    return _verify_at(port, prefs, oracle_id, commit, role)


def verify_candidate(port: Port, prefs: Preferences, oracle_id: str, commit: str, *,
                     store: bool = True) -> Verification:
    """`verify` of the commit an advance is about to pin (an omni advance has no cycle
    target), checked as a target; without `store` (a dry run) its isolation check is
    measured and returned in `isolation_check`, never recorded."""
    commit, role = verify_commit(port, prefs, check_id(oracle_id), commit, shape_only=True)
    return _verify_at(port, prefs, oracle_id, commit,
                      "target" if role == "shape only" else role, store=store)


def _verify_at(port: Port, prefs: Preferences, oracle_id: str, commit: str, role: Role, *,
               store: bool = True) -> Verification:
    home = oracle_home(port, prefs)
    env = env_path(home, oracle_id, commit)
    guard = (omni_watch(port, prefs, home, oracle_id, commit, "verify") if store
             else omni_measure(port, prefs, home, oracle_id, "verify"))
    with guard as watch:
        p = probe_env(port, prefs, oracle_id, commit, env, home)
        found = check(port, prefs, p, role)
        if watch is not None:
            watch.problems.extend(isolation.scan(env, forbidden_roots(port, prefs, home),
                                                 p.sys_path))
    if watch is None:
        return Verification(p, tuple(found), identity(p), role)
    found += [Mismatch("isolation", x) for x in watch.problems]
    return Verification(p, tuple(found), identity(p), role, watch.check)


def verify_gate(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None,
                *, shape_only: bool = False, store: gates.Store | None = None
                ) -> Verification:
    """`verify`; checking the core oracle at the gate target also records gate oracle:<id>
    through `store` (`gates.record`'s: the CLI's writes the report with it), kept as it was
    when this verification found what it holds: only its time would change."""
    started = time.monotonic()
    v = verify(port, prefs, oracle_id, commit_spec, shape_only=shape_only)
    if is_core(oracle_id) and v.role != "shape only" \
            and v.probe.commit == gates.current_target(port):
        argv = ["upstream-sync", "oracle", "verify", "--oracle", oracle_id,
                "--commit", v.probe.commit]
        gates.record(port, v.probe.commit, gates.GateResult(
            f"oracle:{oracle_id}", "PASS" if v.ok else "FAIL", shlex.join(argv),
            round(time.monotonic() - started, 3), gates.hostname(), gates.now(), None,
            None if v.ok else f"{len(v.mismatches)} mismatch(es): {v.verdict}",
            identity_map(v.identity)), keep_same=True, store=store)
    return v


def refusal(oracle_id: str, v: Verification, *, adopting: bool = False) -> IdentityMismatch:
    n = len(v.mismatches)
    build = f"upstream-sync oracle build --oracle {oracle_id} --commit {v.probe.commit}"
    fix = (f"it is not the oracle of {short(v.probe.commit)}: build one ('{build}') instead "
           "(--json lists every mismatch)" if adopting else
           f"rebuild it ('{build} --rebuild') or correct the records from a measured oracle")
    return IdentityMismatch(
        f"oracle {oracle_id} at {short(v.probe.commit)} refused ({n} mismatch"
        f"{'es' if n != 1 else ''}): {v.verdict}", fix)


def require(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None,
            *, say: Note = lambda _: None) -> Verification:
    """`verify`, raising IdentityMismatch after one `say` line per mismatch."""
    v = verify(port, prefs, oracle_id, commit_spec)
    if not v.ok:
        for m in v.mismatches:
            say(f"mismatch: {m}")
        raise refusal(oracle_id, v)
    return v


def measured_pin(port: Port, p: Probe) -> pins.Pin:
    """The pin block a verified measurement makes: `vllm_commit_id` is written where the
    runtime names no commit (a release) and kept wherever the block already asserts it."""
    current = port.pin_record().pin
    if p.runtime_version is None or p.distribution_version is None:
        raise IdentityMismatch("the oracle measurement has no version strings",
                               "rebuild the oracle at the target")
    keep = current.commit_id is not None or "+" not in p.runtime_version
    return pins.from_values(p.commit, p.runtime_version, p.distribution_version,
                            p.flashinfer_version or current.flashinfer_version,
                            path=port.rel(port.protocol),
                            commit_id=p.commit_id if keep else None)
