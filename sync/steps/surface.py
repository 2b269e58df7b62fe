"""The ported surface: which upstream paths the port mirrors, and which port files mirror each.

Three sources, merged into one many-to-many map: per-file header citations of the core
oracle (PORTED headers only: an ORIGINAL file that cites upstream is not a port of it),
inline citation statements of upstream `*.py` paths anywhere in the ported roots, and the
configured mapping rules (`src/vllm/**/*.cpp` <- `vllm/{stem}.py`). What is only named
(a mention, in a header or inline) or watched (an original file whose semantics mirror an
upstream path) is kept apart as a reference: listed, never a reason for PORT-NOW.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sync.headers import citations as headers
from sync.headers import oracles
from sync.infra import globs
from sync.port import Port
from sync.records.config import Config, Mapping

_SKIP_DIRS = {".git", ".nox", "node_modules", "__pycache__", "build", ".venv"}


@dataclass(frozen=True)
class Surface:
    by_upstream: dict[str, tuple[str, ...]]  # upstream path -> port files (sorted)
    file_headers: dict[str, headers.Header]  # port file -> its parsed, attributed header
    mirrored: tuple[str, ...]
    watched: dict[str, tuple[str, ...]] = field(default_factory=dict)  # original files
    references: dict[str, tuple[str, ...]] = field(default_factory=dict)  # mentions

    def citing(self, upstream_path: str) -> tuple[str, ...]:
        """The port files that cite or watch `upstream_path` (whose moves they must follow)."""
        return tuple(sorted({*self.by_upstream.get(upstream_path, ()),
                             *self.watched.get(upstream_path, ())}))

    def port_files(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        out: set[str] = set()
        for p in upstream_paths:
            out.update(self.by_upstream.get(p, ()))
        return tuple(sorted(out))

    def ported(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for p in upstream_paths if p in self.by_upstream}))

    def mirrored_paths(self, upstream_paths: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for p in upstream_paths if is_mirrored(p, self.mirrored)}))


def is_mirrored(path: str, mirrored: tuple[str, ...]) -> bool:
    return any(path == m.rstrip("/") or path.startswith(m.rstrip("/") + "/") for m in mirrored)


def port_files(port: Port) -> Iterator[Path]:
    """Every file under the ported roots matching the header globs, in sorted order."""
    cfg = port.config
    seen: set[Path] = set()
    for root_rel in cfg.port_roots:
        root = port.root / root_rel
        if not root.is_dir():
            continue
        for path in sorted(_walk(root)):
            rel = path.relative_to(port.root).as_posix()
            if path not in seen and any(globs.match(rel, g) for g in cfg.header_globs):
                seen.add(path)
                yield path


def _walk(root: Path) -> Iterator[Path]:
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            if child.name not in _SKIP_DIRS:
                yield from _walk(child)
        elif child.is_file():
            yield child




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


def read_headers(port: Port) -> tuple[dict[str, headers.Header], dict[str, str]]:
    """(port file -> its attributed header, port file -> its text) for every scanned file;
    a citation another oracle's named citations explain (its SHA, its path root) is theirs."""
    texts: dict[str, str] = {}
    found: dict[str, headers.Header] = {}
    for path in port_files(port):
        rel = path.relative_to(port.root).as_posix()
        try:
            texts[rel] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found[rel] = port.header(rel, texts[rel])
    ups = port.upstreams()
    learned = oracles.learn(found.values(), ups)
    return {rel: oracles.reattribute(h, learned, ups) for rel, h in found.items()}, texts


def build(port: Port) -> Surface:
    cfg: Config = port.config
    core = port.upstreams().core
    by_upstream: dict[str, set[str]] = {}
    watched: dict[str, set[str]] = {}
    refs: dict[str, set[str]] = {}
    file_headers, texts = read_headers(port)
    for rel, header in file_headers.items():
        cited: set[str] = set()
        mine = [c.upstream_path for c in header.citations if c.oracle == core]
        if header.kind == "PORTED":
            cited.update(mine)
        elif header.kind == "ORIGINAL":
            for up in mine:
                watched.setdefault(up, set()).add(rel)
        if header.kind != "ORIGINAL":
            inline = headers.inline_paths(texts[rel], cfg.mirrored)
            cited.update(inline.cited)
            for up in inline.mentioned:
                refs.setdefault(up, set()).add(rel)
        for m in header.mentions:
            if m.why == "prose":
                refs.setdefault(m.path, set()).add(rel)
        for mapping in cfg.mappings:
            mapped = mapped_upstream(rel, mapping)
            if mapped is not None:
                cited.add(mapped)
        for up in cited:
            by_upstream.setdefault(up, set()).add(rel)
    return Surface(_sorted(by_upstream), file_headers, cfg.mirrored, _sorted(watched),
                   _sorted(refs))
