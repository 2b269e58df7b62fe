"""`queue` (step 5): the PORT-NOW worklist: per item its own diff, definitions marked."""

from __future__ import annotations

import argparse
from pathlib import Path

from sync.cli.context import Context, add_json
from sync.infra.errors import UsageError
from sync.steps import queue as workqueue
from sync.upstream import gitio


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("queue", help="step 5: the PORT-NOW worklist with per-file pins and diffs",
                       description="List the open cycle's PORT-NOW items in upstream order: the "
                       "port files, their per-file pins, and per cited path that commit's own "
                       "diff (git show <sha> -M -- <path>) with the definitions it changes "
                       "marked (* for one a port file cites).")
    p.add_argument("--patch", metavar="DIR", type=Path,
                   help="also write each item's own diff to DIR/NNN-<sha>-vllm<PR>.patch, each "
                   "hunk header naming the definitions it changes; patches of that name an "
                   "earlier run left there are removed, other files kept")
    p.add_argument("--drift", action="store_true",
                   help="also the cumulative diff since each file's pin (git diff "
                   "<file-pin>..TARGET -- <path>; with --patch, NNN-...-drift.patch)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    port = ctx.port
    ref, upstream = port.reference(), port.upstream_ref
    if gitio.resolve(ref, upstream) is None:
        upstream = port.open_cycle().target
    patch_dir = None if args.patch is None else _patch_dir(args.patch)
    if patch_dir is not None and patch_dir.is_relative_to(port.root.resolve()):
        ctx.note(f"warning: --patch {patch_dir} is inside the port: the patches show in git "
                 "status (and check-commit counts those under its feature paths); a folder "
                 "outside it keeps the tree clean")
    q = workqueue.build(port, ref, upstream, patch_dir=patch_dir, drift=args.drift)
    for n in q.notes:
        ctx.note(f"note: {n}")
    if ctx.json:
        ctx.emit_json(workqueue.to_json(q))
    else:
        for line in workqueue.render(q):
            ctx.say(line)
    return 0


def _patch_dir(raw: Path) -> Path:
    """--patch DIR, made if missing; a path that is no directory, or one that cannot be made,
    is refused before any work (a write that fails later is refused by the step)."""
    patch_dir = raw.expanduser().resolve()
    if patch_dir.exists() and not patch_dir.is_dir():
        raise UsageError(f"--patch {patch_dir} is not a directory", "give a directory")
    try:
        patch_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--patch {patch_dir} cannot be created ({e.strerror or e})",
                         "give a directory you can write") from None
    return patch_dir
