"""`check-commit` (CI): no commit mixes a sync cycle with feature work."""

from __future__ import annotations

import argparse

from sync.cli.context import Context, add_json
from sync.infra.errors import CheckFailed
from sync.records.mdtext import flat
from sync.steps.commitcheck import offenders
from sync.upstream.gitio import short


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check-commit", help="refuse commits that mix sync records with feature "
                       "work", description="Fail on any commit in RANGE that touches both "
                       "sync-owned records and feature paths (check.feature_globs).")
    p.add_argument("range", nargs="?", default="HEAD",
                   help="A..B, or one commit (default: HEAD)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    checked, bad = offenders(ctx.port, args.range)
    if ctx.json:
        ctx.emit_json({"ok": not bad, "checked": checked, "commits": [
            {"sha": s, "subject": subj, "sync_paths": o, "feature_paths": f}
            for s, subj, o, f in bad]})
    else:
        for sha, subject, owned, feature in bad:
            # A subject (and a path) is a person's text: a control character in it must not
            # reach the terminal as one.
            ctx.say(f"{short(sha)} {flat(subject)}: mixes sync records ({_listed(owned)}) with "
                    f"feature work ({_listed(feature)})")
    if bad:
        raise CheckFailed(f"{len(bad)} commit(s) mix a sync cycle with feature work",
                          "split each into a sync commit and a feature commit")
    if not ctx.json:
        ctx.say(f"check-commit: no commit in {args.range} mixes sync records with feature work"
                if checked else f"check-commit: {args.range} holds no commit (nothing checked; "
                "a reversed range?)")
    return 0


SHOWN = 5  # paths named per list in the text (--json lists every one)


def _listed(paths: list[str]) -> str:
    """The first paths and how many more: a snapshot commit touches thousands."""
    more = f" and {len(paths) - SHOWN} more (--json lists them)" if len(paths) > SHOWN else ""
    return ", ".join(map(flat, paths[:SHOWN])) + more
