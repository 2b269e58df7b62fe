"""Attribution: which oracle's upstream each citation cites, and which paths are the port's own.

Ports cite more than one upstream (DESIGN §3): the oracle files name them
(`upstream = https://github.com/ggml-org/llama.cpp`), and the configuration may add
names and path prefixes per oracle. A citation belongs to another oracle when its
statement names that project (`from llama.cpp @`, `@ LMCache 8570aad`), when its
path has one of that oracle's prefixes, or when its SHA is that oracle's pin; a
project a statement names that no oracle file registers is attributed to it by
name ("cites llama.cpp at 237ad9b96, not verified here"). Everything else is the
core oracle's (vLLM): its paths are rewritten by the configured prefixes
(`vllm/csrc/...` is upstream `csrc/...`). A "citation" of a file the port itself
holds (`tests/vt/x.cpp`, `.agents/specs/x.md`, the file's own path) is a mention.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from sync.headers.citations import CORE, Citation, Header, Mention

_REPO = re.compile(r"(?:https?://[^/\s]+/|git@[^:\s]+:)?(?P<repo>[\w.-]+/[\w.-]+?)(?:\.git)?/?\Z")
DEFAULT_REWRITES: tuple[tuple[str, str], ...] = (
    ("vllm/csrc/", "csrc/"), ("vllm/tests/", "tests/"), ("vllm/docs/", "docs/"))


@dataclass(frozen=True)
class Oracle:
    id: str
    names: frozenset[str]  # lower-case names a statement may call it by
    prefixes: tuple[str, ...] = ()  # cited path prefixes that belong to its tree
    pin: str | None = None  # its pinned commit (40 hex), when the oracle file gives one
    registered: bool = True  # an oracle file (or the configuration) declares it


def names_of(oracle_id: str, upstream: str = "") -> frozenset[str]:
    """The names an oracle is cited by: its id, its upstream's owner/repo and repo name."""
    out = {oracle_id.lower()}
    m = _REPO.search(upstream.strip())
    if m is not None:
        repo = m["repo"].lower()
        out |= {repo, repo.rsplit("/", 1)[-1]}
    return frozenset(out)


def _never_local(_path: str) -> bool:
    return False


@dataclass(frozen=True)
class Upstreams:
    """The oracles citations may belong to, and how to tell the port's own paths."""

    oracles: tuple[Oracle, ...] = ()
    rewrites: tuple[tuple[str, str], ...] = DEFAULT_REWRITES
    local: Callable[[str], bool] = _never_local  # whether the port itself holds the path
    records: str = ".agents/"  # the port's records folder: never an upstream path
    core: str = CORE
    _by_name: dict[str, str] = field(default_factory=dict, init=False, repr=False,
                                     compare=False)

    def __post_init__(self) -> None:
        for o in self.oracles:
            for n in o.names:
                self._by_name.setdefault(n, o.id)

    def named(self, project: str) -> str:
        """The oracle id a project name (as written) stands for; an unregistered name is its
        own id."""
        low = project.lower().removesuffix("'s")
        for key in (low, low.rsplit("/", 1)[-1]):
            if key in self._by_name:
                return self._by_name[key]
        return project

    def by_path(self, path: str) -> str | None:
        for o in self.oracles:
            if o.id != self.core and any(path.startswith(p) for p in o.prefixes):
                return o.id
        return None

    def by_sha(self, sha: str) -> str | None:
        for o in self.oracles:
            if o.id != self.core and o.pin and len(sha) >= 7 and o.pin.startswith(sha):
                return o.id
        return None

    def registered(self, oracle_id: str) -> bool:
        return oracle_id == self.core or any(o.id == oracle_id for o in self.oracles)

    def rewrite(self, path: str) -> str | None:
        for old, new in self.rewrites:
            if path.startswith(old):
                return new + path[len(old):]
        return None


def _oracle_of(c: Citation, ups: Upstreams) -> str:
    if c.project is not None:
        return ups.named(c.project)
    return ups.by_path(c.path) or (ups.by_sha(c.sha) if c.sha else None) or ups.core


def _local_why(path: str, ups: Upstreams, rel: str) -> str | None:
    if path.startswith(ups.records):
        return "record"
    if path == rel or ups.local(path):
        return "port-local"
    return None


def _mention_why(m: Mention, ups: Upstreams, rel: str) -> Mention:
    """A mention of the port's own file or record says so (it is no upstream reference)."""
    if m.why != "prose":
        return m
    why = _local_why(m.path, ups, rel)
    return m if why is None else Mention(m.path, m.line, "record" if why == "record" else
                                         "port-local")


def attribute(header: Header, ups: Upstreams, rel: str) -> Header:
    """`header` with each citation attributed to its oracle (core paths rewritten) and the
    port's own paths moved to its mentions. A PORTED header left with no citation cites
    only the port itself: it is no per-file pin header."""
    if not header.citations and not header.mentions:
        return header
    kept: list[Citation] = []
    mentions = [_mention_why(m, ups, rel) for m in header.mentions]
    for c in header.citations:
        why = _local_why(c.path, ups, rel)
        if why is not None:
            mentions.append(Mention(c.path, c.line, "record" if why == "record" else
                                    "port-local"))
            continue
        oracle = _oracle_of(c, ups)
        upstream = ups.rewrite(c.path) if oracle == ups.core else None
        # Most citations are already what attribution makes them; replace() is costly.
        same = c.oracle == oracle and c.upstream == upstream
        kept.append(c if same else replace(c, oracle=oracle, upstream=upstream))
    kind = header.kind if kept or header.kind != "PORTED" else "NONE"
    verb = header.verb if kind == "PORTED" else None
    if (kind, verb) == (header.kind, header.verb) and tuple(kept) == header.citations \
            and tuple(mentions) == header.mentions:
        return header
    return replace(header, kind=kind, citations=tuple(kept), mentions=tuple(mentions),
                   verb=verb)


@dataclass(frozen=True)
class Learned:
    """What the port's named citations teach about its unnamed ones: the SHAs and the first
    path segments (`flashinfer/`, `lmcache/`) another oracle's citations use."""

    shas: dict[str, str]  # SHA as written -> oracle
    roots: dict[str, str]  # first path segment + "/" -> oracle

    def oracle_of(self, c: Citation) -> str | None:
        if c.sha:
            for known, oracle in self.shas.items():
                if known.startswith(c.sha) or c.sha.startswith(known):
                    return oracle
        head = c.path.split("/", 1)[0] + "/"
        return self.roots.get(head) if "/" in c.path else None


def learn(headers: Iterable[Header], ups: Upstreams) -> Learned:
    """SHAs and path roots of the citations whose statements name another oracle (a root
    only when it is the oracle's own name: `flashinfer/` for FlashInfer)."""
    shas: dict[str, str] = {}
    roots: dict[str, str] = {}
    for h in headers:
        for c in h.citations:
            if c.oracle == ups.core:
                continue
            if c.sha and len(c.sha) >= 7:
                shas.setdefault(c.sha, c.oracle)
            head = c.path.split("/", 1)[0]
            if "/" in c.path and head.lower() in (c.oracle.lower(),
                                                  c.oracle.lower().rsplit("/", 1)[-1]):
                roots.setdefault(head + "/", c.oracle)
    return Learned(shas, roots)


def reattribute(header: Header, learned: Learned, ups: Upstreams) -> Header:
    """Core citations whose SHA or path root another oracle's named citations use belong to
    that oracle (a file citing `flashinfer/decode.py` without naming FlashInfer)."""
    if not (learned.shas or learned.roots) or not any(c.oracle == ups.core
                                                      for c in header.citations):
        return header
    cites = []
    for c in header.citations:
        other = learned.oracle_of(c) if c.oracle == ups.core and c.project is None else None
        cites.append(c if other is None else replace(c, oracle=other, upstream=None))
    return replace(header, citations=tuple(cites))
