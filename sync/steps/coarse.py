"""Coarse citations: large upstream files cited whole that made a commit PORT-NOW.

Under a whole-file citation any changed definition of the file is PORT-NOW (DESIGN §8), so
a port file that mirrors two functions of a 4,000-line file is asked to port every change
to the other functions. The report says which citations those were, so a port learns to
cite symbols: per (upstream file, port file), the commits it made PORT-NOW, and the
definitions of the file that the port file's own text names (a C++ port keeps the names,
or writes them in CamelCase), the anchors that would make the citation precise.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from sync.steps import symbols
from sync.steps.classify import Entry

COARSE_LINES = 300  # an upstream file this long, cited whole, is coarse
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Coarse:
    path: str  # the upstream file
    lines: int  # its length at the target (after the range's last commit that changed it)
    port_file: str
    commits: tuple[str, ...]  # the PORT-NOW commits this citation made, in range order
    definitions: int  # how many definitions the file has
    named: tuple[str, ...]  # of them, those the port file's text names, in file order
    decided: tuple[tuple[str, str], ...] = ()  # (commit, disposition) a maintainer decided

    def doc(self) -> dict[str, object]:
        return {"path": self.path, "lines": self.lines, "port_file": self.port_file,
                "commits": list(self.commits), "decided": dict(self.decided),
                "definitions": self.definitions, "named": list(self.named)}


def find(entries: Iterable[Entry], read: Callable[[str], str | None]) -> tuple[Coarse, ...]:
    """The coarse citations behind the entries the pass made PORT-NOW, and behind those a
    maintainer decided (what was decided is shown); `read` gives a port file's text (None
    when it cannot be read). Entries come in range order."""
    entries = list(entries)
    latest = _latest(entries)
    shas: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        for path, port_file in _whole_file_hits(e, latest):
            got = shas.setdefault((path, port_file), [])
            if e.sha not in got:
                got.append(e.sha)
    decided = {e.sha: e.disposition for e in entries if not e.auto}
    # A port file citing several coarse files is read and split into words once.
    words = functools.cache(lambda port_file: _Words.of(read(port_file) or ""))
    out = []
    for (path, port_file), commits in sorted(shas.items()):
        lines, definitions = latest[path]
        out.append(Coarse(path, lines, port_file, tuple(commits), len(definitions),
                          _named(definitions, words(port_file)),
                          tuple((c, decided[c]) for c in commits if c in decided)))
    return tuple(out)


def _latest(entries: list[Entry]) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Per upstream file cited whole: its length and definitions after the last commit of
    the range that changed it (whatever that commit's disposition): the file at the target."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    for e in entries:
        for fc in e.evidence.files if e.evidence is not None else ():
            if fc.definitions or fc.status == "D":
                out[fc.path] = (fc.lines, fc.definitions)
    return out


def _whole_file_hits(e: Entry, latest: dict[str, tuple[int, tuple[str, ...]]]
                     ) -> Iterator[tuple[str, str]]:
    """(upstream path, port file) per whole-file verdict of a coarse file that made the
    entry PORT-NOW (or that a maintainer then decided); a rule's demotion is not one."""
    if e.evidence is None or (e.auto and e.disposition != "PORT-NOW"):
        return
    for v in e.evidence.verdicts:
        if v.outcome == "whole-file" and latest.get(v.path, (0, ()))[0] >= COARSE_LINES:
            yield v.path, v.cited.cite.port_file


_CAMEL = re.compile(r"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def named(definitions: Iterable[str], text: str) -> tuple[str, ...]:
    """The definitions (`Class.method` by its last part) whose name of two words or more
    `text` holds as an identifier, in any case and with or without underscores, in file
    order. A class whose members are among them gives way to them (citing the members is
    the precise anchor, and a change to the class's own statements still reaches them), and
    to its constructor, which a C++ port defines under the class's name."""
    return _named(definitions, _Words.of(text))


def _named(definitions: Iterable[str], words: _Words) -> tuple[str, ...]:
    defs = list(definitions)
    out = [name for name in defs if _names(name.rsplit(".", 1)[-1], words)]
    kept = {n for n in out if not any(m.startswith(n + ".") for m in out)}
    kept |= {n + ".__init__" for n in out if n not in kept}
    return tuple(n for n in defs if n in kept)


@dataclass(frozen=True)
class _Words:
    """A port file's identifiers, for `_names`."""

    idents: frozenset[str]

    @classmethod
    def of(cls, text: str) -> _Words:
        return cls(frozenset(_IDENT.findall(text)))

    @functools.cached_property
    def folded(self) -> frozenset[str]:
        return frozenset(_key(w) for w in self.idents)

    @functools.cached_property
    def capital(self) -> frozenset[str]:
        """Folded, of the identifiers that start with a capital (`KvCacheSpec`)."""
        return frozenset(_key(w) for w in self.idents if w[:1].isupper())

    @functools.cached_property
    def public(self) -> frozenset[str]:
        """Folded, of the identifiers with no leading underscore."""
        return frozenset(_key(w) for w in self.idents if not w.startswith("_"))


def _names(last: str, words: _Words) -> bool:
    """Whether a definition's own name is among `words`: of two words or more, and not a
    dunder (`__init__` is named by its class). A CamelCase name (a class, an alias) only by
    a capitalised identifier (`KvCacheSpec` for `KVCacheSpec`; folded from any word, a field
    `tool_choice` named `ToolChoice`); a public name not by a private one
    (`_get_function_parameters` is the pin's name of what became `get_function_parameters`),
    a private one also in CamelCase (walk-s12 O1). Otherwise in any case, with or without
    underscores."""
    if last.startswith("__") and last.endswith("__"):
        return False
    # A name of one word (`build`, `forward`, `sample`) is in any text: no evidence of a mirror.
    if len(symbols.name_words(last)) < 2:
        return False
    if _CAMEL.fullmatch(last):
        return _key(last) in words.capital
    return _key(last) in (words.folded if last.startswith("_") else words.public)
