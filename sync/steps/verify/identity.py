"""Oracle verification: the probe against the records, one mismatch per line.

The probe is checked against the pin block (core) or the oracle file (omni). At
a commit other than the recorded pin (a cycle target) the strings cannot be
known in advance; the measurement must then obey the rules a pin block obeys
(the runtime's `+g<sha>` names the commit, the distribution adds only the
recorded build mode's suffix), and it is what an advance writes into the pin
block. Omni oracles also prove their isolation while they are verified.
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
from sync.records import gates, pins
from sync.records.config import OracleConfig
from sync.records.prefs import Preferences
from sync.steps.verify import isolation
from sync.steps.verify.oracle import (
    MARKER,
    Note,
    check_id,
    checkouts,
    env_path,
    is_core,
    oracle_file,
    oracle_home,
    resolve_commit,
    under,
)
from sync.steps.verify.probe import Probe, probe_env
from sync.steps.verify.watch import forbidden_roots, omni_watch

_LOCAL_SHA = re.compile(r"g([0-9a-f]{7,40})")

@dataclass(frozen=True)
class Mismatch:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class Identity(TypedDict):
    """The uniform oracle identity written into manifests and gate results."""

    oracle: str
    commit: str
    runtime_version: str | None
    distribution_version: str | None
    flashinfer_version: str | None
    torch_version: str | None
    build_mode: str | None
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


def identity(p: Probe) -> Identity:
    core = is_core(p.oracle)
    return {
        "oracle": p.oracle, "commit": p.commit, "runtime_version": p.runtime_version,
        "distribution_version": p.distribution_version,
        "flashinfer_version": p.flashinfer_version, "torch_version": p.torch_version,
        "build_mode": p.build.build_mode if p.build else None,
        "vllm_commit": p.commit if core else local_commit(p.vllm_version),
        "vllm_version": p.distribution_version if core else p.vllm_version,
        "host": gates.hostname(), "time": gates.now(),
    }


def commit_rule(runtime: str, commit: str) -> str | None:
    """Why `runtime` does not name `commit` (None when it does)."""
    try:
        parsed = Version(runtime)
    except InvalidVersion:
        return f"runtime version {runtime!r} is not a valid version"
    if parsed.local is None:
        return (f"runtime version {runtime!r} has no +g<sha> local segment: a released wheel "
                f"cannot name commit {commit[:10]}")
    sha = local_commit(runtime)
    if sha is None:
        return f"runtime version {runtime!r} has a local segment that is not g<7..40 hex>"
    if not commit.startswith(sha):
        return (f"runtime version {runtime!r} names g{sha}, not a prefix of {commit[:10]} "
                "(built from another checkout? a shallow clone yields 0.1.devN+g<sha>)")
    return None


def expected_suffix(build_mode: str) -> str | None:
    return None if build_mode == "source" else build_mode


def _same(field: str, got: str | None, want: str, where: str) -> list[Mismatch]:
    if got == want:
        return []
    return [Mismatch(field, f"oracle reports {got!r}, {where} says {want!r}")]


def check(port: Port, prefs: Preferences, p: Probe) -> list[Mismatch]:
    """Every way the probed oracle differs from what the records require."""
    cfg = port.config.oracle(p.oracle)
    env = Path(p.env).resolve()
    out = _build_record(p)
    out += _interpreter(p, cfg, env)
    out += _module_file(port, prefs, p, cfg, env)
    if p.editable:
        out.append(Mismatch("editable", f"{cfg.distribution} is installed editable: the oracle "
                            "must be a non-editable install"))
    out += _versions(p, cfg)
    out += _required(p, cfg)
    if is_core(p.oracle):
        out += _against_pin(port, p)
    else:
        out += _against_oracle_file(port, p)
    return out


def _build_record(p: Probe) -> list[Mismatch]:
    """The env was built by upstream-sync, to the end, for this oracle at this commit."""
    b = p.build
    if b is None:
        return [Mismatch("build", f"{MARKER} is missing: not built by upstream-sync, or the "
                         "build did not finish")]
    out = []
    if b.commit != p.commit:
        out.append(Mismatch("build", f"built at {b.commit[:10]}, expected {p.commit[:10]}"))
    if b.oracle != p.oracle:
        out.append(Mismatch("build", f"built for oracle {b.oracle!r}, not {p.oracle!r}"))
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


def _versions(p: Probe, cfg: OracleConfig) -> list[Mismatch]:
    """The runtime version names the commit; the distribution adds the build mode's suffix."""
    runtime, dist = p.runtime_version, p.distribution_version
    out = []
    if runtime is None:
        if not p.import_error:
            out.append(Mismatch("runtime version", f"{cfg.module}.__version__ is missing"))
    else:
        why = commit_rule(runtime, p.commit)
        if why is not None:
            out.append(Mismatch("commit", why))
    if dist is None:
        out.append(Mismatch("distribution version", f"no {cfg.distribution} metadata"))
    elif runtime is not None:
        out += _build_mode(p, dist, runtime)
    return out


def _build_mode(p: Probe, dist: str, runtime: str) -> list[Mismatch]:
    try:
        suffix = pins.split_distribution(dist, runtime, path="oracle")
    except MalformedRecord as exc:
        return [Mismatch("distribution version", exc.message.removeprefix("oracle: ")
                         .replace("vllm_distribution_version", "distribution version"))]
    b = p.build
    if b is None or suffix == expected_suffix(b.build_mode):
        return []
    return [Mismatch("build mode", f"recorded build mode {b.build_mode!r} but the distribution "
                     f"version adds {'.' + suffix if suffix else 'no suffix'}")]


def _required(p: Probe, cfg: OracleConfig) -> list[Mismatch]:
    out = []
    if cfg.require_flashinfer and p.flashinfer_version is None:
        out.append(Mismatch("flashinfer", "FlashInfer is not installed (config requires it)"))
    if cfg.require_torch and p.torch_version is None:
        out.append(Mismatch("torch", "Torch is not installed (config requires it)"))
    return out


def _against_pin(port: Port, p: Probe) -> list[Mismatch]:
    pin = port.pin_record().pin
    where = f"the pin block ({port.rel(port.protocol)})"
    if p.commit != pin.commit:
        return []  # a cycle target: nothing recorded to compare strings with yet
    out = _same("runtime version", p.runtime_version, pin.runtime_version, where)
    out += _same("distribution version", p.distribution_version, pin.distribution_version,
                 where)
    if p.flashinfer_version is not None:  # absent: reported above when config requires it
        out += _same("flashinfer", p.flashinfer_version, pin.flashinfer_version, where)
    return out


def _against_oracle_file(port: Port, p: Probe) -> list[Mismatch]:
    of = oracle_file(port, p.oracle)
    if of.pin != p.commit or p.runtime_version is None:
        return []
    public = p.runtime_version.partition("+")[0]
    return _same("pin label", public, of.pin_label, f"{port.rel(of.path)} (pin_label)")


@dataclass(frozen=True)
class Verification:
    probe: Probe
    mismatches: tuple[Mismatch, ...]
    identity: Identity

    @property
    def ok(self) -> bool:
        return not self.mismatches


def verify(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None
           ) -> Verification:
    """Probe and check; omni oracles also prove isolation (recorded either way)."""
    home = oracle_home(port, prefs)
    commit = resolve_commit(port, prefs, check_id(oracle_id), commit_spec)
    env = env_path(home, oracle_id, commit)
    with omni_watch(port, prefs, home, oracle_id, commit, "verify") as watch:
        p = probe_env(port, prefs, oracle_id, commit, env, home)
        found = check(port, prefs, p)
        if watch is not None:
            watch.problems.extend(isolation.scan(env, forbidden_roots(port, prefs, home),
                                                 p.sys_path))
    if watch is not None:
        found += [Mismatch("isolation", x) for x in watch.problems]
    return Verification(p, tuple(found), identity(p))


def verify_gate(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None
                ) -> Verification:
    """`verify`; checking the core oracle at the gate target also records gate oracle:<id>."""
    started = time.monotonic()
    v = verify(port, prefs, oracle_id, commit_spec)
    if is_core(oracle_id) and v.probe.commit == gates.current_target(port):
        argv = ["upstream-sync", "oracle", "verify", "--oracle", oracle_id,
                "--commit", v.probe.commit]
        gates.record(port, v.probe.commit, gates.GateResult(
            f"oracle:{oracle_id}", "PASS" if v.ok else "FAIL", shlex.join(argv),
            round(time.monotonic() - started, 3), gates.hostname(), gates.now(), None,
            None if v.ok else f"{len(v.mismatches)} mismatch(es): {v.mismatches[0]}",
            identity_map(v.identity)))
    return v


def require(port: Port, prefs: Preferences, oracle_id: str, commit_spec: str | None = None,
            *, say: Note = lambda _: None) -> Verification:
    """`verify`, raising IdentityMismatch after one `say` line per mismatch."""
    v = verify(port, prefs, oracle_id, commit_spec)
    if not v.ok:
        for m in v.mismatches:
            say(f"mismatch: {m}")
        raise IdentityMismatch(
            f"oracle {oracle_id} at {v.probe.commit[:10]} failed verification with "
            f"{len(v.mismatches)} mismatch{'es' if len(v.mismatches) != 1 else ''}",
            f"rebuild it ('upstream-sync oracle build --oracle {oracle_id} --commit "
            f"{v.probe.commit} --rebuild') or correct the records from a measured oracle")
    return v
