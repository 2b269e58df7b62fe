"""The symbol pass: what each commit changed in the upstream files the port cites, per definition,
and what each citation of those files names.

For the commits that touch a cited path, one `git diff-tree --stdin` lists their patches
(renames followed; only the files of cited paths and their rename partners are kept) and
one `git cat-file --batch` reads every blob the comparison needs: both sides of each
changed Python file, and each anchored citation's file at its cited SHA and at the
pin (with its folder's tree there, whose mode says whether it was a symbolic link). So
the pass adds two git processes to a run, whatever the number of commits. Python blobs are mapped to
definitions by `steps.symbols`; a file that is not Python, is a symbolic link (its blob
is the link's target) or does not parse stays at path level, with the reason.

A citation's anchor is read at its cited SHA (at the pin when that SHA is not a commit
in the checkout, or the file is not at it or is a symbolic link there): `::Sym` by name,
`:A-B` as the definitions enclosing those lines there. When it names both and they
disagree, the name wins and the disagreement is noted. A line range inside a definition
longer than `HUGE` lines keeps its statements (translated to the commit's parent), so a
change elsewhere in a 700-line `__post_init__` is told apart from one in the cited lines.
"""

from __future__ import annotations

import difflib
import gc
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from sync.infra import fanout, globs
from sync.infra.cache import Store
from sync.infra.notes import Notes
from sync.steps import symbols
from sync.steps.surface import Cite, Surface
from sync.upstream import gitio, history, patch

HUGE = 150  # lines: a definition this long is compared statement by statement for :A-B cites
SUSPECT_UNITS = 3  # a line range over more top-level definitions than this is suspect
_PY = (".py", ".pyi")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_STORE = "symbols"  # per reference checkout: upstream commits' changes, by what they depend on
KEEP_COMMITS = 20_000  # cached commits kept from earlier passes (a few cycles' ranges)

How = Literal["symbols", "lines", "whole-file", "path-level"]


@dataclass(frozen=True)
class Cited:
    """One citation of a path, read against one commit."""

    cite: Cite
    how: How
    names: tuple[str, ...] = ()  # the definitions it names; () for the whole file
    note: str = ""  # why it fell back, or where its anchors disagree
    at: str = ""  # where the anchor was read: "d28fbddc", "the pin", "the commit's parent"
    ranges: tuple[tuple[int, int], ...] = ()  # its line ranges in the parent's blob
    statements: tuple[tuple[int, int], ...] = ()  # in a huge definition: the cited statements
    own: tuple[str, ...] = ()  # classes a line range names by their own statements only


@dataclass(frozen=True)
class FileChange:
    """One cited path as one commit changed it."""

    path: str  # the cited path (the old name of a rename when that is cited)
    status: str
    old_path: str | None
    new_path: str | None
    hunks: tuple[patch.Hunk, ...]
    units: tuple[symbols.UnitChange, ...]
    fallback: str | None  # path level: "not Python (.cu)", "does not parse after: line 3 ..."
    cited: tuple[Cited, ...]
    old_lines: int = 0  # lengths of the two blobs (0: absent or not read)
    new_lines: int = 0
    # Under a whole-file citation: the file's definitions after the commit (before it, for a
    # deletion), which the report's coarse citations match against the citing port files.
    definitions: tuple[str, ...] = ()

    @property
    def lines(self) -> int:
        """The file's length after the commit (before it, for a deletion)."""
        return self.new_lines or self.old_lines


@dataclass(frozen=True)
class CommitChanges:
    sha: str
    files: tuple[FileChange, ...]
    models: tuple[str, ...] = ()  # models this commit changes that no port file cites


@dataclass(frozen=True)
class Pass:
    """The symbol pass over a range: per commit that touches a cited path."""

    commits: dict[str, CommitChanges] = field(default_factory=dict)
    git_processes: int = 0


def _python(path: str) -> bool:
    return path.lower().endswith(_PY)


def _related(commit: history.Commit, cited: set[str]) -> set[str]:
    """The commit's cited paths plus the other name of each rename that involves one."""
    out = {p for p in commit.paths if p in cited}
    for ch in commit.changes:
        if ch.old_path is not None and (ch.old_path in cited or ch.path in cited):
            out.update((ch.old_path, ch.path))
    return out


def models(commit: history.Commit, surf: Surface) -> tuple[str, ...]:
    """Model names (the first path part under a model glob's folder) the commit changes
    and no port file cites: `vllm/models/kimi_k3/...` gives `kimi_k3`."""
    names: set[str] = set()
    cited_names: set[str] = set()
    for p in commit.paths:
        for g in surf.model_globs:
            prefix = re.split(r"[*?\[]", g, maxsplit=1)[0]
            if prefix and p.startswith(prefix) and globs.match(p, g):
                head = p[len(prefix):].split("/", 1)[0]
                stem = head.rsplit(".", 1)[0] if head.endswith(_PY) else head
                (cited_names if p in surf.by_upstream else names).add(stem.lower())
    return tuple(sorted(names - cited_names))


def gather(ref: gitio.Reference, commits: Iterable[history.Commit], surf: Surface, pin: str,
           notes: Notes | None = None) -> Pass:
    """The symbol pass for every commit that touches a cited path (two git processes)."""
    before = gitio.PROCESS_COUNT
    cited = set(surf.cites)
    touching = [c for c in commits if any(p in cited for p in c.paths)]
    if not touching:
        return Pass()
    if notes is not None:
        notes.progress(f"reading the patches of {len(touching)} commits that touch cited paths")
    # Patches and syntax trees are acyclic and dropped when the pass returns; the cyclic
    # collector would only rescan the millions of objects kept meanwhile (it more than
    # doubled the pass's time).
    store = Store(ref.path, _STORE)
    cached = store.load()
    keys = {c.sha: _key(c, surf, pin) for c in touching}
    out = {c.sha: cached[keys[c.sha]] for c in touching
           if isinstance(cached.get(keys[c.sha]), CommitChanges)}
    missing = [c for c in touching if c.sha not in out]
    enabled = gc.isenabled()
    gc.disable()
    try:
        if missing:
            out.update(_read(ref, missing, surf, pin))
    finally:
        if enabled:
            gc.enable()
    if missing:
        # What other passes cached stays (an `explain` of one commit must not empty a
        # sync's cache), up to a bound: past it, only this pass's commits are kept.
        kept = {} if len(cached) > KEEP_COMMITS else dict(cached)
        kept.update({keys[sha]: changes for sha, changes in out.items()})
        store.save(kept)
    return Pass({c.sha: out[c.sha] for c in touching}, gitio.PROCESS_COUNT - before)


def _key(c: history.Commit, surf: Surface, pin: str) -> tuple[object, ...]:
    """What a commit's changes depend on: the commit (immutable), the pin (anchors are read
    there when their SHA is not a commit), the citations of the paths it touches, and the
    models it changes that no port file cites."""
    related = sorted(_related(c, set(surf.cites)))
    return (c.sha, pin, tuple((p, surf.cites.get(p, ())) for p in related), models(c, surf))


def _read(ref: gitio.Reference, touching: list[history.Commit], surf: Surface,
          pin: str) -> dict[str, CommitChanges]:
    cited = set(surf.cites)
    spec: set[str] = set()
    for c in touching:
        spec |= _related(c, cited)
    listed = history.commit_patches(ref, [c.sha for c in touching], spec)
    blobs = _Blobs(ref, pin)
    plans = [(c, listed.get(c.sha)) for c in touching]
    for c, cp in plans:
        blobs.want_commit(c, cp, surf)
    blobs.read()
    tasks = [t for c, cp in plans for t in _tasks(c, cp, surf)]
    changed = _files(tasks, surf, blobs)
    files: dict[str, list[FileChange]] = {c.sha: [] for c in touching}
    for t, fc in zip(tasks, changed, strict=True):
        files[t.sha].append(fc)
    return {c.sha: CommitChanges(c.sha, tuple(files[c.sha]), models(c, surf))
            for c in touching}


def _files(tasks: list[_Task], surf: Surface, blobs: _Blobs) -> list[FileChange]:
    """Each task's file change. The parsing dominates, so the tasks are split across cores
    (`infra.fanout`) by path: each path's blobs are parsed in one process, whose outlines
    its commits share (a commit's new blob is the next one's old)."""
    by_path: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        by_path.setdefault(t.path, []).append(i)
    groups = list(by_path.values())

    def weight(group: list[int]) -> int:
        return sum(blobs.size(tasks[i].fp) for i in group)

    parts = fanout.split(groups, weight, fanout.jobs(sum(weight(g) for g in groups)))

    def work(part: list[list[int]]) -> list[tuple[int, FileChange]]:
        return [(i, _file(tasks[i].path, tasks[i].fp, surf.cites[tasks[i].path], blobs,
                          tasks[i].ctx)) for group in part for i in group]

    got: dict[int, FileChange] = {}
    for done in fanout.map_parts(work, parts):
        got.update(done)
    return [got[i] for i in range(len(tasks))]


# -- blobs: every one the pass needs, in one read -----------------------------------------------


@dataclass
class _Blobs:
    ref: gitio.Reference
    pin: str
    names: dict[str, int] = field(default_factory=dict)
    data: list[bytes | None] = field(default_factory=list)
    trees: dict[str, bytes] = field(default_factory=dict)  # `rev:dir` -> its raw tree
    outlines: dict[bytes, symbols.Outline | str] = field(default_factory=dict)  # by content
    moves: dict[tuple[bytes, bytes], _Mover] = field(default_factory=dict)  # by both contents

    def want(self, name: str | None) -> None:
        if name and name not in self.names:
            self.names[name] = len(self.names)

    def want_commit(self, commit: history.Commit, cp: patch.CommitPatch | None,
                    surf: Surface) -> None:
        for path in sorted(p for p in commit.paths if p in surf.cites):
            fp = cp.for_path(path) if cp is not None else None
            anchored = [c for c in surf.cites[path] if not c.whole_file]
            if fp is not None and (_python(fp.path) or anchored):
                self.want(fp.old_blob)
                self.want(fp.new_blob)
            for c in anchored:
                self.want_anchor(c, path)

    def want_anchor(self, c: Cite, path: str) -> None:
        """The blobs an anchored citation of `path` may be read in: at its SHA and at the
        pin, under the name it gives and (a rename followed in the range) the new one."""
        for named in dict.fromkeys((c.path, path)):
            for at in (c.sha, self.pin):
                self.want(_at(at, named))
                self.want(_folder(_at(at, named)))  # its mode there: is it a link?

    def read(self) -> None:
        """Every blob and folder wanted, in one `git cat-file --batch`."""
        got = gitio.cat_objects(self.ref, list(self.names))
        self.data = [o[1] if o is not None and o[0] == "blob" else None for o in got]
        self.trees = {n: o[1] for n, o in zip(self.names, got, strict=True)
                      if o is not None and o[0] == "tree"}

    def link(self, name: str) -> bool:
        """Blob `rev:path` is a symbolic link at rev (its folder's tree says mode 120000):
        its content is the link's target, no module to read an anchor in."""
        tree = self.trees.get(_folder(name) or "")
        base = name.rpartition(":")[2].rsplit("/", 1)[-1]
        size = len(self.pin) // 2 if len(self.pin) in (40, 64) else 20
        return tree is not None and gitio.tree_mode(tree, base, size) == patch.LINK

    def size(self, fp: patch.FilePatch) -> int:
        """What comparing a changed file costs, about: its blobs' bytes, when it is Python."""
        if not _python(fp.path):
            return 1
        return 1 + sum(len(self.get(b) or b"") for b in (fp.old_blob, fp.new_blob))

    def get(self, name: str | None) -> bytes | None:
        i = self.names.get(name or "")
        return None if i is None or i >= len(self.data) else self.data[i]

    def outline(self, name: str | None) -> symbols.Outline | str | None:
        """The outline of a blob, a string saying why it has none, or None when absent."""
        data = self.get(name)
        if data is None:
            return None
        if data not in self.outlines:  # the pin's, a cited SHA's and a parent's blob often agree
            try:
                self.outlines[data] = symbols.outline(data)
            except symbols.ParseFailure as exc:
                self.outlines[data] = str(exc)
        return self.outlines[data]

    def lines(self, name: str | None) -> list[str]:
        data = self.get(name)
        return [] if data is None else symbols.git_lines(data.decode("utf-8", "replace"))

    def mover(self, a: str, b: str | None) -> _Mover:
        """Lines of blob `a` as lines of blob `b`. Several citations of one file at one SHA
        read against one parent: the line diff is made once per pair of contents."""
        key = (self.get(a) or b"", self.get(b) or b"")
        if key not in self.moves:
            self.moves[key] = _line_map(self.lines(a), self.lines(b))
        return self.moves[key]


def _at(sha: str | None, path: str) -> str | None:
    if sha is None or not re.fullmatch(r"[0-9a-f]{4,64}", sha):
        return None
    return f"{sha}:{path}"


def _folder(name: str | None) -> str | None:
    """`rev:dir` of a blob named `rev:dir/file` (`rev:` for a file at the top)."""
    if name is None:
        return None
    rev, _, path = name.partition(":")
    return f"{rev}:{path.rpartition('/')[0]}"


# -- one commit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    """One cited file a commit changed, to compare."""

    sha: str
    path: str
    fp: patch.FilePatch
    ctx: symbols.Context


def _tasks(c: history.Commit, cp: patch.CommitPatch | None, surf: Surface) -> list[_Task]:
    ctx = symbols.Context(frozenset(models(c, surf)))
    out = []
    for path in sorted(p for p in c.paths if p in surf.cites):
        fp = cp.for_path(path) if cp is not None else None
        if fp is None or _read_under_other_name(fp, path, surf):
            continue
        out.append(_Task(c.sha, path, fp, replace(ctx, tests=_test_module(fp.new_path or path))))
    return out


def _read_under_other_name(fp: patch.FilePatch, path: str, surf: Surface) -> bool:
    """A rename of a cited path is read once, under its old name; under its new one when
    only that is a path a citation names (renamed back to it: the old name is cited only
    as a rename followed earlier in the range, `surface.followed`)."""
    other = fp.old_path if fp.new_path == path else fp.new_path
    if other is None or other == path or other not in surf.cites:
        return False
    new_only = surf.named(fp.new_path) and not surf.named(fp.old_path)
    return (path == fp.new_path) != new_only


def _test_module(path: str) -> bool:
    """A test module, as pytest finds them: under a `tests` folder, or named `test_*.py`,
    `*_test.py` or `conftest.py` (its asserts are its checks, never debugging aids)."""
    parts = path.split("/")
    name = parts[-1]
    return ("tests" in parts[:-1] or name.startswith("test_") or name == "conftest.py"
            or name.endswith(("_test.py", "_test.pyi")))


def _sides(fp: patch.FilePatch, blobs: _Blobs) -> tuple[
        symbols.Outline | None, symbols.Outline | None, str | None]:
    """(old outline, new outline, path-level reason) of a changed file."""
    why = _no_module(fp)
    if why is not None:
        return None, None, why
    old, new = blobs.outline(fp.old_blob), blobs.outline(fp.new_blob)
    for side, o in (("before", old), ("after", new)):
        if isinstance(o, str):
            return None, None, f"does not parse {side} the commit ({o})"
    if (fp.old_blob and old is None) or (fp.new_blob and new is None):
        return None, None, "blob not readable"
    assert not isinstance(old, str) and not isinstance(new, str)
    return old, new, None


def _no_module(fp: patch.FilePatch) -> str | None:
    """Why a changed file has no Python module on its sides to read, if so."""
    if fp.binary:
        return "binary file"
    if fp.symlink:  # its blob is the link's target (`real.py` parses as an expression)
        return "a symbolic link, not a Python module"
    name = fp.path.rsplit("/", 1)[-1]
    if not _python(name):
        return f"not Python (.{name.rsplit('.', 1)[1]})" if "." in name else "not Python"
    return None


def _file(path: str, fp: patch.FilePatch, cites: tuple[Cite, ...], blobs: _Blobs,
          ctx: symbols.Context) -> FileChange:
    old, new, fallback = _sides(fp, blobs)
    units: tuple[symbols.UnitChange, ...] = ()
    if fallback is None:
        deleted = [n for h in fp.hunks for n in h.deleted]
        added = [n for h in fp.hunks for n in h.added]
        units = tuple(symbols.changes(old, new, deleted, added, ctx))
    reader = _Reader(blobs, path, fp.old_blob, old, fallback)
    latest = new or old
    defs = tuple(u.name for u in latest.units if _citable(u)) if (
        latest is not None and any(c.whole_file for c in cites)) else ()
    return FileChange(path, fp.status, fp.old_path, fp.new_path, fp.hunks, units, fallback,
                      tuple(reader.cited(c) for c in cites),
                      len(blobs.lines(fp.old_blob)), len(blobs.lines(fp.new_blob)), defs)


def _citable(u: symbols.Unit) -> bool:
    """A definition a citation can name: a function, a class, or a module-level statement
    named by its one assignment target (`_MODELS`)."""
    return u.kind != "statement" or not (symbols.internal(u.name) or ", " in u.name)


# -- citations, read at their SHA ---------------------------------------------------------------


def parse_ranges(lines: str | None) -> list[tuple[int, int]]:
    out = []
    for m in _RANGE.finditer(lines or ""):
        a = int(m.group(1)[:9])
        b = int(m.group(2)[:9]) if m.group(2) else a
        out.append((min(a, b), max(a, b)))
    return out


@dataclass
class _Reader:
    blobs: _Blobs
    path: str
    parent_blob: str | None
    parent: symbols.Outline | None
    fallback: str | None

    def cited(self, cite: Cite) -> Cited:
        if cite.whole_file:
            how: How = "path-level" if self.fallback else "whole-file"
            return Cited(cite, how, note=_source_note(cite))
        name, at = self._anchor_blob(cite)
        ranges = self._translate(name, parse_ranges(cite.lines))
        if self.fallback is not None:
            return self._path_level(cite, name, at, ranges)
        outl = self.blobs.outline(name)
        where = outl if isinstance(outl, symbols.Outline) else self.parent
        if where is None:
            return Cited(cite, "whole-file", at=at, note=f"{self.path} not readable at {at}")
        if cite.symbols:
            named = self._fields(cite, where, name, self._by_name(cite, where, at, ranges))
            if cite.lines and named.how == "symbols" and self._stale_name(cite, where):
                return self._with_lines(cite, where, at, ranges, named)
            return self._narrowed(cite, where, at, ranges, named)
        return self._by_lines(cite, where, at, ranges)

    def _path_level(self, cite: Cite, name: str | None, at: str,
                    ranges: tuple[tuple[int, int], ...]) -> Cited:
        """A citation of a file read by lines (not Python, or not parseable). A line range
        wholly past the file's end where it is read cites no line of it: stale, so the file
        is compared whole (as a Python range that holds no definition is), never a miss."""
        length = len(self.blobs.lines(name)) if self.blobs.get(name) is not None else 0
        spans = parse_ranges(cite.lines)
        if spans and length and all(a > length for a, _ in spans):
            return Cited(cite, "path-level", at=at, note=(
                f"lines {cite.lines} lie past the end of {self.path} at {at} ({length} lines): "
                "compared as a whole file"))
        return Cited(cite, "path-level", at=at, ranges=ranges,
                     note="" if ranges else "symbol anchors are not read outside Python")

    def _find(self, where: symbols.Outline, sym: str) -> tuple[str, ...]:
        """The definitions a cited name means where it is read, else in the parent, else
        (`Class.helper`, no method or field of the class) the module's own `helper`."""
        return (where.find(sym) or (self.parent.find(sym) if self.parent else ())
                or _top_level(where, sym))

    def _stale_name(self, cite: Cite, where: symbols.Outline) -> bool:
        """Some name the citation gives is no definition where it is read."""
        return any(not self._find(where, s) for s in cite.symbols)

    def _with_lines(self, cite: Cite, where: symbols.Outline, at: str,
                    ranges: tuple[tuple[int, int], ...], named: Cited) -> Cited:
        """Names of which some are stale (`(a, b, c):875-962,1640-1649`, only `a` found):
        the definitions its lines lie in are cited too, not dropped for the name."""
        lines = self._by_lines(cite, where, at, ranges)
        more = tuple(n for n in lines.names if n not in named.names) if lines.how == "lines" \
            else ()
        if not more:
            return named
        note = f"{named.note}; its lines name {', '.join(more)}, cited too"
        return replace(named, names=named.names + more, note=note.lstrip("; "))

    def _narrowed(self, cite: Cite, where: symbols.Outline, at: str,
                  ranges: tuple[tuple[int, int], ...], named: Cited) -> Cited:
        """`:134-229 (class Platform)`: lines read at the cited SHA that lie inside the named
        definitions cite those lines, not all of it (an 800-line class). Lines read at the
        pin (no SHA) may be stale: the name stands."""
        if not (cite.lines and cite.sha) or named.how != "symbols" or at != cite.sha:
            return named
        lines = self._by_lines(cite, where, at, ranges)
        inside = lines.how == "lines" and all(
            any(n == u or n.startswith(u + ".") for u in named.names) for n in lines.names)
        return lines if inside and set(lines.names) != set(named.names) else named

    def _anchor_blob(self, cite: Cite) -> tuple[str | None, str]:
        """The blob an anchor is read in, and what it is: the cited SHA's, else the pin's,
        else the commit's parent's. A file renamed earlier in the range is read under the
        name the citation gives (the one it had at that SHA), else under its new one. Where
        the path is a symbolic link, its blob is the link's target: the next one is read."""
        paths = tuple(dict.fromkeys((cite.path, self.path)))
        for at, label in ((cite.sha, cite.sha or ""), (self.blobs.pin, "the pin")):
            for name in (_at(at, p) for p in paths):
                if name is not None and self.blobs.get(name) is not None and (
                        not self.blobs.link(name)):  # a link there: not the file
                    return name, label
        return self.parent_blob, "the commit's parent"

    def _translate(self, name: str | None, ranges: list[tuple[int, int]]) -> tuple[
            tuple[int, int], ...]:
        """`ranges` of blob `name` as lines of the parent's blob (by a line diff)."""
        if not ranges or name is None:
            return ()
        if name == self.parent_blob or self.blobs.get(name) == self.blobs.get(self.parent_blob):
            return tuple(ranges)
        move = self.blobs.mover(name, self.parent_blob)
        return tuple((move(x), max(move(x), move(y))) for x, y in ranges)

    def _by_name(self, cite: Cite, where: symbols.Outline, at: str,
                 ranges: tuple[tuple[int, int], ...]) -> Cited:
        names: list[str] = []
        missing: list[str] = []
        for sym in cite.symbols:
            found = self._find(where, sym)
            (names.extend(found) if found else missing.append(sym))
        note = f"anchor {', '.join(missing)} names no definition at {at}" if missing else ""
        bare = [f"{s} is read as the top-level {top[0]}" for s in cite.symbols
                if not where.find(s) and not (self.parent and self.parent.find(s))
                and (top := _top_level(where, s))]
        note = "; ".join(n for n in (note, *bare) if n)
        if not names:
            return Cited(cite, "whole-file", at=at, note=note + ": read as a whole-file citation")
        drift = _disagreement(cite, where, names)
        return Cited(cite, "symbols", tuple(dict.fromkeys(names)),
                     "; ".join(n for n in (note, drift) if n), at, ranges)

    def _fields(self, cite: Cite, where: symbols.Outline, name: str | None,
                named: Cited) -> Cited:
        """`Class.field` (a field the class body assigns, no definition of its own) cites that
        statement of the class, not the whole file; the other names stand for their
        definitions whole. A class the citation also names whole keeps all of it."""
        found = [f for s in cite.symbols if not self._find(where, s)
                 and (f := symbols.class_field(where, s)) and f[0] not in named.names]
        if not found or self.parent is None:
            return named
        classes = tuple(dict.fromkeys(c for c, _ in found))
        others = tuple((u.start, u.end) for n in named.names for u in self.parent.named(n))
        note = "; ".join(f"{c}: its field's statement {a}-{b} is cited" for c, (a, b) in found)
        return replace(named, how="symbols", names=named.names + classes,
                       own=named.own + classes, note=note if named.how == "whole-file" else (
                           f"{named.note}; {note}".lstrip("; ")),
                       statements=self._translate(name, [s for _, s in found]) + others)

    def _by_lines(self, cite: Cite, where: symbols.Outline, at: str,
                  ranges: tuple[tuple[int, int], ...]) -> Cited:
        spans = parse_ranges(cite.lines)
        owners = [u for a, b in spans for n in range(a, b + 1)
                  if where.code(n) and (u := where.at(n)) is not None]
        names = tuple(dict.fromkeys(u.name for u in owners))
        # A range over a class's own lines (a field, its header) cites those, not its methods.
        own = tuple(dict.fromkeys(u.name for u in owners if u.kind == "class"))
        if not names:
            return Cited(cite, "whole-file", at=at,
                         note=f"lines {cite.lines} hold no definition at {at}: whole file")
        tops = {n.split(".", 1)[0] for n in names}
        note = (f"suspect range: :{cite.lines} spans {len(tops)} top-level definitions"
                if len(tops) > SUSPECT_UNITS else "")
        statements = self._statements(where, spans, ranges)
        return Cited(cite, "lines", names, note, at, ranges, statements, own)

    def _statements(self, where: symbols.Outline, spans: list[tuple[int, int]],
                    ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        """Where a range falls in one huge definition: its statements there, in the parent.
        Ranges elsewhere (`compilation.py:683-684,1438-1444`: a field of a 1,200-line class
        and one of its methods) stand for their definitions whole, so a change to the class's
        other fields is no change to what is cited. () when no range is in a huge one."""
        if self.parent is None or len(spans) != len(ranges):
            return ()
        out: list[tuple[int, int]] = []
        huge = False
        for (a0, b0), (a, b) in zip(spans, ranges, strict=True):
            owners = _outer({u.name: u for n in range(a0, b0 + 1)
                             if where.code(n) and (u := where.at(n)) is not None})
            parents = [p for name in owners for p in self.parent.named(name)]
            if len(owners) == 1 and next(iter(owners.values())).length > HUGE \
                    and len(parents) == 1:
                huge = True
                first = self.parent.statement(parents[0], a) or (a, a)
                last = self.parent.statement(parents[0], b) or (b, b)
                out.append((min(first[0], a), max(last[1], b)))
            else:
                out += [(p.start, p.end) for p in parents] or [(a, b)]
        return tuple(out) if huge else ()


def _outer(owners: dict[str, symbols.Unit]) -> dict[str, symbols.Unit]:
    """`owners` without the definitions nested in another of them: a range over statements
    of a huge function that holds a nested helper is a range in that function."""
    return {n: u for n, u in owners.items() if not any(n.startswith(o + ".") for o in owners)}


def _top_level(where: symbols.Outline, sym: str) -> tuple[str, ...]:
    """`(Class.m, helper)` reads `helper` as `Class.helper` (`anchors._qualified`, as real
    headers mostly mean); a class with no such method or field, in a module that defines
    `helper` at its top, meant that one: dropping it missed every change to it."""
    owner, _, tail = sym.replace("::", ".").strip(".").rpartition(".")
    if not owner or not where.named(tail) or symbols.class_field(where, sym) is not None:
        return ()
    return (tail,)


def _source_note(cite: Cite) -> str:
    if cite.source == "inline":
        return ("a citation in the file's body" if cite.symbols or cite.lines else
                "a citation in the file's body, without anchors")
    if cite.source == "mapping":
        return "implied by a mapping rule"
    return ""


def _disagreement(cite: Cite, where: symbols.Outline, names: list[str]) -> str:
    """"line anchor :A-B lies in X; named Y is at C-D" when both anchors are given."""
    spans = parse_ranges(cite.lines)
    if not spans:
        return ""
    inside = {u.name for a, b in spans for n in range(a, b + 1) if (u := where.at(n))}
    if any(n == i or i.startswith(n + ".") for n in names for i in inside):
        return ""
    named = where.named(names[0])
    at = f" is at {named[0].start}-{named[0].end}" if named else ""
    lies = ", ".join(sorted(inside)[:3]) or "no definition"
    return f"line anchor :{cite.lines} lies in {lies}; named {names[0]}{at} (the name wins)"


def _line_map(a: list[str], b: list[str]) -> _Mover:
    blocks = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks()
    return _Mover(tuple((m.a, m.b, m.size) for m in blocks))


@dataclass(frozen=True)
class _Mover:
    blocks: tuple[tuple[int, int, int], ...]

    def __call__(self, line: int) -> int:
        """Line `line` (1-based) of a as a line of b: exact inside a matching block, else
        the start of the gap it falls in."""
        i = line - 1
        last_b = 0
        for a0, b0, size in self.blocks:
            if a0 <= i < a0 + size:
                return b0 + (i - a0) + 1
            if a0 > i:
                break
            last_b = b0 + size
        return last_b + 1
