"""The real vLLM case, made ready for a real oracle: `nox -s real-oracle -- CASE` uses it.

`python -m sync.dev.realoracle run CASE [--work DIR] [--at REF]` is the session: the two
steps below, the oracle built (when missing) and verified at the pin, `status`, and with
`--at` the oracle measured, pinned and verified at REF too.

`python -m sync.dev.realoracle prepare CASE --work DIR` takes a case folder: either one
holding `prepare.sh` (the shared `late-july` case: it is prepared into DIR once) or one
already holding `vllm/` (the reference checkout) and `port/`. It runs `init` in the port
when the port has no configuration (init writes `[oracles.vllm] build_mode` from the pin
block's suffix: `empty` for the case), and pins the oracle's install to the Torch release
the pin commit's own `pyproject.toml` builds with (a constraints file in the port, pip as
the installer): a registry resolves an unpinned torch to a CUDA build of several GB. It
prints the paths as JSON (`port`, `source`, `home`), also into the file `--out` names.

`python -m sync.dev.realoracle pin-at REF --work DIR` measures the oracle at REF (a
release tag, say) and writes, into a copy of the port, the pin block that measurement
makes (the advance's own code: `identity.measured_pin`, `pins.render`); it prints the
block, and what the same block says without its `vllm_commit_id`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

from sync import cli
from sync.infra import proc
from sync.infra.atomic import write_text
from sync.infra.errors import MalformedRecord, SyncError
from sync.port import Port
from sync.records import config, pins
from sync.steps.verify import build, probe
from sync.steps.verify import identity as oracle_verify
from sync.upstream import gitio

CONSTRAINTS = ".agents/oracle-constraints.txt"
_TORCH = re.compile(r"""["']torch\s*==\s*([0-9][^"';\s]*)["']""")


def paths(case: Path, work: Path) -> dict[str, Path]:
    root = case if (case / "port").is_dir() and (case / "vllm").is_dir() else work
    return {"port": root / "port", "source": root / "vllm", "home": root / "oracles"}


def _prepared(case: Path, work: Path) -> dict[str, Path]:
    where = paths(case, work)
    if not where["port"].is_dir():
        script = case / "prepare.sh"
        if not script.is_file():
            raise SystemExit(f"{case} holds neither port/ and vllm/ nor prepare.sh")
        proc.Command(("bash", str(script), str(work)), what="prepare.sh").run().check()
    return where


def _torch_pin(source: Path, commit: str) -> str | None:
    """The `torch == X` the commit's pyproject.toml builds with."""
    text = gitio.run(source, ["show", f"{gitio.check_rev(commit)}:pyproject.toml"],
                     check=False).stdout.decode("utf-8", "replace")
    found = _TORCH.search(text)
    return found.group(1) if found else None


def _configure(where: dict[str, Path]) -> None:
    port = where["port"]
    cfg_path = port / config.CONFIG_PATH
    if not cfg_path.exists() and cli.main(["init", str(port)]) != 0:
        raise SystemExit("upstream-sync init failed in the case's port")
    text = cfg_path.read_text(encoding="utf-8")
    if "constraints" in tomllib.loads(text).get("oracles", {}).get("vllm", {}):
        return
    commit = pins.load(port / config.Config().protocol).pin.commit
    torch = _torch_pin(where["source"], commit)
    if torch is None:
        return
    write_text(port / CONSTRAINTS, f"torch=={torch}\n")
    write_text(cfg_path, with_constraints(text))


_VLLM_TABLE = re.compile(r"^\[oracles\.vllm\][ \t]*(?:#[^\r\n]*)?\r?$", re.MULTILINE)


def with_constraints(text: str) -> str:
    """The configuration with the constraints file and pip as the installer of the core
    oracle: two lines under its `[oracles.vllm]` table (a new table at the end when it has
    none), every other byte kept, comments included; refused if it does not read back."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = f'constraints = "{CONSTRAINTS}"{nl}installer = "pip"{nl}'
    found = list(_VLLM_TABLE.finditer(text))
    if len(found) > 1:
        raise SystemExit(f"{config.CONFIG_PATH} has {len(found)} [oracles.vllm] tables")
    if found:
        at = found[0].end()
        new = (text[:at + 1] + lines + text[at + 1:] if text.startswith("\n", at)
               else text[:at] + nl + lines + text[at:])
    else:
        sep = nl if text and not text.endswith("\n") else ""
        new = f"{text}{sep}{nl}[oracles.vllm]{nl}{lines}"
    table = tomllib.loads(new).get("oracles", {}).get("vllm", {})
    if (table.get("constraints"), table.get("installer")) != (CONSTRAINTS, "pip"):
        raise SystemExit(f"{config.CONFIG_PATH}: the constraints lines would not read back")
    return new


def prepare(case: Path, work: Path) -> dict[str, Path]:
    where = _prepared(case, work)
    _configure(where)
    where["home"].mkdir(parents=True, exist_ok=True)
    return where


def pin_at(where: dict[str, Path], ref: str) -> Path:
    """A copy of the port pinned to the oracle measured at `ref` (built there if missing)."""
    commit = gitio.resolve(gitio.open_repo(where["source"]), ref)
    if commit is None:  # before the copy: a mistyped ref leaves no copy behind
        raise SystemExit(f"{ref} is not a commit of {where['source']}")
    copy = where["port"].parent / f"port-at-{re.sub(r'[^A-Za-z0-9._-]', '_', ref)}"
    if not copy.exists():
        shutil.copytree(where["port"], copy, symlinks=True)
    port = Port(copy, config.load(copy))
    prefs = port.preferences()
    if build.existing(port, prefs, "vllm", commit) is None:
        build.build(port, prefs, "vllm", commit, note=lambda m: print(m, file=sys.stderr))
    measured = probe.probe(port, prefs, "vllm", commit)
    new = oracle_verify.measured_pin(port, measured)
    record = port.pin_record()
    write_text(record.path, pins.render(record, new))
    again = pins.load(record.path)
    print("".join(f"{k} = {v}\n" for k, v in again.block.as_dict().items()), end="")
    bare = "".join(line for line in again.text.splitlines(keepends=True)
                   if not line.startswith(pins.COMMIT_ID))
    try:
        pins.parse(bare, path=port.rel(record.path))
        print("without vllm_commit_id: accepted")
    except MalformedRecord as exc:
        print(f"without vllm_commit_id: refused: {exc}")
    return copy


def run(case: Path, work: Path, at: str | None) -> int:
    """What `nox -s real-oracle` does: prepare the case, build its oracle at the pin (when
    missing) and verify it, show `status`; with `at`, pin a copy of the port to the oracle
    measured at that ref and verify it there. The first failing command's exit code."""
    where = prepare(case, work)
    print(json.dumps({k: str(v) for k, v in where.items()}), flush=True)
    with _environ(VLLM_SOURCE=str(where["source"]), SYNC_ORACLE_HOME=str(where["home"])):
        port = str(where["port"])
        for argv in (["oracle", "build", "--if-missing"], ["oracle", "verify"], ["status"]):
            rc = cli.main(["--port", port, *argv])
            if rc != 0:
                return rc
        if at is None:
            return 0
        return cli.main(["--port", str(pin_at(where, at)), "oracle", "verify"])


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """`values` in the environment for the commands run inside, as they were after."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sync.dev.realoracle", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("run", "prepare", "pin-at"))
    ap.add_argument("target", help="run, prepare: the case folder (shared/cases/late-july, "
                    "or one holding vllm/ and port/); pin-at: the ref to pin")
    ap.add_argument("--case", type=Path, help="pin-at: the case folder (default: --work)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) /
                    "upstream-sync-real", help="where the case is prepared (default: %(default)s)")
    ap.add_argument("--at", metavar="REF", help="run: also pin a copy of the port to the "
                    "oracle measured at REF (a release tag, e.g. v0.23.1rc0) and verify it there")
    ap.add_argument("--out", type=Path, help="also write the JSON line to this file (nox reads "
                    "it there, so the build's progress is not held back by capturing it)")
    args = ap.parse_args(argv)
    try:
        if args.action == "run":
            return run(Path(args.target).resolve(), args.work.resolve(), args.at)
        if args.action == "prepare":
            where = prepare(Path(args.target).resolve(), args.work.resolve())
            said = {k: str(v) for k, v in where.items()}
        else:
            where = paths((args.case or args.work).resolve(), args.work.resolve())
            said = {"port": str(pin_at(where, args.target))}
    except SyncError as exc:
        print(f"realoracle: {exc}", file=sys.stderr)
        return exc.exit_code
    line = json.dumps(said)
    print(line)
    if args.out is not None:
        write_text(args.out, line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
