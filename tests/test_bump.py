from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stepfixture import World, make_world, run, with_port_cmd, write

from sync.infra.errors import SyncError
from sync.steps import bump
from sync.upstream import gitio

pytestmark = pytest.mark.usefixtures("with_port_cmd")
__all__ = ["with_port_cmd"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


def shapes(w: World) -> dict[str, tuple[str, list[str]]]:
    """file -> (text, the SHA tokens a bump must replace, in order)."""
    older, pin = w.up.older, w.up.pin
    return {
        "src/wrapped.cpp": (
            "/* SPDX-License-Identifier: Apache-2.0 */\n\n"
            "// Ported from: vllm/a.py (EngineCore.step, EngineCore.abort)\n"
            f"//   @ {older}\n// More text.\n\nint x;\n", [older]),
        "src/pinword.cpp": (f"// Ported from vllm/a.py @ pin {older[:10]}\nint x;\n",
                            [older[:10]]),
        "src/multi.cpp": (
            f"// Mirrors:\n//   - vllm/a.py @ {older[:10]}\n"
            f"//   - vllm/c.py:10-20 @ pin {older[:7]}\n\nint x;\n", [older[:10], older[:7]]),
        "src/crlf.cpp": (
            f"// Ported from: vllm/b.py @ `{older[:10]}`\r\n//   (kept in step)\r\n\r\n"
            "int x;\r\n", [older[:10]]),
        "tools/dump.py": (
            f"#!/usr/bin/env python\n# Ported from: vllm/c.py @ {pin[:12]}\nx = 1\n",
            [pin[:12]]),
        "src/group.cpp": (f"// Ported from: vllm/a.py and vllm/c.py @ {older[:10]}\nint x;\n",
                          [older[:10]]),
    }


def expected(text: str, tokens: list[str], target: str) -> str:
    out = text
    for tok in tokens:
        new = target if len(tok) == 40 else target[: max(len(tok), 8)]
        out = out.replace(tok, new, 1)
    return out


def test_bump_is_byte_exact_except_sha_tokens(world: World) -> None:
    world.freeze()
    cases = shapes(world)
    for rel, (text, _) in cases.items():
        write(world.root, rel, text)
    r = run(world.root, "bump-headers", *(str(world.root / rel) for rel in cases))
    assert r.rc == 0, r.err
    target = world.up.target
    for rel, (text, tokens) in cases.items():
        got = (world.root / rel).read_bytes()
        assert got == expected(text, tokens, target).encode(), rel
    crlf = (world.root / "src/crlf.cpp").read_bytes()
    assert crlf.count(b"\r\n") == 4 and crlf.count(b"\n") == 4
    assert (f"src/multi.cpp:3: bumped vllm/c.py {world.up.older[:7]} → {target[:8]} "
            "(against the pin: behind-unchanged; changed upstream up to the target)") in r.out
    # A second run has nothing left to do.
    again = run(world.root, "bump-headers", *(str(world.root / rel) for rel in cases))
    assert again.rc == 0
    *files, total = again.out.splitlines()
    assert all(line.endswith(f"already at {target[:10]}") for line in files)
    assert total.startswith(f"{len(cases)} file(s): 0 bumped")


def test_a_byte_that_is_not_utf8_outside_the_header_is_kept_as_the_header_is_bumped(
        world: World) -> None:
    """A port file with one Latin-1 byte far from its header (and a cut UTF-8 sequence in
    the licence comment above it) was refused whole ('is not UTF-8 ... re-save it as
    UTF-8'), though sync and check read its header. The header is bumped, every other byte
    written back as it was, and check says so."""
    world.freeze()
    older, target = world.up.older, world.up.target
    data = (b"/* (c) \xe2\x82 2026 */\n\n// Ported from: vllm/a.py @ " + older[:10].encode()
            + b"\n\nint x;\n" + b"\n" * 20 + b"// na\xefve caf\xe9\nint y;\n")
    (world.root / "src/latin1.cpp").write_bytes(data)
    warned = ("warning: src/latin1.cpp:1: is not UTF-8 (byte 0xe2 at column 8, offset 7), "
              "outside its header: read as a replacement character (bump-headers writes the "
              "byte back as it was) — re-save it as UTF-8 unless it is meant")
    assert warned in run(world.root, "check").out.splitlines()
    r = run(world.root, "bump-headers", "src/latin1.cpp")
    assert r.rc == 0, r.out + r.err
    assert (world.root / "src/latin1.cpp").read_bytes() == data.replace(
        older[:10].encode(), target[:10].encode())


def test_a_byte_that_is_not_utf8_on_the_headers_lines_is_refused_where_it_is(
        world: World) -> None:
    """Such a byte inside the header (not the file's first) is refused at its own line, as
    check warns of it: the header read there is not what the file says."""
    world.freeze()
    older = world.up.older
    data = (b"/* (c) J\xe9r\xf4me */\n\n// Ported from: vllm/a.py @ " + older[:10].encode()
            + b"\n//   (caf\xe9)\nint x;\n")
    (world.root / "src/latin1.cpp").write_bytes(data)
    where = "src/latin1.cpp:4: is not UTF-8 (byte 0xe9 at column 10, offset 66)"
    assert (f"warning: {where}, so bump-headers will refuse to rewrite its header — re-save "
            "it as UTF-8") in run(world.root, "check").out.splitlines()
    r = run(world.root, "bump-headers", "src/latin1.cpp")
    assert r.rc == 4 and f"refused: {where} — re-save it as UTF-8" in r.out, r.out + r.err
    assert (world.root / "src/latin1.cpp").read_bytes() == data


def test_check_lists_and_writes_nothing(world: World) -> None:
    before = (world.root / "src/a.cpp").read_bytes()
    r = run(world.root, "bump-headers", "src/a.cpp", "src/c.cpp", "--to", world.up.target,
            "--check", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    assert doc["target"] == world.up.target and doc["check"] is True and doc["written"] == 0
    assert [(f["path"], f["status"]) for f in doc["files"]] == [("src/a.cpp", "bump"),
                                                               ("src/c.cpp", "bump")]
    change = doc["files"][0]["changes"][0]
    assert change == {"line": 1, "path": "vllm/a.py", "old": world.up.older[:10],
                      "new": world.up.target[:10], "was": "behind-unchanged", "content": "changed",
                      "paths": ["vllm/a.py"], "changed": ["vllm/a.py"]}
    assert doc["files"][1]["changes"][0]["old"] == world.up.pin[:8]
    assert (world.root / "src/a.cpp").read_bytes() == before


def test_default_target_is_the_cycle_target(world: World) -> None:
    no_cycle = run(world.root, "bump-headers", "src/a.cpp")
    assert no_cycle.rc == 2 and "no sync cycle is open" in no_cycle.err
    world.freeze()
    r = run(world.root, "bump-headers", "src/a.cpp")
    assert r.rc == 0, r.err
    assert (world.root / "src/a.cpp").read_text() == (
        f"// Ported from: vllm/a.py @ {world.up.target[:10]}\n\nint a = 2;\n")


def test_bump_to_an_ancestor_of_the_target_is_allowed(world: World) -> None:
    r = run(world.root, "bump-headers", "src/a.cpp", "--to", world.up.a_again[:12])
    assert r.rc == 0, r.err
    assert world.up.a_again[:10] in (world.root / "src/a.cpp").read_text()


def refused(world: World, *argv: str) -> tuple[int, str, str]:
    files = sorted((world.root / "src").iterdir())
    before = {p: p.read_bytes() for p in files}
    r = run(world.root, "bump-headers", *argv)
    assert {p: p.read_bytes() for p in files} == before, "a refusal must write nothing"
    assert r.err.count("\n") == 1 and " — " in r.err
    return r.rc, r.out, r.err


def test_refuses_a_file_without_header_and_writes_nothing(world: World) -> None:
    rc, out, err = refused(world, "src/a.cpp", "src/none.cpp", "--to", world.up.target)
    assert rc == 4
    # The reason once (on stdout), the count on the one error line.
    assert out.count("src/none.cpp: no per-file pin header") == 1
    assert "no per-file pin header" not in err
    assert "1 of 2 file(s) cannot be bumped safely (the reason listed); nothing was written" in err


def test_refuses_an_original_file(world: World) -> None:
    rc, out, _ = refused(world, "src/orig.cpp", "--to", world.up.target)
    assert rc == 4 and "declares the file original" in out


def test_refuses_a_sha_not_in_the_reference(world: World) -> None:
    rc, _, err = refused(world, "src/a.cpp", "--to", "0123456789abcdef0123456789abcdef01234567")
    assert rc == 2 and "is not a commit in the reference checkout" in err
    rc, _, err = refused(world, "src/a.cpp", "--to=--help")
    assert rc == 2 and "not a usable git revision" in err


def test_refuses_a_target_off_the_upstream_line(world: World) -> None:
    rc, _, err = refused(world, "src/a.cpp", "--to", world.up.pr_head)
    assert rc == 2 and "is not an upstream commit" in err


def test_a_release_tag_off_the_upstream_line_is_a_valid_target(world: World) -> None:
    """A tag the user chose on a release branch: the cycle's target, and a tag of its own."""
    up = world.up
    r = run(world.root, "bump-headers", "src/a.cpp", "--to", "v0.1.0", "--check")
    assert r.rc == 0, r.err
    assert (f"would bump vllm/a.py {up.older[:10]} → {up.release[:10]} "
            "(against the pin: behind-unchanged)") in r.out
    world.freeze(up.release, "v0.1.0")
    r = run(world.root, "bump-headers", "src/a.cpp", "src/c.cpp")
    assert r.rc == 0, r.err
    assert f"vllm/a.py @ {up.release[:10]}" in (world.root / "src/a.cpp").read_text()
    # A header citing main past the fork is ahead of the release: refused, not moved back.
    rc, out, _ = refused(world, "src/hot.cpp")
    assert rc == 6 and "ahead of the target" in out


def test_refuses_a_path_upstream_deleted(world: World) -> None:
    rc, out, _ = refused(world, "src/gone.cpp", "src/a.cpp", "--to", world.up.target)
    assert rc == 6
    assert f"the target {world.up.target[:10]} has no vllm/gone.py" in out
    assert out.splitlines()[0].startswith("refused: src/gone.cpp:1:")
    assert f"src/a.cpp:1: would bump vllm/a.py {world.up.older[:10]}" in out


def test_refuses_a_citation_ahead_of_the_target(world: World) -> None:
    rc, out, _ = refused(world, "src/hot.cpp", "--to", world.up.target)
    assert rc == 6 and "ahead of the target" in out


def test_refuses_ambiguous_headers(world: World) -> None:
    older = world.up.older
    write(world.root, "src/split.cpp",
          f"// Ported from: vllm/a.py @ {older[:20]}\n// {older[20:]}\nint x;\n")
    write(world.root, "src/nosha.cpp", "// Ported from: vllm/a.py\nint x;\n")
    rc, out, err = refused(world, "src/split.cpp", "src/nosha.cpp", "--to", world.up.target)
    assert rc == 4
    assert "2 of 2 file(s) cannot be bumped safely" in err
    assert "split across lines" in out and "has no SHA to rewrite" in out


def test_a_mixed_refusal_exits_the_same_whatever_order_the_files_are_named_in(
        world: World) -> None:
    """A header to fix by hand (4) and a path upstream deleted (6) refused together: the exit
    code was the first named file's, so the same two files exited 6 or 4 by their order."""
    write(world.root, "src/nosha.cpp", "// Ported from: vllm/a.py\nint x;\n")
    codes = set()
    for files in (("src/gone.cpp", "src/nosha.cpp"), ("src/nosha.cpp", "src/gone.cpp")):
        rc, out, err = refused(world, *files, "--to", world.up.target, "--check")
        assert "has no SHA to rewrite" in out and "has no vllm/gone.py" in out
        assert "2 of 2 file(s) cannot be bumped safely" in err
        codes.add(rc)
    assert codes == {4}


def test_refuses_files_outside_the_port_or_missing(world: World, tmp_path: Path) -> None:
    outside = write(tmp_path, "elsewhere.cpp", "// Ported from: vllm/a.py @ 1234567\n")
    r = run(world.root, "bump-headers", str(outside), "--to", world.up.target)
    assert r.rc == 2 and "is not inside the port" in r.err
    r = run(world.root, "bump-headers", "src/missing.cpp", "--to", world.up.target)
    assert r.rc == 2 and "no such file" in r.err


def test_a_sha_that_is_no_upstream_commit_is_refused_never_rewritten(world: World) -> None:
    before = (world.root / "src/pr.cpp").read_bytes()
    r = run(world.root, "bump-headers", "src/pr.cpp", "--to", world.up.target)
    assert r.rc == 6 and "which is not a commit of the upstream line" in r.out
    assert (world.root / "src/pr.cpp").read_bytes() == before


def test_new_token_lengths() -> None:
    t = "0123456789abcdef0123456789abcdef01234567"
    assert bump.new_token("a" * 40, t, 8) == t
    assert bump.new_token("abcdef1", t, 8) == t[:8]
    assert bump.new_token("abcdef12345", t, 8) == t[:11]
    assert bump.new_token("abcdef12", t, 12) == t[:12]


def test_git_processes_do_not_grow_with_files(world: World) -> None:
    ref = gitio.open_repo(world.up.repo)
    for n in range(30):
        write(world.root, f"src/many/f{n}.cpp",
              f"// Ported from: vllm/a.py @ {world.up.older[:10]}\nint x;\n")
    few = [(world.root / "src/a.cpp", "src/a.cpp")]
    many = [(p, p.relative_to(world.root).as_posix())
            for p in sorted((world.root / "src/many").iterdir())]
    start = gitio.PROCESS_COUNT
    bump.plan(ref, world.up.target, "origin/main", few)
    one = gitio.PROCESS_COUNT - start
    start = gitio.PROCESS_COUNT
    plans = bump.plan(ref, world.up.target, "origin/main", many)
    assert gitio.PROCESS_COUNT - start == one
    assert all(p.status == "bump" for p in plans)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("/*#@ \n\r\tvlm.py:-`abcdef0123456789Portedfrom")),
               max_size=300))
def test_header_reading_never_crashes(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.cpp"
        path.write_bytes(text.encode())
        try:
            draft = bump._read(path, "f.cpp")
        except SyncError:
            return
        if draft.refusal is None:
            for c in draft.header.citations:
                assert c.sha is not None and c.sha_start is not None and c.sha_end is not None
                assert draft.text[c.sha_start:c.sha_end] == c.sha


def test_bump_says_where_each_sha_stood_in_audits_words(world: World) -> None:
    """`was` is the audit's status of the cited SHA (against the parity pin), not a word of
    its own: a header at the pin was at-pin, not "behind the target"."""
    world.freeze()
    files = ["src/a.cpp", "src/b.cpp", "src/c.cpp", "src/e.cpp"]
    write(world.root, "src/e.cpp", f"// Ported from: vllm/b.py @ {world.up.older[:10]}\nint e;\n")
    audit = json.loads(run(world.root, "audit", "--json").out)
    words = {(c["sha"], c["path"]): c["status"] for f in audit["files"]
             for c in f["citations"]}
    r = run(world.root, "bump-headers", "--check", "--json", *files)
    assert r.rc == 0, r.err
    changes = [c for f in json.loads(r.out)["files"] for c in f["changes"]]
    assert {c["was"] for c in changes} == {"behind-unchanged", "behind-changed", "at-pin"}
    assert all(c["was"] == words[(c["old"], c["path"])] for c in changes)
    text = run(world.root, "bump-headers", "--check", "src/b.cpp").out
    assert text.splitlines()[0].endswith(
        "(against the pin: at-pin; changed upstream up to the target)")


def test_a_named_bump_names_the_open_port_now_commits_it_claims(world: World) -> None:
    """walk-s6b D4: bumping a file by name says every change to its cited file up to the
    target is ported; the cycle's PORT-NOW commits that change it, with no ledger row, are
    named, so a second one is not claimed without a word."""
    assert run(world.root, "sync").rc == 0
    r = run(world.root, "bump-headers", "--check", "src/a.cpp")
    assert r.rc == 0, r.err
    doc = json.loads(next((world.root / ".agents/sync").glob("*.json")).read_text())
    owed = [e for e in doc["entries"]
            if e["disposition"] == "PORT-NOW" and "vllm/a.py" in e["upstream_paths"]]
    assert len(owed) == 2
    for e in owed:
        assert (f"warning: this bump says PORT-NOW `{e['sha'][:10]}` vllm#{e['pr']} is ported: "
                "it changes vllm/a.py and has no ledger row yet") in r.err
    # A commit with its ledger row is ported already: it is not named.
    first = owed[0]
    assert run(world.root, "ledger", "add", "--commit", "abc1234", "--what", "Port it", "--pr",
               str(first["pr"]), "--status", "ported").rc == 0
    again = run(world.root, "bump-headers", "--check", "src/a.cpp")
    assert f"`{first['sha'][:10]}`" not in again.err and f"`{owed[1]['sha'][:10]}`" in again.err
    # A file whose cited file the cycle's PORT-NOW commits do not change gets no warning.
    quiet = run(world.root, "bump-headers", "--check", "src/gone.cpp")
    assert "warning: this bump says" not in quiet.err


def test_a_named_bump_names_the_carried_port_now_commits_it_claims(world: World) -> None:
    """walk-s9 D1: a PORT-NOW item an earlier cycle carried in is as open as one of the
    range; a bump of a file over its changes names it too."""
    write(world.root, ".agents/sync/carry-over.toml", (
        "schema = 1\n\n"
        f"[carried.{world.up.base}]\n"
        'disposition = "PORT-NOW"\n'
        'subject = "Initial (#1)"\n'
        'reason = "carry-over: next cycle"\n'
        'since = ".agents/sync/2026-01-01-0000000.md"\n'
        f'since_target = "{world.up.base}"\n'
        'by = "advance"\n'
        "pr = 1\n"))
    assert run(world.root, "sync").rc == 0
    r = run(world.root, "bump-headers", "--check", "src/a.cpp")
    assert r.rc == 0, r.err
    assert (f"warning: this bump says PORT-NOW `{world.up.base[:10]}` vllm#1 (carried since "
            "2026-01-01-0000000.md) is ported: it changes vllm/a.py and has no ledger row "
            "yet") in r.err
    assert r.err.count(f"`{world.up.base[:10]}`") == 1


def _drop_object(repo: Path, name: str) -> str:
    """Remove the object `name` (`rev:path`) from `repo`: its packs unpacked to loose objects
    first, so that one object can go while the trees that name it stay."""
    import shutil

    from sync.dev.fastimport import git

    oid = git(repo, "rev-parse", name).strip()
    keep = repo.parent / "packs"
    keep.mkdir(exist_ok=True)
    for p in (repo / ".git/objects/pack").iterdir():
        shutil.move(str(p), keep / p.name)
    for p in sorted(keep.glob("*.pack")):
        git(repo, "unpack-objects", "-q", input=p.read_bytes())
    (repo / ".git/objects" / oid[:2] / oid[2:]).unlink()
    return oid


def test_an_unreadable_blob_is_missing_objects_not_a_path_upstream_deleted(
        world: World) -> None:
    """walk-s11 D6b: with the blob of <target>:<cited path> gone from the checkout (the tree
    still names it), bump-headers said "upstream deleted it — fix the header's path by hand";
    it is the missing-objects refusal, and no header is touched."""
    world.freeze()
    oid = _drop_object(world.up.repo, f"{world.up.target}:vllm/c.py")
    gitio._KNOWN.clear()
    before = (world.root / "src/c.cpp").read_bytes()
    for argv in (["src/c.cpp"], ["src/c.cpp", "--check"], ["--check"]):
        r = run(world.root, "bump-headers", *argv)
        assert r.rc == 3, (argv, r.rc, r.out, r.err)
        assert r.err.strip() == (
            f"upstream-sync: error: the reference checkout {world.up.repo} cannot read "
            f"vllm/c.py at {world.up.target[:10]} (object {oid[:10]}) — the checkout is "
            f"missing objects: re-fetch them with 'git -C {world.up.repo} fetch --refetch "
            "origin' (or re-clone it), then run the command again"), (argv, r.err)
        assert "deleted" not in r.out + r.err and "by hand" not in r.out + r.err
    assert (world.root / "src/c.cpp").read_bytes() == before
    # A path the target's tree really lacks is still "upstream deleted it".
    rc, out, _ = refused(world, "src/gone.cpp", "--to", world.up.target)
    assert rc == 6 and f"the target {world.up.target[:10]} has no vllm/gone.py" in out
