"""The generated parts of the docs: the configuration keys, the preferences and the exit
codes.

Each sits between `<!-- generated: NAME -->` and `<!-- /generated -->` and is rendered
from its one declaration (`records/config.py` for the keys, `records/prefs.py` for the
preferences, `infra/errors.py` for the codes). `python -m sync.dev.docs` rewrites them;
`--check` lists stale files and fails (the test suite runs it), so an edit to a key, a
preference or an error class must regenerate the docs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from sync.infra.atomic import read_text, write_text
from sync.infra.errors import exit_table
from sync.records import prefs
from sync.records.config import keys_table

GENERATED: dict[str, Callable[[], str]] = {"config-keys": keys_table,
                                           "preference-keys": prefs.keys_table,
                                           "exit-codes": exit_table}
FILES = ("README.md", "docs/adopting.md")
_REGION = re.compile(r"(<!-- generated: ([a-z-]+) -->\n)(.*?)(<!-- /generated -->)", re.S)


def render(text: str) -> str:
    """`text` with every generated region rendered afresh."""
    def fill(m: re.Match[str]) -> str:
        make = GENERATED.get(m.group(2))
        if make is None:
            raise SystemExit(f"unknown generated region {m.group(2)!r}")
        return m.group(1) + make() + m.group(4)

    return _REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    return [m.group(2) for m in _REGION.finditer(text)]


def stale(root: Path) -> list[str]:
    """The files whose generated regions differ from what their declarations render."""
    return [name for name in FILES if render(read_text(root / name)) != read_text(root / name)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sync.dev.docs", description=__doc__)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--check", action="store_true", help="write nothing; fail when stale")
    args = ap.parse_args(argv)
    found = stale(args.root)
    if args.check:
        for name in found:
            print(f"{name}: generated docs are stale — run python -m sync.dev.docs",
                  file=sys.stderr)
        return 1 if found else 0
    for name in found:
        path = args.root / name
        write_text(path, render(read_text(path)))
        print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
