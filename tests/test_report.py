"""The sync report: golden text, its JSON companion, byte-stable reruns, escaping, read-back."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from portfixture import Fixture, build, mtime_ns, run

from sync import port
from sync.dev.fastimport import git
from sync.records import cycle
from sync.steps import report
from sync.steps.classify import Entry
from sync.upstream import history

GOLDEN = Path(__file__).parent / "golden" / "report_small.md"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

_ENTRY = re.compile(r"^- `([0-9a-f]{10})` (vllm#(\d+)|\(no PR\)) (.*) — "
                    r"(PORT-NOW|INVENTORY|IGNORE|UNCLASSIFIED): (.*?)( _\(auto: ([^)]*)\)_)?$")


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return build(tmp_path)


def normalise(text: str, fx: Fixture) -> str:
    c = cycle.load(port.locate(str(fx.port)))
    assert c is not None
    out = text.replace(c.frozen_at[:10], "YYYY-MM-DD")
    for form in (report.escape(str(fx.reference)), str(fx.reference)):
        out = out.replace(form, "<reference>")
    return out


def md_entries(text: str) -> list[tuple[str, str, str | None, str]]:
    """(section, sha10, auto rule, PR text) of every entry line, in report order."""
    out: list[tuple[str, str, str | None, str]] = []
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:]
        m = _ENTRY.match(line)
        if m and section in (*report.SECTIONS, report.NOT_PORTED, report.RULED):
            assert m.group(5) == section or section in (report.NOT_PORTED, report.RULED)
            out.append((section, m.group(1), m.group(8), m.group(2)))
    return out


def test_report_golden(fx: Fixture) -> None:
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    text = normalise(fx.report().read_text(encoding="utf-8"), fx)
    if UPDATE:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")
    assert f"report: {fx.report()}" in r.out
    assert "13 commits" in r.out and "5 PORT-NOW, 3 INVENTORY, 5 IGNORE, 0 UNCLASSIFIED" in r.out


def test_json_companion_matches_the_markdown(fx: Fixture) -> None:
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    printed = json.loads(r.out)
    md = fx.report()
    doc = json.loads(md.with_suffix(".json").read_text(encoding="utf-8"))
    assert printed.pop("ok") is True  # the machine contract's answer; not in the record
    assert printed.pop("unusable_checkouts") == []  # this machine's, not the record's
    assert printed.pop("nothing_to_sync") is False  # this run's, as with nothing to sync
    assert printed == doc
    text = md.read_text(encoding="utf-8")
    # Entries: same commits, same order within each section, same disposition and auto rule.
    by_sha = {e["sha"][:10]: e for e in doc["entries"]}
    rows = md_entries(text)
    assert len(rows) == len(doc["entries"]) == len(by_sha)
    for section, sha10, auto, pr in rows:
        e = by_sha[sha10]
        # Touching cited files but not the mirrored code, or a rule's over a change to cited
        # code: each its own section, any disposition.
        apart = e.get("not_ported_code", False) or e.get("ruled_over_code", False)
        assert (e["disposition"] == section) is not apart
        assert e["rule"] == auto and e["auto"] is (auto is not None)
        assert pr == (f"vllm#{e['pr']}" if e["pr"] is not None else "(no PR)")
    for d in report.SECTIONS:
        in_md = [sha for s, sha, _, _ in rows if s == d]
        assert in_md == [e["sha"][:10] for e in doc["entries"] if e["disposition"] == d
                         and not e.get("not_ported_code") and not e.get("ruled_over_code")]
        assert f"| {d} | {doc['counts'][d]} |" in text
    assert [sha for s, sha, _, _ in rows if s == report.NOT_PORTED] == [
        e["sha"][:10] for e in doc["entries"] if e.get("not_ported_code")]
    assert [sha for s, sha, _, _ in rows if s == report.RULED] == [
        e["sha"][:10] for e in doc["entries"] if e.get("ruled_over_code")] != []
    assert f"| total | {len(doc['entries'])} |" in text
    rng = doc["range"]
    assert (f"- Range: {rng['commits']} non-merge commits, {rng['files_changed']} files changed, "
            f"{rng['insertions']} insertions(+), {rng['deletions']} deletions(-)") in text
    # ...and the range stats are git's own.
    shortstat = git(fx.reference, "diff", "--shortstat", fx.pin, fx.tip).strip()
    assert shortstat == (f"{rng['files_changed']} files changed, {rng['insertions']} "
                         f"insertions(+), {rng['deletions']} deletions(-)")
    count = git(fx.reference, "rev-list", "--count", "--no-merges", f"{fx.pin}..{fx.tip}")
    assert rng["commits"] == int(count)
    assert {k: doc[k] for k in ("pin", "target", "report")} == {
        "pin": fx.pin, "target": fx.tip, "report": f".agents/sync/{md.name}"}
    keys = {"sha", "pr", "subject", "disposition", "reason", "rule", "auto", "upstream_paths",
            "port_files"}
    # An entry the symbol pass read carries its evidence: per path the changed definitions,
    # per citation what it names and how it was judged.
    assert set(doc["entries"][0]) == keys | {"not_ported_code", "ruled_over_code", "evidence"}
    assert all(set(e) == keys for e in doc["entries"] if not e["upstream_paths"])
    ev = doc["entries"][0]["evidence"]
    assert ev["paths"][0]["changed"] == [{"name": "a", "kind": "statement", "change": "modified",
                                          "detail": "", "old_lines": ["1"], "new_lines": ["1"]}]
    assert [(c["port_file"], c["how"], c["outcome"]) for c in ev["citations"]] == [
        ("src/a.cpp", "whole-file", "whole-file")]


def test_rerun_with_nothing_changed_is_byte_identical(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    md = fx.report()
    js = md.with_suffix(".json")
    before = (md.read_bytes(), js.read_bytes(), mtime_ns(md), mtime_ns(js))
    for _ in range(2):
        r = run(fx.port, "sync")
        assert r.rc == 0 and "warning" not in r.err, r.err
    assert (md.read_bytes(), js.read_bytes(), mtime_ns(md), mtime_ns(js)) == before
    assert not (fx.sync_dir / "decisions.toml").exists()
    assert fx.reports() == [md]


def test_every_commit_classified_exactly_once(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    listed = git(fx.reference, "rev-list", "--no-merges", "--reverse",
                 f"{fx.pin}..{fx.tip}").split()
    assert [e["sha"] for e in doc["entries"]] == listed
    assert listed == [fx.marks[n] for n in fx.range_names()]
    assert all(c["ok"] for c in doc["checks"])
    text = fx.report().read_text(encoding="utf-8")
    assert ("- [x] every enumerated commit classified exactly once: 13 enumerated, "
            "13 classified, 0 classified twice") in text
    assert "- [x] none classified that was not enumerated: 0 extra" in text
    assert "- [x] subjects without (#N): 1\n" in text
    assert f"  - `{fx.marks['no_pr'][:10]}` Fix a typo in the README" in text


def test_reverts_and_cherry_picks_are_shown_together(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    text = fx.report().read_text(encoding="utf-8")
    m = {k: v[:10] for k, v in fx.marks.items()}
    section = text.split("## Reverts and cherry-picks\n\n", 1)[1].split("\n\n", 1)[0]
    assert section.splitlines() == [f"- `{m['revert_c']}` reverts `{m['fix_c']}`",
                                    f"- patch-identical: `{m['fix_c']}`, `{m['reland_c']}`"]
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    assert doc["reverts"] == [{"sha": fx.marks["revert_c"], "reverts": fx.marks["fix_c"]}]
    assert doc["duplicates"] == [[fx.marks["fix_c"], fx.marks["reland_c"]]]


def test_moves_and_deletions_name_the_citing_port_files(fx: Fixture) -> None:
    assert run(fx.port, "sync").rc == 0
    text = fx.report().read_text(encoding="utf-8")
    m = {k: v[:10] for k, v in fx.marks.items()}
    assert (f"- `vllm/gone.py` deleted in `{m['delete']}` vllm#108; cited by src/gone.cpp"
            in text)
    assert (f"- `vllm/old_name.py` renamed → `vllm/new_name.py` in `{m['rename']}` vllm#109; "
            "cited by src/old.cpp") in text
    doc = json.loads(fx.report().with_suffix(".json").read_text(encoding="utf-8"))
    assert doc["moves"] == [
        {"path": "vllm/gone.py", "kind": "deleted", "new_path": None, "sha": fx.marks["delete"],
         "pr": 108, "port_files": ["src/gone.cpp"]},
        {"path": "vllm/old_name.py", "kind": "renamed", "new_path": "vllm/new_name.py",
         "sha": fx.marks["rename"], "pr": 109, "port_files": ["src/old.cpp"]},
    ]


# -- escaping -----------------------------------------------------------------------------------

NASTY = [
    ("[Core] a | b | c (#121)", {"vllm/a.py": "a = 121\n"}),
    ("[Core] use `x` and ``y`` (#122)", {"vllm/a.py": "a = 122\n"}),
    ("<script>alert(1)</script> *bold* _em_ (#123)", {"vllm/a.py": "a = 123\n"}),
    ("first line\nsecond line (#124)\n\nbody text\n", {"vllm/a.py": "a = 124\n"}),
    ("[Core] " + "x" * 10_000 + " (#125)", {"vllm/a.py": "a = 125\n"}),
    ("[Core] a — dash and _(auto: fake)_ tail (#126)", {"vllm/a.py": "a = 126\n"}),
]


def test_awkward_subjects_are_escaped_in_markdown_and_intact_in_json(tmp_path: Path) -> None:
    fx = build(tmp_path, extra=NASTY)
    r = run(fx.port, "sync")
    assert r.rc == 0, r.err
    md = fx.report()
    text = md.read_text(encoding="utf-8")
    doc = json.loads(md.with_suffix(".json").read_text(encoding="utf-8"))
    subjects = {e["sha"]: e["subject"] for e in doc["entries"]}
    m = fx.marks
    assert subjects[m["extra0"]] == "[Core] a | b | c (#121)"
    assert subjects[m["extra1"]] == "[Core] use `x` and ``y`` (#122)"
    assert subjects[m["extra2"]] == "<script>alert(1)</script> *bold* _em_ (#123)"
    assert subjects[m["extra3"]] == "first line second line (#124)"  # git's own subject
    assert subjects[m["extra4"]] == "[Core] " + "x" * 10_000 + " (#125)"
    lines = {line[3:13]: line for line in text.splitlines() if line.startswith("- `")}
    assert r"\[Core\] a \| b \| c (#121)" in lines[m["extra0"][:10]]
    assert r"use \`x\` and \`\`y\`\` (#122)" in lines[m["extra1"][:10]]
    assert (r"&lt;script\>alert(1)&lt;/script\> \*bold\* \_em\_ (#123)"
            in lines[m["extra2"][:10]])
    assert "first line second line (#124) — PORT-NOW" in lines[m["extra3"][:10]]
    long_line = lines[m["extra4"][:10]]
    assert len(long_line) < 600 and "…" in long_line
    assert "<script>" not in text and "| b |" not in text
    # Nothing in the awkward subjects reads back as a hand edit, so the rerun is byte-stable.
    before = (text, md.with_suffix(".json").read_text(encoding="utf-8"))
    again = run(fx.port, "sync")
    assert again.rc == 0 and "warning" not in again.err, again.err
    assert (md.read_text(encoding="utf-8"),
            md.with_suffix(".json").read_text(encoding="utf-8")) == before
    assert not (fx.sync_dir / "decisions.toml").exists()


def test_non_utf8_commit_message(tmp_path: Path) -> None:
    fx = build(tmp_path, extra=[(b"[Core] caf\xe9 in Latin-1 (#130)", {"vllm/a.py": "a = 130\n"})])
    r = run(fx.port, "sync", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    (entry,) = [e for e in doc["entries"] if e["sha"] == fx.marks["extra0"]]
    assert entry["subject"] == "[Core] caf\ufffd in Latin-1 (#130)"
    assert entry["pr"] == 130 and entry["disposition"] == "PORT-NOW"
    assert "caf\ufffd in Latin-1" in fx.report().read_text(encoding="utf-8")


# -- read-back parser -----------------------------------------------------------------------------


def _entry(**kw: object) -> Entry:
    base: dict[str, object] = dict(sha="ab" * 20, pr=7, subject="[Core] x | y (#7)",
                                   disposition="PORT-NOW", reason="vllm/a.py → src/a.cpp",
                                   rule="ported-path", auto=True, upstream_paths=("vllm/a.py",),
                                   port_files=("src/a.cpp",))
    base.update(kw)
    return Entry(**base)  # type: ignore[arg-type]


def test_entry_line_round_trips_through_parse_entry() -> None:
    e = _entry(reason="a `b` [c] <d> | e \\ f")
    line = report.entry_line(e)
    parsed = report.parse_entry(line, report.entry_prefix(e))
    assert parsed is not None
    assert (parsed.disposition, parsed.reason, parsed.auto_rule) == (
        "PORT-NOW", "a `b` [c] <d> | e \\ f", "ported-path")
    # Without the known prefix the last " — " splits it.
    assert report.parse_entry(line, None) == parsed


def test_read_back_keeps_notes_unparsed_and_state() -> None:
    e = _entry()
    text = report.render(report.Model(
        "2026-01-01", "a" * 40, "0.1+gaaaaaaa", "b" * 40, "origin/main", "a" * 40,
        False, history.RangeStats(1, 1, 1, 0), "STALLED", (e,), enumerated=1,
        unparsed=("- kept as it was",), notes="My notes\n\n## A heading inside the notes\nmore"))
    back = report.read_back(text, {e.sha[:10]: report.entry_prefix(e)})
    assert back.state == "STALLED"
    assert back.unparsed == ("- kept as it was",)
    assert back.notes == "My notes\n\n## A heading inside the notes\nmore"
    assert [p.sha_prefix for p in back.entries] == [e.sha[:10]]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("-`# _()|\\—:abc0123456789\n PORT-NOWIGNE")),
               max_size=300))
def test_read_back_never_raises(text: str) -> None:
    back = report.read_back(text, {"0123456789": "- `0123456789` vllm#1 x — "})
    assert isinstance(back, report.ReadBack)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_entry_never_raises(line: str) -> None:
    report.parse_entry("- `0123456789` " + line, None)
    report.parse_entry(line, "- `0123456789` ")
