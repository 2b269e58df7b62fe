"""`init`: discover a port's records and write its configuration and preferences example.

It reads what the port states (steps/discover.py) and names every file it writes or edits.
The configuration is built in one place (`_config`), so a new discovered section is one
addition there.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from sync.cli.context import Context, add_json
from sync.infra.atomic import read_text, write_text
from sync.infra.errors import UsageError
from sync.records import config, ledger, mdscan, mdtext, prefs, starter
from sync.steps import discover


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="set-up: discover a port's records, write its config and "
                       "the preferences example", description="Discover the pin block, oracle "
                       "files, ledger, inventory, ported roots, build mode and gates in DIR "
                       "(default: --port or the current directory); write "
                       ".agents/upstream-sync.toml and, unless the port has its own, "
                       ".agents/developer-preferences.md.example; every file written or "
                       "edited is named.")
    p.add_argument("dir", nargs="?", help="the port's root")
    p.add_argument("--force", action="store_true",
                   help="rewrite an existing configuration; one that set a key or value "
                   "discovery drops or changes is kept as upstream-sync.toml.bak")
    add_json(p)
    p.set_defaults(func=run)


@dataclass
class _Found:
    """Everything discovery found, beyond the record paths."""

    records: dict[str, Any]
    build: tuple[str, str] | None
    gates: discover.Gates
    conventions: discover.Conventions
    projects: dict[str, int]
    registered: list[str]  # the projects an oracle file names
    not_utf8: list[str]  # the warnings of files read with replacement characters
    written: list[str] = field(default_factory=list)  # what init wrote or edited, said so
    unread_default: tuple[str, ...] = ()  # records whose default path holds a file, unread


def _discover(root: Path, ctx: Context) -> _Found:
    records = discover.discover(root)
    not_utf8 = [f"{where}, so init read it with replacement characters (a header or record "
                "block with a bad byte inside is not found) — re-save it as UTF-8"
                for where in records.pop("not_utf8")]
    # Said first, and on stderr: a file whose bad byte hides the pin block is why the
    # refusal below finds none.
    for text in not_utf8:
        ctx.note(f"warning: {text}")
    if "protocol" not in records["paths"]:
        hits = records["found"]["protocol"]
        where = f" ({', '.join(sorted(set(hits)))})" if hits else ""
        near = [] if hits else discover.unread_pin_fences(root)
        if near:
            raise UsageError(f"found 0 ```parity-pin blocks under {root}, need exactly one; "
                             f"{near[0]}, which is not read", "fence the block with ``` at "
                             "the start of its line and rerun")
        raise UsageError(f"found {len(hits)} ```parity-pin blocks under {root}{where}, need "
                         "exactly one", "keep one pin block in the protocol file (see README) "
                         "and rerun")
    unread = tuple(k for k, rel in discover.DEFAULTS.items()
                   if not records["found"][k] and (root / rel).is_file())
    return _Found(records, discover.build_mode(root, records["paths"]["protocol"]),
                  discover.gates(root), discover.conventions(root),
                  records.pop("cited_projects"), records.pop("registered"), not_utf8,
                  unread_default=unread)


def _config(found: _Found) -> dict[str, Any]:
    """The configuration to write, from what discovery found: the one place it is built."""
    doc: dict[str, Any] = {"schema": config.SCHEMA, "paths": found.records["paths"]}
    if found.records["port_roots"]:
        doc["surface"] = {"port_roots": found.records["port_roots"],
                          "mirrored": found.records["mirrored"]}
        if found.records["header_globs"]:
            doc["surface"]["header_globs"] = [*config.Config().header_globs,
                                              *found.records["header_globs"]]
        doc["check"] = {"feature_globs": feature_globs(found.records["port_roots"])}
    if found.build is not None:
        doc["oracles"] = {"vllm": {"build_mode": found.build[0]}}
    if found.gates.scripts:
        outs = sorted({g.out for g in found.gates.scripts})
        doc["golden"] = {"dir": outs[0],
                         "scripts": [list(g.argv) for g in found.gates.scripts
                                     if g.out == outs[0]]}
    if found.conventions.mapped:
        doc["preferences"] = {"variables": dict(sorted(found.conventions.mapped.items()))}
    config.parse(tomli_w.dumps(doc) + starter.RULES)  # what we write must load
    return doc


def _keys(doc: object, prefix: str = "") -> dict[str, object]:
    """Every dotted key a TOML document sets (`oracles.pytorch.paths`), with its value (an
    array of tables, `rules`, is one value)."""
    if not isinstance(doc, dict):
        return {}
    out: dict[str, object] = {}
    for k, v in doc.items():
        name = f"{prefix}{k}"
        out.update(_keys(v, name + ".") if isinstance(v, dict) and v else {name: v})
    return out


def _keep_old(cfg_path: Path, new_text: str) -> str | None:
    """Under --force: what the old configuration set that the new one does not (a key it
    drops, or a value it changes: a rule of the port's own, a widened port root), said, and
    the old file kept beside it (a hand-made table is no discovery's to drop)."""
    if not cfg_path.exists():
        return None
    old_text = read_text(cfg_path)
    try:
        old, new = _keys(tomllib.loads(old_text)), _keys(tomllib.loads(new_text))
        dropped = sorted(k for k, v in old.items() if k not in new or new[k] != v)
    except tomllib.TOMLDecodeError:
        dropped = ["(the old file does not parse)"]
    if not dropped:
        return None
    backup = cfg_path.with_name(cfg_path.name + ".bak")
    write_text(backup, old_text)
    shown = ", ".join(dropped[:6]) + (f" and {len(dropped) - 6} more" if len(dropped) > 6 else "")
    return (f"kept the old configuration as {backup}: it set {shown}, which discovery does "
            "not; copy back what you still want")


def feature_globs(port_roots: list[str]) -> list[str]:
    """`check-commit`'s feature paths: every port root's files, and the tests."""
    return list(dict.fromkeys([f"{r.rstrip('/')}/**" for r in port_roots] + ["tests/**"]))


def _ignore(root: Path) -> list[str]:
    """Machine-specific preferences and the lock/transaction scratch files are never tracked;
    returns the lines added to .gitignore."""
    ignore = root / ".gitignore"
    sync_dir = config.Config().sync_dir
    wants = ["/" + config.Config().preferences, f"/{sync_dir}/.lock", f"/{sync_dir}/.txn-*"]
    text = read_text(ignore) if ignore.exists() else ""
    missing = [w for w in wants if w not in text.splitlines()]
    if missing:
        # As the records' editors add a line: the file's dominant ending, and after a lone
        # CR only the LF that makes it CRLF (never CR CR LF, an empty line).
        nl = mdscan.newline(mdscan.split_lines(text))
        brk = mdscan.line_break(text, nl, rel=".gitignore")
        write_text(ignore, text + brk + "".join(w + nl for w in missing))
    return missing


# A record no file holds: the path configured all the same, and what needs it.
_NONE_FOUND = {
    "ledger": f"  ledger: none found (no table with the header {' | '.join(ledger.COLUMNS)}); "
              f"{config.Config().ledger} is configured, and check fails until it exists — "
              "create it with that header, or set [paths] ledger to your ledger",
    "inventory": "  inventory: none found (no porting-inventory.md, no file with tiers T0..T3 "
                 f"and a ## 9 deviations section); {config.Config().inventory} is configured, "
                 "and inventory annotate refuses until it exists — create it, or set [paths] "
                 "inventory to your inventory",
}


def _unread(key: str, rel: str) -> str:
    """A record's default path holds a file that does not read as the record."""
    if key == "ledger":
        return (f"  ledger: {rel} holds no table with the header {' | '.join(ledger.COLUMNS)}, "
                "and check fails until it does — fix its header row, or set [paths] ledger to "
                "your ledger")
    return (f"  inventory: {rel} holds no tiers T0..T3 or ## 9 deviations section — fix it, or "
            "set [paths] inventory to your inventory")


def _some(paths: list[str], shown: int = 3) -> str:
    """The first few of `paths`, each on one line, then "+K more"."""
    names = ", ".join(mdtext.flat(p) for p in paths[:shown])
    return names + (f" +{len(paths) - shown} more" if len(paths) > shown else "")


def _records_lines(found: _Found) -> list[str]:
    paths, cands = found.records["paths"], found.records["found"]
    lines = [f"  {key} = {value}" for key, value in paths.items()]
    for key in ("ledger", "inventory"):
        others = [c for c in cands[key] if c != paths.get(key)]
        if key not in paths and not cands[key]:
            lines.append(_unread(key, discover.DEFAULTS[key]) if key in found.unread_default
                         else _NONE_FOUND[key])
        elif key not in paths:
            lines.append(f"  {key}: not found uniquely ({len(cands[key])} candidates: "
                         f"{_some(cands[key])}); default {discover.DEFAULTS[key]} kept — to "
                         f"use one, set [paths] {key} = \"<path>\" in {config.CONFIG_PATH}")
        elif others and paths[key] in discover.DEFAULTS.values():
            lines.append(f"    ({len(others)} other file(s) also look like the {key}: "
                         f"{_some(others)}; the default path is the one)")
    if "oracles" not in paths:
        lines.append("  oracles: no oracle registry found — create .agents/oracles/vllm.md "
                     "(one ```oracle-pin block): an advance refuses without it, as it "
                     "rewrites that file's pin")
    lines.append(f"  port_roots = {found.records['port_roots']}")
    if found.records["port_roots"]:
        lines.append(f"  [check] feature_globs = {feature_globs(found.records['port_roots'])} "
                     "(what check-commit counts as feature work)")
    missed = found.records["header_globs"]
    if missed:
        files = [rel for rels in missed.values() for rel in rels]
        lines.append(f"  header_globs = default + {list(missed)} (ported files the default "
                     f"globs miss: {', '.join(files[:4])}"
                     + (f" and {len(files) - 4} more)" if len(files) > 4 else ")"))
    if found.records["mirrored"] != ["vllm/"]:
        lines.append(f"  mirrored = {found.records['mirrored']} (the headers cite those trees)")
    if found.build is not None:
        lines.append(f"  [oracles.vllm] build_mode = \"{found.build[0]}\" (the pin block's "
                     f"distribution version {found.build[1]})")
    return lines


def _gate_lines(found: _Found) -> list[str]:
    g = found.gates
    lines = [f"  [golden] script from {s.source}: {' '.join(s.argv[1:])}" for s in g.scripts]
    if g.suites:
        lines.append(f"  parity suites the port has, not configured (each needs its build "
                     f"command): {', '.join(g.suites[:3])}"
                     + (f" and {len(g.suites) - 3} more" if len(g.suites) > 3 else "")
                     + " — add [parity.suites.<name>] command = [...]")
    if g.hosts:
        lines.append(f"  the docs name gate host(s) {', '.join(g.hosts)}: set gate_hosts "
                     "(SYNC_GATE_HOSTS) where gates run")
    if not g.scripts:
        lines.append("  warning: no gates configured — an advance refuses until [golden] "
                     "scripts or [parity.suites.<name>] are configured, or [gates] none = true "
                     "declares that the port has none")
    return lines


def _other_lines(found: _Found) -> list[str]:
    def listed(names: list[str]) -> str:
        return ", ".join(f"{name} ({found.projects[name]} citation"
                         f"{'s' if found.projects[name] != 1 else ''})" for name in names)

    mine = [n for n in found.projects if n in found.registered]
    other = [n for n in found.projects if n not in found.registered]
    lines = []
    if mine:
        lines.append(f"  other oracles the headers cite, with oracle files: {listed(mine)} — "
                     "attributed to them, never bumped to a vLLM commit")
    if other:
        lines.append(f"  other upstreams the headers cite by name: {listed(other)} — "
                     "attributed to them, not to vLLM; add .agents/oracles/<id>.md (and a "
                     "checkout in oracle_checkouts) to verify their SHAs")
    return lines


def _prefs(root: Path, found: _Found) -> list[str]:
    """Write the preferences example unless the port has its own; say what maps to what."""
    c = found.conventions
    if c.example is None:
        example = root / (config.Config().preferences + ".example")
        if example.exists():
            return [f"kept {example} (it exists)"]
        write_text(example, prefs.example_text())
        found.written.append(str(example))
        return [f"wrote {example} (copy it to developer-preferences.md and fill it in)"]
    ours = {k.variable: key for key, k in prefs.KEYS.items()}
    said = [f"{n} (read as {ours[n]})" for n in c.names if n in ours]
    said += [f"{var} (mapped to {key})" for key, var in sorted(c.mapped.items())]
    said += [f"{n} (no preference holds it)" for n in c.unmapped]
    return [f"kept the port's own preferences example {c.example}; no second one written"
            + (f": {', '.join(said)}" if said else "")]


def _say(ctx: Context, cfg_path: Path, found: _Found, notes: list[str]) -> None:
    ctx.say(f"wrote {cfg_path}")
    for line in _records_lines(found) + _gate_lines(found) + _other_lines(found) + notes:
        ctx.say(line)


def run(args: argparse.Namespace, ctx: Context) -> int:
    root = Path(args.dir or ctx.port_arg or os.environ.get("SYNC_PORT") or ".").resolve()
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory", "give the port's root")
    cfg_path = root / config.CONFIG_PATH
    if cfg_path.exists() and not args.force:
        raise UsageError(f"{cfg_path} already exists", "pass --force to rewrite it")
    found = _discover(root, ctx)
    doc = _config(found)
    text = ("# upstream-sync configuration (keys: docs/adopting.md in upstream-sync)\n"
            + tomli_w.dumps(doc) + starter.RULES)
    kept = _keep_old(cfg_path, text)
    write_text(cfg_path, text)
    found.written.append(str(cfg_path))
    notes = ([] if kept is None else [kept]) + _prefs(root, found)
    added = _ignore(root)
    if added:
        found.written.append(str(root / ".gitignore"))
        notes.append(f"edited {root / '.gitignore'} (added {', '.join(added)})")
    if ctx.json:
        ctx.emit_json({"config": str(cfg_path), "written": found.written, **found.records,
                       "build_mode": found.build[0] if found.build else None,
                       "gates": {"golden_scripts": [{"argv": list(g.argv), "out": g.out,
                                                     "source": g.source}
                                                    for g in found.gates.scripts],
                                 "suites": list(found.gates.suites),
                                 "hosts": list(found.gates.hosts)},
                       "preferences": {"example": found.conventions.example,
                                       "mapped": found.conventions.mapped},
                       "cited_projects": found.projects,
                       "not_utf8": found.not_utf8})  # the warnings, "warning: " off
    else:
        _say(ctx, cfg_path, found, notes)
    return 0
