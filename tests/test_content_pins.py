"""Content-aware per-file pins, citations vs mentions, and citations of other oracles.

The fixture is the real case's shapes in small (findings §4, §10 recipes 2, 11-13): every
header cites `c1`, the pin is `c3`, and between them `c2` changes one cited file, renames
another and deletes a third; one header cites a path upstream never had. Past the pin, the
target changes p1.py and api_server.py (the first of the two paths `src/api.h` pins at one
SHA). Others write the
port's `vllm/csrc/`, `vllm/tests/` prefixes, a relative path under a directory named on the
verb line, a `See` mention of the port's own header, and citations of llama.cpp, LMCache
and flash-attention (whose `csrc/` is not vLLM's).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from stepfixture import protocol_text, run, write

from sync import port as port_mod
from sync.dev.fastimport import History, git
from sync.headers import verify
from sync.records import cycle
from sync.steps import audit, surface
from sync.upstream import gitio

LLAMA = "237ad9b961f009ae19ac29dbce4cd0c1251f94b3"
FA = "2c839c33742309ec41e620bf837495ec9926c56e"


def build_upstream(repo: Path) -> dict[str, str]:
    h = History()
    for p in ("vllm/p1.py", "vllm/p2.py", "vllm/p3.py", "vllm/p4.py", "csrc/k.cu",
              "tests/t/test_x.py", "vllm/entrypoints/openai/api_server.py",
              "vllm/entrypoints/openai/completion/api_router.py"):
        h.modify(p, f"# {p}\n" + "x = 1\n" * 8)
    c0 = h.commit("Initial (#1)")
    h.modify("README.md", "one\n")
    c1 = h.commit("[Doc] One (#2)")
    h.modify("vllm/p2.py", "# changed\n")
    p2 = h.commit("[Core] Change p2 (#3)")
    h.rename("vllm/p3.py", "vllm/p3_new.py")
    p3 = h.commit("[Refactor] Rename p3 (#4)")
    h.delete("vllm/p4.py")
    p4 = h.commit("[Misc] Delete p4 (#5)")
    h.modify("README.md", "pin\n")
    pin = h.commit("[Doc] Pin (#6)")
    h.modify("vllm/p1.py", "# p1 changed after the pin\n")
    h.modify("vllm/entrypoints/openai/api_server.py", "# the routes changed after the pin\n")
    target = h.commit("[Core] Change p1 and the routes (#7)")
    marks = h.write(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", marks[target])
    return {k: marks[v] for k, v in (("c0", c0), ("c1", c1), ("p2", p2), ("p3", p3),
                                     ("p4", p4), ("pin", pin), ("target", target))}


def headers(c1: str) -> dict[str, str]:
    s = c1[:10]
    return {
        "src/p1.cpp": (f"// Ported from: vllm/p1.py @ {s}\n"
                       "// See include/p1.h for the scope.\nint a;\n"),
        "src/p2.cpp": f"// Ported from: vllm/p2.py @ {s}\nint b;\n",
        "src/p3.cpp": f"// Ported from: vllm/p3.py @ {s}\nint c;\n",
        "src/p4.cpp": f"// Ported from: vllm/p4.py @ {s}\nint d;\n",
        "src/p5.cpp": f"// Ported from: vllm/v1/p5.py @ {s}\nint e;\n",
        "src/k.cu": f"// Ported from: vllm/csrc/k.cu @ {s}\nint k;\n",
        "tests/t.cpp": f"// Ports vllm/tests/t/test_x.py @ {s}\nint t;\n",
        "src/api.h": (f"// Ported from: vllm/entrypoints/openai/api_server.py @ {s} (the route\n"
                      "// shapes) + the per-endpoint api_router modules\n"
                      "//   - completion/api_router.py:34    POST /v1/completions\nint x;\n"),
        "src/ggml.cpp": (f"// Ported from llama.cpp (local fork) ggml/src/ggml-cpu.c @ "
                         f"{LLAMA[:9]}\n// (b9892) — the upstream pin.\nint g;\n"),
        "src/lm.h": "// Ported from: lmcache/v1/protocol.py:23-321 @ LMCache 8570aad.\nint l;\n",
        "src/fa.cu": (f"// FA2 launcher, ported from vllm-project/flash-attention @ {FA}:\n"
                      "//   csrc/flash_attn/flash_api.cpp:30-147.\n"
                      "// Interface matched to vLLM (vllm/p2.py).\nint f;\n"),
        "src/mixed.cpp": (f"// Ported from: vllm/p1.py @ {s}.\n"
                          f"// Dispatch ported FROM llama.cpp `ggml/src/ggml-metal/` @ "
                          f"{LLAMA[:9]}.\nint m;\n"),
        "src/orig.cpp": (f"// vllm.cpp original (runtime). Semantics mirrored 1:1 from\n"
                         f"// vllm/p1.py @ {s}; see .agents/specs/x.md.\n"
                         "// Flipping it is wrong (a875397 lesson).\nint o;\n"),
    }


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    up = build_upstream(tmp_path / "vllm")
    root = tmp_path / "port"
    write(root, ".agents/upstream-sync.md", protocol_text(up["pin"]))
    write(root, ".agents/parity-ledger.md",
          "| Date / commit | What it does | Upstream equivalent | Parity status |\n"
          "|---|---|---|---|\n| 2026-07-01 `abc1234` | Port | vllm/p1.py | ok |\n")
    write(root, ".agents/specs/x.md", "spec\n")
    write(root, ".agents/upstream-sync.toml",
          '[surface]\nport_roots = ["src", "tests", "include"]\n')
    write(root, "include/p1.h", "// the port's own header\n")
    for rel, text in headers(up["c1"]).items():
        write(root, rel, text)
    monkeypatch.setenv("VLLM_SOURCE", str(tmp_path / "vllm"))
    return root, up


def audited(root: Path, pin: str) -> audit.Audit:
    p = port_mod.locate(str(root))
    ref = gitio.open_repo(Path(str(p.preferences().path("reference_checkout"))))
    return audit.run_audit(p, ref, pin, "origin/main", surface.build(p))


def test_behind_splits_by_content(case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    a = audited(root, up["pin"])
    assert a.control_ok
    status = {f.path: f.status for f in a.files}
    assert status == {
        "include/p1.h": "no-header",
        "src/p1.cpp": "behind-unchanged", "src/p2.cpp": "behind-changed",
        "src/p3.cpp": "path-gone", "src/p4.cpp": "path-gone", "src/p5.cpp": "path-gone",
        "src/k.cu": "behind-unchanged", "tests/t.cpp": "behind-unchanged",
        "src/api.h": "behind-unchanged", "src/ggml.cpp": "other-oracle",
        "src/lm.h": "other-oracle", "src/fa.cu": "other-oracle",
        "src/mixed.cpp": "behind-unchanged", "src/orig.cpp": "original"}
    detail = {f.path: [c.detail for c in f.cites] for f in a.files}
    assert detail["src/p2.cpp"] == [
        f"vllm/p2.py changed since {up['c1'][:10]} by 1 commit: `{up['p2'][:10]}`"]
    assert detail["src/p3.cpp"] == [
        f"vllm/p3.py was renamed to vllm/p3_new.py in `{up['p3'][:10]}`"]
    assert detail["src/p4.cpp"] == [f"vllm/p4.py was deleted in `{up['p4'][:10]}`"]
    assert detail["src/p5.cpp"] == [
        f"vllm/v1/p5.py is not in upstream at {up['c1'][:10]} nor at the pin: a wrong or "
        "relative path"]
    assert detail["src/ggml.cpp"] == [f"cites llama.cpp at {LLAMA[:9]} (not verified here)"]
    assert detail["src/lm.h"] == ["cites LMCache at 8570aad (not verified here)"]
    assert detail["src/fa.cu"] == [f"cites vllm-project/flash-attention at {FA} (not verified "
                                   "here)"]
    # The p1 change is noted in no row, but it changed nothing: only content findings remain.
    assert [f.path for f in a.findings] == ["src/p2.cpp", "src/p3.cpp", "src/p4.cpp",
                                            "src/p5.cpp"]


def test_prefixes_and_relative_paths_resolve(case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    by = {f.path: f for f in audited(root, up["pin"]).files}
    assert [c.content.path for c in by["src/k.cu"].cites if c.content] == ["csrc/k.cu"]
    assert [c.content.path for c in by["tests/t.cpp"].cites if c.content] == [
        "tests/t/test_x.py"]
    assert [c.content.path for c in by["src/api.h"].cites if c.content] == [
        "vllm/entrypoints/openai/api_server.py",
        "vllm/entrypoints/openai/completion/api_router.py"]


def test_audit_json_lists_references_and_no_vllm_not_upstream(
        case: tuple[Path, dict[str, str]]) -> None:
    root, _ = case
    r = run(root, "audit", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["counts"]["not-upstream"] == 0
    by = {f["path"]: f for f in doc["files"]}
    assert [c["path"] for c in by["src/p1.cpp"]["citations"]] == ["vllm/p1.py"]
    assert by["src/p1.cpp"]["references"] == [
        {"path": "include/p1.h", "line": 2, "kind": "mention", "why": "port-local"}]
    assert by["src/orig.cpp"]["references"] == [
        {"path": ".agents/specs/x.md", "line": 2, "kind": "mention", "why": "record"},
        {"path": "vllm/p1.py", "line": 2, "kind": "watched", "why": "original",
         "oracle": "vllm"}]
    assert by["src/fa.cu"]["references"] == [
        {"path": "vllm/p2.py", "line": 3, "kind": "mention", "why": "prose"}]
    mixed = [(c["path"], c["oracle"], c["sha"]) for c in by["src/mixed.cpp"]["citations"]]
    assert mixed == [("vllm/p1.py", "vllm", _c1(root)), ("ggml/src/ggml-metal/", "llama.cpp",
                                                         LLAMA[:9])]


def _c1(root: Path) -> str:
    return (root / "src/p1.cpp").read_text().split("@ ")[1].split()[0]


def test_mentions_and_watched_paths_never_make_port_now(
        case: tuple[Path, dict[str, str]]) -> None:
    root, _ = case
    surf = surface.build(port_mod.locate(str(root)))
    # fa.cu only mentions p2.py: a reference, and for the symbol pass an inline (whole-file)
    # cite it judges a mention, never PORT-NOW on its own; p2.cpp's header cites it.
    assert surf.references["vllm/p2.py"] == ("src/fa.cu",)
    assert {(c.port_file, c.source) for c in surf.cites["vllm/p2.py"]} == {
        ("src/p2.cpp", "header"), ("src/fa.cu", "inline")}
    assert "include/p1.h" not in surf.by_upstream
    assert "csrc/flash_attn/flash_api.cpp" not in surf.by_upstream  # not vLLM's csrc/
    assert surf.watched["vllm/p1.py"] == ("src/orig.cpp",)
    assert "src/orig.cpp" in surf.citing("vllm/p1.py")
    assert "src/orig.cpp" not in surf.by_upstream["vllm/p1.py"]


def test_bump_unchanged_moves_every_safe_header_at_once(
        case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    before = {rel: (root / rel).read_bytes() for rel in headers(up["c1"])}
    r = run(root, "bump-headers", "--unchanged")  # no cycle open: to the parity pin
    assert r.rc == 0, r.err
    bumped = {rel for rel in before if (root / rel).read_bytes() != before[rel]}
    assert bumped == {"src/p1.cpp", "src/k.cu", "tests/t.cpp", "src/api.h", "src/mixed.cpp"}
    for rel in bumped:
        want = before[rel].replace(up["c1"][:10].encode(), up["pin"][:10].encode())
        assert (root / rel).read_bytes() == want, rel
    assert LLAMA[:9].encode() in (root / "src/mixed.cpp").read_bytes()
    assert "skipped: src/p2.cpp:1: vllm/p2.py changed upstream since" in r.out
    assert "skipped: src/p3.cpp:1: the target" in r.out and "renamed it to vllm/p3_new.py" in r.out
    ported = len(headers(up["c1"])) - 1  # every file but the original one
    assert r.out.splitlines()[-1].startswith(f"{ported} file(s): 5 bumped")
    again = run(root, "bump-headers", "--unchanged")
    assert again.rc == 0 and "0 bumped" in again.out.splitlines()[-1]


def test_bump_unchanged_to_a_target_past_a_change_skips_that_file(
        case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    r = run(root, "bump-headers", "--unchanged", "--to", up["target"], "--check")
    assert r.rc == 0, r.err
    assert "skipped: src/p1.cpp:1: vllm/p1.py changed upstream since" in r.out
    assert f"src/k.cu:1: would bump vllm/csrc/k.cu {up['c1'][:10]} → {up['target'][:10]}" \
        in r.out
    assert (root / "src/k.cu").read_text().count(up["c1"][:10]) == 1  # --check wrote nothing


API = "vllm/entrypoints/openai/api_server.py"


def test_one_sha_pinning_several_paths_is_said_in_its_worst_state(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk17 A2: `src/api.h`'s one SHA pins api_server.py (changed up to the target) and,
    last, completion/api_router.py (unchanged): the change is named by the changed file and
    says so, in the text and the JSON, rather than showing the last path's state."""
    root, up = case
    old, new = up["c1"][:10], up["target"][:10]
    argv = ("bump-headers", "src/api.h", "--to", up["target"], "--check")
    r = run(root, *argv)
    assert r.rc == 0, r.err
    assert r.out.splitlines()[0] == (
        f"src/api.h:1: would bump {API} (+1 more cited at this SHA) {old} → {new} (against "
        f"the pin: behind-unchanged; changed up to the target: {API}, 1 of the 2 paths this SHA "
        "pins)")
    doc = json.loads(run(root, *argv, "--json").out)
    assert doc["files"][0]["changes"] == [{
        "line": 1, "path": API, "old": old, "new": new, "was": "behind-unchanged",
        "content": "changed", "paths": [API, "completion/api_router.py"], "changed": [API]}]
    # To the pin neither file changed: one change, named by the first path, unchanged.
    pinned = json.loads(run(root, "bump-headers", "src/api.h", "--to", up["pin"], "--check",
                            "--json").out)["files"][0]["changes"]
    assert [(c["path"], c["content"], c["changed"]) for c in pinned] == [(API, "unchanged", [])]
    # --unchanged tests every citation: the file is skipped for the changed one.
    r = run(root, "bump-headers", "src/api.h", "--unchanged", "--to", up["target"], "--check")
    assert r.rc == 0 and r.out.startswith(f"skipped: src/api.h:1: {API} changed upstream since")


def test_audits_bump_advice_moves_exactly_its_behind_unchanged_files(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk17 A4: with a cycle open past a change to p1.py and api_server.py, bare
    `--unchanged` (to the target) skips three of the five files audit calls behind-unchanged
    (identical at the pin); the command audit gives moves all five, to the pin."""
    root, up = case
    cycle.save(port_mod.locate(str(root)), up["pin"], up["target"], "origin/main")
    r = run(root, "audit")
    assert r.rc == 0, r.err
    command = f"upstream-sync bump-headers --unchanged --to {up['pin'][:10]}"
    assert ("- behind-unchanged: 5 file(s) cite a blob identical at the pin — safe to bump "
            f"to the pin with `{command}`") in r.out.splitlines()
    bare = run(root, "bump-headers", "--unchanged", "--check", "--json")
    assert {f["path"] for f in json.loads(bare.out)["files"] if f["status"] == "bump"} == {
        "src/k.cu", "tests/t.cpp"}
    behind = {f["path"] for f in json.loads(run(root, "audit", "--json").out)["files"]
              if f["status"] == "behind-unchanged"}
    before = {rel: (root / rel).read_bytes() for rel in headers(up["c1"])}
    done = run(root, *command.split()[1:])
    assert done.rc == 0, done.err
    assert {rel for rel in before if (root / rel).read_bytes() != before[rel]} == behind
    after = json.loads(run(root, "audit", "--json").out)
    assert after["counts"]["behind-unchanged"] == 0
    assert "behind-unchanged:" not in run(root, "audit").out


def test_bump_never_rewrites_another_oracles_sha(case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    r = run(root, "bump-headers", "src/ggml.cpp", "src/fa.cu", "--to", up["pin"])
    assert r.rc == 0, r.err
    assert LLAMA[:9] in (root / "src/ggml.cpp").read_text()
    assert FA in (root / "src/fa.cu").read_text()
    r = run(root, "bump-headers", "src/p3.cpp", "--to", up["pin"])
    assert r.rc == 6 and f"upstream renamed it to vllm/p3_new.py in {up['p3'][:10]}" in r.out


def test_a_file_citing_only_other_upstreams_is_not_said_to_be_at_the_target(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk17 A5: llama.cpp, LMCache and flash-attention citations are no vLLM SHA a bump
    moves; such a file says so, and "already at" stays for a file whose vLLM SHA is there."""
    root, up = case
    pin = up["pin"][:10]
    write(root, "src/at.cpp", f"// Ported from: vllm/p1.py @ {pin}\nint p;\n")
    files = ["src/ggml.cpp", "src/lm.h", "src/fa.cu", "src/at.cpp", "src/mixed.cpp"]
    r = run(root, "bump-headers", *files, "--to", up["pin"], "--check")
    assert r.rc == 0, r.err
    assert r.out.splitlines() == [
        "src/ggml.cpp: cites no vLLM SHA to move (only llama.cpp)",
        "src/lm.h: cites no vLLM SHA to move (only LMCache)",
        "src/fa.cu: cites no vLLM SHA to move (only vllm-project/flash-attention)",
        f"src/at.cpp: already at {pin}",
        f"src/mixed.cpp:1: would bump vllm/p1.py {up['c1'][:10]} → {pin} (against the pin: "
        "behind-unchanged)",
        f"5 file(s): 1 to bump, 1 already at {pin}, 3 citing no vLLM SHA to "
        "move, 0 skipped, 0 refused"]
    doc = json.loads(run(root, "bump-headers", *files, "--to", up["pin"], "--check",
                         "--json").out)
    assert [(f["path"], f["status"]) for f in doc["files"]] == [
        ("src/ggml.cpp", "other-oracle"), ("src/lm.h", "other-oracle"),
        ("src/fa.cu", "other-oracle"), ("src/at.cpp", "unchanged"), ("src/mixed.cpp", "bump")]


def test_git_processes_stay_constant(case: tuple[Path, dict[str, str]]) -> None:
    root, up = case

    def processes() -> int:
        before = gitio.PROCESS_COUNT
        audited(root, up["pin"])
        return gitio.PROCESS_COUNT - before

    few = processes()
    for i in range(30):
        write(root, f"src/more{i}.cpp", f"// Ported from: vllm/p{1 + i % 5}.py @ "
              f"{up['c1'][:10]}\nint m;\n")
    assert processes() == few


def test_other_oracle_shas_are_verified_against_its_checkout(
        case: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, up = case
    h = History()
    h.modify("ggml/src/ggml-cpu.c", "int x;\n")
    first = h.commit("llama.cpp (#1)")
    marks = h.write(tmp_path / "llama.cpp")
    sha = marks[first]
    write(root, "src/ggml.cpp", f"// Ported from llama.cpp (local fork) ggml/src/ggml-cpu.c @ "
          f"{sha[:9]}\nint g;\n")
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS", f"llama.cpp={tmp_path / 'llama.cpp'}")
    by = {f.path: f for f in audited(root, up["pin"]).files}
    assert [c.detail for c in by["src/ggml.cpp"].cites] == [
        f"cites llama.cpp at {sha[:9]} (a commit of its checkout)"]
    assert [c.detail for c in by["src/lm.h"].cites] == [
        "cites LMCache at 8570aad (not verified here)"]
    write(root, "src/ggml.cpp", "// Ported from llama.cpp (local fork) ggml/src/ggml-cpu.c @ "
          "1234567ab\nint g;\n")
    by = {f.path: f for f in audited(root, up["pin"]).files}
    assert [c.detail for c in by["src/ggml.cpp"].cites] == [
        "cites llama.cpp at 1234567ab, which is NOT a commit of its checkout"]


def test_an_unusable_oracle_checkout_is_warned_of_with_where_it_came_from(
        case: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s13 U3: a configured checkout that is missing or not git was swallowed: audit
    said "(not verified here)" exactly as with none configured. Audit, check and sync warn
    once per such checkout, naming the oracle, the path and where the value came from."""
    root, up = case
    gone = tmp_path / "nonexist-llama"
    prefs = root / ".agents/developer-preferences.md"
    write(root, ".agents/developer-preferences.md",
          f"```sync-preferences\noracle_checkouts = llama.cpp={gone}\n```\n")
    said = (f"llama.cpp checkout {gone} does not exist (oracle_checkouts in {prefs}), so the "
            "SHAs the port cites llama.cpp at are not verified — point its entry there at a "
            "clone of llama.cpp's upstream, or remove the entry")
    r = run(root, "audit")
    assert r.rc == 0, r.err
    assert [ln for ln in r.out.splitlines() if "llama.cpp checkout" in ln] == [
        f"warning: {said}"]
    assert json.loads(run(root, "audit", "--json").out)["unusable_checkouts"] == [said]
    for argv in (("check",), ("sync",)):
        r = run(root, *argv)
        assert [ln for ln in r.out.splitlines() + r.err.splitlines()
                if "llama.cpp checkout" in ln] == [f"warning: {said}"], (argv, r.err)
    # sync --json printed it on stderr only (walk: a machine reading stdout never saw it);
    # the report's own JSON does not depend on this machine's checkouts.
    r = run(root, "sync", "--json")
    doc = json.loads(r.out)
    assert r.rc == 0 and doc["unusable_checkouts"] == [said], r.err
    written = json.loads((root / doc["report"]).with_suffix(".json").read_text(encoding="utf-8"))
    assert "unusable_checkouts" not in written and "llama.cpp checkout" not in json.dumps(written)
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS", f"llama.cpp={tmp_path}")  # wins over the file
    assert audited(root, up["pin"]).unusable_checkouts == (
        f"llama.cpp checkout {tmp_path} is not a git repository (env SYNC_ORACLE_CHECKOUTS), "
        "so the SHAs the port cites llama.cpp at are not verified — point its entry there at "
        "a clone of llama.cpp's upstream, or remove the entry",)


def test_an_unusable_checkout_is_in_the_document_with_nothing_to_sync(
        case: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """h2: `sync --json` with nothing to sync (target == pin) had no `unusable_checkouts`
    and warned of none: the checkouts are this machine's whatever the range."""
    root, up = case
    gone = tmp_path / "nonexist-llama"
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS", f"llama.cpp={gone}")
    said = (f"llama.cpp checkout {gone} does not exist (env SYNC_ORACLE_CHECKOUTS), so the "
            "SHAs the port cites llama.cpp at are not verified — point its entry there at a "
            "clone of llama.cpp's upstream, or remove the entry")
    r = run(root, "sync", "--target", up["pin"], "--json")
    doc = json.loads(r.out)
    assert r.rc == 0 and doc["nothing_to_sync"] is True, r.err
    assert doc["unusable_checkouts"] == [said]
    assert r.err.splitlines() == [f"warning: {said}"]
    r = run(root, "sync")  # the cycle is frozen at the pin: the text warns too
    assert r.out.startswith("nothing to sync") and r.err.splitlines() == [f"warning: {said}"]


def test_an_unusable_checkout_no_header_needs_is_worded_by_its_id(
        case: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout configured under an id no header cites (a typo, or an entry left over) was
    refused as a checkout to fix, as if its SHAs went unverified: there are none; the id is
    what to look at, beside the ids the headers do cite."""
    root, up = case
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS",
                       f"llamacpp={tmp_path / 'gone'}, llama.cpp={tmp_path / 'gone'}")
    said = ("no header cites llamacpp: nothing to verify against its checkout (the headers "
            "cite llama.cpp, LMCache, vllm-project/flash-attention) — correct the id in env "
            "SYNC_ORACLE_CHECKOUTS if it is a typo, or remove the entry")
    cited = (f"llama.cpp checkout {tmp_path / 'gone'} does not exist (env "
             "SYNC_ORACLE_CHECKOUTS), so the SHAs the port cites llama.cpp at are not verified "
             "— point its entry there at a clone of llama.cpp's upstream, or remove the entry")
    assert audited(root, up["pin"]).unusable_checkouts == (cited, said)
    r = run(root, "audit")
    assert r.rc == 0 and f"warning: {said}" in r.out.splitlines(), r.err
    # A checkout that opens is no better under such an id: it was taken in silence.
    h = History()
    h.modify("ggml/src/ggml-cpu.c", "int x;\n")
    h.commit("llama.cpp (#1)")
    h.write(tmp_path / "llama.cpp")
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS", f"llamacpp={tmp_path / 'llama.cpp'}")
    assert audited(root, up["pin"]).unusable_checkouts == (said,)
    monkeypatch.setenv("SYNC_ORACLE_CHECKOUTS", f"diffusers={tmp_path / 'gone'}")
    for rel in ("src/ggml.cpp", "src/lm.h", "src/fa.cu", "src/mixed.cpp"):
        (root / rel).unlink()
    assert audited(root, up["pin"]).unusable_checkouts == (
        "no header cites diffusers: nothing to verify against its checkout (the headers cite "
        "no other oracle) — correct the id in env SYNC_ORACLE_CHECKOUTS if it is a typo, or "
        "remove the entry",)


def test_an_unreadable_ledger_leaves_ledger_notes_unknown(
        case: tuple[Path, dict[str, str]]) -> None:
    root, up = case
    (root / ".agents/parity-ledger.md").write_text("# Ledger\n\nthe table was lost\n")
    a = audited(root, up["pin"])
    by = {f.path: f for f in a.files}
    assert by["src/p2.cpp"].noted is None and by["src/p2.cpp"].finding
    lines = audit.summary_lines(a).lines
    assert lines[1].startswith("- the parity ledger .agents/parity-ledger.md cannot be read "
                               "(no ledger table with columns")
    assert lines[1].endswith("ledger notes were not checked — fix the ledger (upstream-sync "
                             "check names the problem)")
    assert any(ln.endswith("; ledger note: unknown (ledger unreadable)") for ln in lines)


def test_watched_paths_changed_in_the_range_are_listed() -> None:
    from sync.steps import syncrun
    from sync.upstream.history import Change, Commit

    surf = surface.Surface({}, {}, ("vllm/",), watched={"vllm/p1.py": ("src/orig.cpp",)})
    commits = [Commit("a" * 40, (), "x", "d", "s", "", (Change("M", "vllm/p1.py"),)),
               Commit("b" * 40, (), "x", "d", "s", "", (Change("M", "vllm/p9.py"),))]
    assert syncrun.watched_lines(commits, surf) == (
        f"- watched `vllm/p1.py` changed in `{'a' * 10}`; the original file(s) src/orig.cpp "
        "mirror its semantics",)


def test_bumping_every_file_refuses_one_whose_cited_file_changed(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk17 A3: a header says its file is ported up to its SHA. Unnamed (every ported
    file), a file whose cited upstream file changed is refused, nothing written; named, it
    is the maintainer's word that the change is ported, and it is bumped."""
    root, up = case
    before = {rel: (root / rel).read_bytes() for rel in headers(up["c1"])}
    r = run(root, "bump-headers", "--to", up["target"])
    assert r.rc == 6
    assert (f"refused: src/p1.cpp:1: vllm/p1.py changed upstream since {up['c1'][:10]}: a "
            "bump would say the change is ported") in r.out
    # The safe part of "every file" is one option away, and the error says so (walk-s3 U1).
    m = re.search(r"file\(s\): (\d+) to bump", r.out)
    assert m is not None and int(m[1]) > 1
    assert (f"or bump the {m[1]} safe ones alone with 'upstream-sync bump-headers --unchanged'"
            ) in r.err
    assert {rel: (root / rel).read_bytes() for rel in before} == before
    named = run(root, "bump-headers", "src/p1.cpp", "--to", up["target"])
    assert named.rc == 0, named.err
    assert up["target"][:10] in (root / "src/p1.cpp").read_text()


def test_a_vllm_citation_with_no_sha_pins_nothing_and_says_so(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk17 A10: a ported file citing vLLM with no SHA was counted no-header, silently; it
    is no-sha, listed, a check warning, and bump-headers refuses it for the same reason."""
    root, up = case
    write(root, "src/bare.cpp", "// Ported from: vllm/p1.py (the sampler)\nint bare;\n")
    doc = json.loads(run(root, "audit", "--json").out)
    (bare,) = [f for f in doc["files"] if f["path"] == "src/bare.cpp"]
    assert (bare["status"], bare["finding"]) == ("no-sha", False)
    assert doc["counts"]["no-sha"] == 1
    said = run(root, "audit").out
    assert "- `src/bare.cpp` no-sha: vllm/p1.py is cited with no SHA" in said.splitlines()
    warned = ("warning: src/bare.cpp:1: the header cites vllm/p1.py with no SHA, so it pins "
              "nothing — add '@ <sha>' (the upstream commit the file was ported from) to the "
              "citation")
    check = run(root, "check")
    assert warned in check.out.splitlines(), check.out
    # audit warns of it as check does (the real case: check said 23 such lines, audit none).
    assert [ln for ln in said.splitlines() if "with no SHA, so it pins nothing" in ln] == [warned]
    assert doc["no_sha"] == [warned.removeprefix("warning: ")]
    bump = run(root, "bump-headers", "src/bare.cpp", "--to", up["pin"])
    assert bump.rc != 0 and "has no SHA to rewrite" in bump.out + bump.err


def test_a_bare_citation_of_a_path_vllm_lacks_says_what_it_is_instead(
        case: tuple[Path, dict[str, str]]) -> None:
    """A path cited with no SHA that the pin does not have: under a folder vLLM has not
    (ATen's `aten/`: another project's), check says how to attribute it, not only to add a
    SHA; under one it has (moved since), it names the pin's files of that name."""
    root, _up = case
    write(root, "src/norm.cpp", "// Ported FROM: ATen `native_layer_norm`\n//   "
          "(aten/src/ATen/native/layer_norm.cpp), what vllm/sub/p1.py calls\nint n;\n")
    said = run(root, "audit").out
    assert ("- `src/norm.cpp` no-sha: aten/src/ATen/native/layer_norm.cpp is cited with no "
            "SHA and is not in upstream at the pin; vllm/sub/p1.py is cited with no SHA and is "
            "not in upstream at the pin") in said.splitlines()
    check = run(root, "check")
    assert ("warning: src/norm.cpp:2: the header cites aten/src/ATen/native/layer_norm.cpp, "
            "vllm/sub/p1.py with no SHA, so it pins nothing — add '@ <sha>' (the upstream "
            "commit the file was ported from) to the citation; vLLM has no aten/ at the pin: "
            "if aten/src/ATen/native/layer_norm.cpp is another project's, attribute it with "
            '[oracles.<id>] paths = ["aten/"] in the configuration instead; vllm/sub/p1.py is '
            "not in upstream at the pin either (the pin has vllm/p1.py)"
            ) in check.out + check.err


def test_files_bumped_to_the_open_cycles_target_are_one_line(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk-s3 U2: after `bump-headers` moves ported files to the cycle's target, each was
    listed as "ahead of the pin": expected until the advance, so counted on one line. With
    no cycle open, a file ahead of the pin is listed as before."""
    root, up = case
    write(root, "src/at_target.cpp", f"// Ported from: vllm/p1.py @ {up['target'][:10]}\nint t;\n")
    write(root, "src/bumped.cpp", f"// Ported from: vllm/p2.py @ {up['target'][:10]}\nint b;\n")
    before = run(root, "audit").out.splitlines()
    assert f"- `src/bumped.cpp` ahead: {up['target'][:10]} is ahead of the pin" in before
    assert run(root, "sync", "--target", up["target"]).rc == 0
    said = run(root, "audit").out.splitlines()
    assert (f"- ahead: 2 file(s) cite the open cycle's target `{up['target'][:10]}` (bumped "
            "during this cycle; the advance makes it the pin)") in said
    assert not [line for line in said if line.startswith(("- `src/at_target.cpp`",
                                                          "- `src/bumped.cpp`"))]
    doc = json.loads(run(root, "audit", "--json").out)
    assert {f["path"]: f["status"] for f in doc["files"]
            if f["path"].startswith("src/")}["src/bumped.cpp"] == "ahead"


def test_a_path_no_tree_has_names_its_namesakes(case: tuple[Path, dict[str, str]]) -> None:
    """walk17 B16: a cited path in a wrong directory is path-gone, and says which files of
    its name the pin (or the target, for a bump) has, the likely meant one among them."""
    root, up = case
    write(root, "src/sub.cpp", f"// Ported from: vllm/sub/p1.py @ {up['c1'][:10]}\nint s;\n")
    said = run(root, "audit").out
    assert (f"- `src/sub.cpp` path-gone: vllm/sub/p1.py is not in upstream at {up['c1'][:10]} "
            "nor at the pin: a wrong or relative path (the pin has vllm/p1.py)") in said
    bump = run(root, "bump-headers", "src/sub.cpp", "--to", up["target"], "--check")
    assert "does not resolve; the target has vllm/p1.py)" in bump.out
    # A name no file of the pin has gets no hint.
    assert "(the pin has" not in run(root, "audit").out.split("src/p5.cpp", 1)[1].split("\n")[0]


def test_check_warns_of_a_ported_file_that_is_not_utf8(
        case: tuple[Path, dict[str, str]]) -> None:
    """walk-s4 U8: such a file passed sync, check and audit (read with replacement
    characters) and was refused only by bump-headers, mid-cycle."""
    root, up = case
    (root / "src/latin1.cpp").write_bytes(
        f"// Ported from: vllm/p1.py @ {up['c1'][:10]}\n// (caf\xe9)\nint l;\n".encode("latin-1"))
    r = run(root, "check")
    # Located at the first bad byte as a record's refusal is, and as bump-headers refuses it.
    where = "src/latin1.cpp:2: is not UTF-8 (byte 0xe9 at column 8, offset 47)"
    assert (f"warning: {where}, so bump-headers will refuse to rewrite its header — re-save it "
            "as UTF-8") in r.out.splitlines(), r.out
    assert "src/p1.cpp:" not in r.out + r.err
    bump = run(root, "bump-headers", "src/latin1.cpp", "--to", up["pin"], "--check")
    assert f"{where} — re-save it as UTF-8" in bump.out + bump.err, bump.out + bump.err
    # walk-s11 U6: a bad byte inside "Ported from" leaves no header: the file dropped out
    # of the surface in silence.
    (root / "src/latin1.cpp").write_bytes(
        f"// The cache.\n// Ported \xff from: vllm/p1.py @ {up['c1'][:10]}\nint l;\n".encode(
            "latin-1"))
    r = run(root, "check")
    assert ("warning: src/latin1.cpp:2: is not UTF-8 (byte 0xff at column 11, offset 24), and "
            "holds no header that could be read (a byte inside 'Ported from' hides one) — "
            "re-save it as UTF-8") in r.out.splitlines(), r.out


@pytest.mark.parametrize(("text", "said"), [
    ("// Ported from: vllm/p1.py @ {c1}\n// (caf\xe9)\nint l;\n",
     "src/latin1.cpp:2: is not UTF-8 (byte 0xe9 at column 8, offset 47), so bump-headers will "
     "refuse to rewrite its header — re-save it as UTF-8"),
    ("// The cache.\n// Ported \xff from: vllm/p1.py @ {c1}\nint l;\n",
     "src/latin1.cpp:2: is not UTF-8 (byte 0xff at column 11, offset 24), and holds no header "
     "that could be read (a byte inside 'Ported from' hides one) — re-save it as UTF-8")])
def test_audit_warns_of_a_file_that_is_not_utf8_as_check_does(
        case: tuple[Path, dict[str, str]], text: str, said: str) -> None:
    """h2: check warned of such a file, audit (the per-file pin audit itself) said nothing:
    the same line in the text, and in the JSON as its other warnings are (`no_sha`)."""
    root, up = case
    (root / "src/latin1.cpp").write_bytes(text.format(c1=up["c1"][:10]).encode("latin-1"))
    warned = f"warning: {said}"
    assert warned in run(root, "check").out.splitlines()
    r = run(root, "audit")
    assert r.rc == 0 and [ln for ln in r.out.splitlines() if "UTF-8" in ln] == [warned], r.out
    doc = json.loads(run(root, "audit", "--json").out)
    assert doc["not_utf8"] == [said]
    # A clean tree's document has the key too, empty.
    (root / "src/latin1.cpp").write_text(text.format(c1=up["c1"][:10]), encoding="utf-8")
    assert json.loads(run(root, "audit", "--json").out)["not_utf8"] == []


@pytest.mark.parametrize("how", ["no reference checkout", "--no-audit", "audited"])
def test_check_warns_of_a_file_that_is_not_utf8_once_with_or_without_its_audit(
        case: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """h2: the warning came only from the per-file pin audit, so a CI with no reference
    checkout (the audit skipped) said nothing of such a file. It needs no checkout: the
    same line every way, once, in the text and the JSON."""
    root, up = case
    if how == "no reference checkout":
        monkeypatch.delenv("VLLM_SOURCE")
    (root / "src/latin1.cpp").write_bytes(
        f"// Ported from: vllm/p1.py @ {up['c1'][:10]}\n// (caf\xe9)\nint l;\n".encode("latin-1"))
    said = ("src/latin1.cpp:2: is not UTF-8 (byte 0xe9 at column 8, offset 47), so "
            "bump-headers will refuse to rewrite its header — re-save it as UTF-8")
    flags = ["--no-audit"] if how == "--no-audit" else []
    r = run(root, "check", *flags)
    assert [ln for ln in r.out.splitlines() if "UTF-8" in ln] == [f"warning: {said}"], r.out
    assert ("per-file pin audit skipped" in r.err) == (how == "no reference checkout")
    doc = json.loads(run(root, "check", "--json", *flags).out)
    assert [w for w in doc["warnings"] if "UTF-8" in w] == [said]


@pytest.mark.parametrize("action", ["probe", "verify"])
def test_an_unknown_oracle_id_is_named_before_a_missing_oracle_home(
        case: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """walk-s4 U4: with no oracle_home, `oracle probe --oracle nosuch` said to set it first;
    the id is the mistake (and the same as with one set)."""
    root, _up = case
    monkeypatch.delenv("SYNC_ORACLE_HOME", raising=False)
    r = run(root, "oracle", action, "--oracle", "nosuch")
    assert r.rc == 2 and "no oracle file declares id 'nosuch'" in r.err


def test_a_cited_folder_that_changed_names_the_commits_that_changed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s6b D6: a folder's tree changes with any file under it; the commits since are
    those that changed a file there (it said "changed ... by 0 commits:")."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    h = History()
    h.modify("vllm/parser/engine/a.py", "x = 1\n")
    h.modify("vllm/parser/other.py", "y = 1\n")
    cited_at = h.commit("Initial (#1)")
    h.modify("vllm/parser/engine/a.py", "x = 2\n")
    one = h.commit("[Parser] Change a (#2)")
    h.modify("vllm/parser/other.py", "y = 2\n")
    h.commit("[Parser] Change the sibling (#3)")
    h.modify("vllm/parser/engine/b.py", "z = 1\n")
    two = h.commit("[Parser] Add b (#4)")
    marks = h.write(tmp_path / "vllm")
    ref = gitio.open_repo(tmp_path / "vllm")
    cited = verify.Cited(marks[cited_at], "vllm/parser/engine/")
    got = verify.content(ref, marks[two], [cited])[cited]
    assert (got.kind, got.since) == ("changed", (marks[one], marks[two]))
