"""`status --json` and `check`: the keys machines read, and one line per corrupted record."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from nodac import need_setpriv, run_closed, run_without
from portfixture import Fixture, build, run

from sync.dev import example
from sync.dev.fastimport import git

REPO = Path(__file__).resolve().parents[1]
STALE = "b39632a508fabb9a2b6eff7be1ab9e1714bc044d"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example, built once into a private directory; tests corrupt copies."""
    tmp = tmp_path_factory.mktemp("example")
    examples = tmp / "examples"
    shutil.copytree(REPO / "examples", examples,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return example.build(tmp / "ex", examples)


@pytest.fixture
def copy(built: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "port"
    shutil.copytree(built, dest, symlinks=True)
    return dest


def test_status_json_keys(tmp_path: Path) -> None:
    fx = build(tmp_path)
    r = run(fx.port, "status", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert set(doc["pin"]) == {"vllm_commit", "vllm_runtime_version",
                               "vllm_distribution_version", "flashinfer_version"}
    assert doc["pin"]["vllm_commit"] == fx.pin
    ref = doc["reference"]
    assert (ref["path"], ref["head"], ref["shallow"]) == (str(fx.reference), fx.pin, False)
    newest = git(fx.reference, "log", "-1", "--format=%cI", fx.tip).strip()
    assert {k: doc["behind"][k] for k in ("commits", "newest_date")} == {
        "commits": 13, "newest_date": newest}
    assert [{k: o[k] for k in ("id", "pin", "agrees")} for o in doc["oracles"]] == [
        {"id": "vllm", "pin": fx.pin, "agrees": True}]
    assert doc["cycle"] is None
    assert run(fx.port, "sync").rc == 0
    after = json.loads(run(fx.port, "status", "--json").out)
    assert after["cycle"]["counts"] == {"PORT-NOW": 5, "INVENTORY": 3, "IGNORE": 5,
                                        "UNCLASSIFIED": 0}
    text = run(fx.port, "status")
    assert text.rc == 0 and "behind origin/main: 13 commits" in text.out
    # The carry-over folds to counts and a pointer however many items there are.
    owed = after["cycle"]["carry_over"]
    assert len(owed) == 8 and after["cycle"]["carry_over_counts"] == {
        "PORT-NOW open": 5, "INVENTORY unannotated": 3}
    report = after["cycle"]["report"]
    assert [line for line in text.out.splitlines() if "carry-over" in line] == [
        f"  carry-over: 5 PORT-NOW open, 3 INVENTORY unannotated — each item in {report} "
        "(## Carry-over); the PORT-NOW diffs in 'upstream-sync queue'"]
    # 13 lines, the advance's unmet 'no gates are configured' and the dry-run pointer.
    assert len(text.out.splitlines()) < 17


def test_status_on_the_example_reports_a_disagreeing_oracle(copy: Path) -> None:
    oracle = copy / ".agents/oracles/vllm.md"
    oracle.write_text(oracle.read_text(encoding="utf-8").replace(
        "pin = 147b89ac926dabf0d3a3ac630941428c07798a7c", f"pin = {STALE}"), encoding="utf-8")
    doc = json.loads(run(copy, "status", "--json").out)
    (core,) = [o for o in doc["oracles"] if o["id"] == "vllm"]
    assert (core["pin"], core["agrees"]) == (STALE, False)
    assert doc["behind"]["commits"] == 40


def test_status_says_the_advance_needs_a_core_oracle_file(copy: Path) -> None:
    """walk-s6b D3/U3: the real port has no oracle registry; an advance needs `vllm.md`."""
    assert "oracle vllm: no oracle file" not in run(copy, "status").out
    (copy / ".agents/oracles/vllm.md").unlink()
    r = run(copy, "status")
    assert ("oracle vllm: no oracle file (.agents/oracles/vllm.md) — an advance needs one"
            in r.out), r.out


def test_check_on_the_example_is_clean(copy: Path) -> None:
    r = run(copy, "check")
    assert r.rc == 0, r.out + r.err
    assert [ln for ln in r.out.splitlines() if not ln.startswith("warning: ")] == [
        f"check: all record invariants hold in {copy}"]
    j = run(copy, "check", "--json")
    assert j.rc == 0 and json.loads(j.out)["errors"] == []


def test_check_refuses_a_gate_record_no_gate_wrote(copy: Path) -> None:
    """walk-s8 D4: CI's `check` passed a future-dated or mis-timed gate record that every
    other reader (and `advance`) refuses."""
    from sync import port as port_mod
    from sync.records import gates

    assert run(copy, "sync").rc == 0
    p = port_mod.locate(str(copy))
    target = p.open_cycle().target
    rec = gates.path(p, target)
    rec.parent.mkdir(parents=True, exist_ok=True)
    ahead = gates.GateResult("parity:op", "PASS", "c", 1.0, "h", "2099-01-01T00:00:00Z")
    rec.write_text(gates.render_doc(target, [ahead]))
    r = run(copy, "check")
    assert r.rc == 7
    assert "gate 'parity:op' is dated 2099-01-01T00:00:00Z, in the future" in r.out
    rec.write_text(rec.read_text().replace("2099-01-01T00:00:00Z", "2099-01-01 00:00:00"))
    r = run(copy, "check")
    assert r.rc == 7 and "not one a gate writes" in r.out, r.out


def test_status_names_a_broken_gate_record_of_the_open_cycle(copy: Path) -> None:
    """walk-s14 R1: status said nothing of a gate record that advance and gates merge refuse
    (exit 4): it is named among the records, as a broken decisions record is."""
    from sync import port as port_mod
    from sync.records import gates

    assert run(copy, "sync").rc == 0
    p = port_mod.locate(str(copy))
    target = p.open_cycle().target
    rec = gates.path(p, target)
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text('{"schema": 1,\n "target": ')
    rel = p.rel(rec)
    r = run(copy, "status")
    assert r.rc == 0 and f"record: {rel}:2: not valid JSON (" in r.out, r.out
    doc = json.loads(run(copy, "status", "--json").out)
    assert [x.split(" (", 1)[0] for x in doc["records"]] == [f"{rel}:2: not valid JSON"]
    rec.unlink()
    assert json.loads(run(copy, "status", "--json").out)["records"] == []


def test_an_all_clear_that_skipped_the_audit_says_so(copy: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s3 D9: with no reference checkout the per-file pin audit is skipped (CI may run
    check without one); the all-clear must not read as a full pass."""
    (copy / ".agents/developer-preferences.md").unlink()
    monkeypatch.delenv("VLLM_SOURCE", raising=False)
    r = run(copy, "check")
    assert r.rc == 0, r.out + r.err
    assert [ln for ln in r.out.splitlines() if not ln.startswith("warning: ")] == [
        f"check: all record invariants hold in {copy}, but 1 check(s) did not run (see the "
        "note above)"]
    assert "note: per-file pin audit skipped: " in r.err
    doc = json.loads(run(copy, "check", "--json").out)
    assert doc["ok"] and [n.split(":")[0] for n in doc["skipped"]] == [
        "per-file pin audit skipped"]


def test_check_refuses_the_open_cycles_report_json_when_it_does_not_parse(copy: Path) -> None:
    """walk-s3 D8: status and queue refuse a truncated report JSON; check, the CI guard of
    every record, names it too."""
    assert run(copy, "sync").rc == 0
    (jpath,) = (copy / ".agents/sync").glob("*.json")
    jpath.write_bytes(jpath.read_bytes()[:200])
    r = run(copy, "check")
    assert r.rc == 7
    rel = jpath.relative_to(copy).as_posix()
    assert f"{rel}: not valid JSON — run 'upstream-sync sync' to rewrite it" in r.out.splitlines()


def _line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    (number,) = [i for i, line in enumerate(lines, start=1) if needle in line]
    return number


def _corrupt(copy: Path, rel: str, old: str, new: str) -> Path:
    path = copy / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


PROTOCOL = ".agents/upstream-sync.md"
ORACLE = ".agents/oracles/vllm.md"
COMMIT = "147b89ac926dabf0d3a3ac630941428c07798a7c"


def _check_lines(copy: Path) -> list[str]:
    r = run(copy, "check", "--no-audit")
    assert r.rc == 7, r.out + r.err
    assert r.err.strip().splitlines()[-1].startswith("upstream-sync: error: ")
    assert "record invariant(s) violated" in r.err
    return r.out.splitlines()


def test_check_span_not_a_prefix(copy: Path) -> None:
    path = _corrupt(copy, PROTOCOL, "<!--pin:commit-->147b89ac92<!--/pin-->",
                    "<!--pin:commit-->b236b54117<!--/pin-->")
    n = _line_of(path, "b236b54117")
    assert _check_lines(copy) == [
        f"{PROTOCOL}:{n}: pin commit span b236b54117 is not a prefix of vllm_commit {COMMIT}"]


def test_check_oracle_pin_mismatch(copy: Path) -> None:
    path = _corrupt(copy, ORACLE, f"pin = {COMMIT}", f"pin = {STALE}")
    n = _line_of(path, f"pin = {STALE}")
    assert _check_lines(copy) == [
        f"{ORACLE}:{n}: pin = {STALE} but the pin block's vllm_commit is {COMMIT}"]


def test_check_two_parity_pin_blocks(copy: Path) -> None:
    path = copy / PROTOCOL
    text = path.read_text(encoding="utf-8")
    start = text.index("```parity-pin")
    block = text[start:text.index("```\n", start + 3) + 4]
    path.write_text(text + "\n" + block, encoding="utf-8")
    (line,) = _check_lines(copy)
    assert re.fullmatch(rf"{re.escape(PROTOCOL)}:(\d+:)? expected exactly one ```parity-pin "
                        r"block, found 2 \(lines \d+, \d+\) — keep exactly one ```parity-pin "
                        "block", line), line


def test_check_released_wheel_runtime(copy: Path) -> None:
    path = _corrupt(copy, PROTOCOL, "vllm_runtime_version = 0.23.1rc1.dev75+g147b89ac9",
                    "vllm_runtime_version = 0.24.0")
    n = _line_of(path, "vllm_runtime_version = 0.24.0")
    (line,) = _check_lines(copy)
    assert line.startswith(f"{PROTOCOL}:{n}: vllm_runtime_version = '0.24.0' has no local "
                           "segment: a released version names no commit, so it is a pin only "
                           "with vllm_commit_id")


def _paragraph_finding(line: int, sha: str) -> str:
    return (f"{PROTOCOL}:{line}: the PARITY PIN paragraph's pin {sha} is not a prefix of the "
            f"pin block's vllm_commit {COMMIT} — write {COMMIT[:9]} there by hand (an advance "
            "rewrites this line itself, but not while it disagrees with the block)")


def test_check_paragraph_sha_mismatch(copy: Path) -> None:
    path = _corrupt(copy, PROTOCOL, "current parity pin 147b89ac9",
                    "current parity pin b39632a50")
    n = _line_of(path, "current parity pin b39632a50")
    assert _check_lines(copy) == [_paragraph_finding(n, "b39632a50")]


def test_check_reports_every_corruption_at_once(copy: Path) -> None:
    _corrupt(copy, PROTOCOL, "<!--pin:commit-->147b89ac92<!--/pin-->",
             "<!--pin:commit-->b236b54117<!--/pin-->")
    _corrupt(copy, PROTOCOL, "current parity pin 147b89ac9", "current parity pin b39632a50")
    _corrupt(copy, ORACLE, f"pin = {COMMIT}", f"pin = {STALE}")
    lines = _check_lines(copy)
    assert len(lines) == 3
    assert all(re.match(r"^\.agents/[\w/.-]+\.md:\d+: ", line) for line in lines), lines
    j = run(copy, "check", "--json", "--no-audit")
    assert j.rc == 7 and json.loads(j.out)["errors"] == lines


def test_status_on_a_shallow_reference_says_so(tmp_path: Path) -> None:
    fx = build(tmp_path)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{fx.remote}", str(shallow))
    (fx.port / ".agents/developer-preferences.md").write_text(
        example.preferences_text(shallow, tmp_path / "oracles"), encoding="utf-8")
    r = run(fx.port, "status", "--json")
    assert r.rc == 3
    assert "fetch --unshallow" in r.err.strip().splitlines()[-1]
    ref = json.loads(r.out)["reference"]
    assert (ref["path"], ref["shallow"], ref["head"]) == (str(shallow), True, fx.tip)
    assert "shallow clone" in ref["error"]


def test_status_says_a_reference_checkout_left_behind_the_pin(tmp_path: Path) -> None:
    """An advance killed after its records, before it moved the checkout: status showed the
    old HEAD and called nothing a problem (sync said 'nothing to sync'); it says so, and
    what finishes the move."""
    fx = build(tmp_path)
    base = fx.marks["base"]
    git(fx.reference, "reset", "-q", "--hard", base)
    r = run(fx.port, "status", "--json")
    assert r.rc == 0, r.err
    ref = json.loads(r.out)["reference"]
    said = (f"the reference checkout {fx.reference} is at {base[:10]}, behind the pin "
            f"{fx.pin[:10]} (an advance that stopped before moving it?) — run 'upstream-sync "
            f"advance', which finishes the move, or 'git -C {fx.reference} merge --ff-only "
            f"{fx.pin[:10]}'")
    assert (ref["head"], ref["problems"]) == (base, [said])
    assert f"  {said}" in run(fx.port, "status").out.splitlines()
    git(fx.reference, "reset", "-q", "--hard", fx.pin)
    assert json.loads(run(fx.port, "status", "--json").out)["reference"]["problems"] == []


# -- what the real port writes (findings §5, recipe 15) ------------------------------------------


@pytest.mark.parametrize("line", [
    "**Active pin (advanced 2026-01-02):** current parity pin `147b89ac9` (vLLM 0.24.0.dev0 + "
    "Torch 2.13.0); audited target",
    "**Active cycle (2026-01-02):** current parity pin `147b89ac9`; audited target",
    "- Active pin (advanced 2026-01-02): current parity pin 147b89ac9 (vLLM `0.24.0.dev0`)",
])
def test_check_reads_the_markdown_parity_pin_line(copy: Path, line: str) -> None:
    path = copy / PROTOCOL
    text = path.read_text(encoding="utf-8")
    old = next(ln for ln in text.splitlines() if ln.startswith("Active pin"))
    path.write_text(text.replace(old, line), encoding="utf-8")
    r = run(copy, "check", "--no-audit")
    assert r.rc == 0, r.out + r.err
    path.write_text(text.replace(old, line.replace("147b89ac9", "e24d1b24a")), encoding="utf-8")
    n = _line_of(path, "e24d1b24a")
    assert _check_lines(copy) == [_paragraph_finding(n, "e24d1b24a")]


def test_check_hint_for_a_missing_parity_pin_line_is_a_whole_sentence(copy: Path) -> None:
    _corrupt(copy, PROTOCOL, "Active pin (advanced 2026-01-02): current parity pin",
             "Pinned 2026-01-02 at")
    (line,) = _check_lines(copy)
    assert line == (
        f"{PROTOCOL}: no PARITY PIN line — write it as one line 'Active pin (advanced "
        "YYYY-MM-DD): current parity pin <sha> (vLLM <release>)' (markdown bold and backticks "
        "are fine)")
    assert line.count("(") == line.count(")") and line.count("'") % 2 == 0


def test_check_applies_the_registry_rules_and_skips_its_readme(copy: Path) -> None:
    registry = copy / ".agents/oracles"
    (registry / "README.md").write_text(
        "# The oracle registry\n\nOne file per oracle, e.g.\n\n```oracle-pin\nid = x\n```\n",
        encoding="utf-8")
    (registry / "sglang.md").write_text(
        "# sglang\n\n```oracle-pin\nid = sglang\nrole = advisory\n"
        "upstream = https://github.com/sgl-project/sglang\nscope = bench client\n"
        "pin = UNPINNED\npin_label = none\npinned_on = 2026-01-02\ngateable = no\n"
        "evidence = soon\n```\n", encoding="utf-8")
    (registry / "lmcache.md").write_text(
        "# lmcache\n\n```oracle-pin\nid = lmcache\nrole = secondary\n"
        "upstream = https://github.com/LMCache/LMCache\nscope = wire format\n"
        "pin = UNPINNED\npin_label = 8570aad\npinned_on = 2026-01-02\ngateable = yes\n"
        "evidence = docs/BENCHMARKS.md\n```\n", encoding="utf-8")
    lines = _check_lines(copy)
    assert lines == [
        ".agents/oracles/lmcache.md:8: gateable = yes but pin = UNPINNED — pin the oracle "
        "before gating on it, or set gateable = no",
        ".agents/oracles/sglang.md:5: role = 'advisory' is not primary or secondary — write "
        "primary (the oracle the port is gated on) or secondary",
        ".agents/oracles/sglang.md:12: gateable = no but evidence = 'soon' names no issue — "
        "name the issue that owes the gate, as #N"]
    assert not any("README" in ln for ln in lines)
    status = json.loads(run(copy, "status", "--json").out)
    assert "README" not in {o["id"] for o in status["oracles"]}


def test_check_on_a_port_without_a_registry_says_so_and_passes(copy: Path) -> None:
    shutil.rmtree(copy / ".agents/oracles")
    r = run(copy, "check", "--no-audit")
    assert r.rc == 0, r.out + r.err
    assert "no oracle registry (.agents/oracles/*.md)" in r.out + r.err


def test_check_reports_a_broken_carry_over_record(copy: Path) -> None:
    (copy / ".agents/sync").mkdir(exist_ok=True)
    (copy / ".agents/sync/carry-over.toml").write_text('schema = 1\n[carried."zz"]\n')
    lines = _check_lines(copy)
    assert len(lines) == 1 and lines[0].startswith(".agents/sync/carry-over.toml"), lines


def test_status_with_no_reference_checkout_says_which_line_goes_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = build(tmp_path)
    prefs_file = fx.port / ".agents/developer-preferences.md"
    prefs_file.write_text("```sync-preferences\n```\n", encoding="utf-8")
    monkeypatch.delenv("VLLM_SOURCE", raising=False)
    r = run(fx.port, "status")
    (line,) = (x for x in r.out.splitlines() if x.startswith("reference checkout: "))
    # One pair of parentheses: the status line does not wrap the refusal in another.
    assert line == (
        "reference checkout: unresolved: reference_checkout is not set (a full clone of "
        "upstream vLLM, never a shallow one) — set VLLM_SOURCE, or add the line "
        f"'reference_checkout = <path>' to the ```sync-preferences block of {prefs_file}")


def _without_oracle_home(port: Path) -> Path:
    """The port's preferences with their `oracle_home` line taken out."""
    prefs_file = port / ".agents/developer-preferences.md"
    text = prefs_file.read_text(encoding="utf-8")
    prefs_file.write_text("".join(line for line in text.splitlines(keepends=True)
                                  if not line.startswith("oracle_home = ")), encoding="utf-8")
    return prefs_file


def test_status_with_no_oracle_home_says_so_not_build_the_environment(tmp_path: Path) -> None:
    """walk-s13 U2: with oracle_home unset status advised 'upstream-sync oracle build', which
    then refused (rc 3) for the unset home; an empty home looked the same."""
    fx = build(tmp_path)
    (tmp_path / "oracles").mkdir()
    assert "  no environment at the pin (upstream-sync oracle build, or adopt)" in run(
        fx.port, "status").out.splitlines()
    prefs_file = _without_oracle_home(fx.port)
    refusal = (
        "oracle_home is not set (the directory holding the oracle virtualenvs, outside every "
        "checkout) — set SYNC_ORACLE_HOME, or add the line 'oracle_home = <directory>' to the "
        f"```sync-preferences block of {prefs_file}")
    lines = run(fx.port, "status").out.splitlines()
    (i,) = (n for n, x in enumerate(lines) if x.startswith("oracle build: "))
    assert lines[i + 1] == f"  no environment can be looked up: {refusal}"
    build_it = run(fx.port, "oracle", "build", "--if-missing")
    assert build_it.rc == 3 and build_it.err == f"upstream-sync: error: {refusal}\n"
    doc = json.loads(run(fx.port, "status", "--json").out)["oracle_build"]
    assert (doc["env"], doc["home"], doc["home_error"]) == (None, None, refusal)


def _home_lines(port: Path) -> tuple[str, int, str]:
    """What status says of the environment, and `oracle gc`'s exit code and stderr."""
    lines = run(port, "status").out.splitlines()
    (i,) = (n for n, x in enumerate(lines) if x.startswith("oracle build: "))
    gc = run(port, "oracle", "gc")
    return lines[i + 1], gc.rc, gc.err


def test_an_oracle_home_that_is_a_file_is_refused_naming_where_it_was_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """walk N3: a file where the oracle home should be: 'oracle build' said 'internal error:
    NotADirectoryError', while status and 'oracle gc' looked for environments in it and found
    none. Every reader refuses it (rc 3), naming where the value came from."""
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    home.write_text("not a directory\n", encoding="utf-8")
    prefs_file = fx.port / ".agents/developer-preferences.md"
    refusal = (f"oracle_home {home} (from {prefs_file}) exists but is not a directory — change "
               f"oracle_home in {prefs_file} (or set SYNC_ORACLE_HOME) to a directory outside "
               "every checkout, or move what is there away")
    assert _home_lines(fx.port) == (f"  no environment can be looked up: {refusal}", 3,
                                    f"upstream-sync: error: {refusal}\n")
    built = run(fx.port, "oracle", "build", "--if-missing")
    assert (built.rc, built.err) == (3, f"upstream-sync: error: {refusal}\n")
    doc = json.loads(run(fx.port, "status", "--json").out)["oracle_build"]
    assert (doc["home"], doc["home_error"]) == (None, refusal)
    # Set by the variable, and a file in the middle of the path: the variable is named.
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(home / "venvs"))
    refusal = (f"oracle_home {home / 'venvs'} (from env SYNC_ORACLE_HOME) cannot be a "
               "directory: a file stands in its path — set SYNC_ORACLE_HOME to a directory "
               "outside every checkout, or move what is there away")
    assert _home_lines(fx.port) == (f"  no environment can be looked up: {refusal}", 3,
                                    f"upstream-sync: error: {refusal}\n")


def test_an_oracle_home_inside_a_checkout_is_refused_naming_where_it_was_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal of a home inside a checkout said 'set SYNC_ORACLE_HOME (or oracle_home in
    the preferences)' whichever had set it: it names the source and what to change there, as
    the refusal of a home that is no directory does."""
    fx = build(tmp_path)
    prefs_file = fx.port / ".agents/developer-preferences.md"
    inside = (fx.port / ".venvs").resolve()
    prefs_file.write_text(prefs_file.read_text(encoding="utf-8").replace(
        f"oracle_home = {tmp_path / 'oracles'}", f"oracle_home = {inside}"), encoding="utf-8")
    probe = run(fx.port, "oracle", "probe")
    assert (probe.rc, probe.err) == (3, (
        f"upstream-sync: error: oracle_home {inside} (from {prefs_file}) lies inside the port "
        f"at {fx.port.resolve()} — change oracle_home in {prefs_file} (or set "
        "SYNC_ORACLE_HOME) to a directory outside every checkout\n"))
    monkeypatch.setenv("SYNC_ORACLE_HOME", str(fx.reference / "venvs"))
    probe = run(fx.port, "oracle", "probe")
    assert (probe.rc, probe.err) == (3, (
        f"upstream-sync: error: oracle_home {(fx.reference / 'venvs').resolve()} (from env "
        f"SYNC_ORACLE_HOME) lies inside $VLLM_SOURCE (vllm source checkout) at "
        f"{fx.reference.resolve()} — set SYNC_ORACLE_HOME to a directory outside every "
        "checkout\n"))
    assert not inside.exists() and not (fx.reference / "venvs").exists()


def test_an_oracle_home_closed_to_this_user_is_a_refusal_not_an_internal_error(
        tmp_path: Path) -> None:
    """walk N3: a home under a folder this user may not enter crashed status, probe, build
    and gc with 'internal error: PermissionError'; each is a refusal (rc 3) that says so."""
    need_setpriv()
    fx = build(tmp_path)
    closed = tmp_path / "oracles"
    (closed / "venvs").mkdir(parents=True)
    prefs_file = fx.port / ".agents/developer-preferences.md"
    prefs_file.write_text(prefs_file.read_text(encoding="utf-8").replace(
        f"oracle_home = {closed}", f"oracle_home = {closed / 'venvs'}"), encoding="utf-8")
    results = run_closed(closed, closed / "venvs", fx.port,
                          [("status",), ("oracle", "probe"), ("oracle", "gc")])
    refusal = (f"oracle_home {closed / 'venvs'} (from {prefs_file}) cannot be looked up "
               "(Permission denied) — give this user access to it, or change oracle_home in "
               f"{prefs_file} (or set SYNC_ORACLE_HOME) to a directory it can use")
    status, probe, gc = results
    assert status.returncode == 0, status.stderr
    assert f"  no environment can be looked up: {refusal}" in status.stdout.splitlines()
    assert [(r.returncode, r.stderr) for r in (probe, gc)] == [
        (3, f"upstream-sync: error: {refusal}\n")] * 2


def test_a_file_where_an_oracle_environment_belongs_is_refused_or_skipped(
        tmp_path: Path) -> None:
    """A file named as an environment of the home: status took it for an environment with no
    build record, 'oracle build --if-missing' for one to keep, probe and verify sent people
    to build it, which said it exists, '--rebuild' crashed with 'internal error:
    NotADirectoryError' and gc passed it in silence. Each command that uses it refuses it
    (rc 3), naming it; status and gc, which only list, say so and go on."""
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    home.mkdir()
    at_pin, older = home / f"vllm-{fx.pin[:10]}", home / f"vllm-{STALE[:10]}"
    for f in (at_pin, older):
        f.write_text("not an environment\n", encoding="utf-8")
    refusal = (f"oracle environment {at_pin} is not a directory — move it away, then build "
               "the oracle again")
    status = run(fx.port, "status").out.splitlines()
    assert f"  environment at the pin: {at_pin}: {refusal}" in status
    doc = json.loads(run(fx.port, "status", "--json").out)["oracle_build"]
    assert doc["env"] == {"path": str(at_pin), "error": refusal}
    for argv in (("oracle", "probe"), ("oracle", "verify"), ("oracle", "build", "--if-missing"),
                 ("oracle", "build", "--rebuild")):
        r = run(fx.port, *argv)
        assert (r.rc, r.err) == (3, f"upstream-sync: error: {refusal}\n"), argv
    gc = run(fx.port, "oracle", "gc")
    assert (gc.rc, gc.out.splitlines()) == (0, [
        f"kept {f.name}: cannot be judged: oracle environment {f} is not a directory — move "
        "it away, then build the oracle again" for f in sorted((at_pin, older))])
    assert at_pin.is_file() and older.is_file()


def test_an_oracle_environment_closed_to_this_user_is_refused_or_skipped(
        tmp_path: Path) -> None:
    """A mode-0 environment in a good home crashed status, probe, build, gc, verify and adopt
    with 'internal error: PermissionError'; each refuses it (rc 3), naming it, and status
    and gc say so and go on."""
    need_setpriv()
    fx = build(tmp_path)
    env = tmp_path / "oracles" / f"vllm-{fx.pin[:10]}"
    env.mkdir(parents=True)
    refusal = (f"oracle environment {env} cannot be listed (Permission denied) — give this "
               "user access to it, or run as the user who made it")
    _said_by_each(fx, env, (env, env / "bin"), refusal)


def _said_by_each(fx: Fixture, env: Path, closed: tuple[Path, Path], refusal: str) -> None:
    """With `closed` shut (run_closed), status and gc say `refusal` and go on, gc keeping
    `env`; probe, verify, build --if-missing and adopt refuse with it (rc 3)."""
    status, gc, *refused = run_closed(*closed, fx.port, [
        ("status",), ("oracle", "gc"), ("oracle", "probe"), ("oracle", "verify"),
        ("oracle", "build", "--if-missing"), ("oracle", "adopt", str(env))])
    assert status.returncode == 0, status.stderr
    assert f"  environment at the pin: {env}: {refusal}" in status.stdout.splitlines()
    assert (gc.returncode, gc.stdout) == (0, f"kept {env.name}: cannot be judged: {refusal}\n")
    assert [(r.returncode, r.stderr) for r in refused] == [
        (3, f"upstream-sync: error: {refusal}\n")] * 4


def _fake_env(tmp_path: Path, pin: str) -> Path:
    """An environment folder at the pin with a bin/python that is no interpreter: each
    command below refuses before it would run it."""
    env = tmp_path / "oracles" / f"vllm-{pin[:10]}"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    (env / "bin" / "python").chmod(0o755)
    return env


def test_a_build_record_closed_to_this_user_is_refused_or_skipped(tmp_path: Path) -> None:
    """A readable environment whose build record is mode 0 crashed status, probe, verify,
    gc, build --if-missing and adopt with 'internal error: PermissionError' (usable_env looks
    only at the folder); each refuses it (rc 3) naming the record, and status and gc say so
    and go on, gc keeping it (whose it is cannot be told)."""
    need_setpriv()
    fx = build(tmp_path)
    env = _fake_env(tmp_path, fx.pin)
    marker = env / "upstream-sync-oracle.json"
    marker.write_text("{}\n", encoding="utf-8")
    refusal = (f"oracle environment {env} cannot be read: {marker} (Permission denied) — "
               "give this user access to it, or run as the user who made it")
    _said_by_each(fx, env, (marker, marker), refusal)
    assert marker.is_file()


def test_an_oracle_python_hidden_by_a_closed_bin_folder_is_refused(tmp_path: Path) -> None:
    """A readable environment whose bin/ is mode 0 crashed probe, verify and adopt with
    'internal error: PermissionError' (looking for bin/python); each refuses it (rc 3)
    naming the interpreter. Status, gc and build --if-missing do not look into bin/."""
    need_setpriv()
    fx = build(tmp_path)
    env = _fake_env(tmp_path, fx.pin)
    results = run_closed(env / "bin", env / "bin" / "python", fx.port,
                          [("oracle", "probe"), ("oracle", "verify"),
                           ("oracle", "adopt", str(env))])
    refusal = (f"oracle environment {env} cannot be read: {env / 'bin' / 'python'} "
               "(Permission denied) — give this user access to it, or run as the user who "
               "made it")
    assert [(r.returncode, r.stderr) for r in results] == [
        (3, f"upstream-sync: error: {refusal}\n")] * 3


def test_an_oracle_python_that_cannot_be_run_is_refused_naming_it(tmp_path: Path) -> None:
    """A mode-0 bin/python (which not even root may run) was already a refusal, not a
    crash: the probe cannot start it, and says so (rc 3). Pinned here."""
    fx = build(tmp_path)
    env = _fake_env(tmp_path, fx.pin)
    python = env / "bin" / "python"
    python.chmod(0)
    refusal = (f"probing {python} could not start: [Errno 13] Permission denied: '{python}' — "
               "rebuild the oracle ('upstream-sync oracle build --oracle vllm --rebuild')")
    for argv in (("oracle", "probe"), ("oracle", "verify"), ("oracle", "adopt", str(env))):
        r = run(fx.port, *argv)
        assert (r.rc, r.err) == (3, f"upstream-sync: error: {refusal}\n"), argv


def _full_env(home: Path, commit: str) -> Path:
    """An environment folder at `commit` with a few folders of files and a build log."""
    env = home / f"vllm-{commit[:10]}"
    for sub in ("bin", "include", "lib/python3.11/site-packages/pkg"):
        (env / sub).mkdir(parents=True)
        (env / sub / "f.txt").write_text("x\n", encoding="utf-8")
    (env / "upstream-sync-oracle.json").write_text("{}\n", encoding="utf-8")
    (home / "logs").mkdir(exist_ok=True)
    (home / "logs" / f"{env.name}.log").write_text("log\n", encoding="utf-8")
    return env


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_an_environment_with_a_closed_folder_is_not_half_removed_by_gc_or_rebuild(
        tmp_path: Path) -> None:
    """gc and build --rebuild crashed on an environment with a folder this user may not
    change ('internal error: PermissionError: ... 'pkg''), leaving it half removed (its
    build record gone first, the rest up to that folder). Each refuses (rc 3) naming the
    folder, and removes nothing of it."""
    need_setpriv()
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    pin_env = _full_env(home, fx.pin)
    older = git(fx.reference, "rev-parse", f"{fx.pin}~1").strip()
    closed_env = _full_env(home, older)
    before = {e: _files(e) for e in (pin_env, closed_env)}
    pkg = closed_env / "lib/python3.11/site-packages/pkg"
    gc_json, gc = run_closed(pkg, pkg / "f.txt", fx.port, [("oracle", "gc", "--json"),
                                                          ("oracle", "gc")])
    refusal = (f"oracle environment {closed_env} cannot be removed: {pkg} cannot be listed "
               "(Permission denied); nothing was removed — give this user access to it, or "
               "remove the environment as the user who made it")
    doc = json.loads(gc_json.stdout)
    assert (gc_json.returncode, doc["exit_code"], doc["error"]["text"]) == (3, 3, refusal)
    assert [(e["env"], e["drop"], e["error"]) for e in doc["environments"]] == [
        (str(closed_env), False, refusal), (str(pin_env), False, None)]
    assert (gc.returncode, gc.stderr) == (3, f"upstream-sync: error: {refusal}\n")
    assert gc.stdout.splitlines() == [
        f"could not drop {closed_env.name}: {older[:10]} is older than {fx.pin[:10]}; "
        f"{refusal.split(' — ')[0]}", f"kept {pin_env.name}: the pin"]
    assert _files(home / "logs") == [f"{closed_env.name}.log", f"{pin_env.name}.log"]
    include = pin_env / "include"
    (rebuild,) = run_closed(include, include, fx.port, [("oracle", "build", "--rebuild")],
                            mode=0o555)
    assert (rebuild.returncode, rebuild.stderr) == (3, (
        f"upstream-sync: error: oracle environment {pin_env} cannot be removed: {include} is "
        "closed to this user (removing it needs read, write and search); nothing was removed "
        "— give this user access to it, or remove the environment as the user who made it\n"))
    assert {e: _files(e) for e in (pin_env, closed_env)} == before


def test_a_removal_stopped_part_way_leaves_no_build_record_and_says_so(
        tmp_path: Path) -> None:
    """What the check before a removal cannot foresee: a sticky folder of the environment
    holding another user's file (writable, yet not theirs to unlink). gc says the
    environment is only partly removed, naming the file, and its build record went first:
    what is left is never taken for an oracle."""
    need_setpriv()
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    older = git(fx.reference, "rev-parse", f"{fx.pin}~1").strip()
    env = _full_env(home, older)
    shared = env / "include" / "shared"
    shared.mkdir()
    (shared / "theirs").write_text("x\n", encoding="utf-8")
    for p in (shared, shared / "theirs"):
        os.chown(p, 65534, 65534)
    shared.chmod(0o1777)
    (gc,) = run_without(fx.port, [("oracle", "gc")], also=("fowner",))
    said = (f"oracle environment {env} was only partly removed: {shared / 'theirs'} cannot be "
            "removed (Operation not permitted); its build record is gone, so what is left is "
            "never taken for an oracle")
    assert (gc.returncode, gc.stderr) == (3, (
        f"upstream-sync: error: {said} — remove what is left of it as a user who may, then "
        "run the command again\n"))
    assert gc.stdout.splitlines() == [
        f"could not drop {env.name}: {older[:10]} is older than {fx.pin[:10]}; {said}"]
    assert env.is_dir() and not (env / "upstream-sync-oracle.json").exists()
    assert (home / "logs" / f"{env.name}.log").exists()


def test_a_build_log_gc_cannot_remove_is_said_and_refused(tmp_path: Path) -> None:
    """The environment went, its build log could not (a logs folder this user may not
    change): gc said nothing of it and crashed; it says the environment is dropped and the
    log is not, and ends with that refusal (rc 3)."""
    need_setpriv()
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    older = git(fx.reference, "rev-parse", f"{fx.pin}~1").strip()
    env = _full_env(home, older)
    log = home / "logs" / f"{env.name}.log"
    (gc,) = run_closed(home / "logs", log, fx.port, [("oracle", "gc")], mode=0o555)
    said = f"the build log {log} of {env.name} cannot be removed (Permission denied)"
    assert (gc.returncode, gc.stderr) == (3, (
        f"upstream-sync: error: {said} — give this user access to it, or remove it as the "
        "user who made it\n"))
    assert gc.stdout.splitlines() == [
        f"dropped {env.name}: {older[:10]} is older than {fx.pin[:10]}; {said}"]
    assert not env.exists() and log.is_file()


def _dry_and_real(closed: Path, inside: Path, port: Path, *, mode: int = 0, as_json: bool
                  ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`oracle gc --dry-run`, then `oracle gc`, with `closed` shut (run_closed); with
    `as_json` their documents' `dry_run` key is checked and dropped from the stdout."""
    argv = ("oracle", "gc", *(("--json",) if as_json else ()))
    dry, real = run_closed(closed, inside, port, [(*argv, "--dry-run"), argv], mode=mode)
    if as_json:
        docs = [json.loads(r.stdout) for r in (dry, real)]
        assert [d.pop("dry_run") for d in docs] == [True, False]
        dry.stdout, real.stdout = (json.dumps(d) for d in docs)
    return dry, real


def test_gc_dry_run_says_what_the_run_refuses(tmp_path: Path) -> None:
    """`oracle gc --dry-run` said "would drop" of an environment with a folder this user may
    not list, which the run refuses (rc 3), and of one whose build log it cannot remove: the
    dry run asks the run's own questions, removing nothing, and says what the run says (a
    build record this user may not read is kept by both, unjudged), in text and --json."""
    need_setpriv()
    fx = build(tmp_path)
    home = tmp_path / "oracles"
    older = git(fx.reference, "rev-parse", f"{fx.pin}~1").strip()
    closed_env, unread = _full_env(home, older), _full_env(home, STALE)  # judged unread
    (unread / "upstream-sync-oracle.json").chmod(0)
    pkg = closed_env / "lib/python3.11/site-packages/pkg"
    before = _files(home)
    dry, real = _dry_and_real(pkg, pkg / "f.txt", fx.port, as_json=True)
    assert (dry.returncode, dry.stdout, dry.stderr) == (3, real.stdout, real.stderr)
    dry, real = _dry_and_real(pkg, pkg / "f.txt", fx.port, as_json=False)
    assert (dry.returncode, dry.stderr) == (3, real.stderr) and "cannot be removed" in dry.stderr
    assert dry.stdout.splitlines() == [
        line.replace("could not drop", "cannot drop") for line in real.stdout.splitlines()]
    assert [line.split(":")[0] for line in dry.stdout.splitlines()] == [
        f"cannot drop {closed_env.name}", f"kept {unread.name}"]
    assert _files(home) == before
    (unread / "upstream-sync-oracle.json").chmod(0o644)
    shutil.rmtree(unread)
    log = home / "logs" / f"{closed_env.name}.log"
    for as_json in (True, False):
        if not closed_env.exists():  # the JSON run dropped it
            _full_env(home, older)
        dry, real = _dry_and_real(home / "logs", log, fx.port, mode=0o555, as_json=as_json)
        assert (dry.returncode, dry.stderr) == (3, real.stderr) and "build log" in dry.stderr
        assert dry.stdout == real.stdout.replace("dropped", "would drop")
        assert not closed_env.exists() and log.is_file()
    assert dry.stdout.startswith(f"would drop {closed_env.name}: ")


def test_status_names_the_blockers_advance_needs_no_measurement_for(tmp_path: Path) -> None:
    """walk-s13 U1: status promised the open cycle's blockers, but said nothing of a PARITY
    PIN paragraph that disagrees with the block or of an unset oracle home, both unmet lines
    of 'advance --dry-run'; it names them as the advance words them, and points to it."""
    fx = build(tmp_path)
    assert run(fx.port, "sync").rc == 0
    protocol = fx.port / ".agents/upstream-sync.md"
    protocol.write_text(protocol.read_text(encoding="utf-8").replace(
        f"current parity pin {fx.pin[:9]}", f"current parity pin {STALE[:9]}"), encoding="utf-8")
    prefs_file = _without_oracle_home(fx.port)
    unmet = [
        "no gates are configured — configure [golden] scripts or [parity.suites.<name>] in "
        ".agents/upstream-sync.toml, or declare that the port has none with [gates] none = true",
        f".agents/upstream-sync.md:3: the PARITY PIN paragraph's pin {STALE[:9]} is not a "
        f"prefix of the pin block's vllm_commit {fx.pin} — write {fx.pin[:9]} there by hand (an "
        "advance rewrites this line itself, but not while it disagrees with the block)",
        "oracle vllm at the target cannot be verified: oracle_home is not set (the directory "
        "holding the oracle virtualenvs, outside every checkout) — set SYNC_ORACLE_HOME, or add "
        f"the line 'oracle_home = <directory>' to the ```sync-preferences block of {prefs_file}"]
    r = run(fx.port, "status")
    assert r.rc == 0, r.err
    # The oracle home's refusal is said whole under 'oracle build:'; its unmet line points
    # there (it said the same sentence twice, a few lines apart). The JSON keeps it whole.
    home = unmet[2].split(": ", 1)[1]
    assert f"  no environment can be looked up: {home}" in r.out.splitlines()
    assert r.out.splitlines()[-4:] == [
        *(f"  unmet: {u}" for u in unmet[:2]),
        "  unmet: oracle vllm at the target cannot be verified: no oracle home here (see "
        "'oracle build:' above)",
        "  the full list, with the gates and the oracle at the target checked: "
        "'upstream-sync advance --dry-run'"]
    assert json.loads(run(fx.port, "status", "--json").out)["cycle"]["unmet"] == unmet
    dry = run(fx.port, "advance", "--dry-run")
    assert dry.rc == 6 and set(unmet) <= {
        x.removeprefix("unmet: ") for x in dry.out.splitlines()}, dry.out



def test_status_after_a_stall_counts_its_port_now_apart_from_the_other_unmet(
        tmp_path: Path) -> None:
    """walk-s13 N5: after 'advance --stall' the carry-over line said "21 unmet" for 17
    PORT-NOW commits and 4 other preconditions; before the stall it said "17 PORT-NOW open"."""
    fx = build(tmp_path)
    assert run(fx.port, "sync").rc == 0
    unmet = [x.removeprefix("unmet: ") for x in run(fx.port, "advance", "--dry-run").out
             .splitlines() if x.startswith("unmet: ")]
    others = len([u for u in unmet if not u.startswith("PORT-NOW `")])
    assert len(unmet) - others == 5 and others > 1, unmet
    assert run(fx.port, "advance", "--stall").rc == 0
    r = run(fx.port, "status")
    (line,) = (x for x in r.out.splitlines() if x.startswith("  carry-over: "))
    (report,) = (fx.port / ".agents/sync").glob("*.md")
    assert line == (
        f"  carry-over: 5 PORT-NOW open, 3 INVENTORY unannotated (+{others} other unmet "
        f"preconditions) — each item in .agents/sync/{report.name} (## Carry-over); the "
        "PORT-NOW diffs in 'upstream-sync queue'")
    counts = {"PORT-NOW open": 5, "unmet": others, "INVENTORY unannotated": 3}
    assert json.loads(run(fx.port, "status", "--json").out)["cycle"]["carry_over_counts"] \
        == counts
    assert json.loads(report.with_suffix(".json").read_text())["carry_over_counts"] == counts


@pytest.mark.parametrize(("counts", "folded"), [
    ({"PORT-NOW open": 2, "unmet": 1}, "2 PORT-NOW open (+1 other unmet precondition)"),
    ({"unmet": 3}, "+3 other unmet preconditions"),
    ({"gate": 1}, "1 gate")])
def test_the_carry_over_line_says_a_stalls_other_unmet_apart(counts: dict[str, int],
                                                               folded: str) -> None:
    from sync.cli.commands import status

    assert status._carry_line({"carry_over_counts": counts, "report": "r.md"}) == [
        f"  carry-over: {folded} — each item in r.md (## Carry-over); the PORT-NOW diffs in "
        "'upstream-sync queue'"]


def test_check_says_a_record_two_checks_read_is_not_utf8_once(tmp_path: Path) -> None:
    """The protocol file holds the pin block and the PARITY PIN paragraph: a Latin-1 byte in
    it failed both readers the same way, and check printed the same line twice."""
    fx = build(tmp_path)
    protocol = fx.port / ".agents/upstream-sync.md"
    protocol.write_bytes(protocol.read_bytes() + b"caf\xe7\n")
    r = run(fx.port, "check")
    assert r.rc == 7, (r.out, r.err)
    said = [line for line in (r.out + r.err).splitlines() if "is not UTF-8" in line]
    assert len(said) == 1 and said[0].startswith(".agents/upstream-sync.md:"), said
