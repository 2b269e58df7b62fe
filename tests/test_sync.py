"""`sync` and `decide` end to end: classification order, hand edits, decisions, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from portfixture import Fixture, Ran, advance_remote, build, run, write

from sync import port
from sync.dev import example
from sync.dev.fastimport import git
from sync.infra import txn
from sync.infra.errors import UsageError
from sync.records import cycle, decisions
from sync.records.config import Rule
from sync.steps import classify
from sync.steps.surface import Surface
from sync.upstream import gitio
from sync.upstream.history import Change, Commit

REPO = Path(__file__).resolve().parents[1]
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def synced(fx: Fixture, *argv: str) -> dict[str, Any]:
    r = run(fx.port, "sync", "--json", *argv)
    assert r.rc == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def entries(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["sha"]: e for e in doc["entries"]}


def decided(fx: Fixture) -> dict[str, decisions.Decision]:
    return decisions.load(fx.sync_dir / "decisions.toml", rel="decisions.toml")


def line_of(text: str, sha: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"- `{sha[:10]}` ")]
    return line


def edit_report(fx: Fixture, old: str, new: str) -> None:
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    md.write_text(text.replace(old, new), encoding="utf-8")


# -- classification order -------------------------------------------------------------------------


def test_defaults_rules_and_demotions(fx: Fixture) -> None:
    e = {k: entries(synced(fx))[v] for k, v in fx.marks.items() if k in fx.range_names()}
    # The fixture's headers cite whole files: any semantic change is PORT-NOW, and the reason
    # says the citation is whole-file (so ports learn to cite symbols).
    assert (e["change_a"]["disposition"], e["change_a"]["rule"]) == ("PORT-NOW", "whole-file")
    assert e["change_a"]["reason"] == "vllm/a.py (whole-file citation; changes a) → src/a.cpp"
    assert e["change_a"]["upstream_paths"] == ["vllm/a.py"]
    assert e["change_a"]["port_files"] == ["src/a.cpp"]
    assert e["fix_c"]["reason"] == ("vllm/c.py (whole-file citation; changes c) → src/c.cpp, "
                                    "src/c_old.cpp")
    # A tag rule demotes a ported-code commit, but the entry keeps the port files and rule id.
    rocm = e["rocm_b"]
    assert (rocm["disposition"], rocm["rule"], rocm["auto"]) == ("IGNORE", "rule rocm", True)
    assert rocm["port_files"] == ["src/b.cpp"]
    assert rocm["reason"] == ("platform we don't target; touches ported code: vllm/b.py "
                              "(whole-file citation; changes b) → src/b.cpp")
    # A deleted cited file and a pure rename are not changes to port: each says what to re-point.
    assert (e["delete"]["disposition"], e["delete"]["rule"]) == ("INVENTORY", "cited-deleted")
    assert (e["rename"]["disposition"], e["rename"]["rule"]) == ("IGNORE", "renamed-only")
    assert (e["lora"]["disposition"], e["lora"]["rule"]) == ("INVENTORY", "rule lora")
    assert (e["tests_only"]["disposition"], e["tests_only"]["rule"]) == ("IGNORE",
                                                                         "rule tests-only")
    # paths_all needs every path to match: tests/ plus vllm/a.py falls through to the default.
    assert (e["tests_and_a"]["disposition"], e["tests_and_a"]["rule"]) == ("PORT-NOW",
                                                                           "whole-file")
    assert (e["add_model"]["disposition"], e["add_model"]["rule"]) == ("INVENTORY",
                                                                       "mirrored-path")
    assert e["add_model"]["reason"] == "not yet ported: vllm/models/new.py"
    assert e["add_model"]["port_files"] == []
    assert (e["docs"]["disposition"], e["docs"]["rule"]) == ("IGNORE", "unmirrored")
    assert e["docs"]["reason"] == "touches no mirrored path (docs/)"
    assert e["no_pr"]["pr"] is None


def _commit(subject: str, *paths: str) -> Commit:
    return Commit("f" * 40, (), "a <a@b>", "2026-01-01T00:00:00+00:00", subject, "",
                  tuple(Change("M", p) for p in paths))


SURF = Surface({"vllm/a.py": ("src/a.cpp",), "vllm/b.py": ("src/b.cpp", "src/b.h")}, {},
               ("vllm/",))



def _one(commit: Commit, rules: tuple[Rule, ...],
         decided: dict[str, decisions.Decision]) -> classify.Entry:
    return classify.classify_one(commit, classify.Inputs(SURF, rules, decided))

def test_classify_order_decision_then_rules_then_defaults() -> None:
    tag = Rule("rocm", "IGNORE", "not our platform", tags=("ROCm",))
    any_ = Rule("lora", "INVENTORY", "later", paths_any=("vllm/lora/**",))
    all_ = Rule("tests", "IGNORE", "tests only", paths_all=("tests/**",))
    both = Rule("both", "INVENTORY", "tagged and in lora", tags=("Core",),
                paths_any=("vllm/lora/**",))
    rules = (tag, any_, all_, both)
    c = _commit("[rocm][Core] Tune (#5)", "vllm/b.py")
    # Rules match tags case-insensitively, in order; the first match wins.
    e = _one(c, rules, {})
    assert (e.disposition, e.rule, e.port_files) == ("IGNORE", "rule rocm",
                                                     ("src/b.cpp", "src/b.h"))
    assert e.reason == "not our platform; touches ported code: vllm/b.py → src/b.cpp, src/b.h"
    # A decision outranks every rule and carries no auto tag.
    d = decisions.Decision(c.sha, "PORT-NOW", "we need it", "me", "2026-01-01")
    e = _one(c, rules, {c.sha: d})
    assert (e.disposition, e.reason, e.rule, e.auto) == ("PORT-NOW", "we need it", None, False)
    assert e.port_files == ("src/b.cpp", "src/b.h")
    assert _one(_commit("x", "vllm/lora/a.py"), rules, {}).rule == \
        "rule lora"
    assert _one(_commit("x", "tests/a.py", "tests/b.py"), rules,
                                 {}).rule == "rule tests"
    assert _one(_commit("x", "tests/a.py", "vllm/a.py"), rules,
                                 {}).rule == "ported-path"
    # tags AND paths: both must hold.
    assert _one(_commit("[Core] x", "vllm/lora/a.py"), (both,),
                                 {}).rule == "rule both"
    assert _one(_commit("[Core] x", "vllm/c.py"), (both,),
                                 {}).rule == "mirrored-path"
    assert _one(_commit("x", "docs/a.md", "README.md"), (), {}).reason \
        == "touches no mirrored path (README.md, docs/)"
    assert _one(_commit("empty"), (), {}).reason == "changes no files"
    many = _one(_commit("x", *(f"vllm/m{i}.py" for i in range(5))),
                                 (), {})
    assert many.reason == "not yet ported: vllm/m0.py, vllm/m1.py, vllm/m2.py (+2 more)"


# -- hand edits -----------------------------------------------------------------------------------


def _decided_by_hand(fx: Fixture, reason: str) -> tuple[str, str, Ran]:
    """change_a's entry edited to `IGNORE: <reason>`, and the `sync` that reads it back:
    (the commit, the line as edited, that run)."""
    synced(fx)
    sha = fx.marks["change_a"]
    old = line_of(fx.report().read_text(encoding="utf-8"), sha)
    new = old.split(" — ")[0] + " — IGNORE: " + reason
    edit_report(fx, old, new)
    return sha, new, run(fx.port, "sync")


def test_hand_edited_disposition_becomes_a_decision(fx: Fixture) -> None:
    sha, new, r = _decided_by_hand(fx, "covered by the W5 refactor already")
    assert r.rc == 0, r.err
    assert "read back 1 hand-edited entry into decisions.toml" in r.err
    d = decided(fx)[sha]
    assert (d.disposition, d.reason) == ("IGNORE", "covered by the W5 refactor already")
    assert d.by.startswith("hand edit of ")
    text = fx.report().read_text(encoding="utf-8")
    assert line_of(text, sha) == new
    assert new in text.split("## IGNORE\n", 1)[1].split("## UNCLASSIFIED")[0]
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    e = entries(doc)[sha]
    assert (e["disposition"], e["auto"], e["rule"]) == ("IGNORE", False, None)
    # Kept on the next runs, without being read back again.
    before = fx.report().read_bytes()
    again = run(fx.port, "sync")
    assert again.rc == 0 and "read back" not in again.err
    assert fx.report().read_bytes() == before


def test_hand_edited_reason_and_removed_auto_tag(fx: Fixture) -> None:
    synced(fx)
    text = fx.report().read_text(encoding="utf-8")
    model, lora = fx.marks["add_model"], fx.marks["lora"]
    old = line_of(text, model)
    assert old.endswith(" _(auto: mirrored-path)_")
    edit_report(fx, old, old.removesuffix(" _(auto: mirrored-path)_"))
    old_lora = line_of(text, lora)
    edit_report(fx, old_lora, old_lora.replace("LoRA not ported yet", "tier T2, next quarter"))
    assert run(fx.port, "sync").rc == 0
    table = decided(fx)
    assert (table[model].disposition, table[model].reason) == (
        "INVENTORY", "not yet ported: vllm/models/new.py")
    assert (table[lora].disposition, table[lora].reason) == ("INVENTORY",
                                                             "tier T2, next quarter")
    after = fx.report().read_text(encoding="utf-8")
    assert "_(auto:" not in line_of(after, model)
    assert line_of(after, lora).endswith("INVENTORY: tier T2, next quarter")
    assert run(fx.port, "sync").rc == 0
    assert fx.report().read_text(encoding="utf-8") == after


def _wrap(line: str, at: int, indent: str = "  ") -> str:
    return line[:at].rstrip(" ") + "\n" + indent + line[at:].lstrip(" ")


@pytest.mark.parametrize(("split", "indent"), [("space", "  "), ("word", "  "), ("space", "")])
def test_an_entry_line_an_editor_wrapped_is_no_hand_edit(fx: Fixture, split: str,
                                                          indent: str) -> None:
    """walk-s11 D1: a wrapped line lost its `_(auto: ...)_` tag to its next line, and was
    read back as a hand edit: a decision with a cut reason, outranking every rule."""
    synced(fx)
    sha = fx.marks["change_a"]
    before = fx.report().read_text(encoding="utf-8")
    old = line_of(before, sha)
    # An editor wraps at a space; a cut mid-word (a copy at a fixed width) lands in the reason.
    reason_at = old.index(": ", old.index(" — ")) + 5
    at = old.rindex(" ", 0, 40) if split == "space" else reason_at
    edit_report(fx, old, _wrap(old, at, indent))
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    assert "read back" not in r.err and "unparseable" not in r.err
    assert decided(fx) == {}
    assert fx.report().read_text(encoding="utf-8") == before


def test_a_persons_line_under_an_entry_is_not_joined_to_it(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["change_a"]
    old = line_of(fx.report().read_text(encoding="utf-8"), sha)
    edit_report(fx, old, old + "\nTODO: ask the scheduler owners")
    r = run(fx.port, "sync")
    assert r.rc == 0 and "read back" not in r.err, r.err
    assert "kept an unparseable line verbatim: TODO: ask the scheduler owners" in r.err
    assert decided(fx) == {}


def test_a_wrapped_hand_edit_is_read_whole(fx: Fixture) -> None:
    sha, _new, r = _decided_by_hand(fx, "covered by the W5\n  refactor already")
    assert r.rc == 0 and "read back 1 hand-edited entry into decisions.toml" in r.err, r.err
    assert decided(fx)[sha].reason == "covered by the W5 refactor already"


def test_a_report_cut_short_is_refused_before_anything_is_decided(fx: Fixture) -> None:
    """walk-s11 D1: `head -c N` of a report ended inside an entry line, whose cut reason
    (its auto tag gone) became a decision."""
    synced(fx)
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    sha = fx.marks["change_a"]
    cut = text[:text.index(line_of(text, sha)) + 30]
    md.write_text(cut, encoding="utf-8")
    r = run(fx.port, "sync")
    assert r.rc == 4, r.err
    assert r.err.strip().endswith(
        f"{fx.report().relative_to(fx.port).as_posix()}: the report ends before its last "
        "section ('## Notes'): cut short? — restore it from git, or delete it (and its "
        ".json) and run 'upstream-sync sync' to write it afresh")
    assert md.read_text(encoding="utf-8") == cut and decided(fx) == {}
    # status read only the JSON, and showed the cycle ACTIVE with nothing said of it.
    st = run(fx.port, "status", "--json")
    assert st.rc == 0, st.err
    assert json.loads(st.out)["records"] == [r.err.strip().removeprefix("upstream-sync: error: ")]
    md.write_text("", encoding="utf-8")  # empty: written afresh, as before
    assert run(fx.port, "sync").rc == 0


def test_a_crlf_report_is_whole_and_its_hand_edit_is_read_back(fx: Fixture) -> None:
    """A checkout with core.autocrlf (or an editor on Windows) gives the report CRLF line
    endings: its `## Notes\\r` line read as missing, and sync and status refused the report
    as cut short."""
    synced(fx)
    sha = fx.marks["change_a"]
    old = line_of(fx.report().read_text(encoding="utf-8"), sha)
    edit_report(fx, old, old.split(" — ")[0] + " — IGNORE: covered already")
    md = fx.report()
    md.write_bytes(md.read_bytes().replace(b"\n", b"\r\n"))
    st = run(fx.port, "status", "--json")
    assert st.rc == 0 and json.loads(st.out)["records"] == [], st.out
    r = run(fx.port, "sync")
    assert r.rc == 0 and "read back 1 hand-edited entry into decisions.toml" in r.err, r.err
    d = decided(fx)[sha]
    assert (d.disposition, d.reason) == ("IGNORE", "covered already")


def test_a_report_with_merge_conflict_markers_is_refused(fx: Fixture) -> None:
    """walk-s11 U2: the markers were kept as unparsed lines, and sync exited 0."""
    synced(fx)
    sha = fx.marks["change_a"]
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    old = line_of(text, sha)
    other = old.split(" — ")[0] + " — IGNORE: theirs"
    edit_report(fx, old, f"<<<<<<< HEAD\n{old}\n=======\n{other}\n>>>>>>> theirs")
    before = md.read_bytes()
    r = run(fx.port, "sync")
    line = text[:text.index(old)].count("\n") + 1
    assert r.rc == 4 and (f"{md.relative_to(fx.port).as_posix()}:{line}: holds merge conflict "
                          "markers — resolve the conflict") in r.err, r.err
    assert md.read_bytes() == before and decided(fx) == {}


class Killed(BaseException):
    """A kill between two writes: no handler of ours may catch it."""


@pytest.mark.parametrize("point", ["staged", "journal written", "replaced"])
def test_a_decide_killed_between_its_writes_is_all_or_nothing(fx: Fixture,
                                                               point: str) -> None:
    """walk-s11 D7: decisions.toml, the report and its JSON were three writes; a kill
    between them left a decision the report did not show (status and queue read stale)."""
    synced(fx)
    sha = fx.marks["change_a"]
    md = fx.report()
    before = (md.read_bytes(), md.with_suffix(".json").read_bytes())
    seen: list[str] = []

    def kill(at: str) -> None:
        seen.append(at)
        if at.startswith(point) and not at.endswith("decisions.toml"):
            raise Killed(at)

    txn.FAULT = kill
    try:
        with pytest.raises(Killed):
            run(fx.port, "decide", sha, "IGNORE", "covered by W5")
    finally:
        txn.FAULT = None
    assert len([s for s in seen if s.startswith("staged")]) >= 2  # one transaction
    status = run(fx.port, "status", "--json")  # any command finishes or discards it
    assert status.rc == 0, status.err
    after = (md.read_bytes(), md.with_suffix(".json").read_bytes())
    if point == "staged":
        assert after == before and not (fx.sync_dir / "decisions.toml").exists()
    else:
        assert decided(fx)[sha].reason == "covered by W5"
        assert "— IGNORE: covered by W5" in line_of(after[0].decode(), sha)
        assert entries(json.loads(after[1]))[sha]["disposition"] == "IGNORE"
    assert not [p for p in fx.sync_dir.iterdir() if ".txn" in p.name]


def test_unparseable_line_is_kept_verbatim_with_a_warning(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["change_a"]
    text = fx.report().read_text(encoding="utf-8")
    bad = "- `" + sha[:10] + "` this line lost its disposition"
    stray = "* a stray bullet somebody typed"
    edit_report(fx, line_of(text, sha), bad + "\n" + stray)
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    assert "warning:" in r.err and "kept an unparseable line verbatim" in r.err
    assert "this line lost its disposition" in r.err
    # An entry-like line says why it was not read (walk-s4 U2); other text says nothing more.
    assert ("kept an unparseable line verbatim (its subject is not the commit's as the report "
            "writes it): - `") in r.err
    assert f"kept an unparseable line verbatim: {stray}" in r.err
    after = fx.report().read_text(encoding="utf-8")
    section = after.split("## Unparsed lines (kept verbatim)\n\n", 1)[1].split("\n\n")[0]
    assert section.splitlines() == [bad, stray]
    # The commit itself is still classified (once), from the rules.
    assert line_of(after.split("## Unparsed")[0], sha).endswith("_(auto: whole-file)_")
    assert run(fx.port, "sync").rc == 0
    assert fx.report().read_text(encoding="utf-8") == after


def test_notes_survive_reruns(fx: Fixture) -> None:
    synced(fx)
    md = fx.report()
    notes = ("Talked to the scheduler owners: #101 lands with W6.\n\n"
             "## Follow-ups\n\n- check the MI300 numbers\n")
    md.write_text(md.read_text(encoding="utf-8") + notes, encoding="utf-8")
    for _ in range(2):
        assert run(fx.port, "sync").rc == 0
        assert md.read_text(encoding="utf-8").endswith("## Notes\n\n" + notes)


# -- decide ---------------------------------------------------------------------------------------


def test_decide_by_sha_prefix_outranks_rules_and_survives(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["rocm_b"]
    r = run(fx.port, "decide", sha[:8], "port-now", "the", "MI300", "path", "is", "shared")
    assert r.rc == 0, r.err
    assert f"{sha[:10]} PORT-NOW: the MI300 path is shared" in r.out
    d = decided(fx)[sha]
    assert (d.disposition, d.reason, d.subject) == ("PORT-NOW", "the MI300 path is shared",
                                                    "[ROCm] Tune b for MI300 (#102)")
    for _ in range(2):  # the decision, not the rule, on every later run
        e = entries(synced(fx))[sha]
        assert (e["disposition"], e["reason"], e["rule"], e["auto"]) == (
            "PORT-NOW", "the MI300 path is shared", None, False)
        assert decided(fx)[sha] == d
    line = line_of(fx.report().read_text(encoding="utf-8"), sha)
    assert line.endswith("— PORT-NOW: the MI300 path is shared")


def test_decide_by_pr_number(fx: Fixture) -> None:
    synced(fx)
    r = run(fx.port, "decide", "#103", "IGNORE", "not a model we ship", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["sha"] == fx.marks["add_model"] and doc["disposition"] == "IGNORE"
    assert entries(synced(fx))[fx.marks["add_model"]]["reason"] == "not a model we ship"


def test_decide_ambiguous_pr_is_refused(fx: Fixture) -> None:
    synced(fx)
    r = run(fx.port, "decide", "#110", "IGNORE", "x")
    assert r.rc == 2
    assert "PR #110 matches 2 commits" in r.err
    assert fx.marks["fix_c"][:10] in r.err and fx.marks["reland_c"][:10] in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not (fx.sync_dir / "decisions.toml").exists()


@pytest.mark.parametrize("key", ["#999", "deadbeef", OTHER_SHA])
def test_decide_unknown_commit_is_refused(fx: Fixture, key: str) -> None:
    synced(fx)
    r = run(fx.port, "decide", key, "IGNORE", "x")
    assert r.rc == 2
    assert "is not in the cycle's range" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_decide_never_replaces_a_decision_silently(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["docs"]
    assert run(fx.port, "decide", "#104", "PORT-NOW", "docs drive our CLI help").rc == 0
    same = run(fx.port, "decide", "#104", "PORT-NOW", "docs drive our CLI help", "--json")
    assert same.rc == 0 and json.loads(same.out)["replaced"] is None
    r = run(fx.port, "decide", "#104", "IGNORE", "not ours after all")
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1
    assert (f"{sha[:10]} is already decided PORT-NOW: 'docs drive our CLI help' (by "
            in r.err) and "pass --force to replace that decision" in r.err
    assert decided(fx)[sha].disposition == "PORT-NOW"
    r = run(fx.port, "decide", "#104", "IGNORE", "not ours after all", "--force", "--json")
    assert r.rc == 0, r.err
    assert json.loads(r.out)["replaced"]["reason"] == "docs drive our CLI help"
    assert "replaced the earlier decision PORT-NOW: 'docs drive our CLI help'" in r.err
    assert decided(fx)[sha].reason == "not ours after all"


def test_decide_a_bare_pr_number_suggests_the_pr(fx: Fixture) -> None:
    synced(fx)
    r = run(fx.port, "decide", "104", "IGNORE", "docs")
    assert r.rc == 2
    assert r.err.strip() == (
        "upstream-sync: error: 104 is not a SHA prefix of a commit in the cycle's range, but "
        f"#104 is a PR of it (`{fx.marks['docs'][:10]}`) — give #104 for the PR")
    assert not (fx.sync_dir / "decisions.toml").exists()
    assert run(fx.port, "decide", "#104", "IGNORE", "docs").rc == 0


def test_decide_refuses_garbage_keys_and_empty_reasons(fx: Fixture) -> None:
    synced(fx)
    bad = run(fx.port, "decide", "--", "--help", "IGNORE", "x")
    assert bad.rc == 2 and "neither a SHA prefix nor #N" in bad.err
    empty = run(fx.port, "decide", fx.marks["docs"][:10], "IGNORE", " ")
    assert empty.rc == 2 and "the reason is empty" in empty.err
    wrong = run(fx.port, "decide", fx.marks["docs"][:10], "MAYBE", "x")
    assert wrong.rc == 2 and "invalid choice" in wrong.err


@pytest.mark.parametrize("key", ["#abc", "nope", "0d7", "#999", "deadbeef"])
def test_explain_and_decide_refuse_a_key_alike(fx: Fixture, key: str) -> None:
    synced(fx)
    explained = run(fx.port, "explain", key)
    decided_ = run(fx.port, "decide", key, "IGNORE", "x")
    assert explained.rc == decided_.rc == 2
    # decide also reaches the commits carried over into the cycle, and its refusal says so.
    said = decided_.err.replace(" (nor carried over into it)", "")
    assert explained.err == said and len(said.strip().splitlines()) == 1
    if key == "0d7":
        assert "too short for a SHA prefix (3 hex digit(s), at least 4 needed)" in said


def test_decisions_outlive_a_retarget(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["docs"]
    assert run(fx.port, "decide", sha[:10], "PORT-NOW", "docs drive our CLI help").rc == 0
    advance_remote(fx, "later1")
    assert run(fx.port, "fetch", "--retarget").rc == 0
    doc = synced(fx)
    assert doc["target"] == fx.marks["later1"]
    assert entries(doc)[sha]["reason"] == "docs drive our CLI help"
    assert len(fx.reports()) == 2


# -- bad input ------------------------------------------------------------------------------------


def test_unknown_target_ref(fx: Fixture) -> None:
    r = run(fx.port, "sync", "--target", "no-such-branch")
    assert r.rc == 2
    assert r.err.startswith("upstream-sync: error: target 'no-such-branch' does not name a commit")
    assert len(r.err.strip().splitlines()) == 1
    assert run(fx.port, "sync", "--target", "--upload-pack=x").rc == 2


def test_a_broken_upstream_ref_is_the_checkouts_state_not_a_usage_error(fx: Fixture) -> None:
    """`origin/main` pruned or corrupt in the reference checkout: `sync` refused with exit 2,
    "give a SHA, tag or branch that exists", though no target was given (`status` and the
    audit said it as the checkout's state, exit 3). Now 3 too, saying what to do."""
    synced(fx)
    ref_file = fx.reference / ".git" / "refs" / "remotes" / "origin" / "main"
    git(fx.reference, "pack-refs", "--all")
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    ref_file.write_text("garbage\n", encoding="utf-8")  # git: "ignoring broken ref"
    for argv in (("sync",), ("advance", "--dry-run")):
        r = run(fx.port, *argv)
        assert r.rc == 3, r.err
        assert "origin/main does not resolve in the reference checkout" in r.err
        assert "update-ref -d refs/remotes/origin/main" in r.err
        assert len(r.err.strip().splitlines()) == 1
    # A target named on the command line that names nothing stays a usage error.
    assert run(fx.port, "sync", "--target", "no-such-branch").rc == 2


def test_target_equal_to_the_pin_is_nothing_to_sync(fx: Fixture) -> None:
    r = run(fx.port, "sync", "--target", fx.pin)
    assert (r.rc, r.err) == (0, "")
    assert r.out == f"nothing to sync: the target {fx.pin[:10]} is the pin\n"
    assert fx.reports() == []
    j = run(fx.port, "sync", "--json")
    assert j.rc == 0 and json.loads(j.out)["nothing_to_sync"] is True


def test_nothing_to_sync_has_the_keys_a_sync_of_commits_adds_to_its_report(fx: Fixture) -> None:
    """h2: with nothing to sync the document lacked `unusable_checkouts`, which a run with
    commits gives beside the report's JSON: a machine reading it met a missing key. What
    the run adds is the same keys either way; the report's own keys need a report."""
    nothing = json.loads(run(fx.port, "sync", "--target", fx.pin, "--json").out)
    r = run(fx.port, "sync", "--retarget", "--json")
    assert r.rc == 0, r.err
    full = json.loads(r.out)
    written = json.loads((fx.port / full["report"]).with_suffix(".json").read_text("utf-8"))
    added = {"nothing_to_sync", "unusable_checkouts", "ok"}
    assert set(full) - set(written) == added
    assert set(nothing) == added | {"pin", "target", "report"} and set(nothing) <= set(full)
    assert (nothing["nothing_to_sync"], full["nothing_to_sync"]) == (True, False)
    assert nothing["unusable_checkouts"] == full["unusable_checkouts"] == []
    assert nothing["report"] is None and (nothing["pin"], nothing["target"]) == (fx.pin, fx.pin)


def test_pin_missing_from_the_reference_checkout(fx: Fixture) -> None:
    proto = fx.port / ".agents/upstream-sync.md"
    text = proto.read_text(encoding="utf-8").replace(fx.pin, OTHER_SHA)
    proto.write_text(text.replace(f"+g{fx.pin[:9]}", f"+g{OTHER_SHA[:9]}"), encoding="utf-8")
    r = run(fx.port, "sync")
    assert r.rc == 3
    assert f"the pin {OTHER_SHA[:10]} is not in the reference checkout" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_shallow_reference_checkout_is_refused(fx: Fixture, tmp_path: Path) -> None:
    from sync.dev.fastimport import git

    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{fx.remote}", str(shallow))
    prefs = fx.port / ".agents/developer-preferences.md"
    prefs.write_text(example.preferences_text(shallow, tmp_path / "oracles"), encoding="utf-8")
    for cmd in ("sync", "fetch"):
        r = run(fx.port, cmd)
        assert r.rc == 3, r.err
        assert "shallow clone" in r.err and "fetch --unshallow" in r.err
        assert len(r.err.strip().splitlines()) == 1


def test_malformed_decisions_toml(fx: Fixture) -> None:
    write(fx.port, ".agents/sync/decisions.toml", "[decisions.abc\nbroken = ")
    r = run(fx.port, "sync")
    assert r.rc == 4
    assert r.err.startswith("upstream-sync: error: .agents/sync/decisions.toml:1: not valid TOML")
    assert len(r.err.strip().splitlines()) == 1
    write(fx.port, ".agents/sync/decisions.toml",
          f'[decisions.{fx.marks["docs"]}]\ndisposition = "LATER"\nreason = "x"\n')
    r = run(fx.port, "sync")
    assert r.rc == 4 and "disposition 'LATER' is not one of" in r.err


@pytest.mark.parametrize("allow", [(), ("--allow-divergent",)])
def test_a_target_behind_the_pin_is_refused_even_when_divergence_is_allowed(
        fx: Fixture, allow: tuple[str, ...]) -> None:
    """walk-s4 D5: the pin's parent was called divergent and, allowed, made a cycle of no
    commits whose advance would move the pin back."""
    behind = git(fx.reference, "rev-parse", f"{fx.pin}^").strip()
    r = run(fx.port, "sync", "--target", behind, *allow)
    assert r.rc == 2
    assert (f"target {behind[:10]} is behind the pin {fx.pin[:10]} (an ancestor of it): a sync "
            "only moves forward") in r.err
    assert fx.reports() == []
    # With a cycle open it is said the same, not "pass --retarget" (walk-s5).
    synced(fx)
    r = run(fx.port, "sync", "--target", behind, *allow)
    assert r.rc == 2 and "is behind the pin" in r.err and "--retarget" not in r.err


def test_divergent_target_needs_allow_divergent(fx: Fixture) -> None:
    side = fx.marks["side"]
    r = run(fx.port, "sync", "--target", "origin/side")
    assert r.rc == 2
    assert f"target {side[:10]} does not descend from the pin {fx.pin[:10]}" in r.err
    assert "--allow-divergent" in r.err
    assert fx.reports() == []
    doc = synced(fx, "--target", "origin/side", "--allow-divergent")
    assert doc["divergent"] is True and doc["target"] == side
    assert [e["sha"] for e in doc["entries"]] == [side]
    assert "(divergent: does not descend from the pin)" in fx.report().read_text(encoding="utf-8")
    # One commit is "1 commit" (walk-s13 N7).
    r = run(fx.port, "sync", "--target", "origin/side", "--allow-divergent")
    assert r.rc == 0 and r.out.startswith(f"1 commit {fx.pin[:10]}..{side[:10]}: "), r.out


def test_explicit_same_target_keeps_the_cycle_and_its_report(fx: Fixture) -> None:
    synced(fx)
    p = port.locate(str(fx.port))
    # The cycle was frozen on an earlier day; naming the same target again must update that
    # cycle's report, not start a new one under today's date.
    path = cycle.path(p)
    c = cycle.load(p)
    assert c is not None
    path.write_text(path.read_text(encoding="utf-8").replace(c.frozen_at, "2026-01-05T00:00:00Z"),
                    encoding="utf-8")
    old = fx.report()
    old.rename(old.with_name(f"2026-01-05-{fx.tip[:7]}.md"))
    old.with_suffix(".json").unlink()
    doc = synced(fx, "--target", fx.tip[:12])
    assert doc["report"] == f".agents/sync/2026-01-05-{fx.tip[:7]}.md"
    assert [p.name for p in fx.reports()] == [f"2026-01-05-{fx.tip[:7]}.md"]
    again = cycle.load(p)
    assert again is not None and again.frozen_at == "2026-01-05T00:00:00Z"


def test_bundled_example_end_to_end(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    shutil.copytree(REPO / "examples", examples,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    root = example.build(tmp_path / "ex", examples)
    marks = example.marks(examples)
    assert run(root, "fetch").rc == 0
    doc = json.loads(run(root, "sync", "--json").out)
    assert doc["pin"] == marks["pin"] and doc["target"] == marks["tip"]
    assert doc["range"]["commits"] == len(doc["entries"]) == 40
    assert sum(doc["counts"].values()) == 40 and doc["counts"]["UNCLASSIFIED"] == 0
    assert all(c["ok"] for c in doc["checks"])
    md = root / doc["report"]
    text = md.read_text(encoding="utf-8")
    assert f"- `{marks['minp_revert'][:10]}` reverts `{marks['minp_fix'][:10]}`" in text
    assert re.search(r"deleted in `" + marks["delete_xgrammar"][:10], text)
    before = md.read_bytes(), md.with_suffix(".json").read_bytes()
    r = run(root, "decide", marks["docs_quant"][:10], "INVENTORY", "quantization docs drive T2")
    assert r.rc == 0, r.err
    after = json.loads(run(root, "sync", "--json").out)
    assert after["counts"]["INVENTORY"] == doc["counts"]["INVENTORY"] + 1
    assert (md.read_bytes(), md.with_suffix(".json").read_bytes()) != before
    stable = md.read_bytes()
    assert run(root, "sync").rc == 0 and md.read_bytes() == stable


def test_git_processes_do_not_grow_with_the_range(tmp_path: Path) -> None:
    def spawned(fx: Fixture) -> int:
        synced(fx)  # the first run writes the report; the second reads it back as well
        before = gitio.PROCESS_COUNT
        synced(fx)
        return gitio.PROCESS_COUNT - before

    small = spawned(build(tmp_path / "small"))
    many = [(f"[Core] Change a, step {i} (#{500 + i})", {"vllm/a.py": f"a = {i}\n"})
            for i in range(40)]
    large = spawned(build(tmp_path / "large", extra=many))
    assert large == small


def test_carry_over_matches_whole_pr_references_in_the_ledger(fx: Fixture) -> None:
    ledger = fx.port / ".agents/parity-ledger.md"
    row = "| 2026-01-03 / `def5678` | Port {what} | vllm#{pr} (`vllm/x.py`) | ✅ |\n"
    ledger.write_text(ledger.read_text(encoding="utf-8") + row.format(what="z", pr=1010),
                      encoding="utf-8")
    doc = synced(fx)
    open_ = [line for line in doc["carry_over"] if line.startswith("- PORT-NOW open")]
    assert f"- PORT-NOW open: `{fx.marks['change_a'][:10]}` vllm#101 (no ledger row yet)" \
        in open_
    ledger.write_text(ledger.read_text(encoding="utf-8") + row.format(what="a", pr=101),
                      encoding="utf-8")
    again = synced(fx)
    assert not any("vllm#101 " in line for line in again["carry_over"])
    assert len(again["carry_over"]) == len(doc["carry_over"]) - 1


def test_a_new_rule_reclassifies_untouched_auto_entries(fx: Fixture) -> None:
    synced(fx)
    config = fx.port / ".agents/upstream-sync.toml"
    config.write_text(config.read_text(encoding="utf-8") + (
        '\n[[rules]]\nid = "docs"\ntags = ["Doc"]\ndisposition = "INVENTORY"\n'
        'reason = "docs feed our CLI help"\n'), encoding="utf-8")
    e = entries(synced(fx))[fx.marks["docs"]]
    assert (e["disposition"], e["rule"], e["auto"]) == ("INVENTORY", "rule docs", True)
    assert not (fx.sync_dir / "decisions.toml").exists()



def test_an_emptied_configuration_is_refused_not_read_as_the_defaults(fx: Fixture) -> None:
    """`: > upstream-sync.toml` once made `sync` classify on the defaults, dropping the rules,
    with no word (walk-s11 D4); now every command refuses, and the records stay as they were."""
    synced(fx)
    report = fx.report()
    before = report.read_bytes(), report.with_suffix(".json").read_bytes()
    (fx.port / ".agents/upstream-sync.toml").write_text("# emptied by a bad merge\n")
    for argv in (("sync",), ("status",), ("check", "--no-audit")):
        r = run(fx.port, *argv)
        assert (r.rc, r.err.strip()) == (2, (
            "upstream-sync: error: .agents/upstream-sync.toml sets nothing (only comments) — "
            "restore it from git, or run 'upstream-sync init --force'")), argv
    assert (report.read_bytes(), report.with_suffix(".json").read_bytes()) == before
    assert run(fx.port, "init", "--force").rc == 0  # the fix the message names works
    assert run(fx.port, "status").rc == 0


def test_removing_a_decision_returns_the_commit_to_its_rule(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["lora"]
    assert run(fx.port, "decide", sha[:10], "IGNORE", "never").rc == 0
    assert entries(synced(fx))[sha]["disposition"] == "IGNORE"
    decisions.save(fx.sync_dir / "decisions.toml", {})
    e = entries(synced(fx))[sha]
    assert (e["disposition"], e["rule"]) == ("INVENTORY", "rule lora")
    assert decided(fx) == {}


def test_an_unreadable_ledger_is_never_read_as_empty(fx: Fixture) -> None:
    ledger = fx.port / ".agents/parity-ledger.md"
    ledger.write_text("# Parity ledger\n\nThe table was lost in a merge.\n", encoding="utf-8")
    doc = synced(fx)
    first = doc["carry_over"][0]
    assert first.startswith("- the parity ledger .agents/parity-ledger.md cannot be read "
                            "(no ledger table with columns")
    assert "every PORT-NOW commit below shows as open because no row can be checked" in first
    assert f"- PORT-NOW open: `{fx.marks['change_a'][:10]}` vllm#101 (ledger unreadable)" \
        in doc["carry_over"]
    # Said where the maintainer looks too: the run exits 0 (it said nothing of it).
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    assert ("warning: the parity ledger .agents/parity-ledger.md cannot be read (no ledger "
            "table with columns") in r.err
    assert "every PORT-NOW commit shows as open in the report, as no row can be checked" in r.err
    r = run(fx.port, "queue")
    assert r.rc == 0, r.err
    assert "the parity ledger .agents/parity-ledger.md cannot be read" in r.out + r.err
    assert "every item shows as open because no row can be checked" in r.out + r.err


def test_a_ledger_row_naming_the_commit_by_sha_prefix_counts(fx: Fixture) -> None:
    # The real ledger cites upstream SHAs (`702f481`) and paths, never vllm#N.
    ledger = fx.port / ".agents/parity-ledger.md"
    row = (f"| 2026-01-03 `def5678` | Port a | vLLM `{fx.marks['change_a'][:7]}`: "
           "`vllm/a.py` | ok | an extra fifth column |\n")
    ledger.write_text(ledger.read_text(encoding="utf-8") + row, encoding="utf-8")
    doc = synced(fx)
    assert not any(fx.marks["change_a"][:10] in line for line in doc["carry_over"])
    r = run(fx.port, "check")
    assert ".agents/parity-ledger.md:6: ledger row has 5 cells, expected 4" in r.out


# -- the target: retargets, release tags, reports written by hand ----------------------------------


def test_another_target_for_an_open_cycle_needs_retarget(fx: Fixture) -> None:
    first = synced(fx)
    old = fx.report()
    rename = fx.marks["rename"]
    r = run(fx.port, "sync", "--target", rename[:10])
    assert r.rc == 2
    assert r.err.strip() == (
        f"upstream-sync: error: the open cycle is frozen at {fx.tip[:10]} (origin/main); "
        f"{rename[:10]} is {rename[:10]} — pass --retarget to move the cycle to it, or leave "
        "--target out to keep the frozen target")
    kept = cycle.load(port.locate(str(fx.port)))
    assert fx.reports() == [old] and kept is not None and kept.target == fx.tip
    doc = synced(fx, "--target", rename[:10], "--retarget")
    assert doc["target"] == rename and doc["report"] != first["report"]
    # The old report leaves ACTIVE (its cycle moved on); its JSON says so too.
    assert "- Cycle state: RETARGETED" in old.read_text(encoding="utf-8")
    assert json.loads(old.with_suffix(".json").read_text())["state"] == "RETARGETED"
    # Back to the first target the same day: that report is the cycle's again, ACTIVE.
    synced(fx, "--target", fx.tip, "--retarget")
    assert "- Cycle state: ACTIVE" in old.read_text(encoding="utf-8")


def test_a_retarget_to_the_pin_is_refused_and_the_open_cycle_kept(fx: Fixture) -> None:
    """walk-s11 D8: `sync --retarget --target HEAD` (the checkout's HEAD is at the pin) said
    "nothing to sync" (rc 0) but froze the open cycle at the pin and marked its report
    RETARGETED, and queue and sync then sent each other round. It is refused, writing
    nothing; so is the pin named without --retarget (whose advice was to pass it), and a
    --retarget to a remote that is back at the pin."""
    synced(fx)
    before = {p: p.read_bytes() for p in sorted(fx.sync_dir.rglob("*")) if p.is_file()}
    said = (f"upstream-sync: error: the target {fx.pin[:10]} is the pin: there is nothing to "
            f"retarget to — the open cycle to {fx.tip[:10]} is kept: leave --target out to "
            "sync it, or name a target past the pin\n")
    assert git(fx.reference, "rev-parse", "HEAD").strip() == fx.pin
    for argv in (["--retarget", "--target=HEAD"], ["--target", fx.pin, "--retarget"],
                 ["--target", "HEAD"]):
        r = run(fx.port, "sync", *argv)
        assert (r.rc, r.out, r.err) == (2, "", said), argv
    git(fx.reference, "update-ref", "refs/remotes/origin/main", fx.pin)
    r = run(fx.port, "sync", "--retarget")
    assert (r.rc, r.out, r.err) == (2, "", said)
    assert {p: p.read_bytes() for p in sorted(fx.sync_dir.rglob("*")) if p.is_file()} == before
    git(fx.reference, "update-ref", "refs/remotes/origin/main", fx.tip)
    assert synced(fx)["target"] == fx.tip  # the open cycle goes on


def test_a_refused_divergent_target_leaves_the_open_cycle_alone(fx: Fixture) -> None:
    synced(fx)
    before = cycle.load(port.locate(str(fx.port)))
    r = run(fx.port, "sync", "--target", "origin/side", "--retarget")
    assert r.rc == 2 and "--allow-divergent" in r.err
    assert cycle.load(port.locate(str(fx.port))) == before
    doc = synced(fx, "--target", "origin/side", "--retarget", "--allow-divergent")
    assert doc["divergent"] is True
    # Accepted once for the cycle: a later step need not say it again.
    assert run(fx.port, "decide", fx.marks["side"][:10], "IGNORE", "a side branch").rc == 0
    assert synced(fx)["target"] == fx.marks["side"]


def test_a_release_tag_target_says_where_it_came_from(fx: Fixture) -> None:
    git(fx.remote, "tag", "v0.1.0", fx.marks["release"])
    assert run(fx.port, "fetch", "--target", "v0.1.0").rc == 0
    doc = synced(fx)
    assert doc["target"] == fx.marks["release"] and doc["target_ref"] == "v0.1.0"
    assert doc["target_from"] == ("tag `v0.1.0` on `origin/releases/v0.1` (not on "
                                  "`origin/main`)")
    text = fx.report().read_text(encoding="utf-8")
    assert (f"- Target: `{fx.marks['release']}` from tag `v0.1.0` on `origin/releases/v0.1` "
            "(not on `origin/main`)\n") in text
    assert [e["sha"] for e in doc["entries"]][-1] == fx.marks["release"]
    # Every step takes it: the queue, a decision, a header bump to the tag.
    assert run(fx.port, "queue").rc == 0
    assert run(fx.port, "decide", "#400", "PORT-NOW", "the release fix").rc == 0
    r = run(fx.port, "bump-headers", "src/a.cpp")
    assert r.rc == 0, r.err
    assert f"vllm/a.py @ {fx.marks['release'][:10]}" in (fx.port / "src/a.cpp").read_text()


def test_a_report_for_the_same_target_written_by_hand_is_named(fx: Fixture) -> None:
    hand = write(fx.port, ".agents/sync/audit-notes.md",
                 f"# Our own audit\n\nWe looked at {fx.tip[:12]} by hand.\n")
    write(fx.port, ".agents/sync/other.md", f"# Unrelated\n\nAbout {fx.pin[:12]}.\n")
    doc = synced(fx)
    assert doc["other_reports"] == [{"report": hand.name, "by_hand": True}]
    ours = fx.sync_dir / doc["report"].rsplit("/", 1)[-1]
    assert (f"- Other reports for this target: `{hand.name}` (written by hand)\n"
            in ours.read_text(encoding="utf-8"))


def test_decide_a_number_that_is_both_a_sha_prefix_and_a_pr_is_refused() -> None:
    from sync.cli.commands import decide

    prefix = _commit("[Core] Something (#1)")
    prefix = Commit("38375" + "a" * 35, (), "", "", prefix.subject, "", ())
    pr = Commit("b" * 40, (), "", "", "[Core] Other (#38375)", "", ())
    with pytest.raises(UsageError, match=r"38375 is both a SHA prefix \(38375aaaaa\) and PR "
                                         r"#38375 \(bbbbbbbbbb\) — give #38375 or more"):
        decide._find([prefix, pr], "38375")
    assert decide._find([prefix, pr], "#38375") == pr
    assert decide._find([prefix], "38375") == prefix


def test_a_carried_item_stays_until_a_decision_closes_it(fx: Fixture) -> None:
    """An item carried from an earlier cycle, outside this range: shown every run, decidable
    like one of the range, gone once decided otherwise (and the record not rewritten)."""
    base = fx.marks["base"]  # behind the pin: in no later range
    record = write(fx.port, ".agents/sync/carry-over.toml", (
        "schema = 1\n\n"
        f"[carried.{base}]\n"
        'disposition = "PORT-NOW"\n'
        'subject = "Initial import (#1)"\n'
        'reason = "carry-over: the import itself"\n'
        'since = ".agents/sync/2026-01-01-0000000.md"\n'
        f'since_target = "{fx.pin}"\n'
        'by = "advance"\n'
        "pr = 1\n"))
    before = record.read_bytes()
    for _ in range(2):
        doc = synced(fx)
        (line,) = [x for x in doc["carry_over"] if f"`{base[:10]}`" in x]
        assert line.startswith("- carried PORT-NOW: ") and f"up to `{fx.tip[:10]}`" in line
        assert [c["sha"] for c in doc["carried"]] == [base]
    q = json.loads(run(fx.port, "queue", "--json").out)
    assert q["items"][-1]["sha"] == base
    # explain names it too (walk-s9 U1), classified as sync classifies it.
    ex = run(fx.port, "explain", base[:10])
    assert ex.rc == 0, ex.err
    lines = ex.out.splitlines()
    assert lines[1].startswith(f"carried into the open cycle {fx.pin[:10]}..")
    assert "since .agents/sync/2026-01-01-0000000.md (outside its range)" in lines[1]
    assert lines[2] == ("decision: PORT-NOW: carry-over: the import itself (the carry-over "
                        "record) — decides it; rules and the symbol pass are not consulted "
                        "(shown below for reference)")
    assert lines[-2].startswith("result: PORT-NOW: carry-over: the import itself")
    assert json.loads(run(fx.port, "explain", base[:10], "--json").out)["carried_since"] == (
        ".agents/sync/2026-01-01-0000000.md")
    assert q["items"][-1]["carried_since"] == "2026-01-01-0000000.md"
    assert run(fx.port, "decide", base[:10], "IGNORE", "nothing to port after all").rc == 0
    doc = synced(fx)
    assert doc["carried"] == [] and not any(base[:10] in x for x in doc["carry_over"])
    assert record.read_bytes() == before  # closed by the decision, not by an edit


def _carry(sha: str, since_target: str) -> str:
    return ("schema = 1\n\n"
            f"[carried.{sha}]\n"
            'disposition = "PORT-NOW"\n'
            'subject = "Initial import (#1)"\n'
            'reason = "carry-over: the import itself"\n'
            'since = ".agents/sync/2026-01-01-0000000.md"\n'
            f'since_target = "{since_target}"\n'
            'by = "advance"\n'
            "pr = 1\n")


def test_a_carried_sha_that_names_no_commit_is_a_malformed_record(fx: Fixture) -> None:
    """walk-s9 D5: a carried SHA edited by hand (one digit off) was kept as "not in the
    reference checkout: fetch it", although the checkout has the cycle that carried it."""
    base = fx.marks["base"]
    typo = base[:-1] + ("0" if base[-1] != "0" else "1")
    write(fx.port, ".agents/sync/carry-over.toml", _carry(typo, fx.pin))
    r = run(fx.port, "sync")
    assert r.rc == 4, r.err
    assert r.err.strip() == (
        f"upstream-sync: error: .agents/sync/carry-over.toml:3: carried {typo[:10]} is no "
        f"commit of the reference checkout, which has the target {fx.pin[:10]} of the cycle "
        "that carried it (a mistyped SHA?) — correct the table's SHA ('git log' in the "
        "reference checkout finds the commit) or remove the table")
    check = run(fx.port, "check")
    assert check.rc == 7 and f"carry-over.toml:3: carried {typo[:10]} is no commit" in check.out
    # status names it too (walk-s10 U4), as it names a decisions record that does not load.
    status = run(fx.port, "status")
    assert status.rc == 0 and (f"record: .agents/sync/carry-over.toml:3: carried {typo[:10]} "
                               "is no commit") in status.out
    write(fx.port, ".agents/sync/decisions.toml", "schema = 1\n[decisions\n")
    status = run(fx.port, "status")
    assert "record: .agents/sync/decisions.toml:2: not valid TOML" in status.out
    assert json.loads(run(fx.port, "status", "--json").out)["records"][0].startswith(
        ".agents/sync/decisions.toml:2: not valid TOML")
    (fx.port / ".agents/sync/decisions.toml").unlink()
    # A record from a checkout that lacks the carrying cycle too may be behind: fetch it.
    write(fx.port, ".agents/sync/carry-over.toml", _carry(typo, "e" * 40))
    doc = synced(fx)
    (line,) = [x for x in doc["carry_over"] if f"`{typo[:10]}`" in x]
    assert "(not in the reference checkout: fetch it)" in line
    assert "is no commit" not in run(fx.port, "check").out


@pytest.mark.parametrize(("text", "why"), [
    ("schema = 1\n[carried.abc]\n", "is not a full lowercase SHA"),
    ("schema = 2\n", "expected schema = 1"),
    ("[carried\n", "not valid TOML"),
    (f"schema = 1\n[carried.{'a' * 40}]\ndisposition = \"MAYBE\"\n", "unknown or missing key"),
])
def test_a_malformed_carry_over_record_is_refused_typed(fx: Fixture, text: str, why: str) -> None:
    write(fx.port, ".agents/sync/carry-over.toml", text)
    r = run(fx.port, "sync")
    assert r.rc == 4 and why in r.err and len(r.err.strip().splitlines()) == 1
    assert r.err.startswith("upstream-sync: error: .agents/sync/carry-over.toml:")


def test_explain_says_what_made_a_rule_match(fx: Fixture) -> None:
    """walk-s3 U13: a rule that does not match says why not; one that matches says why."""
    assert run(fx.port, "sync").rc == 0
    (jpath,) = (fx.port / ".agents/sync").glob("*.json")
    ruled = [e for e in json.loads(jpath.read_text())["entries"]
             if (e["rule"] or "").startswith("rule ")]
    assert ruled
    e = ruled[0]
    r = run(fx.port, "explain", e["sha"][:10])
    assert r.rc == 0, r.err
    rid = e["rule"].removeprefix("rule ")
    (line,) = [ln for ln in r.out.splitlines() if ln.startswith(f"  {rid}: ")]
    assert line.startswith(f"  {rid}: MATCHES: ") and len(line) > len(f"  {rid}: MATCHES: ")
    doc = json.loads(run(fx.port, "explain", e["sha"][:10], "--json").out)
    (rule,) = [x for x in doc["rules"] if x["id"] == rid]
    assert rule["matches"] and rule["why_not"] is None
    assert rule["why"] == line.removeprefix(f"  {rid}: MATCHES: ")


def test_a_reference_checkout_that_is_the_port_itself_is_named_so(
        fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s3 U8: VLLM_SOURCE at the port gave "the pin is not in the reference checkout —
    run fetch", which fetching cannot fix."""
    monkeypatch.setenv("VLLM_SOURCE", str(fx.port))
    r = run(fx.port, "sync")
    assert r.rc == 3
    assert (f"the reference checkout {fx.port} is the port itself — point VLLM_SOURCE (or "
            "reference_checkout in the preferences) at a clone of vLLM") in r.err


def test_a_persons_prose_outside_entries_and_notes_is_kept(fx: Fixture) -> None:
    """walk-s4 D3: text written under a regenerated section (Carry-over, Gates, Coarse
    citations) or under a heading of one's own vanished on the next sync, unsaid. It is
    kept under "Unparsed lines", with a warning, and stays there."""
    assert run(fx.port, "sync").rc == 0
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    text = text.replace("## Gates\n", "## Gates\n\nReviewer: the golden gate runs Friday.\n", 1)
    text = text.replace("## Carry-over\n", "## Carry-over\n\nWe port these next week.\n", 1)
    text = text.replace("## Summary\n", "## My own section\n\nkept please\n- and this item\n\n"
                        "## Summary\n", 1)
    md.write_text(text, encoding="utf-8")
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    kept = ["Reviewer: the golden gate runs Friday.", "We port these next week.",
            "## My own section", "kept please", "- and this item"]
    for line in kept:
        assert f"kept an unparseable line verbatim: {line}" in r.err
    after = md.read_text(encoding="utf-8")
    unparsed = after.split("## Unparsed lines (kept verbatim)\n\n", 1)[1].split("\n\n## ", 1)[0]
    assert sorted(unparsed.splitlines()) == sorted(kept)
    assert run(fx.port, "sync").rc == 0
    assert md.read_text(encoding="utf-8") == after  # stable: read back from there again


def test_a_reference_checkout_without_the_cycles_target_says_so(
        fx: Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s4 D6: a checkout that has the pin but not the frozen target gave git's "Invalid
    revision range" in explain and decide, and status said all was well."""
    assert run(fx.port, "sync").rc == 0
    lean = tmp_path / "lean"
    git(tmp_path, "clone", "-q", f"file://{fx.reference}", str(lean))  # main only: the pin
    monkeypatch.setenv("VLLM_SOURCE", str(lean))
    (jpath,) = (fx.port / ".agents/sync").glob("*.json")
    sha = json.loads(jpath.read_text())["entries"][0]["sha"]
    r = run(fx.port, "explain", sha[:10])
    assert r.rc == 3
    assert (f"the reference checkout {lean} does not have {fx.tip[:10]} (of the range "
            f"{fx.pin[:10]}..{fx.tip[:10]})") in r.err
    s = run(fx.port, "status")
    assert s.rc == 3 and ", NOT in the reference checkout" in s.out
    assert f"the cycle's target {fx.tip[:10]} is not in the reference checkout" in s.err


def test_status_says_the_remote_moved_past_the_frozen_target(fx: Fixture) -> None:
    """walk-s4 U6: only `sync` said the remote had moved on; status showed the distance to
    it and the frozen target, side by side, without saying the cycle keeps the older one."""
    synced(fx)
    later = advance_remote(fx, "later1")
    assert run(fx.port, "fetch").rc == 0  # keeps the open cycle's target
    s = run(fx.port, "status")
    assert s.rc == 0, s.err
    assert (f"  origin/main moved to {later[:10]}; this cycle keeps its target {fx.tip[:10]} "
            "('upstream-sync sync --retarget' moves it)") in s.out.splitlines()


def test_an_unknown_disposition_says_which_are_known(fx: Fixture) -> None:
    synced(fx)
    sha = fx.marks["change_a"]
    text = fx.report().read_text(encoding="utf-8")
    line = line_of(text, sha)
    head, _, _rest = line.partition(" — ")
    edit_report(fx, line, f"{head} — MAYBE: unsure")
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    assert ("kept an unparseable line verbatim (unknown disposition MAYBE: one of PORT-NOW, "
            "INVENTORY, IGNORE, UNCLASSIFIED): ") in r.err
