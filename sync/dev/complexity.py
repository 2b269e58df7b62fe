"""How many functions are too branchy to read at once: the share over 10 branches.

A branch is a decision a reader has to hold: each `if`/`elif`, loop, `except`
handler, `with`, conditional expression, `match` case, extra operand of
`and`/`or`, and each `for`/`if` clause of a comprehension (nested functions count
on their own). The tools this package takes its habits from sit at 2.5-6.5% by
this count; `nox -s lint` fails above `--max-share`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

_ONE = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.With,
        ast.AsyncWith, ast.match_case)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def branches(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    count = 0
    todo: list[ast.AST] = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            continue  # counted as a function of its own
        if isinstance(node, _ONE):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.Try):
            count += bool(node.orelse) + bool(node.finalbody)
        todo.extend(ast.iter_child_nodes(node))
    return count


def functions(root: Path) -> list[tuple[str, int]]:
    """(`path:line name`, branches) for every function under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, _FUNCS):
                out.append((f"{path.as_posix()}:{node.lineno} {node.name}", branches(node)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sync.dev.complexity", description=__doc__)
    ap.add_argument("root", nargs="?", default="sync", type=Path)
    ap.add_argument("--limit", type=int, default=10, help="branches a function may have")
    ap.add_argument("--max-share", type=float, default=None,
                    help="fail when more than this percentage of functions is over the limit")
    ap.add_argument("--list", action="store_true", help="list the functions over the limit")
    args = ap.parse_args(argv)
    found = functions(args.root)
    over = sorted(((n, b) for n, b in found if b > args.limit), key=lambda x: -x[1])
    share = 100 * len(over) / max(1, len(found))
    if args.list:
        for name, n in over:
            print(f"{n:3} {name}")
    print(f"{len(over)} of {len(found)} functions have more than {args.limit} branches "
          f"({share:.1f}%)")
    if args.max_share is not None and share > args.max_share:
        print(f"over the {args.max_share}% bar: split the longest ones into named steps",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
