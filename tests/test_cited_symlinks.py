"""A cited upstream path that is a symbolic link (mode 120000): its blob is the link's target
(`real.py`), which the symbol pass parsed as Python (`real.py` is an expression, so the
retarget was a changed module-level statement; `../x.py` a syntax error). A link is no
module: it is compared at path level, never by definitions, and says why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from symbolfixture import Link, Plan, Shape, World, entry, planned

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
