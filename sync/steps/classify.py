"""Classify every enumerated commit exactly once: decisions, then rules, then the symbol pass,
then defaults.

A rule may demote a commit that touches ported code, but the entry keeps the
port files and names the rule, so nothing that touches ported code disappears
silently.

The symbol pass (`steps.evidence`) says, per cited path a commit changes, which
definitions changed and how; each citation of that path is then judged:

- a changed definition that equals, nests in, or (a class's own statements, changed)
  contains a cited one is a hit; so is any semantic change under a whole-file
  citation (the reason says "whole-file citation", so ports learn to cite symbols),
  and any change at path level (not Python, or not parseable) outside a line anchor;
- a hit whose every changed line sits under an `if` naming a word of the port file's
  own DEFERRED / "not ported" paragraphs is "under a deferred feature";
- a line anchor inside a huge definition hits only when the change reaches the cited
  statements ("same definition, other statements" otherwise);
- a cited definition that the commit deletes is "cited definitions deleted upstream":
  only a definition a citation names can be (a definition removed from a file cited
  whole, or from inside a cited class, is a change to what is cited, and a deleted file
  is the one deletion a whole-file citation has);
- a commit that only adds (definitions, fields, members, rows) is INVENTORY "adds";
  one that changes definitions no citation names is INVENTORY "not the mirrored
  code"; one whose changes are only comments, docstrings, annotations, logging,
  imports or a consistent renaming is an IGNORE candidate, with that reason;
- a path in a port file's body without a citing verb is a mention: never PORT-NOW on
  its own.

Any hit makes the commit PORT-NOW. Every other outcome is listed in the report's
"touches ported files, not ported code" section, with the port files, so a reviewer
can scan them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from sync.infra.globs import match as glob_match
from sync.records.config import Rule
from sync.records.decisions import Decision, Disposition
from sync.steps import evidence as ev
from sync.steps import symbols
from sync.steps.surface import Cite, Surface
from sync.upstream import patch
from sync.upstream.history import Commit

Outcome = Literal["hit", "whole-file", "path-level", "deferred", "platform", "other-statements",
                  "deleted",
                  "miss", "mention", "adds", "non-semantic", "no-change"]
# Strongest first: the commit's outcome is the strongest of its citations' outcomes.
ORDER: tuple[Outcome, ...] = ("hit", "path-level", "whole-file", "deleted", "deferred",
                              "platform", "other-statements", "miss", "mention", "adds",
                              "non-semantic", "no-change")
# The auto rule each outcome gives, and its disposition.
AUTO: dict[Outcome, tuple[str, Disposition]] = {
    "hit": ("symbol-hit", "PORT-NOW"), "path-level": ("path-level", "PORT-NOW"),
    "whole-file": ("whole-file", "PORT-NOW"), "deleted": ("cited-deleted", "INVENTORY"),
    "deferred": ("deferred-feature", "INVENTORY"),
    "platform": ("platform-not-targeted", "INVENTORY"),
    "other-statements": ("other-statements", "INVENTORY"),
    "miss": ("not-mirrored", "INVENTORY"), "mention": ("mentioned-only", "INVENTORY"),
    "adds": ("adds-only", "INVENTORY"),
    "non-semantic": ("non-semantic", "IGNORE"), "no-change": ("renamed-only", "IGNORE"),
}
NOT_PORTED_CODE = frozenset(AUTO[o][0] for o in ORDER[3:])
MARKER = "touches ported files, not ported code"
SHOWN = 2  # hits (and definitions per hit) named in a reason before "+N more"
FILES_SHOWN = 2  # port files named per hit before "+N"


@dataclass(frozen=True)
class Verdict:
    """One citation of one changed path, judged."""

    path: str
    cited: ev.Cited
    outcome: Outcome
    units: tuple[str, ...] = ()  # the changed definitions the outcome is about
    why: str = ""
    related: bool = True  # False: what changed is not what this citation names
    removed: tuple[str, ...] = ()  # of `units`, those the commit removes (whole-file)
    added: tuple[str, ...] = ()  # definitions added beside a removal (a rename reads as both)


@dataclass(frozen=True)
class Evidence:
    files: tuple[ev.FileChange, ...]
    verdicts: tuple[Verdict, ...]
    models: tuple[str, ...] = ()

    def outcome(self) -> Outcome | None:
        found = {v.outcome for v in self.verdicts}
        return next((o for o in ORDER if o in found), None)


@dataclass(frozen=True)
class Entry:
    sha: str
    pr: int | None
    subject: str
    disposition: Disposition
    reason: str
    rule: str | None  # the auto rule ("symbol-hit", "rule rocm", ...); None when decided
    auto: bool
    upstream_paths: tuple[str, ...]
    port_files: tuple[str, ...]
    date: str = ""
    evidence: Evidence | None = field(default=None, compare=False)

    @property
    def not_ported_code(self) -> bool:
        """Touches files the port cites, but not code it mirrors (its own report section): as
        the symbol pass classified it, or a rule did and the pass found the same (walk-s12
        O5: its reason said so, and the section a reviewer scans left it out)."""
        if self.rule in NOT_PORTED_CODE:
            return True
        out = self._ruled_outcome()
        return out is not None and AUTO[out][1] != "PORT-NOW" and bool(self.port_files)

    @property
    def ruled_over_code(self) -> bool:
        """A rule classified it, though the symbol pass found it changes code a port file
        cites: a subject tag can hide such a change, so the report lists it apart."""
        out = self._ruled_outcome()
        return out is not None and AUTO[out][1] == "PORT-NOW"

    def _ruled_outcome(self) -> Outcome | None:
        """What the symbol pass found of a commit a rule classified (None: no rule did, or
        the pass read none of its paths)."""
        if not (self.auto and (self.rule or "").startswith("rule ")) or self.evidence is None:
            return None
        return self.evidence.outcome()


# -- rules ----------------------------------------------------------------------------------------


def rule_miss(rule: Rule, commit: Commit) -> str | None:
    """Why the rule does not match the commit (the first condition that fails); None: it does."""
    if rule.tags and not _tagged(commit, rule.tags):
        shown = ", ".join(commit.tags) or "none"
        return f"no subject tag {' / '.join(rule.tags)} (tags: {shown})"
    paths = commit.paths
    if rule.paths_any and not _any_path(paths, rule.paths_any):
        return f"no changed path matches paths_any {', '.join(rule.paths_any)}"
    return _all_miss(rule, paths) or _none_miss(rule, paths)


def _all_miss(rule: Rule, paths: tuple[str, ...]) -> str | None:
    if not rule.paths_all:
        return None
    odd = next((p for p in paths if not any(glob_match(p, g) for g in rule.paths_all)), None)
    if odd is None and paths:
        return None
    return f"{odd or 'no path'} matches none of paths_all {', '.join(rule.paths_all)}"


def _none_miss(rule: Rule, paths: tuple[str, ...]) -> str | None:
    hit = next((p for p in paths for g in rule.paths_none if glob_match(p, g)), None)
    return None if hit is None else f"{hit} matches paths_none {', '.join(rule.paths_none)}"


def rule_hit(rule: Rule, commit: Commit) -> str:
    """What made a matching rule match, one clause per condition it sets."""
    paths, out = commit.paths, []
    if rule.tags:
        wanted = {t.lower() for t in rule.tags}
        out.append("subject tag " + next(t for t in commit.tags if t.lower() in wanted))
    if rule.paths_any:
        hit = next(p for p in paths for g in rule.paths_any if glob_match(p, g))
        out.append(f"{hit} matches paths_any {', '.join(rule.paths_any)}")
    if rule.paths_all:
        out.append(f"every path ({len(paths)}) matches paths_all {', '.join(rule.paths_all)}")
    if rule.paths_none:
        out.append(f"no path matches paths_none {', '.join(rule.paths_none)}")
    return "; ".join(out)


def rule_matches(rule: Rule, commit: Commit) -> bool:
    """Every condition the rule sets holds: a tag, any path, all paths, no path."""
    return rule_miss(rule, commit) is None


def _tagged(commit: Commit, wanted: tuple[str, ...]) -> bool:
    tags = {t.lower() for t in commit.tags}
    return any(t.lower() in tags for t in wanted)


def _any_path(paths: tuple[str, ...], globs: tuple[str, ...]) -> bool:
    return any(glob_match(p, g) for p in paths for g in globs)


# -- judging one citation -----------------------------------------------------------------------


def _related(changed: str, cited: str, class_changed: bool) -> bool:
    """The changed definition equals the cited one, nests in it, or contains it (a class
    whose own statements changed contains its methods)."""
    return (changed == cited or changed.startswith(cited + ".")
            or (class_changed and cited.startswith(changed + ".")))


def _term(guard: frozenset[str], words: frozenset[str]) -> str | None:
    """The deferred word an `if` test names (`speculator` names `spec`), if any."""
    exact = sorted(guard & words)
    if exact:
        return exact[0]
    for w in sorted(guard):
        for t in sorted(words):
            short, long_ = sorted((w, t), key=len)
            if w == t or (len(short) >= 4 and long_.startswith(short)):
                return t
    return None


def _deferred(units: list[symbols.UnitChange], cite: Cite,
              surf: Surface) -> str | None:
    """"'spec' (runner.h:44)" when every changed line of `units` sits under an `if` naming a
    word of the port file's deferred paragraphs."""
    paras = surf.deferred.get(cite.port_file, ())
    found: list[str] = []
    for u in units:
        if not u.guards:
            return None
        for guard in u.guards:
            hit = next(((t, d.line) for d in paras if (t := _term(guard, d.words))), None)
            if hit is None:
                return None
            found.append(f"'{hit[0]}' ({cite.port_file}:{hit[1]})")
    return found[0] if found else None


def _platform_word(words: Iterable[str], platforms: tuple[str, ...]) -> str | None:
    """The platform a word names (`gfx` for `gfx1250`), if any: the first of `platforms`
    (their order, not a set's, decides which the reason names)."""
    ws = sorted(words)
    for p in platforms:
        if any(w == p or (w.startswith(p) and w[len(p):].isdigit()) for w in ws):
            return p
    return None


def _platform(units: list[symbols.UnitChange], surf: Surface) -> str | None:
    """"'rocm'" when each of `units` is code of a platform the port does not target: named
    for it (`rocm_unquantized_gemm_impl`), or every changed line under an `if` that
    requires it (`if rocm_aiter_ops.is_enabled() and ...`)."""
    if not surf.platforms or not units:
        return None
    found: list[str] = []
    for u in units:
        named = _platform_word(symbols.ident_words(u.name), surf.platforms)
        guarded = [_platform_word(g, surf.platforms) for g in u.guards]
        word = named or (guarded[0] if guarded and all(guarded) else None)
        if word is None:
            return None
        found.append(word)
    return f"'{found[0]}'"


def _spans(hunks: tuple[patch.Hunk, ...]) -> list[tuple[int, int]]:
    """Each run of changed lines in the old blob (an insertion: the lines around it), read
    from the hunks' bodies: their headers include the context lines."""
    return [s for h in hunks for s in h.old_spans]


def _overlaps(spans: Iterable[tuple[int, int]], ranges: Iterable[tuple[int, int]]) -> bool:
    rs = list(ranges)
    return any(a <= d and c <= b for a, b in spans for c, d in rs)


def _unchanged(fc: ev.FileChange, c: ev.Cited) -> Verdict:
    if fc.new_path and fc.new_path != fc.path:
        return Verdict(fc.path, c, "no-change", why=f"renamed to {fc.new_path}; re-point the "
                       "citation")
    if fc.old_path and fc.old_path != fc.path:
        return Verdict(fc.path, c, "no-change", why=f"renamed from {fc.old_path} (back to the "
                       "cited path), no lines changed")
    return Verdict(fc.path, c, "no-change", why="mode change only")


def _path_level(fc: ev.FileChange, c: ev.Cited) -> Verdict:
    if not fc.hunks:
        return _unchanged(fc, c)
    if c.ranges:
        if _overlaps(_spans(fc.hunks), c.ranges):
            return Verdict(fc.path, c, "path-level", why=f"{fc.fallback}; a hunk overlaps the "
                           f"cited lines {_ranges(c.ranges)}")
        return Verdict(fc.path, c, "miss", why=f"{fc.fallback}; changed lines "
                       f"{_ranges(_spans(fc.hunks))} lie outside the cited lines "
                       f"{_ranges(c.ranges)}")
    return Verdict(fc.path, c, "path-level", why=f"{fc.fallback}: compared as a whole file")


def _ranges(ranges: Iterable[tuple[int, int]]) -> str:
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def _whole_file(fc: ev.FileChange, c: ev.Cited, surf: Surface) -> Verdict:
    """Only the file itself can be deleted under a whole-file citation: a definition removed
    from a file that stays (or renamed: removed and added) is a change to the file."""
    if fc.status == "D":
        return Verdict(fc.path, c, "deleted", why="deletes the file")
    mods = [u for u in fc.units if u.change == "modified"]
    removed = _outermost([u for u in fc.units if u.change == "removed"])
    if not mods and not removed:
        return _lesser(fc, c, list(fc.units))
    names = tuple(u.name for u in mods + removed)
    gone = tuple(u.name for u in removed)
    added = tuple(u.name for u in fc.units if u.change == "added") if gone else ()
    platform = _platform(mods + removed, surf)
    if platform is not None:
        return Verdict(fc.path, c, "platform", names, _platform_why(names, platform))
    feature = _deferred(mods + removed, c.cite, surf)
    if feature is not None:
        return Verdict(fc.path, c, "deferred", names, f"every changed line of "
                       f"{', '.join(names)} is under an if naming {feature}")
    v = Verdict(fc.path, c, "whole-file", names, removed=gone, added=added)
    return dataclasses.replace(v, why="whole-file citation; " + _what(v, ", ".join))


def _platform_why(names: tuple[str, ...], platform: str) -> str:
    return (f"{', '.join(names)}: code for {platform} only (named for it, or under an if "
            "requiring it)")


def _what(v: Verdict, show: Callable[[Iterable[str]], str]) -> str:
    """"changes A; removes B; adds C": what a whole-file verdict's definitions went through."""
    changed = [n for n in v.units if n not in v.removed]
    return "; ".join(f"{verb} {show(names)}" for verb, names in (
        ("changes", changed), ("removes", v.removed), ("adds", v.added)) if names)


def _lesser(fc: ev.FileChange, c: ev.Cited, units: list[symbols.UnitChange],
            related: bool = True) -> Verdict:
    """Only additions, or only non-semantic changes, among `units`."""
    adds = [u for u in units if u.change in ("added", "extended")]
    if adds:
        return Verdict(fc.path, c, "adds", tuple(u.name for u in adds), "adds " + "; ".join(
            u.detail.removeprefix("adds ") if u.detail else u.name for u in adds), related)
    quiet = [u for u in units if u.change == "non-semantic"]
    if quiet:
        return Verdict(fc.path, c, "non-semantic", tuple(u.name for u in quiet),
                       "; ".join(f"{u.name}: {u.detail}" for u in quiet), related)
    return Verdict(fc.path, c, "no-change", why="no definition changed", related=related)


def _named(fc: ev.FileChange, c: ev.Cited) -> list[symbols.UnitChange]:
    """The changed definitions related to one the citation names (a class a line range names
    by its own lines: only those)."""
    return [u for u in fc.units if any(
        u.name == n if n in c.own else _related(u.name, n, u.kind == "class"
                                                 and u.change == "modified")
        for n in c.names)]


def _in_statements(fc: ev.FileChange, c: ev.Cited,
                   strong: list[symbols.UnitChange]) -> list[symbols.UnitChange]:
    """Of `strong`, those whose hunks reach the cited statements of a huge definition."""
    spans = _spans(fc.hunks)
    return [u for u in strong if u.old_span is not None and _overlaps(
        [s for s in spans if _overlaps([s], [u.old_span])], c.statements)]


def _changed_named(fc: ev.FileChange, c: ev.Cited, surf: Surface,
                   strong: list[symbols.UnitChange]) -> Verdict:
    """A cited definition changed: a hit, unless only under a feature the port defers, or
    (in a huge definition cited by lines) only in other statements."""
    if c.statements:
        inside = _in_statements(fc, c, strong)
        if not inside:
            first = strong[0]
            return Verdict(fc.path, c, "other-statements", tuple(u.name for u in strong),
                           f"{first.name} changes outside the cited statements "
                           f"{_ranges(c.statements)} ({_size(first)})")
        strong = inside
    names = tuple(u.name for u in strong)
    platform = _platform(strong, surf)
    if platform is not None:
        return Verdict(fc.path, c, "platform", names, _platform_why(names, platform))
    feature = _deferred(strong, c.cite, surf)
    if feature is not None:
        return Verdict(fc.path, c, "deferred", names,
                       f"every changed line is under an if naming {feature}")
    return Verdict(fc.path, c, "hit", names, ", ".join(
        f"{u.name} {_relation(u.name, c.names)}" + (" (removed)" if u.change == "removed" else "")
        for u in strong))


def _anchored(fc: ev.FileChange, c: ev.Cited, surf: Surface) -> Verdict:
    hits = _named(fc, c)
    removed = _outermost([u for u in hits if _gone(u, c)])
    # A cited definition is deleted only when it is itself removed; one removed from inside
    # it (a method of a cited class) changes it.
    gone = [u for u in removed if u.name in c.names]
    strong = [u for u in hits if u.change == "modified"] + [u for u in removed if u not in gone]
    if strong:
        return _changed_named(fc, c, surf, strong)
    if gone:
        return Verdict(fc.path, c, "deleted", tuple(u.name for u in gone), _deletes(c, gone))
    if hits:
        return _lesser(fc, c, hits)
    changed = [u for u in fc.units if u.semantic]
    if changed:
        return Verdict(fc.path, c, "miss", tuple(u.name for u in changed),
                       f"changes {', '.join(u.name for u in changed)}", related=False)
    return _lesser(fc, c, list(fc.units), related=False)


def _gone(u: symbols.UnitChange, c: ev.Cited) -> bool:
    """Removed; or a cited definition renamed (body unchanged), gone for this citation all
    the same: its anchor names nothing after the commit, so it is re-pointed like a deletion."""
    return u.change == "removed" or (u.detail.startswith(symbols.RENAMED_TO)
                                     and u.name in c.names)


def _deletes(c: ev.Cited, gone: list[symbols.UnitChange]) -> str:
    if c.how == "symbols":
        moved = [u for u in gone if u.detail.startswith(symbols.RENAMED_TO)]
        deleted = [u.name for u in gone if u not in moved]
        return "; ".join([f"renames {u.name} to {u.detail.removeprefix(symbols.RENAMED_TO)}"
                          for u in moved] + (["deletes " + ", ".join(deleted)] if deleted else []))
    # A line range names the definitions around its lines, statements (`<if ...>`) among
    # them: internal names, never shown as what the port cites.
    named = [u.name for u in gone if not symbols.internal(u.name)]
    return "deletes the cited lines" + (f" ({', '.join(named)})" if named else "")


def _outermost(units: list[symbols.UnitChange]) -> list[symbols.UnitChange]:
    """`units` without those nested in another of them (a deleted class, not its methods)."""
    names = {u.name for u in units}
    return [u for u in units if not any(u.name.startswith(n + ".") for n in names)]


def _size(u: symbols.UnitChange) -> str:
    a, b = u.old_span or (0, 0)
    return f"a {b - a + 1}-line definition"


def _relation(changed: str, cited: tuple[str, ...]) -> str:
    for n in cited:
        if changed == n:
            return "is cited"
        if changed.startswith(n + "."):
            return f"nests in the cited {n}"
    return f"contains the cited {next(n for n in cited if n.startswith(changed + '.'))}"


def judge(fc: ev.FileChange, c: ev.Cited, surf: Surface) -> Verdict:
    if c.how == "path-level" or fc.fallback is not None:
        return _path_level(fc, c)
    if not fc.hunks:
        return _unchanged(fc, c)
    if c.how == "whole-file":
        v = _whole_file(fc, c, surf)
        if c.cite.source == "inline" and v.outcome == "whole-file":
            # A path in a comment's body with no citing verb is a mention (DESIGN §3): it never
            # makes a commit PORT-NOW on its own.
            return dataclasses.replace(v, outcome="mention", why=f"mentioned at "
                                       f"{c.cite.where()}; {_what(v, _few)}")
        return v
    return _anchored(fc, c, surf)


def evidence_for(changes: ev.CommitChanges, surf: Surface) -> Evidence:
    verdicts = tuple(judge(fc, c, surf) for fc in changes.files for c in fc.cited)
    return Evidence(changes.files, verdicts, changes.models)


# -- reasons ------------------------------------------------------------------------------------


def _files(files: Iterable[str]) -> str:
    fs = sorted(set(files))
    more = f" (+{len(fs) - FILES_SHOWN} port files)" if len(fs) > FILES_SHOWN else ""
    return ", ".join(fs[:FILES_SHOWN]) + more


def _grouped(verdicts: list[Verdict], label: bool) -> str:
    """`path::Unit → files` per changed definition (or `path (why) → files`), merged."""
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if v.outcome == "deleted" and (v.cited.how != "symbols" or not v.units):
            keys = [f"{v.path} ({v.why})"]
        elif v.outcome in ("hit", "deleted", "deferred") and v.units:
            keys = [f"{v.path}::{u}" for u in v.units]
        elif v.outcome == "whole-file":
            keys = [f"{v.path} (whole-file citation; {_what(v, _few)})"]
        elif v.outcome == "path-level":
            keys = [f"{v.path} (path level: {v.why})"]
        else:
            keys = [f"{v.path}" + (f" ({v.why})" if label else "")]
        for k in keys:
            groups.setdefault(k, []).append(_citing(v))
    items = [f"{k} → {_files(fs)}" for k, fs in groups.items()]
    more = f"; +{len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


def _citing(v: Verdict) -> str:
    """The port file of a verdict, and the path it cites when that is not the changed one (a
    file renamed earlier in the range: the citation still names the old path)."""
    cite = v.cited.cite
    return cite.port_file if cite.path == v.path else f"{cite.port_file} (cites {cite.path})"


def _mirrors(c: ev.Cited) -> str:
    """What a citation names: its definitions, else (a file read by lines) its lines."""
    if c.names:
        return ", ".join(c.names)
    return f"lines {c.cite.lines}" if c.cite.lines else "the whole file"


def _few(names: Iterable[str]) -> str:
    ns = list(dict.fromkeys(names))
    return ", ".join(ns[:SHOWN]) + (f" +{len(ns) - SHOWN}" if len(ns) > SHOWN else "")


def mentioned_only(outcomes: Iterable[tuple[object, object]]) -> frozenset[str]:
    """Of (path, outcome) pairs, the paths every citation of which was judged a mention
    (`See vllm/x.py`): a reference, never what a port file ports."""
    seen: dict[str, set[object]] = {}
    for path, outcome in outcomes:
        if isinstance(path, str):
            seen.setdefault(path, set()).add(outcome)
    return frozenset(p for p, got in seen.items() if got == {"mention"})


_LEAD: dict[Outcome, str] = {
    "deleted": "cited definitions deleted upstream (re-point the citation)",
    "deferred": "changes only under a feature the port file defers",
    "platform": "changes only code of a platform the port does not target",
    "other-statements": "same definition, other statements than the cited lines",
    "miss": MARKER,
    "mention": "mentioned in a port file's body, not cited",
    "adds": "only adds",
    "non-semantic": "IGNORE candidate",
    "no-change": "IGNORE candidate: no lines changed",
}


def reason(e: Evidence) -> str:
    out = e.outcome()
    if out is None:
        return ""
    chosen = [v for v in e.verdicts if v.outcome == out]
    if AUTO[out][1] == "PORT-NOW":  # symbol hits first: they are what a reviewer reads
        strong = [v for v in e.verdicts if AUTO[v.outcome][1] == "PORT-NOW"]
        return _grouped(sorted(strong, key=lambda v: ORDER.index(v.outcome)), False)
    if out == "deleted":
        return f"{_LEAD[out]}: {_grouped(chosen, False)}"
    if out == "deferred":
        return f"{_LEAD[out]}: {_grouped(chosen, False)}; {chosen[0].why}"
    return f"{_LEAD[out]}: {_summary(chosen)}"


def _summary(chosen: list[Verdict]) -> str:
    """`path: why (port files)` per path, the shortest reading: the citations the change
    concerns (or all of them, when it concerns none), and for a miss what each one names."""
    by_path: dict[str, list[Verdict]] = {}
    for v in chosen:
        by_path.setdefault(v.path, []).append(v)
    items = []
    for path, vs in by_path.items():
        near = [v for v in vs if v.related] or vs
        why = near[0].why
        if near[0].outcome == "miss":
            mirrored = [f"{_mirrors(v.cited)} ({v.cited.cite.port_file})" for v in near]
            why += "; the port mirrors " + _few(mirrored)
            items.append(f"{path}: {why}")
            continue
        items.append(f"{path}: {why} ({_files(v.cited.cite.port_file for v in near)})")
    more = f"; +{len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


# -- one commit -----------------------------------------------------------------------------------


def _arrow(ported: tuple[str, ...], surface: Surface) -> str:
    parts = []
    for up in ported:
        files = surface.by_upstream.get(up, ())
        parts.append(f"{up} → {_files(files)}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Inputs:
    """What classifying a commit reads besides the commit."""

    surface: Surface
    rules: tuple[Rule, ...]
    decisions: dict[str, Decision]
    symbols: ev.Pass = field(default_factory=ev.Pass)


def classify_one(commit: Commit, inputs: Inputs) -> Entry:
    surface = inputs.surface
    paths = commit.paths
    ported = surface.ported(paths)
    port_files = surface.port_files(ported)
    mirrored = surface.mirrored_paths(paths)
    shown = ported or mirrored
    changes = inputs.symbols.commits.get(commit.sha)
    found = evidence_for(changes, surface) if changes is not None else None

    def entry(disposition: Disposition, reason: str, rule: str | None) -> Entry:
        return Entry(commit.sha, commit.pr, commit.subject, disposition, reason, rule,
                     rule is not None, shown, port_files, commit.date, found)

    decided = inputs.decisions.get(commit.sha)
    if decided is not None:
        return entry(decided.disposition, decided.reason, None)
    rule = next((r for r in inputs.rules if rule_matches(r, commit)), None)
    if rule is not None:
        return entry(rule.disposition, rule.reason + _touches(ported, surface, found),
                     f"rule {rule.id}")
    if found is not None and found.outcome() is not None:
        out = found.outcome()
        assert out is not None
        name, disposition = AUTO[out]
        return entry(disposition, reason(found), name)
    return entry(*_default(paths, ported, mirrored, surface))


def _touches(ported: tuple[str, ...], surface: Surface, found: Evidence | None) -> str:
    """What a rule-classified commit touches of the port, as exactly as the pass knows it."""
    if not ported:
        return ""
    if found is None or found.outcome() is None:
        return f"; touches ported code: {_arrow(ported, surface)}"
    if AUTO[found.outcome() or "no-change"][1] == "PORT-NOW":
        return "; touches ported code: " + reason(found)
    return f"; {MARKER}: {_arrow(ported, surface)}"


def _default(paths: tuple[str, ...], ported: tuple[str, ...], mirrored: tuple[str, ...],
             surface: Surface) -> tuple[Disposition, str, str]:
    """(disposition, reason, auto rule) for a commit no decision, rule or symbol pass claims."""
    if ported:
        return "PORT-NOW", _arrow(ported, surface), "ported-path"
    if mirrored:
        more = f" (+{len(mirrored) - 3} more)" if len(mirrored) > 3 else ""
        return "INVENTORY", f"not yet ported: {', '.join(mirrored[:3])}{more}", "mirrored-path"
    if not paths:
        return "IGNORE", "changes no files", "unmirrored"
    tops = sorted({p.split("/", 1)[0] + ("/" if "/" in p else "") for p in paths})
    return "IGNORE", f"touches no mirrored path ({', '.join(tops[:4])})", "unmirrored"


def classify(commits: list[Commit], inputs: Inputs) -> list[Entry]:
    return [classify_one(c, inputs) for c in commits]
