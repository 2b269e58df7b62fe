from __future__ import annotations

from pathlib import Path

import pytest
from stepfixture import INVENTORY, World, make_world

from sync.records import deviations, inventory
from sync.steps import surface
from sync.upstream import gitio, history

# The §9 parser is exercised through inventory.parse (test_inventory.py): an
# Inventory carries its deviations.


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


def range_of(world: World) -> list[history.Commit]:
    return history.log_range(gitio.open_repo(world.up.repo), world.up.pin, world.up.target)


def test_deviations_touched_golden(world: World) -> None:
    port = world.port
    lines = deviations.deviations_touched(port, range_of(world), surface.build(port))
    up = world.up
    assert lines == [
        f'- §9.1 "A is synchronous": vllm/a.py touched by `{up.a_again[:10]}` vllm#12',
        f'- §9.1 "B keeps fp32": vllm/b.py (via src/b.cpp) touched by `{up.target[:10]}` '
        "vllm#15",
    ]


def test_deviations_keyed_by_title_and_cited_shas_and_prs(world: World) -> None:
    up = world.up
    text = INVENTORY + (
        "\n### 9.5 A is synchronous\n\nAlso `vllm/c.py`.\n"
        f"\n### 9.6 Cites a commit\n\nSince {up.delete[:9]}, and vllm#14 too.\n"
    )
    inv = inventory.parse(text, path="inv.md")
    lines = deviations.touched(inv, range_of(world), surface.build(world.port))
    assert lines[0] == (f'- §9.1 "A is synchronous": vllm/a.py touched by `{up.a_again[:10]}` '
                        f"vllm#12; vllm/c.py touched by `{up.target[:10]}` vllm#15")
    assert lines[2] == (f'- §9.6 "Cites a commit": cites `{up.delete[:9]}`, in the range: '
                        f"`{up.delete[:10]}` vllm#13; cites vllm#14, in the range: "
                        f"`{up.add_model[:10]}`")
    assert len(lines) == 3


def test_deviations_touched_without_inventory_or_section9(world: World) -> None:
    port = world.port
    inv_path = world.root / ".agents/porting-inventory.md"
    inv_path.write_text("# Inventory\n\n## T0\n\n- `vllm/a.py`\n")
    assert deviations.deviations_touched(port, range_of(world), surface.build(port)) == []
    inv_path.unlink()
    assert deviations.deviations_touched(port, range_of(world), surface.build(port)) == []
