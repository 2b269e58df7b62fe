"""The patch listing: one `git diff-tree --stdin` for many commits, parsed in one pass; the
batch blob read."""

from __future__ import annotations

import difflib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sync.dev.fastimport import History
from sync.upstream import gitio, history, patch

SHA = "a" * 40


def _listing(old: list[str], new: list[str], n: int) -> bytes:
    body = "".join(difflib.unified_diff([x + "\n" for x in old], [x + "\n" for x in new],
                                        "a/p.py", "b/p.py", n=n, lineterm="\n"))
    head = f"{SHA}\ndiff --git a/p.py b/p.py\nindex 1111111..2222222 100644\n"
    return (head + body).encode()


# A lone carriage return, a form feed, a vertical tab: git ends a diff's lines at LF only.
_LINES = st.lists(st.sampled_from(["x = 1", "y = 2", "def f():", "    return 3", "", "#",
                                   "a\rb", "\x0c", "c\x0bd"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_LINES, _LINES, st.integers(0, 3))
def test_changed_lines_are_exactly_the_diffs(old: list[str], new: list[str], n: int) -> None:
    (cp,) = patch.parse(_listing(old, new, n))
    deleted: list[int] = []
    added: list[int] = []
    spans: list[tuple[int, int]] = []  # each run of changes, in the old blob
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new).get_opcodes():
        if tag != "equal":
            deleted += range(i1 + 1, i2 + 1)
            added += range(j1 + 1, j2 + 1)
            spans.append((i1 + 1, i2) if i2 > i1 else (i1, i1 + 1))
    if old == new:
        assert cp.files == () or not cp.files[0].hunks
        return
    (fp,) = cp.files
    assert [d for h in fp.hunks for d in h.deleted] == deleted
    assert [a for h in fp.hunks for a in h.added] == added
    # Whatever the context (n), the runs come from the body, not the header.
    assert [s for h in fp.hunks for s in h.old_spans] == spans
    assert (fp.old_path, fp.new_path, fp.old_blob, fp.new_blob) == (
        "p.py", "p.py", "1111111", "2222222")


_FRAGMENTS = st.sampled_from([
    b"diff --git a/x b/x\n", b'diff --git "a/x\\ty" "b/x\\ty"\n', b"@@ -1,2 +1,3 @@\n",
    b"@@ -99999999999999999999,1 +1 @@\n", b"@@ -0,0 +1 @@ ctx\n", b"-gone\n", b"+new\n",
    b" same\n", b"\\ No newline at end of file\n", b"rename from a b\n", b"rename to c\n",
    b"--- /dev/null\n", b"+++ b/x\t\n", b'--- "a/\\303\\251"\n', b"index 0000000..abcdef0\n",
    b"new file mode 100644\n", b"deleted file mode 100644\n", b"Binary files a/x and b/x differ\n",
    SHA.encode() + b"\n", b"\n", b"\xff\xfe\n", b"diff --git a/a b/b c\n",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=30))
def test_hostile_listings_never_raise(parts: list[bytes]) -> None:
    for cp in patch.parse(b"".join(parts)):
        for fp in cp.files:
            assert fp.status in "AMDRCT"
            for h in fp.hunks:
                assert len(h.deleted) <= max(h.old_count, 0) and len(h.added) <= h.new_count


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_raise(data: bytes) -> None:
    patch.parse(data)
    patch.unquote(data)


def test_unquote_reads_git_c_quoting() -> None:
    assert patch.unquote(b'"a/caf\\303\\251 \\"x\\"\\t.py"') == 'a/café "x"\t.py'
    assert patch.unquote(b"plain") == "plain"


def test_a_real_listing_follows_renames_and_odd_names(tmp_path: Path) -> None:
    h = History()
    body = "".join(f"line {i}\n" for i in range(30))
    h.modify("vllm/old.py", body).modify("vllm/a b.py", "x = 1\n").modify("vllm/gone.py", "g\n")
    h.modify("bin.dat", b"\x00\x01\x02")
    h.commit("base")
    h.rename("vllm/old.py", "vllm/new.py")
    h.modify("vllm/new.py", body.replace("line 7\n", "line seven\n"))
    h.modify("vllm/a b.py", "x = 2\n").delete("vllm/gone.py").modify("bin.dat", b"\x00\x09")
    h.modify("vllm/ünï.py", "u = 1\n")
    second = h.commit("change")
    shas = h.write(tmp_path / "r")
    ref = gitio.open_repo(tmp_path / "r")
    paths = ["vllm/old.py", "vllm/new.py", "vllm/a b.py", "vllm/gone.py", "bin.dat",
             "vllm/ünï.py"]
    before = gitio.PROCESS_COUNT
    listed = history.commit_patches(ref, [shas[second]], paths)
    assert gitio.PROCESS_COUNT - before == 1
    cp = listed[shas[second]]
    by = {f.path: f for f in cp.files}
    moved = by["vllm/new.py"]
    assert (moved.status, moved.old_path, moved.new_path) == ("R", "vllm/old.py", "vllm/new.py")
    assert [(h.deleted, h.added) for h in moved.hunks] == [((8,), (8,))]
    assert cp.for_path("vllm/old.py") is moved
    assert by["vllm/a b.py"].hunks[0].deleted == (1,)
    assert (by["vllm/gone.py"].status, by["vllm/gone.py"].new_path) == ("D", None)
    assert by["bin.dat"].binary and by["vllm/ünï.py"].status == "A"
    # One batch read for both sides of every blob, plus names git does not know.
    blobs = gitio.cat_blobs(ref, [moved.old_blob or "", moved.new_blob or "",
                                  f"{shas[second]}:vllm/a b.py", "nope:x", "line\nbreak"])
    assert blobs[0] == body.encode() and blobs[1] is not None and b"line seven" in blobs[1]
    assert blobs[2] == b"x = 2\n" and blobs[3] is None and blobs[4] is None
