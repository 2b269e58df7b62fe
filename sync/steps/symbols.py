"""Definitions of an upstream Python file, with `ast`: which one encloses each line, and what
kind of change a commit made to each one it touches.

A unit is a definition (`Class.method`, a nested function `outer.inner`, a class's own
statements under the class's name) or a module-level statement, named by its
assignment target (`_MODELS`), `<imports>`, or its head (`<if TYPE_CHECKING>`).
Decorators and docstrings belong to their definition. Each line of the file is owned
by the innermost unit around it, so a change inside a method names the method, and a
changed class attribute names the class.

A changed unit is compared on both blobs, least to most semantic: only comments or
blank lines, only docstrings or annotations, only logging calls or `assert` statements,
only a consistent renaming of identifiers (each an IGNORE candidate, shown with its
reason); only added rows or members (`extended`); or `modified`. `guards` keep, per
changed line, the words of the `if` tests it sits under, for the deferred-feature signal.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

UnitKind = Literal["function", "class", "statement"]
Change = Literal["modified", "added", "removed", "extended", "non-semantic"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
             ast.TryStar, ast.Match)
_LOGGERS = frozenset({"logger", "log", "logging", "_logger", "LOGGER"})
_LOG_METHODS = re.compile(r"(?:debug|info|warning|warn|error|exception|critical|log)(?:_once)?")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
HEAD_MAX = 48


@dataclass(frozen=True, eq=False)
class Unit:
    name: str
    kind: UnitKind
    start: int  # first line, decorators included
    end: int
    node: ast.AST
    # Fingerprints by mode, made once: a blob's outline is shared by the commits on either
    # side of it (a commit's new blob is the next one's old), and each compares its units.
    prints: dict[_Mode, tuple[str, tuple[str, ...]]] = field(default_factory=dict, repr=False)

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def fingerprint(self, mode: _Mode) -> tuple[str, tuple[str, ...]]:
        if mode not in self.prints:
            self.prints[mode] = fingerprint(self.node, mode)
        return self.prints[mode]


@dataclass(frozen=True, eq=False)
class Outline:
    """Every unit of one blob, and which unit owns each of its lines."""

    units: tuple[Unit, ...]
    owner: tuple[int, ...]  # per line (index 0 is line 1): index into units, -1 for none
    lines: tuple[str, ...]
    by_name: dict[str, tuple[Unit, ...]] = field(default_factory=dict)
    imported: frozenset[str] = frozenset()  # the names module-level imports bind
    defined: frozenset[str] = frozenset()  # the names of its top-level definitions

    def at(self, line: int) -> Unit | None:
        if 1 <= line <= len(self.owner) and self.owner[line - 1] >= 0:
            return self.units[self.owner[line - 1]]
        return None

    def named(self, name: str) -> tuple[Unit, ...]:
        return self.by_name.get(name, ())

    def find(self, symbol: str) -> tuple[str, ...]:
        """Unit names a cited symbol means: its exact name, else every unit it ends
        (`_prepare_inputs` for `GPUModelRunner._prepare_inputs`)."""
        sym = symbol.replace("::", ".").strip(".")
        if sym in self.by_name:
            return (sym,)
        tail = "." + sym
        return tuple(n for n in self.by_name if n.endswith(tail))

    def blank(self, line: int) -> bool:
        text = self.lines[line - 1].strip() if 1 <= line <= len(self.lines) else ""
        return not text

    def code(self, line: int) -> bool:
        """Neither blank nor only a comment."""
        text = self.lines[line - 1].strip() if 1 <= line <= len(self.lines) else ""
        return bool(text) and not text.startswith("#")

    def statement(self, unit: Unit, line: int) -> tuple[int, int] | None:
        """The span of the statement of `unit`'s own body that holds `line`."""
        for stmt in getattr(unit.node, "body", ()):
            start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
            if start <= line <= (stmt.end_lineno or stmt.lineno):
                return start, stmt.end_lineno or stmt.lineno
        return None


class ParseFailure(Exception):
    """The blob is not Python this interpreter can read; the reason says where."""


def outline(source: bytes) -> Outline:
    """The units of a Python blob; ParseFailure when it does not parse."""
    # A UTF-8 byte order mark is valid Python (the interpreter skips it), and no line.
    text = source.decode("utf-8", "replace").removeprefix("\ufeff")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ParseFailure(f"line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ParseFailure(type(exc).__name__) from None
    lines = tuple(git_lines(text))
    units = list(_module_units(tree.body))
    owner = [-1] * max(len(lines), max((u.end for u in units), default=0))
    # Outer units come first, so an inner one overwrites the lines it owns.
    for i, u in enumerate(units):
        owner[u.start - 1:u.end] = [i] * (u.end - u.start + 1)
    by_name: dict[str, list[Unit]] = {}
    for u in units:
        by_name.setdefault(u.name, []).append(u)
    imported = frozenset((a.asname or a.name).split(".")[0] for u in by_name.get("<imports>", [])
                         for a in getattr(u.node, "names", ()))
    defined = frozenset(u.name for u in units if u.kind != "statement" and "." not in u.name)
    return Outline(tuple(units), tuple(owner), lines, {k: tuple(v) for k, v in by_name.items()},
                   imported, defined)


def git_lines(text: str) -> list[str]:
    """The lines of `text` as git and `ast` number them: split at LF only (`str.splitlines`
    also splits at a form feed, a vertical tab, U+2028, ..., and every line after one would
    be read one off the line a hunk names)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines] if "\r" in text else lines


def _span(node: ast.stmt) -> tuple[int, int]:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return start, node.end_lineno or node.lineno


def _module_units(body: list[ast.stmt]) -> Iterator[Unit]:
    for stmt in body:
        if isinstance(stmt, _DEFS):
            yield from _def_units(stmt, "")
            continue
        start, end = _span(stmt)
        yield Unit(statement_name(stmt), "statement", start, end, stmt)
        if isinstance(stmt, _COMPOUND):
            yield from _nested_defs(stmt, "")


def _def_units(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
               prefix: str) -> Iterator[Unit]:
    name = prefix + node.name
    start, end = _span(node)
    yield Unit(name, "class" if isinstance(node, ast.ClassDef) else "function", start, end, node)
    yield from _nested_defs(node, name + ".")


# The only fields that hold statements (and handlers, match cases): a definition is never
# inside an expression, so the walk need not visit one (most of a module's nodes).
_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _nested_defs(node: ast.AST, prefix: str) -> Iterator[Unit]:
    """The definitions anywhere under `node`'s statements, not inside another definition
    (in the order `ast.iter_child_nodes` gives)."""
    for name in node._fields:
        if name not in _BLOCK_FIELDS:
            continue
        block = getattr(node, name, None)
        if not isinstance(block, list):
            continue  # a lambda's or an expression's `body`
        for child in block:
            if isinstance(child, _DEFS):
                yield from _def_units(child, prefix)
            elif isinstance(child, _BLOCKS):
                yield from _nested_defs(child, prefix)


def class_field(outline: Outline, symbol: str) -> tuple[str, tuple[int, int]] | None:
    """`Class.name` where `name` is no definition but a field the class's own body assigns
    (a pydantic or dataclass field, a class constant): the class, and that statement's span."""
    owner, _, attr = symbol.replace("::", ".").strip(".").rpartition(".")
    for cls in (outline.find(owner) if owner else ()):
        for unit in outline.named(cls):
            if not isinstance(unit.node, ast.ClassDef):
                continue
            for stmt in _own_statements(unit.node):
                if attr in _targets(stmt):
                    return cls, _span(stmt)
    return None


def _targets(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else (
        [stmt.target] if isinstance(stmt, ast.AnnAssign | ast.AugAssign) else [])
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def internal(name: str) -> bool:
    """A statement unit named by its head (`<imports>`, `<if TYPE_CHECKING>`): no definition
    a port can cite by name."""
    return name.startswith("<")


def statement_name(stmt: ast.stmt) -> str:
    """A module-level statement's name: its assignment target, `<imports>`, or its head."""
    if isinstance(stmt, ast.Assign):
        return ", ".join(_short(e) for t in stmt.targets
                         for e in (t.elts if isinstance(t, ast.Tuple) else [t]))
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return _short(stmt.target)
    if type(stmt).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
        return _short(getattr(stmt, "name", stmt))
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return "<imports>"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
            stmt.value.value, str):
        return "<docstring>"
    if isinstance(stmt, ast.If | ast.While):
        return f"<{type(stmt).__name__.lower()} {_short(stmt.test)}>"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return f"<call {_short(stmt.value.func)}>"
    return f"<{type(stmt).__name__.lower()}>"


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= HEAD_MAX else text[:HEAD_MAX - 1] + "…"


# -- fingerprints: a unit's own content, with what a mode leaves out ---------------------------


@dataclass(frozen=True)
class _Mode:
    docstrings: bool = False  # leave out docstrings and annotations
    logging: bool = False  # leave out logging calls
    names: bool = False  # identifiers become placeholders (collected in order)
    # Leave out `assert` statements: debugging checks, which `python -O` drops (an assert
    # the annotation now states, `assert isinstance(spec, MambaSpec)`: walk-s12 W8).
    asserts: bool = False


_RAW, _DOCS, _NAMES = _Mode(), _Mode(True), _Mode(True, False, True)
_ALL, _ALL_BUT_ASSERTS = _Mode(True, True, True, True), _Mode(True, True, True)
_LOGS, _ASSERTS = _Mode(True, True), _Mode(True, asserts=True)
_ANNOTATION_FIELDS = frozenset({"annotation", "returns", "type_comment"})
# A renaming is of names only: a changed attribute or keyword is a different member.
_IDENT_FIELDS = {ast.Name: "id", ast.arg: "arg"}


@dataclass
class _Print:
    mode: _Mode
    root: ast.AST
    out: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def node(self, node: ast.AST) -> None:
        if node is not self.root and isinstance(node, _DEFS):
            return  # a nested definition is a unit of its own
        mode = self.mode
        if (mode.logging and _is_log(node)) or (mode.asserts and isinstance(node, ast.Assert)):
            return
        out = self.out
        out.append(type(node).__name__)
        ident = _IDENT_FIELDS.get(type(node))
        for name in node._fields:
            if mode.docstrings and name in _ANNOTATION_FIELDS:
                continue
            value = getattr(node, name, None)
            if name == "body" and isinstance(value, list):
                value = self._body(value)
            elif name == ident and mode.names and isinstance(value, str):
                self.names.append(value)
                value = "_"
            if isinstance(value, ast.AST):
                self.node(value)
            elif isinstance(value, list):
                out.append("[")
                for v in value:
                    self.value(v)
                out.append("]")
            else:
                out.append(repr(value))
        out.append(")")

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if self.mode.docstrings and body and _is_docstring(body[0]):
            body = body[1:]
        if self.mode.logging:
            body = [s for s in body if not _only_logs(s)]
        return body

    def value(self, value: object) -> None:
        if isinstance(value, ast.AST):
            self.node(value)
        elif isinstance(value, list):
            self.out.append("[")
            for v in value:
                self.value(v)
            self.out.append("]")
        else:
            self.out.append(repr(value))


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _is_log(node: ast.AST) -> bool:
    """A statement that is one call of a logger method (`logger.warning_once(...)`)."""
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return False
    func = node.value.func
    return (isinstance(func, ast.Attribute) and _LOG_METHODS.fullmatch(func.attr) is not None
            and isinstance(func.value, ast.Name) and func.value.id in _LOGGERS)


def _only_logs(stmt: ast.stmt) -> bool:
    """An `if` whose branches hold nothing but logging calls (`if verbose: logger.info(..)`)."""
    if _is_log(stmt):
        return True
    if not isinstance(stmt, ast.If):
        return False
    return all(_only_logs(s) for s in [*stmt.body, *stmt.orelse])


def fingerprint(node: ast.AST, mode: _Mode = _RAW) -> tuple[str, tuple[str, ...]]:
    p = _Print(mode, node)
    p.node(node)
    return "".join(p.out), tuple(p.names)


def _prints(units: Iterable[Unit], mode: _Mode) -> list[tuple[str, tuple[str, ...]]]:
    return sorted(u.fingerprint(mode) for u in units)


# -- what changed in a unit ---------------------------------------------------------------------


@dataclass(frozen=True)
class UnitChange:
    name: str
    kind: UnitKind
    change: Change
    detail: str  # what an IGNORE candidate or an extension is: "logging only", "adds rows 'X'"
    old_lines: tuple[int, ...]  # changed lines of the old blob this unit owns
    new_lines: tuple[int, ...]
    old_span: tuple[int, int] | None  # the unit's lines in each blob
    new_span: tuple[int, int] | None
    # Per changed line: the words of what the `if` tests over it require (`holding`).
    guards: tuple[frozenset[str], ...] = ()

    @property
    def semantic(self) -> bool:
        return self.change not in ("non-semantic", "extended", "added")


@dataclass(frozen=True)
class Context:
    """What the comparison knows beyond the units: model names the port has no file for, and
    the names each blob imports (set by `changes`)."""

    models: frozenset[str] = frozenset()
    imported_old: frozenset[str] = frozenset()
    imported_new: frozenset[str] = frozenset()
    renamed_defs: frozenset[tuple[str, str]] = frozenset()  # set by `changes`: see `_renames`
    tests: bool = False  # the blob is a test module: its asserts are what it checks


def changes(old: Outline | None, new: Outline | None, deleted: Iterable[int],
            added: Iterable[int], ctx: Context | None = None) -> list[UnitChange]:
    """The units a commit changed, given the deleted lines of the old blob and the added
    lines of the new one (None: the file did not exist on that side)."""
    hits: dict[str, tuple[list[int], list[int]]] = {}
    for side, outl, lines in ((0, old, deleted), (1, new, added)):
        for line in lines:
            if outl is None or outl.blank(line):
                continue
            unit = outl.at(line)
            hits.setdefault(unit.name if unit else "<comments>", ([], []))[side].append(line)
    base = ctx or Context()
    ctx = replace(base, imported_old=old.imported if old else frozenset(),
                  imported_new=new.imported if new else frozenset(),
                  renamed_defs=_renamed_defs(old, new))
    out = [_change(name, old, new, olds, news, ctx) for name, (olds, news) in hits.items()]
    return _moved(out, old, new, ctx) if ctx.renamed_defs else out


RENAMED_TO = "renamed to "


def _moved(out: list[UnitChange], old: Outline | None, new: Outline | None,
           ctx: Context) -> list[UnitChange]:
    """A top-level definition renamed in the commit with nothing else changed reads as one
    renaming (non-semantic), not a removal and an addition: each name pairs once."""
    assert old is not None and new is not None  # renamed_defs is empty otherwise
    by_name = {u.name: u for u in out}
    used: set[str] = set()
    for a, b in sorted(ctx.renamed_defs):
        ua, ub = by_name.get(a), by_name.get(b)
        if ua is None or ub is None or a in used or b in used or not _renaming(ua, ub, old, new):
            continue
        used |= {a, b}
        by_name[a] = replace(ua, change="non-semantic", detail=RENAMED_TO + b)
        by_name[b] = replace(ub, change="non-semantic", detail=f"renamed from {a}")
    return [by_name[u.name] for u in out]


def _renaming(ua: UnitChange, ub: UnitChange, old: Outline, new: Outline) -> bool:
    """`ua` removed and `ub` added are one definition renamed: the same code but for the
    name, and nothing left naming the old one (a caller that still does changed with it)."""
    return (ua.change == "removed" and ub.change == "added"
            and _same_but_name(old.named(ua.name), new.named(ub.name))
            and not _refers_to(new, ua.name))


def _refers_to(outline: Outline, name: str) -> bool:
    """Whether any code of the blob names `name` (a call, an attribute, a reference)."""
    return any((isinstance(n, ast.Name) and n.id == name)
               or (isinstance(n, ast.Attribute) and n.attr == name)
               for u in outline.units if "." not in u.name for n in ast.walk(u.node))


def _same_but_name(before: tuple[Unit, ...], after: tuple[Unit, ...]) -> bool:
    if len(before) != 1 or len(after) != 1:
        return False
    a, b = before[0].node, after[0].node
    if not isinstance(a, _DEFS) or not isinstance(b, _DEFS) or type(a) is not type(b):
        return False
    old_print, _ = before[0].fingerprint(_RAW)
    new_print, _ = after[0].fingerprint(_RAW)
    return old_print.replace(repr(a.name), repr(b.name)) == new_print


def _change(name: str, old: Outline | None, new: Outline | None, olds: list[int],
            news: list[int], ctx: Context) -> UnitChange:
    before = old.named(name) if old else ()
    after = new.named(name) if new else ()
    unit = (after or before or (None,))[0]
    kind: UnitKind = unit.kind if unit is not None else "statement"
    change, detail = _compare(before, after, ctx)
    guards = tuple(_guards(before, olds)) + tuple(_guards(after, news))
    return UnitChange(name, kind, change, detail, tuple(olds), tuple(news), _whole(before),
                      _whole(after), guards)


def _whole(units: tuple[Unit, ...]) -> tuple[int, int] | None:
    if not units:
        return None
    return min(u.start for u in units), max(u.end for u in units)


def _compare(before: tuple[Unit, ...], after: tuple[Unit, ...],
             ctx: Context) -> tuple[Change, str]:
    if not before and not after:
        return "non-semantic", "comments or blank lines only"
    if not before:
        return "added", ""
    if not after:
        return "removed", ""
    if before[0].name in ("<imports>", "<if TYPE_CHECKING>", "<if typing.TYPE_CHECKING>"):
        return "non-semantic", "imports only" if before[0].name == "<imports>" else (
            "typing-only imports (TYPE_CHECKING)")
    # One forgiving pass first (docstrings, annotations, logging and names left out): most
    # changes differ there already, and then no other comparison can call them non-semantic.
    forgiving = _ALL_BUT_ASSERTS if ctx.tests else _ALL
    old, new = _prints(before, forgiving), _prints(after, forgiving)
    if [shape for shape, _n in old] == [shape for shape, _n in new]:
        quiet = _quiet(before, after, old == new, ctx)
        if quiet is not None:
            return "non-semantic", quiet
    grown = _extension(before, after, ctx)
    if grown is not None:
        return "extended", grown
    return "modified", ""


def _quiet(before: tuple[Unit, ...], after: tuple[Unit, ...], same_names: bool,
           ctx: Context) -> str | None:
    """What a change equal in shape is: comments, docstrings, logging, assertions, or a
    renaming."""
    if same_names:
        for mode, what in ((_RAW, "comments or formatting only"),
                           (_DOCS, "docstrings or annotations only"),
                           (_LOGS, "logging only"), (_ASSERTS, "assertions only")):
            if _prints(before, mode) == _prints(after, mode):
                return what
        return "logging only" if ctx.tests else "logging and assertions only"
    renamed = _renames(before, after, ctx)
    if renamed:
        return "renames only: " + ", ".join(f"{a}→{b}" for a, b in renamed)
    return None


def _renamed_defs(old: Outline | None, new: Outline | None) -> frozenset[tuple[str, str]]:
    """(old, new) for every top-level definition gone and every one new in the same file:
    the candidates for a definition renamed in this commit (its callers then follow)."""
    if old is None or new is None:
        return frozenset()
    gone, fresh = old.defined - new.defined, new.defined - old.defined
    return frozenset((a, b) for a in gone for b in fresh)


def _renames(before: tuple[Unit, ...], after: tuple[Unit, ...],
             ctx: Context) -> list[tuple[str, str]]:
    """The name pairs of a consistent one-to-one renaming that is the only difference, where
    each pair is bound on both sides: a local (a parameter, an assignment) renamed, an
    import renamed with it, or a definition of the file renamed in the same commit.
    `tuple(x)` -> `list(x)` calls something else: not a renaming."""
    if len(before) != len(after):
        return []
    pairs: dict[str, str] = {}
    back: dict[str, str] = {}
    for (shape_a, names_a), (shape_b, names_b) in zip(
            _prints(before, _NAMES), _prints(after, _NAMES), strict=True):
        if shape_a != shape_b or len(names_a) != len(names_b):
            return []
        for a, b in zip(names_a, names_b, strict=True):
            if pairs.setdefault(a, b) != b or back.setdefault(b, a) != a:
                return []
    renamed = sorted((a, b) for a, b in pairs.items() if a != b)
    old_bound = _bound(before) | ctx.imported_old
    new_bound = _bound(after) | ctx.imported_new
    if not all((a in old_bound and b in new_bound) or (a, b) in ctx.renamed_defs
               for a, b in renamed):
        return []
    return renamed


def _bound(units: tuple[Unit, ...]) -> set[str]:
    """Names a unit binds itself: parameters and assignment targets."""
    out: set[str] = set()
    for u in units:
        for node in ast.walk(u.node):
            if isinstance(node, ast.arg):
                out.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
    return out


# -- extensions: rows, members and fields added, nothing existing changed -----------------------


def _extension(before: tuple[Unit, ...], after: tuple[Unit, ...], ctx: Context) -> str | None:
    """"adds ..." when the new unit only adds to the old one; None otherwise."""
    if len(before) != 1 or len(after) != 1:
        return None
    a, b = before[0].node, after[0].node
    if isinstance(a, ast.ClassDef) and isinstance(b, ast.ClassDef):
        return _class_extension(a, b)
    if isinstance(a, ast.stmt) and isinstance(b, ast.stmt):
        return _rows_extension(a, b, ctx)
    return None


def _own_statements(node: ast.ClassDef) -> list[ast.stmt]:
    return [s for s in node.body if not isinstance(s, _DEFS) and not _is_docstring(s)]


def _class_extension(a: ast.ClassDef, b: ast.ClassDef) -> str | None:
    head = ("bases", "keywords", "decorator_list")
    if any(fingerprint(ast.Tuple(getattr(a, f), ast.Load()))[0]
           != fingerprint(ast.Tuple(getattr(b, f), ast.Load()))[0] for f in head):
        return None
    old = [fingerprint(s, _DOCS)[0] for s in _own_statements(a)]
    new_stmts = _own_statements(b)
    remaining = list(old)
    added: list[str] = []
    for s in new_stmts:
        fp = fingerprint(s, _DOCS)[0]
        if fp in remaining:
            remaining.remove(fp)
        else:
            added.append(statement_name(s))
    if remaining or not added:
        return None
    return "adds " + ", ".join(f"{a.name}.{n}" for n in added)


def _elements(value: ast.AST | None) -> tuple[str, list[ast.AST]] | None:
    """(container shape, its elements) of a literal table: a dict, list, set or tuple, one
    wrapped in a call (`frozenset({...})`), or a `Literal[...]`."""
    if isinstance(value, ast.Dict):
        return "dict", [ast.Tuple([k or ast.Constant(None), v], ast.Load())
                        for k, v in zip(value.keys, value.values, strict=True)]
    if isinstance(value, ast.List | ast.Set | ast.Tuple):
        return type(value).__name__, list(value.elts)
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        inner = _elements(value.args[0])
        return None if inner is None else (ast.unparse(value.func) + inner[0], inner[1])
    if isinstance(value, ast.Subscript):
        inner = _elements(value.slice)
        return None if inner is None else (ast.unparse(value.value) + inner[0], inner[1])
    return None


def _tables(a: ast.stmt, b: ast.stmt) -> tuple[list[ast.AST], list[ast.AST]] | None:
    """The rows of the same literal table on both sides of one statement, else None."""
    if type(a) is not type(b) or statement_name(a) != statement_name(b):
        return None
    old, new = _elements(getattr(a, "value", None)), _elements(getattr(b, "value", None))
    if old is None or new is None or old[0] != new[0]:
        return None
    return old[1], new[1]


@dataclass(frozen=True)
class _Rows:
    added: list[str]  # keys of new rows
    changed: list[str]  # keys of rows whose value changed
    fresh: list[ast.AST]  # the new side's rows not on the old side
    gone: int  # old rows not on the new side


def _row_delta(old: list[ast.AST], new: list[ast.AST]) -> _Rows:
    old_rows = {fingerprint(e)[0] for e in old}
    old_keys = {_key(e) for e in old}
    fresh = [e for e in new if fingerprint(e)[0] not in old_rows]
    gone = len(old_rows - {fingerprint(e)[0] for e in new})
    return _Rows([_key(e) for e in fresh if _key(e) not in old_keys],
                 [_key(e) for e in fresh if _key(e) in old_keys], fresh, gone)


def _rows_extension(a: ast.stmt, b: ast.stmt, ctx: Context) -> str | None:
    """"adds rows ..." when a table only gains rows (or, for models the port has no file
    for, gains or re-points them); None otherwise."""
    tables = _tables(a, b)
    if tables is None:
        return None
    d = _row_delta(*tables)
    if not d.fresh or d.gone != len(d.changed):
        return None  # nothing new, or a row removed
    if not d.changed:
        return "adds rows " + _names(d.added)
    if ctx.models and all(_names_model(e, ctx.models) for e in d.fresh):
        return ("adds or re-points rows " + _names(d.added + d.changed)
                + " for models the port has no file for")
    return None


def _key(element: ast.AST) -> str:
    if isinstance(element, ast.Tuple) and len(element.elts) == 2:  # a dict row
        element = element.elts[0]
    return _short(element)


def _names(keys: list[str]) -> str:
    return ", ".join(keys[:4]) + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else "")


def _names_model(element: ast.AST, models: frozenset[str]) -> bool:
    """A row naming (in one of its strings) a model the port has no file for."""
    for node in ast.walk(element):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = set(re.split(r"[^A-Za-z0-9_]+", node.value.lower()))
            if words & models:
                return True
    return False


# -- guards: the `if` tests a changed line sits under -------------------------------------------


def name_words(ident: str) -> list[str]:
    """The words of one identifier as written (`KVCacheSpec`: KV, Cache, Spec)."""
    return _WORD.findall(ident)


def words(node: ast.AST) -> frozenset[str]:
    """The identifier and string words of an expression, lower-cased, whole and split
    (`self.speculator is not None` gives self, speculator; `is_sparse` gives is_sparse,
    is, sparse)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        text = (sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(
            sub, ast.Attribute) else sub.value if isinstance(sub, ast.Constant) and isinstance(
            sub.value, str) else None)
        if text:
            out |= ident_words(text[:200])
    return frozenset(out)


def ident_words(text: str) -> frozenset[str]:
    """The identifiers of `text`, lower-cased, whole and split (`TopKSampler.is_rocm` gives
    topksampler, top, k, sampler, is_rocm, is, rocm)."""
    out: set[str] = set()
    for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        out.add(ident.lower().strip("_"))
        out.update(w.lower() for w in name_words(ident))
    return frozenset(w for w in out if w)


def _guards(units: tuple[Unit, ...], lines: list[int]) -> Iterator[frozenset[str]]:
    for line in lines:
        unit = next((u for u in units if u.start <= line <= u.end), None)
        yield frozenset() if unit is None else _under(unit.node, line)


def _under(node: ast.AST, line: int) -> frozenset[str]:
    """Words of every `if` test over `line` inside `node` (the line in a test or a body of
    it; an `else` is not under its test)."""
    found: set[str] = set()
    todo = [node]
    while todo:
        cur = todo.pop()
        for child in ast.iter_child_nodes(cur):
            start, end = getattr(child, "lineno", 0), getattr(child, "end_lineno", 0) or 0
            if not start <= line <= end:
                continue
            if isinstance(child, ast.If) and _in_test_or_body(child, line):
                found |= holding(child.test)
            todo.append(child)
    return frozenset(found)


_ABSENT = (None, False, 0, "")  # what `x is None`, `x == 0`, `not x` test for: x unset


def holding(test: ast.expr) -> frozenset[str]:
    """The words of what must hold for an `if` test to pass: each side of an `and`, the
    words both sides of an `or` share, a presence test (`x`, `x is not None`, `x > 0`,
    `x == "rocm"`); nothing that is negated (`not x`, `x is None`, `x != "rocm"`), since
    the body then runs without it."""
    if isinstance(test, ast.BoolOp):
        parts = [holding(v) for v in test.values]
        return frozenset().union(*parts) if isinstance(test.op, ast.And) else (
            frozenset.intersection(*parts))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return frozenset()
    if isinstance(test, ast.Compare) and not _present(test):
        return frozenset()
    return words(test)


def _present(test: ast.Compare) -> bool:
    """A comparison that holds when its subject is set: `x is not None`, `x != 0`, `x > 0`,
    `x == "a"`, `x in (...)`; not `x is None`, `x == 0`, `x != "a"`, `x not in (...)`."""
    if len(test.ops) != 1:
        return not any(isinstance(op, ast.NotEq | ast.IsNot | ast.NotIn) for op in test.ops)
    op, right = test.ops[0], test.comparators[0]
    unset = isinstance(right, ast.Constant) and any(
        right.value is v or (type(right.value) is type(v) and right.value == v) for v in _ABSENT)
    if isinstance(op, ast.NotEq | ast.IsNot):
        return unset
    if isinstance(op, ast.Eq | ast.Is):
        return not unset
    return not isinstance(op, ast.NotIn)


def _in_test_or_body(node: ast.If, line: int) -> bool:
    last = max((s.end_lineno or s.lineno for s in node.body), default=node.lineno)
    return node.lineno <= line <= last
