"""Coarse citations: large upstream files cited whole that made a commit PORT-NOW.

Under a whole-file citation any changed definition of the file is PORT-NOW (DESIGN §8), so
a port file that mirrors two functions of a 4,000-line file is asked to port every change
to the other functions. The report says which citations those were, so a port learns to
cite symbols: per (upstream file, port file), the commits it made PORT-NOW, and the
definitions of the file that the port file's own text names (a C++ port keeps the names,
or writes them in CamelCase), the anchors that would make the citation precise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from sync.steps.classify import Entry

COARSE_LINES = 300  # an upstream file this long, cited whole, is coarse
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A name of one word (`build`, `forward`, `sample`) is in any text: no evidence of a mirror.
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@dataclass(frozen=True)
class Coarse:
    path: str  # the upstream file
    lines: int  # its length after the newest commit that changed it
    port_file: str
    commits: tuple[str, ...]  # the PORT-NOW commits this citation made, in range order
    definitions: int  # how many definitions the file has
    named: tuple[str, ...]  # of them, those the port file's text names, in file order

    def doc(self) -> dict[str, object]:
        return {"path": self.path, "lines": self.lines, "port_file": self.port_file,
                "commits": list(self.commits), "definitions": self.definitions,
                "named": list(self.named)}


def find(entries: Iterable[Entry], read: Callable[[str], str | None]) -> tuple[Coarse, ...]:
    """The coarse citations behind the PORT-NOW entries the pass classified; `read` gives a
    port file's text (None when it cannot be read)."""
    shas: dict[tuple[str, str], list[str]] = {}
    size: dict[str, tuple[int, tuple[str, ...]]] = {}
    for sha, path, port_file, lines, definitions in _whole_file_hits(entries):
        got = shas.setdefault((path, port_file), [])
        if sha not in got:
            got.append(sha)
        size[path] = (lines, definitions)  # the newest commit's: entries are in range order
    out = []
    for (path, port_file), commits in sorted(shas.items()):
        lines, definitions = size[path]
        out.append(Coarse(path, lines, port_file, tuple(commits), len(definitions),
                          named(definitions, read(port_file) or "")))
    return tuple(out)


def _whole_file_hits(entries: Iterable[Entry]) -> Iterator[
        tuple[str, str, str, int, tuple[str, ...]]]:
    """(sha, upstream path, port file, the file's lines, its definitions) per whole-file
    verdict of a coarse length that made an entry PORT-NOW."""
    for e in entries:
        if e.disposition != "PORT-NOW" or not e.auto or e.evidence is None:
            continue
        files = {fc.path: fc for fc in e.evidence.files}
        for v in e.evidence.verdicts:
            fc = files.get(v.path)
            if v.outcome != "whole-file" or fc is None:
                continue
            lines = fc.new_lines or fc.old_lines
            if lines >= COARSE_LINES:
                yield e.sha, v.path, v.cited.cite.port_file, lines, fc.definitions


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def named(definitions: Iterable[str], text: str) -> tuple[str, ...]:
    """The definitions (`Class.method` by its last part) whose name of two words or more
    `text` holds as an identifier, in any case and with or without underscores; a class
    whose members are among them is left out (citing the members is the precise anchor, and
    a change to the class's own statements still reaches them)."""
    words = {_key(w) for w in _IDENT.findall(text)}
    out = []
    for name in definitions:
        last = name.rsplit(".", 1)[-1]
        if last.startswith("__") and last.endswith("__"):
            continue  # `__init__`: a constructor is named by its class
        if len(_WORDS.findall(last)) >= 2 and _key(last) in words:
            out.append(name)
    return tuple(n for n in out if not any(m.startswith(n + ".") for m in out))
