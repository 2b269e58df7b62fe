"""Omni isolation: proof that an omni oracle never touches the core one.

The protocol lets the omni pin advance without re-opening the core binding grids
only while the omni oracle lives in its own virtualenv and touches neither
`$VLLM_SOURCE` nor the environment the core pin measures itself from. We prove it
instead of trusting it:

- the fingerprint (every installed distribution, its version, a hash of its RECORD,
  and the `.pth` files) of every core environment that matters -- the pin's and, with a
  cycle open, its target's where it is built (the one the advance pins next) -- and
  the reference checkout's state (HEAD and `git status`) are taken before and after
  every omni operation (build, verify, golden) and must be unchanged;
- no path in the omni environment (symlinks, `.pth` lines, `direct_url.json`,
  script shebangs, `pyvenv.cfg`, the probed `sys.path`) points into a core
  environment or the reference checkout.

Each check is recorded in `<sync_dir>/isolation/<omni-id>-<commit10>.json`, with
the digest of each core environment it watched; a failure is sticky for that omni
commit, and `require` refuses the omni advance as one that must be re-validated as a
core sync cycle, naming the core environment that changed. A later PASS of the operation
never hides the failure while a core environment the failed check watched is still the one
it may have touched: it stands only once each of them is gone or was built (or adopted)
again after the failure -- the core sync cycle's rebuild of the core oracle, which the
refusal names as commands. A proof whose checks did not
watch the environment the core pin measures itself from now (made before a core advance)
proves nothing about it: `require` refuses it until the checks are run again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args, get_type_hints
from urllib.parse import unquote, urlparse

from sync.infra.atomic import read_record, write_text
from sync.infra.errors import BlockedCycle, MalformedRecord, SyncError, UsageError
from sync.infra.hashing import file_sha256
from sync.port import Port
from sync.records import gates
from sync.steps.verify.oracle import read_marker
from sync.upstream import gitio
from sync.upstream.gitio import short

SCHEMA = 2
# Schema 1 (still read) named one core environment for the whole proof (`core_env`) and
# gave each check its digest as a string; schema 2 gives each check a digest per core
# environment it watched.
_PROOF_KEYS: dict[int | None, tuple[str, ...]] = {
    1: ("schema", "oracle", "commit", "core_env", "checks"),
    2: ("schema", "oracle", "commit", "checks")}
DIR = "isolation"
Status = Literal["PASS", "FAIL"]
ABSENT = "absent"


@dataclass(frozen=True)
class Fingerprint:
    env: str
    present: bool
    dists: tuple[tuple[str, str, str], ...] = ()  # (metadata dir, version, sha256 of RECORD)
    pth: tuple[tuple[str, str], ...] = ()  # (.pth file, sha256 of its bytes)

    @property
    def digest(self) -> str:
        if not self.present:
            return ABSENT
        doc = json.dumps([self.dists, self.pth], separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(doc).hexdigest()


def site_dirs(env: Path) -> list[Path]:
    """The environment's site-packages (lib64 is usually a link to lib: counted once)."""
    found: dict[Path, Path] = {}
    for pattern in ("lib/python*/site-packages", "lib64/python*/site-packages"):
        for d in sorted(env.glob(pattern)):
            found.setdefault(d.resolve(), d)
    return list(found.values())


def _sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError:
        return "unreadable"


def _metadata_version(meta_dir: Path) -> str:
    for name in ("METADATA", "PKG-INFO"):
        p = meta_dir / name
        if not p.is_file():
            continue
        try:
            with open(p, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip()
        except OSError:
            return "unreadable"
    return "unknown"


def fingerprint(env: Path) -> Fingerprint:
    if not env.is_dir():
        return Fingerprint(str(env), False)
    dists: list[tuple[str, str, str]] = []
    pth: list[tuple[str, str]] = []
    for site in site_dirs(env):
        rel = site.relative_to(env).as_posix()
        for entry in sorted(site.iterdir(), key=lambda p: p.name):
            if entry.suffix in (".dist-info", ".egg-info") and entry.is_dir():
                dists.append((f"{rel}/{entry.name}", _metadata_version(entry),
                              _sha256(entry / "RECORD")))
            elif entry.suffix == ".pth" and entry.is_file():
                pth.append((f"{rel}/{entry.name}", _sha256(entry)))
    return Fingerprint(str(env), True, tuple(dists), tuple(pth))


def compare(before: Fingerprint, after: Fingerprint) -> list[str]:
    """One line per difference (empty when the environment is unchanged)."""
    where = f"core environment {before.env}"
    if before.present != after.present:
        return [f"{where} {'appeared' if after.present else 'disappeared'}"]
    return _dist_changes(where, before, after) + _pth_changes(where, before, after)


def _dist_changes(where: str, before: Fingerprint, after: Fingerprint) -> list[str]:
    out = []
    b = {d[0]: d for d in before.dists}
    a = {d[0]: d for d in after.dists}
    for name in sorted(set(b) | set(a)):
        if name not in a:
            out.append(f"{where}: {name} was removed")
        elif name not in b:
            out.append(f"{where}: {name} was added (version {a[name][1]})")
        elif b[name] != a[name]:
            what = "version" if b[name][1] != a[name][1] else "RECORD"
            out.append(f"{where}: {name} {what} changed")
    return out


def _pth_changes(where: str, before: Fingerprint, after: Fingerprint) -> list[str]:
    bp, ap = dict(before.pth), dict(after.pth)
    return [f"{where}: {name} was " + ("added" if name not in bp else "removed" if name not in ap
                                       else "changed")
            for name in sorted(set(bp) | set(ap)) if bp.get(name) != ap.get(name)]


def source_state(path: Path | None) -> str | None:
    """HEAD plus a hash of `git status`: any write to the checkout changes it."""
    if path is None or not path.is_dir():
        return None
    head = gitio.run(path, ["rev-parse", "HEAD"], check=False).stdout.decode().strip()
    status = gitio.run(path, ["status", "--porcelain=v1", "-z", "--untracked-files=all"],
                       check=False).stdout
    return f"{head} {hashlib.sha256(status).hexdigest()}"


def _under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _resolved(text: str, base: Path) -> Path | None:
    try:
        p = Path(text)
        return (p if p.is_absolute() else base / p).resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def _hit(text: str, base: Path, forbidden: Sequence[tuple[str, Path]]) -> str | None:
    p = _resolved(text, base)
    if p is None:
        return None
    for label, root in forbidden:
        if _under(p, root):
            return label
    return None


def scan(env: Path, forbidden: Sequence[tuple[str, Path]],
         sys_path: Sequence[str] = ()) -> list[str]:
    """Paths in the omni environment that point into a forbidden root (one line each)."""
    roots = [(label, root.resolve()) for label, root in forbidden]
    out: list[str] = []
    for what, text, base in _env_paths(env, sys_path):
        label = _hit(text.strip(), base, roots)
        if label is not None:
            out.append(f"{what} points into {label}: {text.strip()}")
    return out


Found = Iterator[tuple[str, str, Path]]  # (what holds the path, the path, what it is relative to)


def _env_paths(env: Path, sys_path: Sequence[str]) -> Found:
    """Every path the environment names, in the order `scan` reports them."""
    yield from _pyvenv_cfg(env)
    yield from _symlinks(env)
    for site in site_dirs(env):
        yield from _pth_lines(env, site)
        yield from _egg_links(env, site)
        yield from _direct_urls(env, site)
    yield from _shebangs(env)
    for entry in sys_path:
        if entry:
            yield "sys.path entry", entry, env


def _pyvenv_cfg(env: Path) -> Found:
    cfg = env / "pyvenv.cfg"
    if not cfg.is_file():
        return
    for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip().startswith("/"):
            yield f"pyvenv.cfg {key.strip()}", value.strip().split(" ")[0], env


def _symlinks(env: Path) -> Found:
    for dirpath, dirnames, filenames in os.walk(env):
        d = Path(dirpath)
        for name in [*dirnames, *filenames]:
            p = d / name
            if p.is_symlink():
                yield f"symlink {p.relative_to(env)}", os.readlink(p), d


def _pth_lines(env: Path, site: Path) -> Found:
    for pth in sorted(site.glob("*.pth")):
        for line in pth.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip() and not line.startswith(("#", "import ", "import\t")):
                yield f"{pth.relative_to(env)}", line, site


def _egg_links(env: Path, site: Path) -> Found:
    for link in sorted(site.glob("*.egg-link")):
        first = link.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        if first:
            yield f"{link.relative_to(env)}", first[0], site


def _direct_urls(env: Path, site: Path) -> Found:
    for direct in sorted(site.glob("*.dist-info/direct_url.json")):
        try:
            url = json.loads(direct.read_text(encoding="utf-8")).get("url", "")
        except (ValueError, AttributeError):
            continue
        if isinstance(url, str) and url.startswith("file:"):
            yield f"{direct.relative_to(env)}", unquote(urlparse(url).path), site


def _shebangs(env: Path) -> Found:
    bindir = env / "bin"
    if not bindir.is_dir():
        return
    for script in sorted(bindir.iterdir()):
        if script.is_symlink() or not script.is_file():
            continue
        try:
            with open(script, "rb") as fh:
                head = fh.read(512)
        except OSError:
            continue
        if head.startswith(b"#!"):
            line = head[2:].split(b"\n")[0].decode("utf-8", "replace").strip()
            if line:
                yield f"shebang of bin/{script.name}", line.split()[0], bindir


@dataclass(frozen=True)
class Check:
    """One operation's check; in the record, `op` is its key under `checks` and the other
    fields, in this order, its keys. `core_before`/`core_after` map each core environment
    the check watched to its digest (schema 1: one digest, of the proof's `core_env`)."""

    op: str
    status: Status
    time: str
    host: str
    core_before: dict[str, str]
    core_after: dict[str, str]
    problems: tuple[str, ...]


@dataclass(frozen=True)
class Proof:
    """`<sync_dir>/isolation/<id>-<commit10>.json`: `schema`, then these fields in order."""

    oracle: str
    commit: str
    checks: tuple[Check, ...]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "FAIL"]

    @property
    def core_envs(self) -> tuple[str, ...]:
        """Every core environment a check watched, in the order the checks name them."""
        return tuple(dict.fromkeys(e for c in self.checks for e in c.core_after))


def _strings(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that are strings in the record."""
    hints = get_type_hints(cls)
    return tuple(f.name for f in fields(cls) if hints[f.name] is str and f.name != "op")


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1]


STATUSES: tuple[Status, ...] = get_args(Status)
_PROOF_STRINGS = _strings(Proof)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}-[0-9a-f]{4,10}\.json")
_CHECK_KEYS = tuple(f.name for f in fields(Check) if f.name != "op")
_CHECK_STRINGS = _strings(Check)


def path(port: Port, oracle_id: str, commit: str) -> Path:
    name = f"{oracle_id}-{short(commit)}.json"
    if not _NAME.fullmatch(name):  # both come from the command line or a record
        raise UsageError(f"oracle {oracle_id[:40]!r} at {short(commit)!r} names no isolation "
                         "record", "give an oracle id and a commit SHA")
    return port.sync_dir / DIR / name


def _bad(rel: str, message: str) -> MalformedRecord:
    return MalformedRecord(message, "delete it and run 'upstream-sync oracle build' for the "
                           "omni oracle again", path=rel)


def parse(text: str, *, rel: str) -> Proof:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _bad(rel, f"not valid JSON ({type(exc).__name__})") from None
    schema = _schema_of(doc)
    keys = _PROOF_KEYS.get(schema, _PROOF_KEYS[SCHEMA])
    if not isinstance(doc, dict) or set(doc) != set(keys):
        raise _bad(rel, f"expected an object with {_listing(keys)}")
    if schema not in _PROOF_KEYS:
        raise _bad(rel, f"schema {doc['schema']!r}, expected {SCHEMA} (or 1, still read)")
    strings = (*_PROOF_STRINGS, *(k for k in keys if k == "core_env"))  # schema 1's too
    if not all(isinstance(doc[k], str) for k in strings):
        raise _bad(rel, f"{_listing(strings)} must be strings")
    raw_checks = doc["checks"]
    if not isinstance(raw_checks, dict):
        raise _bad(rel, "checks must be an object keyed by operation")
    checks = tuple(_parse_check(rel, op, c, doc.get("core_env"))
                   for op, c in sorted(raw_checks.items()))
    return Proof(**{k: doc[k] for k in _PROOF_STRINGS}, checks=checks)


def _schema_of(doc: object) -> int | None:
    schema = doc.get("schema") if isinstance(doc, dict) else None
    return schema if type(schema) is int else None


def _parse_check(rel: str, op: str, c: object, core_env: str | None) -> Check:
    if not isinstance(c, dict) or set(c) != set(_CHECK_KEYS):
        raise _bad(rel, f"check {op!r} does not have the expected keys")
    if c["status"] not in STATUSES:
        raise _bad(rel, f"check {op!r}: status {c['status']!r} is not {' or '.join(STATUSES)}")
    problems = c["problems"]
    before, after = (_digests(c[k], core_env) for k in ("core_before", "core_after"))
    if not all(isinstance(c[k], str) for k in _CHECK_STRINGS) or not (
            isinstance(problems, list) and all(isinstance(p, str) for p in problems)) or (
            before is None or after is None or set(before) != set(after)):
        raise _bad(rel, f"check {op!r}: values have the wrong types")
    # `watch` writes PASS only for unchanged, present core environments and no problem:
    # a PASS that says otherwise was not written by it (a FAIL edited by hand).
    if c["status"] == "PASS" and (problems or before != after or ABSENT in before.values()):
        raise _bad(rel, f"check {op!r} says PASS but records "
                   + ("problems" if problems else "a core environment that changed or was "
                      "absent") + ": it was not written by the check")
    return Check(op=op, status=c["status"], problems=tuple(problems), core_before=before,
                 core_after=after, **{k: c[k] for k in _CHECK_STRINGS})


def _digests(value: object, core_env: str | None) -> dict[str, str] | None:
    """A check's digests per core environment; schema 1's one digest is `core_env`'s."""
    if core_env is not None:
        return {core_env: value} if isinstance(value, str) else None
    if not isinstance(value, dict) or not value or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return dict(value)


def _read(port: Port, oracle_id: str, commit: str) -> Proof | None:
    p = path(port, oracle_id, commit)
    if not p.exists():
        return None
    return parse(read_record(p, rel=port.rel(p)), rel=port.rel(p))


def load(port: Port, oracle_id: str, commit: str) -> Proof | None:
    """The record of `oracle_id` at `commit`; one filed there for another is refused."""
    proof = _read(port, oracle_id, commit)
    if proof is not None and (proof.oracle, proof.commit) != (oracle_id, commit):
        rel = port.rel(path(port, oracle_id, commit))
        raise _bad(rel, f"it proves oracle {proof.oracle[:40]!r} at {proof.commit[:40]!r}, not "
                   f"{oracle_id} at {commit}: a record copied from another commit proves "
                   "nothing about this one")
    return proof


def _render(proof: Proof) -> str:
    doc = {"schema": SCHEMA, **{k: getattr(proof, k) for k in _PROOF_STRINGS},
           "checks": {c.op: {k: _plain(getattr(c, k)) for k in _CHECK_KEYS}
                      for c in proof.checks}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def record(port: Port, oracle_id: str, commit: str, check: Check) -> Proof:
    """Store `check`; a FAIL already recorded for this omni commit is never overwritten, and
    a check that only re-dates the one recorded leaves the file as it is (it is committed:
    an omni verify run again must not leave the port's tree dirty)."""
    with gates.locked(port):
        old = _read(port, oracle_id, commit)
        if old is not None and (old.oracle, old.commit) != (oracle_id, commit):
            old = None  # filed here for another commit: none of its checks are this one's
        checks = {c.op: c for c in (old.checks if old else ())}
        if old is not None and _kept(checks.get(check.op), check):
            return old
        checks[check.op] = check
        proof = Proof(oracle_id, commit, tuple(checks[op] for op in sorted(checks)))
        write_text(path(port, oracle_id, commit), _render(proof))
    return proof


def _kept(prev: Check | None, check: Check) -> bool:
    """Whether the recorded `prev` stays as it is: a FAIL (sticky, until the core oracle is
    built again after it), or `check` only re-dates it."""
    return prev is not None and (
        ((prev.status, check.status) == ("FAIL", "PASS") and bool(_not_rebuilt_since(prev)))
        or replace(prev, time=check.time) == check)


def _not_rebuilt_since(failed: Check) -> list[str]:
    """The core environments `failed` watched that are still there and were not built (or
    adopted) after it: what the failing operation may have written into is still what a
    core oracle measures itself from, so no later PASS proves it clean."""
    return [env for env in failed.core_after if not _remade_after(Path(env), failed.time)]


def _remade_after(env: Path, time: str) -> bool:
    if not env.exists():
        return True  # gone, and with it whatever the failed operation wrote into it
    try:
        rec = read_marker(env)
    except SyncError:
        return False  # a build record that does not read proves no rebuild
    return rec is not None and _after(rec.built_at, time)


def _after(later: str, earlier: str) -> bool:
    """Whether the time `later` (as gates write it) is after `earlier`; False when either is
    not such a time."""
    try:
        return datetime.strptime(later, gates.TIME) > datetime.strptime(earlier, gates.TIME)
    except ValueError:
        return False


@dataclass
class Watch:
    """Before/after state around one omni operation; `problems` collects every violation."""

    core_envs: tuple[Path, ...]
    source: Path | None
    before: tuple[Fingerprint, ...]
    source_before: str | None
    problems: list[str] = field(default_factory=list)
    after: tuple[Fingerprint, ...] = ()
    check: Check | None = None  # set by `finish`: what a watch records

    @classmethod
    def start(cls, core_envs: Sequence[Path], source: Path | None) -> Watch:
        envs = tuple(core_envs)
        return cls(envs, source, tuple(fingerprint(e) for e in envs), source_state(source))

    def finish(self, op: str) -> Check:
        self.after = tuple(fingerprint(env) for env in self.core_envs)
        self.problems[:0] = [line for b, a in zip(self.before, self.after, strict=True)
                             for line in compare(b, a)]
        if source_state(self.source) != self.source_before:
            self.problems.insert(0, f"the reference checkout {self.source} changed "
                                    "(HEAD or work tree)")
        self.check = Check(op, "FAIL" if self.problems else "PASS", gates.now(),
                           gates.hostname(), _by_env(self.before), _by_env(self.after),
                           tuple(self.problems))
        return self.check


def _by_env(prints: Sequence[Fingerprint]) -> dict[str, str]:
    return {f.env: f.digest for f in prints}


@contextlib.contextmanager
def watch(port: Port, oracle_id: str, commit: str, op: str, *, core_envs: Sequence[Path],
          source: Path | None) -> Iterator[Watch]:
    """Fingerprint the core side (each of `core_envs`) around an omni operation and record
    the check.

    Recorded even when the operation raises: a failed build may still have
    written into a core environment.
    """
    w = Watch.start(core_envs, source)
    try:
        yield w
    finally:
        record(port, oracle_id, commit, w.finish(op))


@contextlib.contextmanager
def measure(op: str, *, core_envs: Sequence[Path], source: Path | None) -> Iterator[Watch]:
    """`watch` for a dry run: the same check, left in `Watch.check` and never recorded."""
    w = Watch.start(core_envs, source)
    try:
        yield w
    finally:
        w.finish(op)


REQUIRED = ("build", "verify")  # the checks an omni advance needs


def require(port: Port, oracle_id: str, commit: str, *, core_env: Path) -> Proof:
    """The proof an omni advance needs: build and verify checks recorded, none failed, each
    watching `core_env`, the environment the core pin measures itself from now (a check
    made before the core pin moved watched the environment of the pin it moved from)."""
    proof = load(port, oracle_id, commit)
    cmd = f"upstream-sync oracle build --oracle {oracle_id} --commit {commit}"
    # A commit an omni advance moves to is not yet its pin: verify checks it for shape
    # only (at the pin, --shape-only changes nothing).
    verify = f"upstream-sync oracle verify --oracle {oracle_id} --commit {commit} --shape-only"
    if proof is None:
        raise BlockedCycle(f"isolation of oracle {oracle_id} at {short(commit)} is not proven",
                           f"run '{cmd}' and '{verify}'")
    if proof.failures:
        first = proof.failures[0]
        raise BlockedCycle(
            f"isolation of oracle {oracle_id} at {short(commit)} failed during {first.op} "
            f"({first.problems[0] if first.problems else 'see the record'}): the omni oracle "
            "touched what a core oracle measures itself from",
            _core_cycle(proof, cmd, verify))
    moved = _moved(proof)
    if moved is not None:
        check, env, now = moved
        raise BlockedCycle(
            f"isolation of oracle {oracle_id} at {short(commit)}: the core environment "
            f"{env} is not what its {check.op} check left ({check.core_after[env][:19]}…, "
            f"now {now[:19]}…): the record does not prove it untouched",
            f"verify the core oracle, then run {_again(proof, cmd, verify)}")
    missing = [op for op in REQUIRED if op not in {c.op for c in proof.checks}]
    if missing:
        raise BlockedCycle(f"isolation of oracle {oracle_id} at {short(commit)} has no "
                           f"{missing[0]} check",
                           f"run '{verify}'" if missing == ["verify"] else
                           f"run '{cmd} --rebuild' and '{verify}'")
    _refuse_unwatched(proof, core_env, cmd, verify)
    return proof


def _core_cycle(proof: Proof, cmd: str, verify: str) -> str:
    """The way out of a failed check: the core oracle rebuilt (each core environment a failed
    check watched that was not built since), then the omni checks recorded again (`cmd`, the
    build; `verify`; a failed golden, its run), which a failure gives way to only then."""
    stale = list(dict.fromkeys(e for c in proof.failures for e in _not_rebuilt_since(c)))
    golden = [f"upstream-sync golden --oracle {proof.oracle}"] if "golden" in {
        c.op for c in proof.failures} else []
    omni = _quoted([f"{cmd} --rebuild", verify, *golden])
    if not stale:
        return f"the core oracle was built again since: run {omni}"
    rebuild = _quoted([f"upstream-sync oracle build --oracle {_named(e)} --rebuild"
                       for e in stale])
    return (f"treat it as a core sync cycle: rebuild the core oracle ({rebuild}), regenerate "
            f"the goldens and re-verify it, then run {omni}")


def _named(env: str) -> str:
    """`--oracle` and `--commit` of the environment `<id>-<commit10>`."""
    oracle_id, _, commit = Path(env).name.rpartition("-")
    return f"{oracle_id} --commit {commit}"


def _again(proof: Proof, cmd: str, verify: str) -> str:
    """What records the proof's checks again once a core environment moved under them: the
    build (`cmd`) and `verify`, and a golden check's run when the proof holds one (it too
    recorded the environment as it was, and would be refused next)."""
    golden = [f"upstream-sync golden --oracle {proof.oracle}"] if "golden" in {
        c.op for c in proof.checks} else []
    return _quoted([f"{cmd} --rebuild", verify, *golden])


def _quoted(commands: Sequence[str]) -> str:
    return _listing([f"'{c}'" for c in commands]) if len(commands) > 1 else f"'{commands[0]}'"


def _refuse_unwatched(proof: Proof, core_env: Path, cmd: str, verify: str) -> None:
    """Each required check watched `core_env`; the first that did not is named, and what
    records it again (`cmd`, the build; `verify`)."""
    unwatched = [c for c in proof.checks if c.op in REQUIRED and str(core_env) not in c.core_after]
    if not unwatched:
        return
    first = unwatched[0]
    raise BlockedCycle(
        f"isolation of oracle {proof.oracle} at {short(proof.commit)} is not proven against "
        f"the core environment {core_env}, the one the core pin measures itself from: its "
        f"{first.op} check watched {', '.join(first.core_after)} (the core pin moved since)",
        f"run '{verify}'" if [c.op for c in unwatched] == ["verify"] else
        f"run '{cmd} --rebuild' and '{verify}'")


def _moved(proof: Proof) -> tuple[Check, str, str] | None:
    """The first check, core environment and its digest now, where it is not what the
    check left."""
    now: dict[str, str] = {}
    for c in proof.checks:
        for env, digest in c.core_after.items():
            if env not in now:
                now[env] = fingerprint(Path(env)).digest
            if now[env] != digest:
                return c, env, now[env]
    return None
