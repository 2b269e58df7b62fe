"""The generated docs (config keys, exit codes) match their one declaration."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sync.dev import docs
from sync.infra import errors
from sync.records import config

ROOT = Path(__file__).resolve().parents[1]


def test_committed_docs_are_generated() -> None:
    assert docs.stale(ROOT) == []
    assert docs.main(["--root", str(ROOT), "--check"]) == 0


def test_each_generated_region_is_placed() -> None:
    assert docs.regions((ROOT / "README.md").read_text()) == ["exit-codes"]
    assert docs.regions((ROOT / "docs/adopting.md").read_text()) == [
        "config-keys", "preference-keys", "exit-codes"]


def test_a_stale_region_is_found_and_rewritten(tmp_path: Path) -> None:
    for name in docs.FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        text = (ROOT / name).read_text()
        (tmp_path / name).write_text(text.replace("| 4 | `MalformedRecord` |", "| 4 | x |"))
    assert docs.stale(tmp_path) == list(docs.FILES)
    assert docs.main(["--root", str(tmp_path), "--check"]) == 1
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert docs.stale(tmp_path) == []


def test_every_config_field_is_a_documented_key() -> None:
    table = config.keys_table()
    for f in dataclasses.fields(config.Config):
        if f.name not in ("source", "raw"):
            key = f.metadata["upstream_sync.key"]
            assert re.search(rf"[ `\[.]{key.name or f.name}[`\].]", table), f.name
    for cls in (config.Mapping, config.Rule, config.Suite):
        for f in dataclasses.fields(cls):
            if f.name != "name":
                assert f" {f.name}` |" in table, (cls.__name__, f.name)


def test_exit_codes_are_one_table() -> None:
    codes = [c.exit_code for c in errors.EXIT_CODES]
    assert codes == sorted(set(codes)) == list(range(1, 8))
    declared = {c for c in vars(errors).values()
                if isinstance(c, type) and issubclass(c, errors.SyncError)}
    assert declared == set(errors.EXIT_CODES)
    table = errors.exit_table()
    for c in errors.EXIT_CODES:
        assert f"| {c.exit_code} | `{c.__name__}` | {errors.meaning(c)} |" in table
