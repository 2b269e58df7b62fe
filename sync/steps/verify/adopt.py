"""`oracle adopt PATH`: measure an existing environment, verify it, and record it unbuilt.

A port may keep its oracle where its own tools expect it (`~/venvs/vllm-oracle-next`,
often behind a symlink). Adopting measures that environment exactly as `verify` does
(both version measurements, the installed files against the commit's tree in the
source checkout, the build mode, the records at the pin or the cycle's target), with
a build record made from the measurement itself; only when nothing is wrong is the
record written into the environment (with its dependency set) and
`<oracle_home>/<id>-<commit10>` linked to it; an environment `oracle build` made keeps the
record it has (its log, constraints, installer settings) when that record verifies. A refusal
writes nothing and names, in one line, the forgery the environment shows. Nothing of the
environment is rebuilt or moved; `oracle gc` drops only the link.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from sync.infra import proc
from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.port import Port
from sync.records import gates
from sync.records.prefs import Preferences
from sync.steps.verify import build, installed
from sync.steps.verify import identity as oracle_verify
from sync.steps.verify.oracle import (
    BuildRecord,
    Note,
    check_id,
    checkouts,
    env_path,
    oracle_home,
    python_of,
    settings,
    source_path,
    under,
    verify_commit,
    write_marker,
)
from sync.steps.verify.probe import Probe, probe_env, probe_environ


@dataclass(frozen=True)
class Adopted:
    env: Path  # <oracle_home>/<id>-<commit10> (a link to `real` unless it is `real`)
    real: Path
    verification: oracle_verify.Verification
    record: BuildRecord | None  # None when refused (nothing written)


def _target(path: Path, port: Port, prefs: Preferences) -> Path:
    real = path.expanduser().resolve()
    if not real.is_dir() or python_of(real) is None:
        raise EnvironmentUnresolved(f"{path} is not a virtualenv (no bin/python)",
                                    "give the directory of the environment to adopt")
    for label, root in checkouts(port, prefs):
        if under(real, root):
            raise UsageError(f"{real} lies inside {label} at {root}: an oracle lives outside "
                             "every checkout", "move the environment, then adopt it")
    return real


def _direct_url(inst: installed.Installed) -> tuple[str | None, str | None]:
    """The wheel the distribution was installed from, and its sha256, when pip recorded it."""
    try:
        doc = json.loads((inst.dist_info / "direct_url.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str):
        return None, None
    info = doc.get("archive_info")
    hashes = info.get("hashes") if isinstance(info, dict) else None
    digest = hashes.get("sha256") if isinstance(hashes, dict) else None
    return doc["url"].rsplit("/", 1)[-1], digest if isinstance(digest, str) else None


def _measured(port: Port, prefs: Preferences, p: Probe, real: Path) -> BuildRecord | None:
    """The build record the measurement itself makes (None: no one distribution to bind)."""
    cfg = port.config.oracle(p.oracle)
    src = source_path(prefs, cfg)
    if p.files is None or src is None:
        return None
    tree = installed.against_tree(p.files, cfg.module, src, p.commit)
    mode = settings(port, p.oracle).mode
    binaries = None
    if mode == "precompiled":
        binaries = {"location": None, "wheel": None, "version": None, "commit": None,
                    "requested": None, "sha256": None,
                    "files": str(sum(not x.endswith("/" + installed.VERSION_FILE)
                                     for x in tree.not_in_tree)),
                    "warning": "adopted: where its precompiled binaries came from is not known"}
    wheel, digest = _direct_url(p.files)
    installer = (p.files.dist_info / "INSTALLER")
    return BuildRecord(
        oracle=p.oracle, commit=p.commit, build_mode=mode, build_env={},
        installer=installer.read_text(encoding="utf-8").strip() if installer.is_file() else "",
        python=str((real / "bin" / "python").resolve()), source=str(src),
        host=gates.hostname(), built_at=gates.now(), origin="adopted", log=None,
        record_sha256=p.files.record_sha256, not_in_tree=list(tree.not_in_tree),
        binaries=binaries, wheel=wheel, wheel_sha256=digest, constraints=None,
        constraints_sha256=None, freeze_sha256=None, inputs={})


def adopt(port: Port, prefs: Preferences, oracle_id: str, path: Path,
          commit_spec: str | None = None, *, note: Note = lambda _: None) -> Adopted:
    check_id(oracle_id)
    home = oracle_home(port, prefs)
    commit, role = verify_commit(port, prefs, oracle_id, commit_spec)
    real = _target(path, port, prefs)
    env = env_path(home, oracle_id, commit)
    p = probe_env(port, prefs, oracle_id, commit, real, home)
    if p.build is not None and p.build.origin == "built" \
            and not oracle_verify.check(port, prefs, p, role):
        # `oracle build` made it and its record holds: the record is the build's provenance
        # (log, constraints, installer settings, binaries), which a measurement cannot make.
        _link(env, real)
        note(f"kept its build record (built {p.build.built_at}): linked {real} as {env}")
        again = oracle_verify.verify(port, prefs, oracle_id, commit)
        return Adopted(env, real, again, p.build if again.ok else None)
    record = _measured(port, prefs, p, real)
    found = oracle_verify.check(port, prefs, replace(p, build=record), role)
    if record is None:
        # An environment not yet adopted has no build record: that is the normal state, not
        # the refusal. What kept the measurement from making one (vllm does not import, not
        # one distribution, no source checkout) is reported beside it, and leads instead.
        found = [m for m in found if m.kind != "record"] or found
    v = oracle_verify.Verification(p, tuple(found), oracle_verify.identity(p), role)
    if found or record is None:
        return Adopted(env, real, v, None)
    _free(env, real)
    uv = build.find_uv()
    record = replace(record, freeze_sha256=build.freeze(real, uv, _runner(real)))
    write_marker(real, record)
    _link(env, real)
    note(f"recorded {real} as {env} ({record.build_mode} build)")
    again = oracle_verify.verify(port, prefs, oracle_id, commit)
    return Adopted(env, real, again, record if again.ok else None)


def _free(env: Path, real: Path) -> None:
    """`<oracle_home>/<id>-<commit10>` is free for `real`, or already is it."""
    if (env.exists() or env.is_symlink()) and env.resolve() != real:
        raise UsageError(f"{env} already exists (it is {env.resolve()})",
                         "drop it ('upstream-sync oracle gc', or remove it), then adopt again")


def _link(env: Path, real: Path) -> None:
    """`env` (in the oracle home) is `real`, or a link to it."""
    _free(env, real)
    if env.resolve() != real:
        env.parent.mkdir(parents=True, exist_ok=True)
        env.symlink_to(real, target_is_directory=True)


def _runner(real: Path) -> build.Runner:
    def run(argv: list[str], what: str) -> bytes:
        return proc.Command(tuple(argv), cwd=real, env=probe_environ(), what=what,
                            fix="check the environment's pip").run().check().stdout

    return run
