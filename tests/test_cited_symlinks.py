"""A cited upstream path that is a symbolic link (mode 120000): its blob is the link's target
(`real.py`), which the symbol pass parsed as Python (`real.py` is an expression, so the
retarget was a changed module-level statement; `../x.py` a syntax error). A link is no
module: it is compared at path level, never by definitions, and says why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Link, Plan, Shape, World, entry, planned, report_doc

from sync.upstream import patch

LINK = "vllm/v1/link.py"
REAL = "vllm/v1/real.py"
OTHER = "vllm/v1/other.py"

MODULE = "def f(a):\n    return a + 1\n\n\ndef g(b):\n    return b\n"

SHAPES = (
    Shape("retarget", "[Core] Point the link at other", {LINK: Link("other.py")}),
    Shape("outside", "[Core] Point the link outside", {LINK: Link("../v1/other.py")}),
)


def _port_files(marks: dict[str, str]) -> dict[str, str]:
    pin = marks["pin"][:10]
    return {"src/link.cpp": f"// Ported from: {LINK}::f @ {pin}\nint f;\n",
            "src/whole.cpp": f"// Ported from: {LINK} @ {pin}\nint w;\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plan = Plan({REAL: MODULE, OTHER: MODULE.replace("a + 1", "a + 2"), LINK: Link("real.py"),
                 "README.md": "fake vllm\n"}, SHAPES, _port_files)
    with planned(tmp_path_factory, "links", plan) as w:
        yield w


@pytest.mark.parametrize("name", ["retarget", "outside"])
def test_a_cited_symlink_is_compared_at_path_level(world: World, name: str) -> None:
    """Before: the retarget was 'whole-file citation; changes <expr>' (the target text read
    as a module), the link outside 'does not parse after the commit (line 1: invalid
    syntax)'."""
    e = entry(world, name)
    (changed,) = e["evidence"]["paths"]
    assert (changed["path_level"], changed["changed"]) == (
        "a symbolic link, not a Python module", []), e
    assert (e["disposition"], e["rule"]) == ("PORT-NOW", "path-level"), e
    assert e["reason"] == (f"{LINK} (path level: a symbolic link, not a Python module: "
                           "compared as a whole file) → src/link.cpp, src/whole.cpp")
    assert all((c["how"], c["names"], c["definitions"]) == ("path-level", [], [])
               for c in e["evidence"]["citations"]), e


def test_a_patch_says_which_side_is_a_symbolic_link() -> None:
    listing = (b"a" * 40 + b"\n"
               b"diff --git a/l.py b/l.py\n"
               b"index " + b"1" * 40 + b".." + b"2" * 40 + b" 120000\n"
               b"--- a/l.py\n+++ b/l.py\n@@ -1 +1 @@\n-a.py\n\\ No newline at end of file\n"
               b"+b.py\n\\ No newline at end of file\n"
               b"diff --git a/t.py b/t.py\nnew file mode 120000\n"
               b"index " + b"0" * 40 + b".." + b"3" * 40 + b"\n"
               b"--- /dev/null\n+++ b/t.py\n@@ -0,0 +1 @@\n+b.py\n"
               b"diff --git a/m.py b/m.py\nold mode 100644\nnew mode 100755\n"
               b"index " + b"4" * 40 + b".." + b"5" * 40 + b"\n")
    (cp,) = patch.parse(listing)
    got = [(f.path, f.old_mode, f.new_mode, f.symlink) for f in cp.files]
    assert got == [("l.py", "120000", "120000", True), ("t.py", None, "120000", True),
                   ("m.py", "100644", "100755", False)]


TYPED = "vllm/v1/typed.py"  # a regular file at the pin that a commit turns into a link
BACK = "vllm/v1/back.py"  # a link at the pin that a commit turns into a regular file
WAS_LINK = "vllm/v1/was_link.py"  # a link at the older commit, a regular file at the pin

TYPE_SHAPES = (
    Shape("to_link", "[Core] Make typed.py a link to real.py", {TYPED: Link("real.py")}),
    Shape("from_link", "[Core] Make back.py a module of its own", {BACK: MODULE}),
    Shape("edit_f", "[Core] Add two in f", {
        WAS_LINK: MODULE.replace("a + 1", "a + 2")}),
)


def _type_port_files(marks: dict[str, str]) -> dict[str, str]:
    pin, older = marks["pin"][:10], marks["older"][:10]
    return {"src/typed.cpp": f"// Ported from: {TYPED}::f @ {pin}\nint t;\n",
            "src/typed_whole.cpp": f"// Ported from: {TYPED} @ {pin}\nint tw;\n",
            "src/back.cpp": f"// Ported from: {BACK}::f @ {pin}\nint b;\n",
            "src/back_whole.cpp": f"// Ported from: {BACK} @ {pin}\nint bw;\n",
            "src/was_link.cpp": f"// Ported from: {WAS_LINK}:1-2 @ {older}\nint w;\n"}


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plan = Plan({REAL: MODULE, TYPED: MODULE, BACK: Link("real.py"), WAS_LINK: MODULE,
                 "README.md": "fake vllm\n"}, TYPE_SHAPES, _type_port_files,
                {WAS_LINK: Link("real.py")})
    with planned(tmp_path_factory, "typechange", plan) as w:
        yield w


@pytest.mark.parametrize(("name", "path", "files"), [
    ("to_link", TYPED, "src/typed.cpp, src/typed_whole.cpp"),
    ("from_link", BACK, "src/back.cpp, src/back_whole.cpp")])
def test_a_type_change_of_a_cited_path_is_one_change_at_path_level(
        typed: World, name: str, path: str, files: str) -> None:
    """Before: git lists a type change as a deletion and an addition of the path, and only
    the deletion was read: 'deletes the file', the path listed as deleted."""
    e = entry(typed, name)
    (changed,) = e["evidence"]["paths"]
    assert (changed["status"], changed["path_level"], changed["changed"]) == (
        "T", "a symbolic link, not a Python module", []), e
    assert (e["disposition"], e["rule"]) == ("PORT-NOW", "path-level"), e
    assert e["reason"] == (f"{path} (path level: a symbolic link, not a Python module: "
                           f"compared as a whole file) → {files}")
    moved = [m for m in report_doc(typed)["moves"] if m["path"] == path]
    assert moved == [], moved


def test_a_citation_read_where_its_path_was_a_link_is_read_at_the_pin(typed: World) -> None:
    """Before: lines 1-2 were read in the older commit's blob, the link's target `real.py`
    parsed as a module: no line of f, so the change to f was a miss (INVENTORY)."""
    e = entry(typed, "edit_f")
    (cited,) = e["evidence"]["citations"]
    assert (cited["how"], cited["names"], cited["read_at"]) == ("lines", ["f"], "the pin"), e
    assert (e["disposition"], e["rule"]) == ("PORT-NOW", "symbol-hit"), e


def test_a_type_change_is_one_file_patch_with_both_halves() -> None:
    """git prints a file turned into a link as the path's deletion, then its addition."""
    gone = (b"diff --git a/t.py b/t.py\ndeleted file mode 100644\n"
            b"index " + b"1" * 40 + b".." + b"0" * 40 + b"\n"
            b"--- a/t.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n")
    came = (b"diff --git a/t.py b/t.py\nnew file mode 120000\n"
            b"index " + b"0" * 40 + b".." + b"2" * 40 + b"\n"
            b"--- /dev/null\n+++ b/t.py\n@@ -0,0 +1 @@\n+r.py\n\\ No newline at end of file\n")
    (cp,) = patch.parse(b"a" * 40 + b"\n" + gone + came)
    (fp,) = cp.files
    assert (fp.status, fp.old_path, fp.new_path, fp.old_blob, fp.new_blob) == (
        "T", "t.py", "t.py", "1" * 40, "2" * 40)
    assert (fp.old_mode, fp.new_mode, fp.symlink, len(fp.hunks)) == ("100644", "120000", True, 2)
    assert fp.text() == gone + came
