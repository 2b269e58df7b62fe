from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stepfixture import INVENTORY, World, make_world, run, with_port_cmd

from sync.infra.atomic import read_text
from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import inventory

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]

REAL = Path(__file__).resolve().parents[1] / "examples/port/.agents/porting-inventory.md"

LIST_STYLE = (
    "# Inventory\n"
    "\n"
    "### Tier 1\n"
    "\n"
    "| item | upstream | status |\n"
    "|---|---|---|\n"
    "| RoPE | `vllm/rope.py` | ✅ `1234567` |\n"
    "\n"
    "## §9 Deviations from upstream\n"
    "\n"
    "Intro paragraph.\n"
    "\n"
    "1. **Sampler order** — `vllm/sample.py` sorts first; we do not.\n"
    "   Continued, see vllm#77.\n"
    "2. Scheduler fairness: differs (`vllm/sched/` at e24d1b24).\n"
    "- **9.7 Bold numbered** body cites nothing.\n"
    "\n"
    "```\n"
    "## 9. not a heading inside a fence\n"
    "```\n"
)


def test_parse_the_example_inventory() -> None:
    inv = inventory.parse(read_text(REAL), path="inv.md")
    rows = inv.rows()
    assert [r.tier for r in rows].count("T0") == 6 and len(rows) == 15
    assert rows[0].status == "done" and rows[0].prs == (30104, 33121, 35168)
    assert [r.status for r in rows if r.tier == "T1"] == ["done", "wip", "wip", "todo"]
    assert inv.section9 is not None and inv.section9.text == "9. Deviations"
    assert [(d.label, d.title) for d in inv.deviations] == [
        ("§9.1", "Synchronous scheduling only"),
        ("§9.2", "Block hashes cover token ids only"),
        ("§9.2", "Top-p renormalises without a sort"),
        ("§9.3", "Hermes parser rejects non-JSON arguments"),
    ]
    assert inv.deviations[0].paths == ("vllm/v1/engine/core.py",)


def test_parse_list_style_section9_and_tables() -> None:
    inv = inventory.parse(LIST_STYLE, path="inv.md")
    (row,) = inv.rows()
    assert (row.kind, row.tier, row.status, row.line) == ("table", "T1", "done", 7)
    assert [(d.label, d.title, d.paths, d.shas, d.prs) for d in inv.deviations] == [
        ("§9.1", "Sampler order", ("vllm/sample.py",), (), (77,)),
        ("§9.2", "Scheduler fairness", ("vllm/sched/",), ("e24d1b24",), ()),
        ("§9.7", "Bold numbered", (), (), ()),
    ]


def test_a_bold_title_wrapped_over_lines_is_read_whole() -> None:
    text = ("# Inventory\n\n## 9. Deviations\n\n"
            "11. **Vendored FlashAttention-2 (head-dim-256 GQA prefill implemented; ratio-6\n"
            "    split-KV decode `ACTIVE`)**: a byte-identical vendor of\n"
            "    vllm-project/flash-attention @ `2c839c33`.\n"
            "12. **Short** — on one line.\n")
    inv = inventory.parse(text, path="inv.md")
    assert [(d.label, d.title) for d in inv.deviations] == [
        ("§9.11", "Vendored FlashAttention-2 (head-dim-256 GQA prefill implemented; ratio-6 "
                  "split-KV decode `ACTIVE`)"),
        ("§9.12", "Short")]


def test_no_section9() -> None:
    inv = inventory.parse("# Inventory\n\n## T0\n\n- a\n", path="inv.md")
    assert inv.section9 is None and inv.deviations == ()


# -- annotate (pure) --------------------------------------------------------------------------


def annotate(text: str, **kw: object) -> inventory.Annotation:
    args: dict[str, object] = {"pr": 42, "tier": "T0", "paths": ["vllm/c.py"], "subject": None,
                               "note": None, "section_title": "Sync 2026-01-05-abcdef0: INVENTORY",
                               "intro": "Intro."}
    args.update(kw)
    return inventory.annotate(inventory.parse(text, path="inv.md"),
                              inventory.Request(**args))  # type: ignore[arg-type]


def test_annotate_existing_row_inserts_only_the_reference() -> None:
    a = annotate(INVENTORY, note="needs   a look")
    row = "- Module c, `vllm/c.py` (not started)"
    assert a.where == "row" and a.line == 6
    assert a.text == INVENTORY.replace(row, row + " (vllm#42 — needs a look)")
    assert a.row == row + " (vllm#42 — needs a look)"


@pytest.mark.parametrize(("pr", "tier", "subject", "row"), [
    (38122, "T2", "[Spec Decode] EAGLE-3 speculative decoding for Qwen3 (#38122)",
     "- EAGLE speculative decoding (vllm#32498)"),
    (38200, "T2", "[LoRA] Pin adapters in the LoRA model manager (#38200)",
     "- LoRA adapters and the LoRA model manager (vllm#31625, vllm#33572)"),
    (38200, "T3", "[LoRA] Support LoRA on fused MoE layers (#38200)",
     "- Fused MoE layer and per-device kernel configs (vllm#33845)"),
    (39904, "T2", "[Multimodal] Key the processor cache by content hash (#39904)",
     "- Multimodal processor cache (vllm#34466)"),
])
def test_annotate_matches_the_tier_row_that_names_the_feature(
        pr: int, tier: str, subject: str, row: str) -> None:
    text = read_text(REAL)
    a = annotate(text, pr=pr, tier=tier, subject=subject, paths=["vllm/not/cited.py"])
    assert a.where == "row" and a.row == f"{row} (vllm#{pr})"
    assert a.text == text.replace(row, f"{row} (vllm#{pr})", 1)


@pytest.mark.parametrize(("tier", "subject"), [
    ("T2", "[Spec Decode] EAGLE-3 drafts for Qwen3 (#38122)"),  # "eagle" only
    ("T2", "[LoRA] Support LoRA on fused MoE layers (#38200)"),  # "lora" only, in T2
])
def test_annotate_one_shared_word_is_not_a_row_naming_the_feature(tier: str,
                                                                  subject: str) -> None:
    text = read_text(REAL)
    a = annotate(text, pr=38999, tier=tier, subject=subject, paths=["vllm/not/cited.py"])
    assert a.where == "section"
    assert a.text.count("(vllm#38999)") == 1 and "- T2 (vllm#38999) " in a.text


ENCODER = (
    "# Inventory\n"
    "\n"
    "## 5. Model architectures\n"
    "\n"
    "| Family | Marquee members | Needs | Tier |\n"
    "|---|---|---|---|\n"
    "| MLA family | DeepSeek V3/V3.2/V4, Kimi K2.5 | MLA wrapper, latent KV | T2 |\n"
    "| Multimodal / ASR / encoder-decoder | Qwen3-VL, Whisper, … | vision/audio towers, "
    "mRoPE full, encoder cache | T3 (deferred; revisit after T1) |\n"
    "\n"
    "## 9. Deviations\n"
)


def test_annotate_a_row_sharing_one_word_with_the_subject_is_left_alone() -> None:
    """The real case: "[FlexAttention] Avoid encoder block-mask compile explosion" shares
    only "encoder" with the multimodal row, and cites none of its paths."""
    req = {"pr": 50339, "tier": "T3", "note": "FlexAttention not targeted",
           "subject": "[FlexAttention] Avoid encoder block-mask compile explosion (#50339)",
           "paths": ["vllm/config/attention.py",
                     "vllm/v1/attention/backends/flex_attention.py"]}
    a = annotate(ENCODER, **req)
    assert a.where == "section"
    row = ENCODER.splitlines()[7]
    assert row in a.text.splitlines() and "vllm#50339" not in a.text.split("## Sync")[0]
    # With no cycle open there is no section to fall back to: refused, nothing written.
    with pytest.raises(UsageError, match=r"no inventory row cites vllm/config/attention\.py"):
        annotate(ENCODER, **req, section_title=None)
    # A subject naming the row with several words still finds it.
    b = annotate(ENCODER, pr=50340, tier="T3", paths=["vllm/x.py"],
                 subject="[Multimodal] Whisper encoder cache for ASR (#50340)")
    assert b.where == "row" and b.line == 8 and "encoder-decoder (vllm#50340) |" in b.row


def test_annotate_a_feature_no_row_names_goes_to_the_section() -> None:
    text = read_text(REAL)
    a = annotate(text, pr=37404, tier="T2", subject="[Model] Add Gemma-4 (#37404)",
                 paths=["vllm/model_executor/models/gemma4.py"])
    assert a.where == "section"


def test_annotate_two_rows_naming_the_feature_equally_need_row() -> None:
    text = INVENTORY.replace("- Models under `vllm/models/`\n",
                             "- Sampler fast path\n- Sampler slow path\n")
    with pytest.raises(UsageError, match=r"2 T2 rows of inv.md name this feature equally"):
        annotate(text, tier="T2", subject="[Perf] Sampler path speedup (#42)",
                 paths=["vllm/x.py"])


TIER_CELLS = (
    "# Inventory\n"
    "\n"
    "## 5. Model architectures\n"
    "\n"
    "| family | models | needs | tier |\n"
    "|---|---|---|---|\n"
    "| Dense decoders | Llama 3.x, Qwen2/3, Gemma 2/3 | GQA + RoPE | T1 |\n"
    "| MLA family | DeepSeek V3/V3.2, Kimi K2.5 | latent KV | T2 |\n"
    "| Spec decode | EAGLE3, MTP | drafts | **T2 (later)** |\n"
    "\n"
    "## 9. Deviations\n"
)


def test_table_rows_outside_tier_headings_carry_their_tier_cell() -> None:
    """The real inventory's shape: sections by area, the tier in a cell of each row."""
    inv = inventory.parse(TIER_CELLS, path="inv.md")
    assert [(r.line, r.tier) for r in inv.rows()] == [(7, "T1"), (8, "T2"), (9, "T2")]
    a = annotate(TIER_CELLS, pr=41000, tier="T2", subject="[Model] DeepSeek V4 (#41000)",
                 paths=["vllm/model_executor/models/deepseek_v4.py"])
    assert a.where == "section"  # "deepseek" alone is one shared word
    a = annotate(TIER_CELLS, pr=41000, tier="T2",
                 subject="[Model] DeepSeek V4 with Kimi-style latent KV (#41000)",
                 paths=["vllm/model_executor/models/deepseek_v4.py"])
    assert a.where == "row" and a.line == 8
    assert a.row == "| MLA family | DeepSeek V3/V3.2, Kimi K2.5 (vllm#41000) | latent KV | T2 |"
    b = annotate(TIER_CELLS, pr=41001, tier="T1", subject="[Model] Gemma 4 dense decoders "
                 "(#41001)", paths=["vllm/gemma4.py"])
    assert b.where == "row" and b.line == 7


def test_annotate_table_row_in_the_citing_cell() -> None:
    a = annotate(LIST_STYLE, paths=["vllm/rope.py"], tier="T1")
    assert a.text == LIST_STYLE.replace("| `vllm/rope.py` |", "| `vllm/rope.py` (vllm#42) |")


# The real inventory's rows cite paths below the package root, and folders (walk-s6b D5).
BELOW_ROOT = (
    "# Inventory\n\n### Engine\n\n| item | upstream | tier |\n|---|---|---|\n"
    "| Streaming API | `v1/engine/async_llm.py`, `llm_engine.py` | T0 |\n"
    "| KV offload | `v1/kv_offload/` | T2 |\n"
    "\n## §9 Deviations from upstream\n\nNone.\n")


@pytest.mark.parametrize(("path", "tier", "row"), [
    ("vllm/v1/engine/async_llm.py", "T0",
     "| `v1/engine/async_llm.py`, `llm_engine.py` (vllm#42) | T0 |"),
    ("vllm/v1/kv_offload/cpu/policies/lru.py", "T2", "`v1/kv_offload/` (vllm#42)"),
])
def test_annotate_finds_a_row_citing_the_path_below_its_root_or_a_folder(
        path: str, tier: str, row: str) -> None:
    a = annotate(BELOW_ROOT, paths=[path], tier=tier)
    assert a.where == "row" and row in a.text, a.text


@pytest.mark.parametrize(("path", "text", "cited"), [
    ("vllm/v1/a.py", "`v1/a.py`", True),
    ("vllm/v1/a.py", "`vllm/v1/a.py`", True),
    ("vllm/v1/a.py", "`xvllm/v1/a.py`", False),
    ("vllm/v1/a.py", "`v1/a.pyc`", False),
    ("vllm/v1/a.py", "`v1/`", False),  # a folder one part below the root is everything
    ("vllm/v1/k/c/a.py", "`v1/k/`", True),
    ("vllm/v1/k/c/a.py", "`v1/k/c.py`", False),
    ("vllm/a.py", "`a.py`", False),  # a bare name is no citation of one file
    # A brace list names the files it makes, not its folder (walk-s9 D4).
    ("vllm/v1/w/gpu/pp_utils.py", "`v1/w/gpu/{dp,pp,eplb}_utils.py`", True),
    ("vllm/v1/w/gpu/pool/runner.py", "`v1/w/gpu/{dp,pp,eplb}_utils.py`", False),
    ("vllm/v1/w/gpu/x_utils.py", "`v1/w/gpu/{dp,pp,eplb}_utils.py`", False),
    ("vllm/v1/k/lru/a.py", "`v1/k/{lru,arc}/`", True),
])
def test_cites_path(path: str, text: str, cited: bool) -> None:
    assert inventory.cites_path(path, text) is cited


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="v1/ak{},._- `", max_size=60))
def test_cites_path_on_any_text_only_answers(text: str) -> None:
    assert inventory.cites_path("vllm/v1/k/a.py", text) in (True, False)


def test_annotate_multiline_bullet_at_its_end_keeping_crlf() -> None:
    text = ("## T1 — x\r\n\r\n- Scheduler `vllm/s.py`\r\n  continued  \r\n"
            "  - nested `vllm/n.py`\r\n\r\n## 9. Deviations\r\n")
    a = annotate(text, paths=["vllm/s.py"], tier="T1")
    assert a.text == text.replace("  continued  \r\n", "  continued (vllm#42)  \r\n")


def test_annotate_goes_to_the_cycle_section_before_section9() -> None:
    a = annotate(INVENTORY, pr=14, tier="T2", paths=["vllm/models/new.py"],
                 subject="[Model] Add new model (#14)")
    bullet = "- T2 (vllm#14) \\[Model\\] Add new model — `vllm/models/new.py`"
    block = f"## Sync 2026-01-05-abcdef0: INVENTORY\n\nIntro.\n\n{bullet}\n\n"
    assert a.where == "section" and a.row == bullet and a.line == 16
    assert a.text == INVENTORY.replace("## 9. Deviations", block + "## 9. Deviations")
    assert a.text.splitlines()[a.line - 1] == bullet
    b = annotate(a.text, pr=15, tier="T3", paths=[], note="later")
    assert b.where == "section" and b.line == 17
    assert b.text == a.text.replace(bullet + "\n", bullet + "\n- T3 (vllm#15) — later\n")
    # The section's rows are rows: annotating them again is a no-op.
    c = annotate(b.text, pr=14, tier="T2", paths=["vllm/models/new.py"])
    assert c.where == "already" and c.text == b.text and c.line == 16


def test_a_bullet_after_a_lone_cr_doubles_no_cr() -> None:
    """A CRLF inventory whose cycle section ends the file in a lone CR (an old-Mac line end)
    got CRLF after that CR, CR CR LF: an empty line to an editor, the new bullet cut off
    the list. Only the LF that makes it CRLF goes there; every old byte is kept."""
    text = ("## T1 — x\r\n\r\n## Sync 2026-01-05-abcdef0: INVENTORY\r\n\r\n"
            "- T1 (vllm#3) y\r")
    a = annotate(text, pr=5, tier="T1", paths=["vllm/b.py"])
    assert a.where == "section"
    assert a.text == text + "\n- T1 (vllm#5) — `vllm/b.py`\r\n"


def test_annotate_never_takes_a_cycle_bullet_for_another_pr() -> None:
    """walk-s10 U2: #50574 ("... encoder token embedding") went onto the bullet of #50293
    ("... encoder token classification"), an earlier cycle's item, by their shared words."""
    a = annotate(INVENTORY, pr=50293, tier="T2", paths=["vllm/v1/worker/gpu/pool/a.py"],
                 subject="[Model Runner V2] Enable encoder token classification (#50293)")
    assert a.where == "section"
    b = annotate(a.text, pr=50574, tier="T2", paths=["vllm/v1/worker/gpu/pool/b.py"],
                 subject="[Model Runner V2] Enable encoder token embedding (#50574)")
    assert b.where == "section" and b.line == a.line + 1
    assert "(vllm#50574)" not in b.text.splitlines()[a.line - 1]


def test_annotate_already_recorded_and_tier_mismatch() -> None:
    assert annotate(INVENTORY, pr=10, paths=[]).where == "already"
    with pytest.raises(UsageError, match="under T0, not T1"):
        annotate(INVENTORY, tier="T1")


def test_annotate_several_rows_need_row() -> None:
    text = INVENTORY.replace("- Models under", "- Also `vllm/c.py`; models under")
    with pytest.raises(UsageError, match=r"2 inventory rows cite vllm/c\.py"):
        annotate(text, tier="T1")
    assert annotate(text, tier="T2").line == 10  # only one of them is in the asked tier
    assert annotate(text, tier="T0", row_line=6).line == 6
    with pytest.raises(UsageError, match="is not an inventory row"):
        annotate(text, row_line=1)


def test_annotate_refuses_without_section9() -> None:
    text = INVENTORY[: INVENTORY.index("## 9.")]
    with pytest.raises(MalformedRecord, match="no §9"):
        annotate(text, paths=["vllm/zzz.py"])
    # An existing row does not need §9.
    assert annotate(text).where == "row"


# -- the command ------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


def test_annotate_command_from_the_report(world: World) -> None:
    up = world.up
    assert run(world.root, "sync", "--target", up.target).rc == 0
    report = next((world.root / ".agents/sync").glob("*.md"))
    assert "INVENTORY unannotated: " in read_text(report)
    r = run(world.root, "inventory", "annotate", "--pr", "14", "--tier", "t2", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["where"] == "section" and doc["tier"] == "T2"
    text = read_text(world.root / ".agents/porting-inventory.md")
    title = f"## Sync {report.stem}: INVENTORY"
    assert f"{title}\n\nINVENTORY items of the sync cycle to `{up.target[:10]}` (report: " \
        f"[{report.name}](sync/{report.name}))" in text
    assert "- T2 (vllm#14) \\[Model\\] Add new model — `vllm/models/new.py`\n" in text
    assert text.index(title) < text.index("## 9. Deviations")
    # The carry-over stops listing it once the report is regenerated (vllm#13, a deleted
    # cited file, is INVENTORY too and stays until annotated or decided).
    assert run(world.root, "sync").rc == 0
    assert "INVENTORY unannotated: `" + up.add_model[:10] not in read_text(report)
    assert "INVENTORY unannotated: `" + up.delete[:10] in read_text(report)
    again = run(world.root, "inventory", "annotate", "--pr", "14", "--tier", "T2")
    assert again.rc == 0 and "already recorded" in again.out
    assert read_text(world.root / ".agents/porting-inventory.md") == text
    # Another tier is not carried out silently (walk-s3 D12): refused, nothing written.
    other = run(world.root, "inventory", "annotate", "--pr", "14", "--tier", "T0")
    assert other.rc == 2
    assert "vllm#14 is already recorded under T2, not T0: - T2 (vllm#14)" in other.err
    assert "a tier changes by moving the row into T0's list by hand" in other.err
    assert read_text(world.root / ".agents/porting-inventory.md") == text


def test_annotate_command_bad_input(world: World) -> None:
    inv = world.root / ".agents/porting-inventory.md"
    r = run(world.root, "inventory", "annotate", "--pr", "99", "--tier", "T1")
    assert r.rc == 2 and ("vllm#99 is not in a report: no cycle is open, and no --path was "
                          "given") in r.err, r.err
    r = run(world.root, "inventory", "annotate", "--pr", "99", "--tier", "T1", "--path",
            "vllm/x.py")
    assert r.rc == 2 and "no sync cycle is open" in r.err
    r = run(world.root, "inventory", "annotate", "--pr", "99", "--tier", "T9", "--path", "x")
    assert r.rc == 2
    assert run(world.root, "sync", "--target", world.up.target).rc == 0
    r = run(world.root, "inventory", "annotate", "--pr", "12", "--tier", "T1")
    assert r.rc == 2 and "lists vllm#12 as PORT-NOW" in r.err
    no9 = INVENTORY[: INVENTORY.index("## 9.")]
    inv.write_text(no9)
    r = run(world.root, "inventory", "annotate", "--pr", "14", "--tier", "T2")
    assert r.rc == 4 and "no §9" in r.err and r.err.count("\n") == 1
    assert read_text(inv) == no9
    inv.unlink()
    r = run(world.root, "inventory", "annotate", "--pr", "14", "--tier", "T2")
    assert r.rc == 4 and "does not exist" in r.err


def test_annotate_command_on_an_existing_row(world: World) -> None:
    r = run(world.root, "inventory", "annotate", "--pr", "15", "--tier", "T0", "--path",
            "vllm/c.py")
    assert r.rc == 0, r.err
    assert read_text(world.root / ".agents/porting-inventory.md") == INVENTORY.replace(
        "(not started)", "(not started) (vllm#15)")


# -- properties -------------------------------------------------------------------------------

_LINES = st.sampled_from([
    "# Inventory", "## T0 — core", "### Tier 2", "## 9. Deviations", "## §9", "### 9.1 Title",
    "### 9.1", "- item `vllm/a.py`", "  continued", "1. **Bold** — body vllm#12", "- **9.2 X**:",
    "| a | `vllm/a.py` |", "|---|---|", "```", "~~~", "", "9.3 plain", "- T1 (vllm#3) x",
    "## Sync 2026-01-05-abcdef0: INVENTORY", "**", "|", "#", "- ", "\t- x", "e24d1b24",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=25), st.sampled_from(["\n", "\r\n", "\r"]),
       st.lists(st.sampled_from(["vllm/a.py", "vllm/b.py"]), max_size=2),
       st.sampled_from(inventory.TIERS))
def test_parse_and_annotate_never_crash(lines: list[str], nl: str, paths: list[str],
                                        tier: str) -> None:
    text = nl.join(lines)
    inv = inventory.parse(text, path="inv.md")
    for d in inv.deviations:
        assert d.title and d.key
    try:
        a = inventory.annotate(inv, inventory.Request(
            pr=5, tier=tier, paths=paths, subject="S (#5)", note=None,
            section_title="Sync 2026-01-05-abcdef0: INVENTORY", intro="I."))
    except SyncError:
        return
    if a.where == "already":
        assert a.text == text
    else:
        assert "vllm#5" in a.text and len(a.text) > len(text)
        again = inventory.parse(a.text, path="inv.md")
        assert any("vllm#5" in r.text for r in again.rows()) or a.where == "section"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LINES, st.sampled_from(["\n", "\r\n", "\r", ""])), max_size=25),
       st.sampled_from(["vllm/a.py", "vllm/z.py"]), st.sampled_from(inventory.TIERS))
def test_annotate_on_mixed_line_endings_keeps_bytes_and_doubles_no_cr(
        lines: list[tuple[str, str]], path: str, tier: str) -> None:
    """Any mix of LF, CRLF and lone CR: an annotation inserts in one place, every old byte
    kept, and adds no CR CR LF."""
    text = "".join(line + end for line, end in lines)
    try:
        a = annotate(text, pr=5, tier=tier, paths=[path], subject="S (#5)")
    except SyncError:
        return
    at = next((i for i, (x, y) in enumerate(zip(text, a.text, strict=False)) if x != y),
              len(text))
    assert a.text.startswith(text[:at]) and a.text.endswith(text[at:])
    assert len(a.text) > len(text) or a.where == "already"
    assert a.text.count("\r\r\n") == text.count("\r\r\n")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_parse_random_text(text: str) -> None:
    inventory.parse(text, path="inv.md")


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINES, max_size=25), st.sampled_from(["\n", "\r\n"]))
def test_a_bom_changes_nothing_that_is_read(lines: list[str], nl: str) -> None:
    """A BOM glued to line 1 hid a tier heading there (`## T0`): its rows read with no tier,
    silently, and were no inventory rows. Read with it, every item, heading and deviation is
    what it is without it, each offset one further into the file."""
    text = nl.join(lines)
    plain, bom = inventory.parse(text, path="inv.md"), inventory.parse("\ufeff" + text,
                                                                        path="inv.md")
    assert [(i.tier, i.text, i.line, i.start + 1) for i in plain.items] == [
        (i.tier, i.text, i.line, i.start) for i in bom.items]
    assert [(h.text, h.tier, h.line) for h in plain.headings] == [
        (h.text, h.tier, h.line) for h in bom.headings]
    assert [d.title for d in plain.deviations] == [d.title for d in bom.deviations]



NAMED = "[paths]\ninventory = \".agents/porting-inventory.md\"\n"
MISSING = (".agents/porting-inventory.md: the porting inventory does not exist, though "
           ".agents/upstream-sync.toml names it — restore it from git, or remove [paths] "
           "inventory if the port has none")


def test_check_names_an_inventory_the_configuration_names_but_that_does_not_exist(
        world: World) -> None:
    """`init` writes `[paths] inventory` only when it found one: a port whose configuration
    names it and lacks the file lost it (walk-s11 D5: check said nothing)."""
    (world.root / ".agents/upstream-sync.toml").write_text(NAMED)
    assert MISSING not in run(world.root, "check", "--no-audit").out
    (world.root / ".agents/porting-inventory.md").unlink()
    r = run(world.root, "check", "--no-audit")
    assert r.rc == 7 and MISSING in r.out.splitlines(), r.out


def test_a_port_that_never_had_an_inventory_passes_check_without_one(world: World) -> None:
    before = run(world.root, "check", "--no-audit")
    (world.root / ".agents/porting-inventory.md").unlink()  # the defaults: no file, no key
    r = run(world.root, "check", "--no-audit")
    assert (r.rc, r.out) == (before.rc, before.out)
    assert "porting-inventory" not in r.out


def test_the_report_says_the_inventory_does_not_exist_instead_of_none(world: World) -> None:
    """Not `_None._` (no deviation touched) when no deviation could be read."""
    (world.root / ".agents/porting-inventory.md").unlink()
    r = run(world.root, "sync", "--json", "--target", world.up.target)
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert (doc["deviations"], doc["inventory_missing"]) == ([], ".agents/porting-inventory.md")
    text = read_text(next((world.root / ".agents/sync").glob("*.md")))
    section = text.split("## Deviations touched\n\n", 1)[1].split("\n\n", 1)[0]
    assert section == ("_the porting inventory `.agents/porting-inventory.md` does not exist: "
                       "deviations not read_")
    # Read back as the tool's own line, not kept as a person's unparsed one.
    assert run(world.root, "sync").rc == 0
    assert read_text(next((world.root / ".agents/sync").glob("*.md"))) == text
