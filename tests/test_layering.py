"""Import direction: infra < upstream < records < headers < port < steps < cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SYNC = Path(__file__).resolve().parents[1] / "sync"
BELOW = {
    "infra": ("sync.infra",),
    "records": ("sync.infra", "sync.upstream", "sync.records"),
}


def imported(path: Path) -> list[str]:
    """Every sync.* module `path` imports, at the top or inside a function."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] if node.module != "sync" else [
                f"sync.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n for n in names if n == "sync" or n.startswith("sync.")]


@pytest.mark.parametrize("layer", sorted(BELOW))
def test_a_layer_imports_only_what_is_below_it(layer: str) -> None:
    allowed = BELOW[layer]
    wrong = [f"{path.relative_to(SYNC.parent)}: {name}"
             for path in sorted((SYNC / layer).glob("*.py")) for name in imported(path)
             if not name.startswith(allowed)]
    assert wrong == []
