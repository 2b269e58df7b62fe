"""The ported surface: which upstream paths the port mirrors, and which port files mirror each.

Three sources, merged into one many-to-many map: per-file header citations of the core
oracle (PORTED headers only: an ORIGINAL file that cites upstream is not a port of it),
inline citation statements of upstream `*.py` paths anywhere in the ported roots, and the
configured mapping rules (`src/vllm/**/*.cpp` <- `vllm/{stem}.py`). What is only named
(a mention, in a header or inline) or watched (an original file whose semantics mirror an
upstream path) is kept apart as a reference: listed, never a reason for PORT-NOW.

Each citation is also kept as a `Cite`, with its anchors (`::Sym`, `(A, B)`, `:A-B`)
and where it is in the port file, for the symbol pass; and each port file's DEFERRED
/ "not ported" paragraphs (`headers.deferred`) for the deferred-feature signal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from sync.headers import citations as headers
from sync.headers import deferred as deferred_mod
from sync.headers import oracles
from sync.infra import globs
from sync.port import Port
from sync.records.config import Config, Mapping
from sync.steps import scan
from sync.upstream.history import Commit

_SKIP_DIRS = {".git", ".nox", "node_modules", "__pycache__", "build", ".venv"}


CiteSource = Literal["header", "inline", "mapping"]


@dataclass(frozen=True)
class Cite:
    """One port file citing one upstream path, with the anchors it gives."""

    port_file: str
    path: str  # the upstream path
    line: int  # 1-based line in the port file; 0 when a mapping rule implies the citation
    symbols: tuple[str, ...] = ()  # `path::Sym`, `path (A, B)`: () when none
    lines: str | None = None  # `path:A-B`, `path:N` (comma lists allowed)
    sha: str | None = None  # the cited SHA as written; None: read at the pin
    source: CiteSource = "header"

    @property
    def whole_file(self) -> bool:
        return not self.symbols and not self.lines

    def where(self) -> str:
        return f"{self.port_file}:{self.line}" if self.line else self.port_file

    def anchor(self) -> str:
        """The citation as a header writes it: `path::Sym`, `path (A, B)` for several
        symbols (never `path::A::B`, which reads as a nested name), `path:A-B`."""
        named = (f" ({', '.join(self.symbols)})" if len(self.symbols) > 1
                 else "".join(f"::{s}" for s in self.symbols))
        lines = f":{self.lines}" if self.lines else ""
        at = f" @ {self.sha}" if self.sha else ""
        return f"{self.path}{named + lines or ' (whole file)'}{at}"


@dataclass(frozen=True)
class Surface:
    by_upstream: dict[str, tuple[str, ...]]  # upstream path -> port files (sorted)
    file_headers: dict[str, headers.Header]  # port file -> its parsed, attributed header
    mirrored: tuple[str, ...]
    cites: dict[str, tuple[Cite, ...]] = field(default_factory=dict)  # upstream path -> cites
    deferred: dict[str, tuple[deferred_mod.Deferred, ...]] = field(default_factory=dict)
    model_globs: tuple[str, ...] = ()
    watched: dict[str, tuple[str, ...]] = field(default_factory=dict)  # original files
    references: dict[str, tuple[str, ...]] = field(default_factory=dict)  # mentions
    # Ported files whose bytes are not UTF-8, each located at its first bad byte on its
    # header's lines, else at its first ("src/x.cpp:3: is not UTF-8 (byte 0xe9 at column 5,
    # offset 40)", as bump-headers refuses such a header).
    not_utf8: tuple[str, ...] = ()
    # Other scanned files that are not UTF-8: a bad byte inside `Ported from` leaves no header
    # to read, and the file would drop out of the surface in silence (walk-s11 U6).
    not_utf8_other: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()  # `[classify] untargeted_platforms`
    # Those of `not_utf8` whose header's lines are UTF-8: bump-headers rewrites their
    # headers and writes every other byte back as it was.
    not_utf8_kept: tuple[str, ...] = ()

    def citing(self, upstream_path: str) -> tuple[str, ...]:
        """The port files that cite or watch `upstream_path` (whose moves they must follow)."""
        return tuple(sorted({*self.by_upstream.get(upstream_path, ()),
                             *self.watched.get(upstream_path, ())}))

    def named(self, upstream_path: str | None) -> bool:
        """A citation gives this path itself (it is not only the new name of a cited path
        that a commit of the range renamed: `followed`)."""
        return any(c.path == upstream_path for c in self.cites.get(upstream_path or "", ()))

    def port_files(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        out: set[str] = set()
        for p in upstream_paths:
            out.update(self.by_upstream.get(p, ()))
        return tuple(sorted(out))

    def ported(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for p in upstream_paths if p in self.by_upstream}))

    def mirrored_paths(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for p in upstream_paths if is_mirrored(p, self.mirrored)}))


def aliased(surf: Surface, upstream_paths: Iterable[str]) -> Surface:
    """`surf` with each citation of a path written without its root (`model_executor/x.py`,
    `gpu/block_table.py`: no mirrored subtree starts it) also filed under every upstream
    path of `upstream_paths` that ends with it: a change there touches what it cites."""
    tails = _relative_keys(surf)
    if not tails:
        return surf
    cites = dict(surf.cites)
    files = dict(surf.by_upstream)
    for p in sorted(set(upstream_paths)):
        keys = [k for k in tails.get(p.rsplit("/", 1)[-1], ()) if p.endswith("/" + k)]
        if keys and is_mirrored(p, surf.mirrored):
            cites[p] = (*cites.get(p, ()),
                        *(replace(c, path=p) for k in keys for c in surf.cites[k]))
            files[p] = tuple(sorted({*files.get(p, ()), *(f for k in keys for f in files[k])}))
    return replace(surf, cites=cites, by_upstream=files)


def in_range(surf: Surface, commits: list[Commit]) -> Surface:
    """`surf` as a range's commits are classified against it: relative citations filed
    under the full paths the range touches (`aliased`), then renames followed (`followed`)."""
    return followed(aliased(surf, (p for c in commits for p in c.paths)), commits)


def followed(surf: Surface, commits: Iterable[Commit]) -> Surface:
    """`surf` with the citations of each cited path a commit renames also filed under the
    new name (oldest first, so a rename of a renamed path follows it too): a later commit
    that changes the file under its new name changes what they cite, though the port file
    names the old path until it is re-pointed. Each citation keeps the path it names."""
    cites = dict(surf.cites)
    files = dict(surf.by_upstream)
    for c in commits:
        for ch in c.changes:
            if ch.status != "R" or ch.old_path not in cites or ch.old_path == ch.path:
                continue
            cites[ch.path] = tuple(dict.fromkeys((*cites.get(ch.path, ()),
                                                  *cites[ch.old_path])))
            files[ch.path] = tuple(sorted({*files.get(ch.path, ()),
                                           *files.get(ch.old_path, ())}))
    if cites == surf.cites:
        return surf
    return replace(surf, cites=cites, by_upstream=files)


def _relative_keys(surf: Surface) -> dict[str, list[str]]:
    """The cited paths no mirrored subtree starts, by file name."""
    out: dict[str, list[str]] = {}
    for k in surf.cites:
        if "/" in k and not is_mirrored(k, surf.mirrored):
            out.setdefault(k.rsplit("/", 1)[1], []).append(k)
    return out


def is_mirrored(path: str, mirrored: tuple[str, ...]) -> bool:
    return any(path == m.rstrip("/") or path.startswith(m.rstrip("/") + "/") for m in mirrored)


def port_files(port: Port) -> Iterator[tuple[str, str]]:
    """(port-relative path, path) of every file under the ported roots matching the header
    globs, in sorted order."""
    wanted = globs.any_of(port.config.header_globs)
    seen: set[str] = set()
    root = os.path.abspath(port.root)
    for root_rel in port.config.port_roots:
        top = os.path.normpath(os.path.join(root, root_rel))
        if not os.path.isdir(top):
            continue
        # One relpath per root, not per file: every walked path is `top` + "/" + a tail.
        base = os.path.relpath(top, root).replace(os.sep, "/")
        for path in sorted(_walk(top), key=_parts):
            tail = path[len(top):].lstrip(os.sep).replace(os.sep, "/")
            rel = tail if base == "." else f"{base}/{tail}"
            if rel not in seen and wanted.match(rel) is not None:
                seen.add(rel)
                yield rel, path


def _parts(path: str) -> list[str]:
    return path.split(os.sep)  # the order Path objects sort in: component by component


def _walk(top: str) -> Iterator[str]:
    """Files under `top` (os.scandir: one system call per directory), symlinked folders and
    tool folders skipped."""
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIP_DIRS:
                    yield from _walk(entry.path)
            elif entry.is_file():
                yield entry.path
        except OSError:
            continue


def mapped_upstream(rel: str, mapping: Mapping) -> str | None:
    """The upstream path a port file maps to under one mapping rule, or None."""
    if not globs.match(rel, mapping.port):
        return None
    prefix = re.split(r"[*?\[]", mapping.port, maxsplit=1)[0]
    stem = rel[len(prefix):]
    stem = stem.rsplit(".", 1)[0] if "." in Path(stem).name else stem
    return mapping.upstream.replace("{stem}", stem)


def _sorted(m: dict[str, set[str]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(sorted(v)) for k, v in sorted(m.items())}


def _not_utf8(scans: dict[str, scan.FileScan], file_headers: dict[str, headers.Header], *,
              ported: bool, kept: bool = False) -> tuple[str, ...]:
    """The scanned files (ported ones, or the others) that are not UTF-8, sorted, each
    located at its first bad byte (a ported file's on its header's lines, when one is
    there: what bump-headers refuses); `kept`: the ported ones whose header's lines are
    UTF-8."""
    out = []
    for rel, h in sorted(file_headers.items()):
        s = scans[rel]
        if (h.kind == "PORTED") != ported or s.not_utf8 is None:
            continue
        if kept and s.header_not_utf8 is not None:
            continue
        bad = (s.header_not_utf8 if ported else None) or s.not_utf8
        out.append(f"{rel}:{bad[0]}: {bad[1]}")
    return tuple(out)


def header_reader(port: Port, found: dict[str, headers.Header] | None = None
                  ) -> Callable[[str, str], headers.Header]:
    """Read one port file's header as `build` reads it: attributed, and with what the port's
    named citations teach about unnamed ones (`found`: the scanned files' headers, read now
    when not given)."""
    if found is None:
        found, _ = read_headers(port)
    ups = port.upstreams()
    learned = oracles.learn(found.values(), ups)

    def read(rel: str, text: str) -> headers.Header:
        known = found.get(rel)
        return known if known is not None else oracles.reattribute(
            port.header(rel, text), learned, ups)

    return read


def read_headers(port: Port) -> tuple[dict[str, headers.Header], dict[str, scan.FileScan]]:
    """(port file -> its attributed header, port file -> its scan) for every scanned file;
    a citation another oracle's named citations explain (its SHA, its path root) is theirs."""
    scans = scan.scan_files(port.root, port_files(port), port.config.mirrored)
    ups = port.upstreams()
    found = {rel: oracles.attribute(s.header, ups, rel) for rel, s in scans.items()}
    learned = oracles.learn(found.values(), ups)
    return {rel: oracles.reattribute(h, learned, ups) for rel, h in found.items()}, scans


def _resolved(citation: headers.Citation, header: headers.Header) -> str:
    """The full upstream path a citation names: a bare `name.py` (`basename::Sym`) is the
    header's full path with that name, when there is exactly one."""
    if "/" in citation.path:
        return citation.upstream_path
    full = {c.upstream_path for c in header.citations
            if "/" in c.path and c.path.rsplit("/", 1)[1] == citation.path}
    return full.pop() if len(full) == 1 else citation.upstream_path


@dataclass
class _Refs:
    """What a file names without porting it: mentions, and what an original file watches."""

    watched: dict[str, set[str]] = field(default_factory=dict)
    mentioned: dict[str, set[str]] = field(default_factory=dict)

    def add(self, kind: dict[str, set[str]], up: str, rel: str) -> None:
        kind.setdefault(up, set()).add(rel)


def _file_cites(rel: str, found: scan.FileScan, header: headers.Header, cfg: Config,
                refs: _Refs) -> list[Cite]:
    cites: list[Cite] = []
    core = [c for c in header.citations if c.oracle == headers.CORE]
    if header.kind == "PORTED":
        cites += [Cite(rel, _resolved(c, header), c.line, c.symbols, c.lines, c.sha)
                  for c in core]
    elif header.kind == "ORIGINAL":
        for c in core:
            refs.add(refs.watched, _resolved(c, header), rel)
    for mention in header.mentions:
        if mention.why == "prose":
            refs.add(refs.mentioned, mention.path, rel)
    if header.kind != "ORIGINAL":
        cites += _body_cites(rel, found, {c.path for c in cites})
        for up in found.inline.mentioned:
            refs.add(refs.mentioned, up, rel)
    for m in cfg.mappings:
        mapped = mapped_upstream(rel, m)
        if mapped is not None and all(c.path != mapped for c in cites):
            cites.append(Cite(rel, mapped, 0, source="mapping"))
    return cites


def _body_cites(rel: str, found: scan.FileScan, named: set[str]) -> list[Cite]:
    """Every path the body names and the header does not, for the symbol pass: one with no
    anchors is judged a mention (never PORT-NOW on its own; those no verb cites are
    references too); a statement that cites with anchors (`Ported from: x.py:165 (Sym)`
    over a struct) is judged by them, as a header's citation is."""
    lines = zip(found.inline.anchored, found.anchored_lines, strict=True)
    anchored = [(up, line, a) for (up, _at, a), line in lines if up not in named]
    plain = [Cite(rel, up, line, source="inline") for up, line in found.first_lines
             if up not in named and all(up != a[0] for a in anchored)]
    return plain + [Cite(rel, up, line, a.symbols, ",".join(a.ranges) or None,
                         source="inline") for up, line, a in anchored]


def build(port: Port) -> Surface:
    cfg: Config = port.config
    by_upstream: dict[str, set[str]] = {}
    cites: dict[str, list[Cite]] = {}
    deferred: dict[str, tuple[deferred_mod.Deferred, ...]] = {}
    refs = _Refs()
    file_headers, scans = read_headers(port)
    for rel, header in file_headers.items():
        found = _file_cites(rel, scans[rel], header, cfg, refs)
        for cite in found:
            by_upstream.setdefault(cite.path, set()).add(rel)
            cites.setdefault(cite.path, []).append(cite)
        if found and scans[rel].deferred:
            deferred[rel] = scans[rel].deferred
    return Surface(_sorted(by_upstream), file_headers, cfg.mirrored,
                   {k: tuple(v) for k, v in sorted(cites.items())}, deferred,
                   cfg.model_globs, _sorted(refs.watched), _sorted(refs.mentioned),
                   _not_utf8(scans, file_headers, ported=True),
                   _not_utf8(scans, file_headers, ported=False),
                   cfg.untargeted_platforms,
                   _not_utf8(scans, file_headers, ported=True, kept=True))
