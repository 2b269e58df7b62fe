"""Which port files the surface scans: every file under the ported roots that a header glob
matches, each once, named relative to the port, in sorted order (as `os.walk` and
`os.path.relpath` would name them: the roots may be `.`, end in `/`, or climb back in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from stepfixture import protocol_text, write

from sync import port as port_mod
from sync.infra import globs
from sync.steps import surface

PIN = "5" * 40
FILES = ["src/a.cpp", "src/sub/b.h", "src/sub/c.txt", "lib/d.cu", "top.cpp", "build/x.cpp",
         "src/.git/y.cpp", "src/sub/deep/e.cpp"]


def reference(root: Path, roots: list[str], wanted: list[str]) -> list[str]:
    """The definition: every walked file, by relpath, first root first, each once."""
    match = globs.any_of(tuple(wanted))
    out: list[str] = []
    for r in roots:
        top = os.path.join(root, r)
        found = []
        for d, dirs, files in os.walk(top):
            dirs[:] = [x for x in dirs if x not in surface._SKIP_DIRS]
            found += [os.path.join(d, f) for f in files]
        for path in sorted(found, key=lambda p: p.split(os.sep)):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel not in out and match.match(rel) is not None:
                out.append(rel)
    return out


@pytest.mark.parametrize("roots", [["src"], ["src/"], ["."], ["src", "src/sub", "lib"],
                                   ["lib/", "./src"], ["src/sub", "."]])
def test_port_files_are_named_as_relpath_names_them(tmp_path: Path, roots: list[str]) -> None:
    root = tmp_path / "port"
    write(root, ".agents/upstream-sync.md", protocol_text(PIN))
    globs_ = ["**/*.cpp", "**/*.h", "**/*.cu"]
    write(root, ".agents/upstream-sync.toml",
          f"[surface]\nport_roots = {roots!r}\nheader_globs = {globs_!r}\n".replace("'", '"'))
    for rel in FILES:
        write(root, rel, "// x\n")
    p = port_mod.locate(str(root))
    found = list(surface.port_files(p))
    assert [rel for rel, _ in found] == reference(root, roots, globs_)
    assert all(os.path.samefile(path, root / rel) for rel, path in found)


_ASKED = ["top.cpp", "src", "a.cpp", "sub/b.h", "src/sub/c.txt", "lib/d.cu", "d.cu",
          "./src/a.cpp", "../port/top.cpp", "vllm/a.py", "", "/etc", "upstream-sync.md",
          "sub", "sub/missing.h", "nothere/x"]


def test_local_paths_are_those_some_base_holds(tmp_path: Path) -> None:
    # What `_local` answers is one `exists` per base (the root, the records' folder, each
    # ported root); it only lists each base once instead of asking each base for each path.
    root = tmp_path / "port"
    write(root, ".agents/upstream-sync.md", protocol_text(PIN))
    write(root, ".agents/upstream-sync.toml", '[surface]\nport_roots = ["src", "lib/", "gone"]\n')
    for rel in FILES:
        write(root, rel, "// x\n")
    p = port_mod.locate(str(root))
    bases = [root, root / ".agents", root / "src", root / "lib", root / "gone"]
    for path in _ASKED:
        assert p._local(path) == any(os.path.exists(os.path.join(b, path)) for b in bases), path
