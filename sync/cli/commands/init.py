"""`init`: discover a port's records and write its configuration and preferences example."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import tomli_w

from sync.cli.context import Context, add_json
from sync.infra.atomic import read_text, write_text
from sync.infra.errors import UsageError
from sync.records import config, modes, prefs, starter
from sync.steps import discover


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="set-up: discover a port's records, write its config and "
                       "the preferences example", description="Discover the pin block, oracle "
                       "files, ledger, inventory and ported roots in DIR (default: --port or the "
                       "current directory); write .agents/upstream-sync.toml and "
                       ".agents/developer-preferences.md.example.")
    p.add_argument("dir", nargs="?", help="the port's root")
    p.add_argument("--force", action="store_true", help="overwrite an existing configuration")
    add_json(p)
    p.set_defaults(func=run)


def _config(root: Path, found: dict[str, Any]) -> dict[str, Any]:
    """The configuration to write, from what `discover` found (refused without one pin block)."""
    if "protocol" not in found["paths"]:
        hits = found["found"]["protocol"]
        where = f" ({', '.join(sorted(set(hits)))})" if hits else ""
        raise UsageError(f"found {len(hits)} ```parity-pin blocks under {root}{where}, need "
                         "exactly one", "keep one pin block in the protocol file (see README) "
                         "and rerun")
    doc: dict[str, Any] = {"schema": config.SCHEMA, "paths": found["paths"]}
    if found["port_roots"]:
        doc["surface"] = {"port_roots": found["port_roots"], "mirrored": ["vllm/"]}
    doc.update(modes.init_doc(root / found["paths"]["protocol"]))  # build_mode from the suffix
    config.parse(tomli_w.dumps(doc) + starter.RULES)  # what we write must load
    return doc


def _ignore(root: Path) -> None:
    """Machine-specific preferences and the lock/transaction scratch files are never tracked."""
    ignore = root / ".gitignore"
    sync_dir = config.Config().sync_dir
    wants = ["/" + config.Config().preferences, f"/{sync_dir}/.lock", f"/{sync_dir}/.txn-*"]
    text = read_text(ignore) if ignore.exists() else ""
    missing = [w for w in wants if w not in text.splitlines()]
    if missing:
        nl = "\r\n" if "\r\n" in text else "\n"
        write_text(ignore, text + ("" if not text or text.endswith(nl) else nl)
                   + "".join(w + nl for w in missing))


def _say(ctx: Context, cfg_path: Path, example: Path, found: dict[str, Any]) -> None:
    ctx.say(f"wrote {cfg_path}")
    for key, value in found["paths"].items():
        ctx.say(f"  {key} = {value}")
    for key in ("ledger", "inventory"):
        if key not in found["paths"]:
            ctx.say(f"  {key}: not found uniquely ({len(found['found'][key])} candidates); "
                  "default kept")
    ctx.say(f"  port_roots = {found['port_roots']}")
    ctx.say(f"wrote {example} (copy it to developer-preferences.md and fill it in)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    root = Path(args.dir or ctx.port_arg or os.environ.get("SYNC_PORT") or ".").resolve()
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory", "give the port's root")
    cfg_path = root / config.CONFIG_PATH
    if cfg_path.exists() and not args.force:
        raise UsageError(f"{cfg_path} already exists", "pass --force to rewrite it")
    found = discover.discover(root)
    doc = _config(root, found)
    write_text(cfg_path, "# upstream-sync configuration (keys: docs/adopting.md in upstream-sync)\n"
               + tomli_w.dumps(doc) + starter.RULES)
    example = root / (config.Config().preferences + ".example")
    if not example.exists():
        write_text(example, prefs.example_text())
    _ignore(root)
    if ctx.json:
        ctx.emit_json({"config": str(cfg_path), "preferences_example": str(example), **found})
    else:
        _say(ctx, cfg_path, example, found)
    return 0
