from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stepfixture import (
    INVENTORY,
    LEDGER,
    World,
    make_world,
    protocol_text,
    run,
    with_port_cmd,
    write,
)

from sync import port
from sync.dev.fastimport import History, git
from sync.infra.errors import MalformedRecord
from sync.steps import queue as workqueue
from sync.upstream import gitio

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    w = make_world(tmp_path, monkeypatch)
    r = run(w.root, "sync", "--target", w.up.target)
    assert r.rc == 0, r.err
    return w


def test_queue_json(world: World) -> None:
    up = world.up
    r = run(world.root, "queue", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["pin"] == up.pin and doc["target"] == up.target
    assert doc["report"].startswith(".agents/sync/") and doc["report"].endswith(
        f"-{up.target[:7]}.md")
    items = doc["items"]
    # Upstream order; only PORT-NOW (vllm#14 adds a model, vllm#13 deletes a cited file).
    assert [(i["index"], i["sha"], i["pr"]) for i in items] == [
        (1, up.a_again, 12), (2, up.target, 15)]
    first = items[0]
    assert first["port_files"] == ["src/a.cpp", "src/hot.cpp", "src/pr.cpp"]
    assert first["pins"] == [
        {"port_file": "src/a.cpp", "upstream_path": "vllm/a.py", "sha": up.older[:10],
         "status": "behind"},
        {"port_file": "src/hot.cpp", "upstream_path": "vllm/a.py", "sha": up.beyond[:12],
         "status": "ahead"},
        {"port_file": "src/pr.cpp", "upstream_path": "vllm/a.py", "sha": up.pr_head[:10],
         "status": "not-upstream"},
    ]
    # The commit's own diff, not the drift since each file pin: its definitions marked, the
    # ones a citation hits with the port files that cite them (here: cite the file whole).
    assert first["commit_diffs"] == [{
        "upstream_path": "vllm/a.py", "new_path": None, "insertions": 2, "deletions": 1,
        "binary": False, "command": f"git show {up.a_again[:12]} -M -- vllm/a.py",
        "definitions": [
            {"name": "a", "change": "modified", "cited_by": [],
             "whole_by": ["src/a.cpp", "src/hot.cpp", "src/pr.cpp"]},
            {"name": "extra", "change": "added", "cited_by": [], "whole_by": []}],
        "hunks": [{"old": "1", "new": "1-2", "definitions": [
            "a (modified; its file cited whole by src/a.cpp, src/hot.cpp, src/pr.cpp)",
            "extra (added)"]}],
    }]
    assert first["diffs"] == []  # the drift is the second view: --drift
    last = items[1]
    assert [(d["upstream_path"], d["insertions"], d["deletions"])
            for d in last["commit_diffs"]] == [("vllm/b.py", 1, 1), ("vllm/c.py", 1, 1)]
    assert not any(i["ledgered"] for i in items)
    assert all(i["patch"] is None for i in items)


def test_a_definition_cited_by_name_is_told_from_one_whose_file_is_cited_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """walk-s12 O3: `*` and "cited by" marked every changed definition of a file cited
    whole, so a citation of the definition itself could not be told from it."""
    w = make_world(tmp_path, monkeypatch)
    write(w.root, "src/named.cpp", f"// Ported from: vllm/a.py::a @ {w.up.older[:10]}\n\nint n;\n")
    assert run(w.root, "sync", "--target", w.up.target).rc == 0
    r = run(w.root, "queue")
    assert r.rc == 0, r.err
    assert ("     * a (modified; cited by src/named.cpp; its file cited whole by src/a.cpp, "
            "src/hot.cpp, src/pr.cpp)") in r.out.splitlines()
    assert "       extra (added)" in r.out.splitlines()
    first = json.loads(run(w.root, "queue", "--json").out)["items"][0]
    assert first["commit_diffs"][0]["definitions"][0] == {
        "name": "a", "change": "modified", "cited_by": ["src/named.cpp"],
        "whole_by": ["src/a.cpp", "src/hot.cpp", "src/pr.cpp"]}


def test_queue_drift_view(world: World) -> None:
    up = world.up
    doc = json.loads(run(world.root, "queue", "--json", "--drift").out)
    first, last = doc["items"]
    assert first["diffs"][0] == {
        "upstream_path": "vllm/a.py", "base": up.older, "base_from": f"file pin {up.older[:10]}",
        "insertions": 2, "deletions": 1, "binary": False,
        "command": f"git diff {up.older[:12]}..{up.target[:12]} -- vllm/a.py",
        "new_path": None, "renamed_before_pin": False}
    assert [d["base"] for d in first["diffs"]] == [up.older, up.beyond, up.pr_head]
    assert [(d["upstream_path"], d["base"]) for d in last["diffs"]] == [
        ("vllm/b.py", up.pin), ("vllm/c.py", up.pin), ("vllm/c.py", up.older)]
    assert [d["insertions"] for d in last["diffs"]] == [1, 1, 1]


def test_queue_numbers_match_git(world: World) -> None:
    ref = gitio.open_repo(world.up.repo)
    q = workqueue.build(world.port, ref, "origin/main", drift=True)
    for item in q.items:
        for d in item.diffs:
            out = git(world.up.repo, "diff", "--numstat", d.base, world.up.target, "--",
                      d.upstream_path).split()
            assert (d.insertions, d.deletions) == (int(out[0]), int(out[1]))
        for own in item.own:
            out = git(world.up.repo, "show", "--format=", "--numstat", "-M", item.entry.sha,
                      "--", own.upstream_path).split()
            assert (own.insertions, own.deletions) == (int(out[0]), int(out[1]))


def test_queue_text_golden(world: World) -> None:
    up = world.up
    r = run(world.root, "queue")
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[1] == f"1. `{up.a_again[:10]}` vllm#12 [Core] Change a again (#12) [open]"
    assert lines[2] == f"   src/a.cpp: vllm/a.py @ {up.older[:10]} (behind)"
    assert lines[5:8] == [
        f"   git show {up.a_again[:12]} -M -- vllm/a.py   (+2 -1)",
        "       a (modified; its file cited whole by src/a.cpp, src/hot.cpp, src/pr.cpp)",
        "       extra (added)"]
    drift = run(world.root, "queue", "--drift").out.splitlines()
    assert drift[8] == (f"   drift: git diff {up.older[:12]}..{up.target[:12]} -- vllm/a.py   "
                        f"(+2 -1; from the file pin {up.older[:10]})")


def test_queue_patch_files(world: World, tmp_path: Path) -> None:
    up = world.up
    out = tmp_path / "patches"
    r = run(world.root, "queue", "--patch", str(out), "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"001-{up.a_again[:10]}-vllm12.patch", f"002-{up.target[:10]}-vllm15.patch"]
    assert "is inside the port" not in r.err
    assert doc["items"][0]["patch"] == str(out / names[0])
    text = (out / names[0]).read_text()
    assert text.startswith(f"# 1. {up.a_again} vllm#12 [Core] Change a again (#12)\n"
                           f"# git show {up.a_again[:12]} -M -- vllm/a.py\n"
                           "#   vllm/a.py: a (modified; its file cited whole by src/a.cpp, "
                           "src/hot.cpp, src/pr.cpp)\n")
    assert text.count("diff --git a/vllm/a.py b/vllm/a.py") == 1
    assert "@@ -1 +1,2 @@  [a (modified; its file cited whole by" in text
    assert "+extra = True" in text
    # The patch is the commit's own diff, marks and all: it applies to the commit's parent.
    work = tmp_path / "wt"
    git(up.repo, "worktree", "add", "-q", "--detach", str(work), up.pin)
    git(work, "apply", "--check", input=text[text.index("diff --git"):].encode())
    # --drift writes the cumulative view beside it.
    r = run(world.root, "queue", "--patch", str(out), "--drift")
    assert r.rc == 0, r.err
    drift = (out / f"001-{up.a_again[:10]}-vllm12-drift.patch").read_text()
    assert drift.count("diff --git a/vllm/a.py b/vllm/a.py") == 3
    # Without --drift, and with an earlier queue's patch, DIR holds this queue's patches
    # only; files of other names are the maintainer's and stay.
    stale = out / f"003-{'0' * 10}-vllm99.patch"
    stale.write_text("# an earlier queue's item\n")
    (out / "notes.patch").write_text("mine\n")
    (out / "001-mine.patch").write_text("mine\n")
    r = run(world.root, "queue", "--patch", str(out))
    assert r.rc == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "notes.patch",
                                                            "001-mine.patch"])
    assert "removed 3 patch file(s) an earlier run left in" in r.out + r.err


def test_queue_marks_ledgered_items(world: World) -> None:
    (report,) = (world.root / ".agents/sync").glob("*.md")
    assert "- PORT-NOW open: " in report.read_text() and "vllm#12 (no ledger row yet)" in \
        report.read_text()
    r = run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "port a", "--pr", "12",
            "--status", "ok")
    assert r.rc == 0, r.err
    # The report's carry-over reads the ledger: the row closes the item there at once.
    assert f"(report {world.root.name}" not in r.out and "(report .agents/sync/" in r.out
    assert "vllm#12 (no ledger row yet)" not in report.read_text()
    doc = json.loads(run(world.root, "queue", "--json").out)
    assert [i["ledgered"] for i in doc["items"]] == [True, False]


def test_queue_after_bump_diffs_from_the_target(world: World) -> None:
    assert run(world.root, "bump-headers", "src/a.cpp").rc == 0
    doc = json.loads(run(world.root, "queue", "--json", "--drift").out)
    d = doc["items"][0]["diffs"][0]
    assert d["base"] == world.up.target and (d["insertions"], d["deletions"]) == (0, 0)
    assert doc["items"][0]["pins"][0]["status"] == "ahead"


def test_queue_missing_port_file_and_unknown_pin(world: World) -> None:
    (world.root / "src/c.cpp").unlink()
    write(world.root, "src/pr.cpp", "// Ported from: vllm/a.py @ 0123abcd\n")
    r = run(world.root, "queue", "--json", "--drift")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert {"port_file": "src/c.cpp", "upstream_path": "vllm/c.py", "sha": None,
            "status": "missing file"} in doc["items"][1]["pins"]
    assert doc["items"][0]["diffs"][2]["base_from"] == "parity pin"
    assert any("0123abcd is not a commit" in n for n in doc["notes"])
    assert "note: src/pr.cpp:1: cited SHA 0123abcd" in r.err


def test_queue_refuses_without_or_with_a_stale_report(world: World, tmp_path: Path) -> None:
    jpath = next((world.root / ".agents/sync").glob("*.json"))
    doc = json.loads(jpath.read_text())
    doc["target"] = world.up.delete
    jpath.write_text(json.dumps(doc))
    r = run(world.root, "queue")
    assert r.rc == 2 and "run 'upstream-sync sync' again" in r.err
    jpath.write_text("{not json")
    r = run(world.root, "queue")
    assert r.rc == 4 and "not valid JSON" in r.err
    jpath.unlink()
    r = run(world.root, "queue")
    assert r.rc == 2 and "does not exist" in r.err
    (tmp_path / "afile").write_text("x")
    r = run(world.root, "queue", "--patch", str(tmp_path / "afile"))
    assert r.rc == 2 and "is not a directory" in r.err


def test_queue_patch_refuses_a_directory_it_cannot_make_or_write(world: World,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    # Below a regular file: mkdir fails. /proc: a directory no one can create files in (not
    # even root, whom permission bits would not stop). Both one line, exit 2, never exit 1.
    cases = [(tmp_path / "afile" / "sub", "cannot be created")]
    if Path("/proc/self").is_dir():
        cases += [(Path("/proc/nope"), "cannot be created"),
                  (Path("/proc"), "--patch /proc: cannot write 001-")]
    for target, says in cases:
        r = run(world.root, "queue", "--patch", str(target))
        assert r.rc == 2, (target, r.err)
        assert says in r.err and "— give a directory you can write" in r.err, r.err
        assert "internal error" not in r.err and len(r.err.strip().splitlines()) == 1
        assert ".tmp" not in r.err  # the patch's name, not the atomic write's temporary file


def test_queue_needs_an_open_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = make_world(tmp_path, monkeypatch)
    r = run(w.root, "queue")
    assert r.rc == 2 and "no sync cycle is open" in r.err


def test_git_processes_do_not_depend_on_item_count(world: World) -> None:
    ref = gitio.open_repo(world.up.repo)
    start = gitio.PROCESS_COUNT
    workqueue.build(world.port, ref, "origin/main")
    # the range's ends (1) + classify (3) + resolve (1) + one patch listing for every
    # item's own diff.
    assert gitio.PROCESS_COUNT - start == 6
    start = gitio.PROCESS_COUNT
    q = workqueue.build(world.port, ref, "origin/main", drift=True)
    bases = {d.base for it in q.items for d in it.diffs}
    # ...and the drift: one numstat per distinct base commit, and one look-up of the paths
    # file pins behind the parity pin cite, for those neither it nor the target has (a
    # header that lagged while upstream renamed its file).
    assert gitio.PROCESS_COUNT - start == 6 + len(bases) + 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["pin", "target", "entries", "sha", "pr", "subject", "disposition",
                         "reason", "rule", "upstream_paths", "port_files"]), inner, max_size=8),
    max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(_JSON)
def test_report_json_reader_only_refuses(doc: object) -> None:
    try:
        pin, target, entries = workqueue.entries_from_json(json.dumps(doc), path="r.json")
    except MalformedRecord:
        return
    assert isinstance(pin, str) and isinstance(target, str)
    assert all(len(e.sha) >= 7 for e in entries)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_report_json_reader_random_text(text: str) -> None:
    with contextlib.suppress(MalformedRecord):
        workqueue.entries_from_json(text, path="r.json")


# -- the bundled example ----------------------------------------------------------------------


def test_example_port_step5(tmp_path: Path) -> None:
    from sync.dev import example
    from sync.infra.atomic import read_text

    examples = Path(__file__).resolve().parents[1] / "examples"
    root = example.build(tmp_path / "ex", examples)
    assert run(root, "sync").rc == 0
    doc = json.loads(run(root, "queue", "--json").out)
    items = doc["items"]
    assert items and all(i["commit_diffs"] for i in items)
    ported = [i for i in items if i["pins"] and all(p["status"] == "at-pin" for p in i["pins"])]
    item = ported[0]
    files = sorted({p["port_file"] for p in item["pins"]})
    before = {f: read_text(root / f) for f in files}
    r = run(root, "bump-headers", *files)
    assert r.rc == 0, r.out + r.err
    for f in files:
        after = read_text(root / f)
        assert after != before[f] and len(after.splitlines()) == len(before[f].splitlines())
    r = run(root, "ledger", "add", "--commit", "abc1234", "--what", "port it", "--pr",
            str(item["pr"]), "--status", "✅ goldens")
    assert r.rc == 0, r.err
    again = json.loads(run(root, "queue", "--json", "--drift").out)["items"]
    mine = next(i for i in again if i["sha"] == item["sha"])
    assert mine["ledgered"] is True
    assert mine["diffs"] and all(d["base"] == doc["target"] for d in mine["diffs"])


def test_queue_patch_inside_the_port_warns(world: World) -> None:
    """walk-s3 D10: patches written into the port's tree dirty it (and check-commit counts
    those under feature paths): said, and written all the same."""
    inside = world.root / "src" / "patches"
    r = run(world.root, "queue", "--patch", str(inside))
    assert r.rc == 0, r.err
    assert f"warning: --patch {inside.resolve()} is inside the port: the patches show in git " \
        "status" in r.err
    assert sorted(p.suffix for p in inside.iterdir()) == [".patch", ".patch"]


def test_queue_refuses_a_checkout_without_the_cycles_commits(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """walk-s11 D2: a clone that never fetched the upstream line (here: only the release
    tag's history, which forks at the pin) made `queue` exit 0 with every diff empty and
    `--patch` write empty patches; it refuses as `explain` does, and git says nothing itself."""
    clone = tmp_path / "nofetch"
    git(tmp_path, "clone", "-q", "--single-branch", "--branch", "v0.1.0",
        f"file://{world.up.repo}", str(clone))
    git(clone, "update-ref", "refs/remotes/origin/main", world.up.pin)  # "fetched" to the pin
    assert git_rc(clone, "cat-file", "-e", f"{world.up.target}^{{commit}}") != 0
    monkeypatch.setenv("VLLM_SOURCE", str(clone))
    patches = tmp_path / "patches"
    capfd.readouterr()
    said = (f"the reference checkout {clone} does not have {world.up.target[:10]} (of the "
            f"range {world.up.pin[:10]}..{world.up.target[:10]}) — fetch it into the checkout "
            "('upstream-sync fetch' fetches the configured remote; a commit only another remote "
            "has needs 'git fetch <remote> <sha>'), or move the cycle with 'upstream-sync sync "
            "--retarget'")
    for argv in (["queue"], ["queue", "--patch", str(patches)]):
        r = run(world.root, *argv)
        assert (r.rc, r.out, r.err) == (3, "", f"upstream-sync: error: {said}\n"), argv
    assert run(world.root, "explain", "#12").err == r.err  # the sibling's own refusal
    assert not any(patches.glob("*.patch"))
    r = run(world.root, "queue", "--json")
    doc = json.loads(r.out)
    assert r.rc == 3 and doc["ok"] is False and doc["exit_code"] == 3
    assert doc["error"]["text"] == said
    assert capfd.readouterr().err == ""  # no raw git line on the process's own stderr


def git_rc(repo: Path, *args: str) -> int:
    import subprocess

    from sync.dev.fastimport import hermetic_env

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                          env=hermetic_env(), check=False).returncode


S_PY = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"
T_PY = "def h():\n    return 1\n"
OLD_PY = "".join(f"def k{i}():\n    return {i}\n\n\n" for i in range(12))


@dataclass(frozen=True)
class Small:
    root: Path
    repo: Path
    pin: str
    change_f: str
    change_h: str
    moved: str


def _written(tmp_path: Path, h: History, pin: int, tip: int
             ) -> tuple[Path, Path, dict[int, str]]:
    """(the upstream, the port, the marks): `h` written as the reference checkout, its
    origin/main at `tip`, and a port pinned at `pin` with its records."""
    repo = tmp_path / "vllm"
    marks = h.write(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", marks[tip])
    root = tmp_path / "port"
    write(root, ".agents/upstream-sync.md", protocol_text(marks[pin]))
    write(root, ".agents/parity-ledger.md", LEDGER)
    write(root, ".agents/porting-inventory.md", INVENTORY)
    return repo, root, marks


def small_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                files: dict[str, str]) -> Small:
    """An upstream with nested paths (vllm/w/...) and a port whose files `files` gives,
    `{pin}` standing for the pin's first ten hex digits; synced to the last commit."""
    h = History()
    h.modify("vllm/w/s.py", S_PY).modify("vllm/w/t.py", T_PY).modify("vllm/w/m.py", "m = 1\n")
    h.modify("vllm/w/old.py", OLD_PY)
    h.commit("Initial (#1)")
    h.modify("README.md", "fake vllm\n")
    pin = h.commit("[Doc] Readme (#2)")
    h.modify("vllm/w/s.py", S_PY.replace("return 1", "return 2", 1))
    change_f = h.commit("[Core] Change f (#20)")
    h.modify("vllm/w/t.py", T_PY.replace("1", "2")).modify("vllm/w/m.py", "m = 2\n")
    change_h = h.commit("[Core] Change h and m (#21)")
    h.rename("vllm/w/old.py", "vllm/w/new.py")
    h.modify("vllm/w/new.py", OLD_PY.replace("return 0", "return 100"))
    moved = h.commit("[Core] Move old to new (#22)")
    repo, root, marks = _written(tmp_path, h, pin, moved)
    for rel, text in files.items():
        write(root, rel, text.replace("{pin}", marks[pin][:10]))
    monkeypatch.setenv("VLLM_SOURCE", str(repo))
    w = Small(root, repo, marks[pin], marks[change_f], marks[change_h], marks[moved])
    r = run(root, "sync", "--target", w.moved)
    assert r.rc == 0, r.err
    return w


def _item(doc: dict[str, Any], sha: str) -> dict[str, Any]:
    (it,) = [i for i in doc["items"] if i["sha"] == sha]
    assert isinstance(it, dict)
    return it


def test_a_port_file_citing_in_its_body_or_by_a_relative_path_is_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real case (vllm#48892, vllm#50334, vllm#50000): the item's port files and pins were read
    from the headers by exact path only, so a port file whose hit is a citation in its body
    (`Mirrors vllm/w/s.py::f`) or a header citing `w/s.py` (no `vllm/`, as `vLLM
    model_executor/warmup/kernel_warmup.py` is written) was missing from the item, though it
    is what made the commit PORT-NOW ("cited by" named it); both are listed with their pin."""
    w = small_world(tmp_path, monkeypatch, {
        "src/body.cpp": "// Ported from: vllm/w/t.py @ {pin}\n\nint b;\n\n"
                        "// The fast path mirrors vllm/w/s.py::f exactly.\nint fast;\n",
        "src/rel.cpp": "// Ported from: w/s.py::f @ {pin}\n\nint r;\n",
    })
    r = run(w.root, "queue", "--json")
    assert r.rc == 0, r.err
    item = _item(json.loads(r.out), w.change_f)
    assert item["pins"] == [
        {"port_file": "src/body.cpp", "upstream_path": "vllm/w/s.py", "sha": None,
         "status": "no pin; cited in the body at line 5"},
        {"port_file": "src/rel.cpp", "upstream_path": "vllm/w/s.py", "sha": w.pin[:10],
         "status": "at-pin"}]
    assert item["commit_diffs"][0]["definitions"][0]["cited_by"] == [
        "src/body.cpp", "src/rel.cpp"]
    text = run(w.root, "queue", "--drift").out.splitlines()
    assert "   src/body.cpp: vllm/w/s.py (no pin; cited in the body at line 5)" in text
    assert f"   src/rel.cpp: vllm/w/s.py @ {w.pin[:10]} (at-pin)" in text
    assert (f"   drift: git diff {w.pin[:12]}..{w.moved[:12]} -- vllm/w/s.py   (+1 -1; from "
            f"the file pin {w.pin[:10]})") in text


def test_a_renamed_paths_show_command_names_both_sides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real case (vllm#48947 moves tests/tool_parsers/test_mistral_tool_parser.py): the item
    said `git show <sha> -M -- OLD   (+1150 -116) (renamed → NEW)`, but with only OLD in the
    pathspec git cannot pair the rename and shows OLD deleted whole (-1621); the command
    names both sides, so it shows the diff the item counts."""
    w = small_world(tmp_path, monkeypatch, {
        "src/old.cpp": "// Ported from: vllm/w/old.py @ {pin}\n\nint o;\n"})
    doc = json.loads(run(w.root, "queue", "--json").out)
    (own,) = _item(doc, w.moved)["commit_diffs"]
    assert (own["upstream_path"], own["new_path"]) == ("vllm/w/old.py", "vllm/w/new.py")
    cmd = f"git show {w.moved[:12]} -M -- vllm/w/old.py vllm/w/new.py"
    assert own["command"] == cmd
    shown = git(w.repo, "show", "--format=", "--numstat", *cmd.split()[2:]).split()
    assert (int(shown[0]), int(shown[1])) == (own["insertions"], own["deletions"]) == (1, 1)
    assert f"   {cmd}   (+1 -1) (renamed → vllm/w/new.py)" in run(w.root, "queue").out.splitlines()


def test_a_path_the_port_only_mentions_is_no_hunk_of_the_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real case (vllm#47189 shows vllm/config/model.py, vllm#50000 vllm/engine/arg_utils.py):
    a path the commit changes that port files only mention (`See vllm/w/m.py`) was shown as a
    diff of the item, with its definitions, and written into its --patch and --drift, though
    no port file the item lists ports it; it is named on one line, its hunks left out."""
    w = small_world(tmp_path, monkeypatch, {
        "src/t.cpp": "// Ported from: vllm/w/t.py @ {pin}\n\nint t;\n\n"
                     "// See vllm/w/m.py for where m is set.\nint m;\n"})
    doc = json.loads(run(w.root, "queue", "--json", "--drift").out)
    item = _item(doc, w.change_h)
    assert item["upstream_paths"] == ["vllm/w/m.py", "vllm/w/t.py"]  # as the report has them
    assert [d["upstream_path"] for d in item["commit_diffs"]] == ["vllm/w/t.py"]
    assert [d["upstream_path"] for d in item["diffs"]] == ["vllm/w/t.py"]
    assert item["mentioned_paths"] == ["vllm/w/m.py"]
    text = run(w.root, "queue").out.splitlines()
    assert (f"   mentioned only (no port file ports it; not shown): vllm/w/m.py — git show "
            f"{w.change_h[:12]} -- vllm/w/m.py") in text
    patches = tmp_path / "patches"
    assert run(w.root, "queue", "--drift", "--patch", str(patches)).rc == 0
    for written in patches.glob("*.patch"):
        assert b"vllm/w/m.py" not in written.read_bytes() or b"mentioned only" in \
            written.read_bytes().split(b"\ndiff --git", 1)[0]
        assert b"diff --git a/vllm/w/m.py" not in written.read_bytes()


def test_the_drift_of_a_renamed_path_is_one_diff_of_both_names_from_its_file_pin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real case (vllm#48947 moves tests/tool_parsers/test_mistral_tool_parser.py): `queue
    --drift` showed OLD deleted whole from its file pin (-1621) and NEW added whole from the
    parity pin (+2655), and wrote both into the -drift.patch; the drift of a path renamed up
    to the target is one rename-aware diff of both names from the port file's pin."""
    w = small_world(tmp_path, monkeypatch, {
        "src/old.cpp": "// Ported from: vllm/w/old.py @ {pin}\n\nint o;\n"})
    doc = json.loads(run(w.root, "queue", "--json", "--drift").out)
    cmd = f"git diff -M {w.pin[:12]}..{w.moved[:12]} -- vllm/w/old.py vllm/w/new.py"
    assert _item(doc, w.moved)["diffs"] == [{
        "upstream_path": "vllm/w/old.py", "base": w.pin, "base_from": f"file pin {w.pin[:10]}",
        "insertions": 1, "deletions": 1, "binary": False, "command": cmd,
        "new_path": "vllm/w/new.py", "renamed_before_pin": False}]
    shown = git(w.repo, "diff", "--numstat", *cmd.split()[2:]).split()
    assert (int(shown[0]), int(shown[1])) == (1, 1)
    text = run(w.root, "queue", "--drift").out.splitlines()
    assert f"   drift: {cmd}   (+1 -1; from the file pin {w.pin[:10]})" in text
    assert not [line for line in text if line.startswith("   drift:") and "new.py" in line
                and line != f"   drift: {cmd}   (+1 -1; from the file pin {w.pin[:10]})"]
    patches = tmp_path / "patches"
    assert run(w.root, "queue", "--drift", "--patch", str(patches)).rc == 0
    (drift,) = patches.glob(f"*-{w.moved[:10]}-*drift.patch")
    body = drift.read_bytes().split(b"\ndiff --git", 1)[1]
    assert body.startswith(b" a/vllm/w/old.py b/vllm/w/new.py\n")
    assert b"rename from vllm/w/old.py\nrename to vllm/w/new.py\n" in body
    assert b"deleted file mode" not in body and b"new file mode" not in body
    assert body.count(b"\ndiff --git") == 0


def _lagged_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> tuple[Path, Path, dict[str, str]]:
    """A port whose headers cite vllm/w/old.py and vllm/w/gone.py at a file pin behind the
    parity pin; between the two upstream renamed the one (old.py -> new.py) and deleted the
    other, after a commit that changed both, carried into the cycle as PORT-NOW."""
    h = History()
    h.modify("vllm/w/old.py", OLD_PY).modify("vllm/w/gone.py", T_PY)
    base = h.commit("Initial (#1)")
    h.modify("vllm/w/old.py", OLD_PY.replace("return 1\n", "return 10\n", 1))
    h.modify("vllm/w/gone.py", T_PY.replace("1", "2"))
    carried = h.commit("[Core] Change k1 and h (#30)")
    h.rename("vllm/w/old.py", "vllm/w/new.py").delete("vllm/w/gone.py")
    h.commit("[Core] Move old to new, drop gone (#31)")
    h.modify("README.md", "fake vllm\n")
    pin = h.commit("[Doc] Readme (#32)")
    h.modify("vllm/w/new.py", OLD_PY.replace("return 1\n", "return 10\n", 1)
             .replace("return 5\n", "return 50\n"))
    target = h.commit("[Core] Change k5 (#33)")
    repo, root, marks = _written(tmp_path, h, pin, target)
    write(root, "src/old.cpp", f"// Ported from: vllm/w/old.py @ {marks[base][:10]}\n\nint o;\n")
    write(root, "src/gone.cpp", f"// Ported from: vllm/w/gone.py @ {marks[base][:10]}\n\nint g;\n")
    write(root, ".agents/sync/carry-over.toml", (
        "schema = 1\n\n"
        f"[carried.{marks[carried]}]\n"
        'disposition = "PORT-NOW"\n'
        'subject = "[Core] Change k1 and h (#30)"\n'
        'reason = "carry-over: ported with the rework"\n'
        'since = ".agents/sync/2026-01-01-0000000.md"\n'
        f'since_target = "{marks[pin]}"\n'
        'by = "advance"\n'
        "pr = 30\n"))
    monkeypatch.setenv("VLLM_SOURCE", str(repo))
    r = run(root, "sync", "--target", marks[target])
    assert r.rc == 0, r.err
    return root, repo, {"base": marks[base], "carried": marks[carried], "pin": marks[pin],
                        "target": marks[target]}


def test_the_drift_of_a_path_renamed_before_the_parity_pin_follows_the_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A header that lagged while upstream renamed its file (the file pin before the rename,
    the parity pin after it): `queue --drift` showed the cited path deleted whole from the
    file pin (-48) and the new name not at all, as the report's moves (the range's) do not
    name the rename; it is one rename-aware diff of both names from the file pin, as for a
    rename in the range, marked as made before the parity pin (the header's path is stale);
    a path git pairs with nothing stays a deletion."""
    root, repo, sha = _lagged_world(tmp_path, monkeypatch)
    base, target = sha["base"], sha["target"]
    span = f"{base[:12]}..{target[:12]}"
    gone = f"git diff {span} -- vllm/w/gone.py"
    moved = f"git diff -M {span} -- vllm/w/old.py vllm/w/new.py"
    doc = json.loads(run(root, "queue", "--json", "--drift").out)
    assert _item(doc, sha["carried"])["diffs"] == [
        {"upstream_path": "vllm/w/gone.py", "base": base, "base_from": f"file pin {base[:10]}",
         "insertions": 0, "deletions": 2, "binary": False, "command": gone,
         "new_path": None, "renamed_before_pin": False},
        {"upstream_path": "vllm/w/old.py", "base": base, "base_from": f"file pin {base[:10]}",
         "insertions": 2, "deletions": 2, "binary": False, "command": moved,
         "new_path": "vllm/w/new.py", "renamed_before_pin": True}]
    shown = git(repo, "diff", "--numstat", *moved.split()[2:]).split()
    assert (int(shown[0]), int(shown[1])) == (2, 2)
    text = run(root, "queue", "--drift").out.splitlines()
    assert [line for line in text if line.startswith("   drift: ")] == [
        f"   drift: {gone}   (+0 -2; from the file pin {base[:10]})",
        f"   drift: {moved}   (+2 -2; from the file pin {base[:10]}; renamed → vllm/w/new.py "
        "before the parity pin)"]
    patches = tmp_path / "patches"
    assert run(root, "queue", "--drift", "--patch", str(patches)).rc == 0
    (drift,) = patches.glob(f"*-{sha['carried'][:10]}-*drift.patch")
    head, body = drift.read_bytes().split(b"\ndiff --git", 1)
    assert head.decode().splitlines()[1:] == [
        f"# {gone}   (file pin {base[:10]})",
        f"# {moved}   (file pin {base[:10]}; renamed → vllm/w/new.py before the parity pin)"]
    assert body.startswith(b" a/vllm/w/gone.py b/vllm/w/gone.py\ndeleted file mode")
    renamed = body.split(b"\ndiff --git", 1)[1]
    assert renamed.startswith(b" a/vllm/w/old.py b/vllm/w/new.py\n")
    assert b"rename from vllm/w/old.py\nrename to vllm/w/new.py\n" in renamed
    assert b"deleted file mode" not in renamed and b"new file mode" not in renamed
    # The drift's git processes: the numstat of the paths it diffs as they are, one look-up of
    # the paths neither the pin nor the target has, one listing of the renames per base that
    # lost one, and the numstat of the renamed paths (as for a rename in the range).
    ref, located = gitio.open_repo(repo), port.locate(str(root))
    start = gitio.PROCESS_COUNT
    workqueue.build(located, ref, "origin/main")
    plain = gitio.PROCESS_COUNT - start
    start = gitio.PROCESS_COUNT
    workqueue.build(located, ref, "origin/main", drift=True)
    assert gitio.PROCESS_COUNT - start == plain + 4
