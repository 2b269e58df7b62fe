"""Hostile upstream history end to end: a rename or a subject can forge nothing.

The regressions of the forged decision (a renamed cited path holding a heading and an
entry line, read back as a hand edit) and of the subject holding `<!--pin:commit-->`
that failed `check` on the tool's own report.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from portfixture import build, run

from sync.records import decisions, spans

from .generators import FRAGMENTS, angles_safe, sample

# -- end to end: upstream history ------------------------------------------------------------


def _change_a(tmp: Path) -> str:
    """The SHA of the fixture's PORT-NOW commit `change_a` (the history is deterministic)."""
    return build(tmp / "probe").marks["change_a"]


def test_a_renamed_path_cannot_forge_a_decision(tmp_path: Path) -> None:
    """The forged decision: a cited file renamed to a path holding a heading and an entry
    line was read back, on the next sync, as a hand edit deciding a PORT-NOW commit IGNORE."""
    sha = _change_a(tmp_path)
    prefix = f"- `{sha[:10]}` vllm#101 [Core] Change a (#101) — "
    evil = f"vllm/a\n\n## IGNORE\n\n{prefix}IGNORE: forged\n\n## Notes\n\nx.py"
    fx = build(tmp_path / "real", extra=[("[Refactor] Move a (#140)",
                                          {"vllm/a.py": None, evil: "a = 4\n"})])
    assert fx.marks["change_a"] == sha
    for _ in range(2):
        r = run(fx.port, "sync")
        assert r.rc == 0, r.err
    text = fx.report().read_text(encoding="utf-8")
    assert "## IGNORE\n\n- " not in text.split("## INVENTORY")[0]
    assert not (fx.sync_dir / decisions.FILE).exists()
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    (entry,) = [e for e in doc["entries"] if e["sha"] == sha]
    assert entry["disposition"] == "PORT-NOW"
    (move,) = [mv for mv in doc["moves"] if mv["path"] == "vllm/a.py"]
    assert move["new_path"] == evil  # the JSON keeps the path exactly
    (line,) = [x for x in text.splitlines() if x.startswith("- `vllm/a.py` renamed")]
    assert "IGNORE\\: forged" not in line and "forged" in line


def test_a_hostile_history_syncs_twice_byte_stable_and_check_passes(tmp_path: Path) -> None:
    """Seeded hostile subjects and renamed paths (every fragment family), end to end: no
    decision, no unparsed line, a byte-stable re-run, and `check` (a subject holding
    `<!--pin:commit-->` once failed the port's CI) still passes."""
    rng = random.Random(14)
    subjects = sample(rng, 24) + [f"{f} (#{200 + i})" for i, f in enumerate(FRAGMENTS[:20])]
    subjects += ["[Core] see <!--pin:commit-->0123456789<!--/pin--> (#299)"]
    # One path component each (git refuses NUL, empty components and `.`/`..`).
    paths = ["h" + p.replace("\x00", "0").replace("/", "∕") for p in sample(rng, 8)]
    extra: list[tuple[str | bytes, dict[str, str | None]]] = [
        (s or "x", {f"vllm/h{i}.py": f"h = {i}\n"}) for i, s in enumerate(subjects)]
    extra.append(("[Refactor] Move b (#298)", {"vllm/b.py": None, f"vllm/{paths[0]}.py":
                                                "b = 2  # MI300\n"}))
    extra += [("[Misc] hostile paths (#297)", {f"vllm/{p}": "x\n" for p in paths[1:]})]
    fx = build(tmp_path, extra=extra)
    first = run(fx.port, "sync")
    assert first.rc == 0, first.err
    checked = run(fx.port, "check", "--no-audit")
    assert checked.rc == 0, checked.out + checked.err
    md = fx.report()
    before = (md.read_text(encoding="utf-8"), md.with_suffix(".json").read_bytes())
    again = run(fx.port, "sync")
    assert again.rc == 0 and "warning" not in again.err, again.err
    assert (md.read_text(encoding="utf-8"), md.with_suffix(".json").read_bytes()) == before
    assert not (fx.sync_dir / decisions.FILE).exists()
    text = before[0]
    assert angles_safe(text) and spans.marker_problems(text, path="r.md") == []


def test_an_invisible_character_in_a_subject_is_shown_wherever_it_is_rendered(
        tmp_path: Path) -> None:
    """h2: a bidi override or zero-width space in a subject reached the report, the queue
    and explain unseen (reversing or hiding what a reviewer reads); each shows its escape
    there, and the JSON keeps the subject exactly."""
    subject = "[Core] Change a \u202eniaga\u202c\u200b## x (#150)"
    fx = build(tmp_path, extra=[(subject, {"vllm/a.py": "a = 5\n"})])
    shown = "Change a \\u202eniaga\\u202c\\u200b## x (#150)"
    assert run(fx.port, "sync").rc == 0
    text = fx.report().read_text(encoding="utf-8")
    assert shown.replace("\\", "\\\\") in text
    assert "\u202e" not in text and "\u200b" not in text
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    assert subject in [e["subject"] for e in doc["entries"]]
    for argv in (("queue",), ("explain", fx.marks["extra0"])):
        r = run(fx.port, *argv)
        assert r.rc == 0 and shown in r.out and "\u202e" not in r.out, r.out + r.err
