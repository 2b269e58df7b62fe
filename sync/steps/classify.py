"""Classify every enumerated commit exactly once: decisions, then rules, then defaults.

A rule may demote a commit that touches ported code, but the entry keeps the
port files and names the rule, so nothing that touches ported code disappears
silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sync.infra.globs import match as glob_match
from sync.records.config import Rule
from sync.records.decisions import Decision, Disposition
from sync.steps.surface import Surface
from sync.upstream.history import Commit


@dataclass(frozen=True)
class Entry:
    sha: str
    pr: int | None
    subject: str
    disposition: Disposition
    reason: str
    rule: str | None  # the auto rule ("ported-path", "rule rocm", ...); None when decided
    auto: bool
    upstream_paths: tuple[str, ...]
    port_files: tuple[str, ...]
    date: str = ""


def rule_matches(rule: Rule, commit: Commit) -> bool:
    """Every condition the rule sets holds: a tag, any path, all paths (each glob-matched)."""
    if rule.tags and not _tagged(commit, rule.tags):
        return False
    paths = commit.paths
    return ((not rule.paths_any or _any_path(paths, rule.paths_any))
            and (not rule.paths_all or _all_paths(paths, rule.paths_all)))


def _tagged(commit: Commit, wanted: tuple[str, ...]) -> bool:
    tags = {t.lower() for t in commit.tags}
    return any(t.lower() in tags for t in wanted)


def _any_path(paths: tuple[str, ...], globs: tuple[str, ...]) -> bool:
    return any(glob_match(p, g) for p in paths for g in globs)


def _all_paths(paths: tuple[str, ...], globs: tuple[str, ...]) -> bool:
    return bool(paths) and all(any(glob_match(p, g) for g in globs) for p in paths)


def _arrow(ported: tuple[str, ...], surface: Surface) -> str:
    parts = []
    for up in ported:
        files = surface.by_upstream.get(up, ())
        parts.append(f"{up} → {', '.join(files)}")
    return "; ".join(parts)


def classify_one(commit: Commit, surface: Surface, rules: Iterable[Rule],
                 decisions: dict[str, Decision]) -> Entry:
    paths = commit.paths
    ported = surface.ported(paths)
    port_files = surface.port_files(ported)
    mirrored = surface.mirrored_paths(paths)
    shown = ported or mirrored

    def entry(disposition: Disposition, reason: str, rule: str | None) -> Entry:
        return Entry(commit.sha, commit.pr, commit.subject, disposition, reason, rule,
                     rule is not None, shown, port_files, commit.date)

    decided = decisions.get(commit.sha)
    if decided is not None:
        return entry(decided.disposition, decided.reason, None)
    rule = next((r for r in rules if rule_matches(r, commit)), None)
    if rule is not None:
        touches = f"; touches ported code: {_arrow(ported, surface)}" if ported else ""
        return entry(rule.disposition, rule.reason + touches, f"rule {rule.id}")
    return entry(*_default(paths, ported, mirrored, surface))


def _default(paths: tuple[str, ...], ported: tuple[str, ...], mirrored: tuple[str, ...],
             surface: Surface) -> tuple[Disposition, str, str]:
    """(disposition, reason, auto rule) for a commit no decision or rule claims."""
    if ported:
        return "PORT-NOW", _arrow(ported, surface), "ported-path"
    if mirrored:
        more = f" (+{len(mirrored) - 3} more)" if len(mirrored) > 3 else ""
        return "INVENTORY", f"not yet ported: {', '.join(mirrored[:3])}{more}", "mirrored-path"
    if not paths:
        return "IGNORE", "changes no files", "unmirrored"
    tops = sorted({p.split("/", 1)[0] + ("/" if "/" in p else "") for p in paths})
    return "IGNORE", f"touches no mirrored path ({', '.join(tops[:4])})", "unmirrored"


def classify(commits: list[Commit], surface: Surface, rules: tuple[Rule, ...],
             decisions: dict[str, Decision]) -> list[Entry]:
    return [classify_one(c, surface, rules, decisions) for c in commits]
