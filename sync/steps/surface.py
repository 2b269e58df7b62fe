"""The ported surface: which upstream paths the port mirrors, and which port files mirror each.

Three sources, merged into one many-to-many map: per-file header citations
(PORTED headers only: an ORIGINAL file that cites upstream is not a port of it),
inline citations of upstream `*.py` paths anywhere in the ported roots, and the
configured mapping rules (`src/vllm/**/*.cpp` <- `vllm/{stem}.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sync.headers import citations as headers
from sync.infra import globs
from sync.port import Port
from sync.records.config import Config, Mapping

_SKIP_DIRS = {".git", ".nox", "node_modules", "__pycache__", "build", ".venv"}


@dataclass(frozen=True)
class Surface:
    by_upstream: dict[str, tuple[str, ...]]  # upstream path -> port files (sorted)
    file_headers: dict[str, headers.Header]  # port file -> its parsed header
    mirrored: tuple[str, ...]

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


def build(port: Port) -> Surface:
    cfg: Config = port.config
    by_upstream: dict[str, set[str]] = {}
    file_headers: dict[str, headers.Header] = {}
    for path in port_files(port):
        rel = path.relative_to(port.root).as_posix()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        header = headers.parse_header(text, rel)
        file_headers[rel] = header
        cited: set[str] = set()
        if header.kind == "PORTED":
            cited.update(c.path for c in header.citations)
        if header.kind != "ORIGINAL":
            cited.update(headers.inline_citations(text, cfg.mirrored))
        for m in cfg.mappings:
            up = mapped_upstream(rel, m)
            if up is not None:
                cited.add(up)
        for up in cited:
            by_upstream.setdefault(up, set()).add(rel)
    return Surface({k: tuple(sorted(v)) for k, v in sorted(by_upstream.items())}, file_headers,
                   cfg.mirrored)
