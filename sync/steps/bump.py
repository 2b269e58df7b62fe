"""`bump-headers`: move ported files' per-file pins to a target by rewriting SHA tokens only.

The header parser gives each citation's SHA as offsets into the original text, so
a bump replaces exactly those characters: wrapped headers, `@ pin <sha>`, several
citations, CRLF files all keep every other byte. Anything that would make the
header wrong instead of current is refused with the reason, and a refusal in any
file means nothing is written: a SHA split over lines (no single token to
rewrite), a citation without a SHA, a path the target no longer has (upstream
moved or deleted it; the header must follow the move by hand), a citation ahead
of the target (a bump would move it back).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sync.headers import citations as headers
from sync.headers import verify as sha_verify
from sync.infra.atomic import read_text, write_text
from sync.infra.errors import (
    BlockedCycle,
    EnvironmentUnresolved,
    MalformedRecord,
    SyncError,
    UsageError,
)
from sync.upstream import gitio
from sync.upstream.gitio import short

MIN_LEN = 8  # a shorter abbreviation is ambiguous in a repository of vLLM's size
FULL_LEN = 40

PlanStatus = Literal["bump", "unchanged", "refused"]


@dataclass(frozen=True)
class Change:
    line: int  # 1-based line of the SHA token
    path: str  # the upstream path the citation names
    old: str
    new: str
    start: int
    end: int
    was: sha_verify.ShaStatus  # where the old SHA stood, in audit's words (against the pin)


@dataclass(frozen=True)
class FilePlan:
    file: Path
    rel: str
    changes: tuple[Change, ...]
    refusal: SyncError | None
    text: str
    new_text: str

    @property
    def status(self) -> PlanStatus:
        if self.refusal is not None:
            return "refused"
        return "bump" if self.changes else "unchanged"


def new_token(old: str, target: str, unique: int) -> str:
    """The target's SHA at the old token's length (at least MIN_LEN and unique; 40 stays 40)."""
    if len(old) >= FULL_LEN:
        return target
    return target[: min(FULL_LEN, max(len(old), MIN_LEN, unique))]


def unique_length(ref: gitio.Reference, target: str) -> int:
    """The shortest unambiguous abbreviation of `target` (at least MIN_LEN), one git process."""
    gitio.check_rev(target)
    out = ref.git("rev-parse", f"--short={MIN_LEN}", "--end-of-options", target)
    short = out.decode().strip()
    if not short or not target.startswith(short):
        raise EnvironmentUnresolved(f"git rev-parse --short gave {short!r} for {target}",
                                    "check the reference checkout")
    return len(short)


def missing_paths(ref: gitio.Reference, target: str, paths: list[str]) -> set[str]:
    """Which of `paths` the target's tree lacks (one `git cat-file --batch-check`)."""
    wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
    if not wanted:
        return set()
    gitio.check_rev(target)
    rows = gitio.batch_check(ref, [f"{target}:{p}" for p in wanted])
    return {p for p, row in zip(wanted, rows, strict=True) if row is None}


def resolve_target(ref: gitio.Reference, rev: str, upstream_ref: str,
                   chosen: str | None = None) -> str:
    """The full SHA `rev` names; refused unless it is an upstream commit.

    An upstream commit is the cycle's target (`chosen`: a tag or commit the user picked,
    on whatever branch), or one that `upstream_ref`, another remote-tracking branch or a
    tag holds (a release tag on a release branch is one).
    """
    sha = gitio.resolve(ref, rev)
    if sha is None:
        raise UsageError(f"{rev} is not a commit in the reference checkout {ref.path}",
                         "fetch it, or bump to the cycle's target (the default)")
    if sha == chosen:
        return sha
    if gitio.resolve(ref, upstream_ref) is None:
        raise EnvironmentUnresolved(f"{upstream_ref} does not resolve in {ref.path}",
                                    "run 'upstream-sync fetch' first")
    if not gitio.is_ancestor(ref, sha, upstream_ref) and not gitio.refs_containing(
            ref, sha, "refs/remotes", "refs/tags"):
        raise UsageError(f"{rev} ({short(sha)}) is not an upstream commit (on no remote branch "
                         f"or tag, nor the cycle's target)",
                         "bump headers to the cycle's target or another upstream commit")
    return sha


@dataclass
class _Draft:
    file: Path
    rel: str
    text: str
    header: headers.Header
    refusal: SyncError | None = None


def _read(file: Path, rel: str) -> _Draft:
    try:
        text = read_text(file)
    except UnicodeDecodeError:
        return _Draft(file, rel, "", headers.NO_HEADER,
                      MalformedRecord("not UTF-8", "re-save it as UTF-8", path=rel))
    header = headers.parse_header(text, rel)
    d = _Draft(file, rel, text, header)
    if header.kind == "NONE":
        d.refusal = MalformedRecord(
            "no per-file pin header (no 'Ported from: <path> @ <sha>' in the leading comment)",
            "write the header by hand first; bump-headers only rewrites existing SHAs", path=rel)
    elif header.kind == "ORIGINAL":
        d.refusal = MalformedRecord(
            f"the header declares the file original (no upstream mirror), line "
            f"{header.start_line}", "leave it out: only ported files carry per-file pins",
            path=rel, line=header.start_line)
    else:
        for c in header.citations:
            if c.sha is None:
                d.refusal = MalformedRecord(
                    f"the citation of {c.path} has no SHA to rewrite",
                    "add '@ <sha>' to it by hand", path=rel, line=c.line)
            elif c.sha_start is None or c.sha_end is None:
                d.refusal = MalformedRecord(
                    f"ambiguous header: the SHA {c.sha} citing {c.path} is split across lines, "
                    "so there is no single token to rewrite",
                    "join the SHA onto one line by hand, then bump again", path=rel, line=c.line)
            elif text[c.sha_start:c.sha_end] != c.sha:
                d.refusal = MalformedRecord(
                    f"the header's SHA {c.sha} for {c.path} is not where the parser located it",
                    "report this header; bump it by hand", path=rel, line=c.line)
            if d.refusal is not None:
                break
    return d


@dataclass(frozen=True)
class _Against:
    """The target a plan bumps to, and where every cited SHA and path stands against it."""

    target: str
    status: dict[str, sha_verify.ShaStatus]
    gone: set[str]  # cited paths the target's tree lacks
    unique: int  # the target's shortest unambiguous abbreviation
    audit: dict[str, sha_verify.ShaStatus]  # cited SHA -> against the parity pin (audit's word)


def plan(ref: gitio.Reference, target: str, upstream_ref: str,
         files: list[tuple[Path, str]], pin: str | None = None) -> list[FilePlan]:
    """What bumping each (file, rel) to the full SHA `target` would change; writes nothing.

    Each change says where its old SHA stood in audit's words, against `pin` (the parity
    pin; the target when none is given). A constant number of git processes whatever the
    number of files: one cat-file for the paths, three (six with `pin`) for the SHA
    statuses, one for the abbreviation length.
    """
    drafts = [_read(f, rel) for f, rel in files]
    against = _against(ref, (target, pin), upstream_ref,
                       [d for d in drafts if d.refusal is None])
    return [_plan_file(d, against) for d in drafts]


def _against(ref: gitio.Reference, points: tuple[str, str | None], upstream_ref: str,
             live: list[_Draft]) -> _Against:
    target, pin = points
    shas = sorted({c.sha for d in live for c in d.header.citations if c.sha})
    status = sha_verify.classify_shas(ref, target, shas, upstream_ref) if shas else {}
    audit = (sha_verify.classify_shas(ref, pin, shas, upstream_ref)
             if shas and pin is not None and pin != target else status)
    moving = [c.path for d in live for c in d.header.citations
              if c.sha and status.get(c.sha) != "at-pin"]
    return _Against(target, status, missing_paths(ref, target, moving),
                    unique_length(ref, target), audit)


def _plan_file(d: _Draft, a: _Against) -> FilePlan:
    if d.refusal is not None:
        return FilePlan(d.file, d.rel, (), d.refusal, d.text, d.text)
    changes: dict[tuple[int, int], Change] = {}
    for c in d.header.citations:
        assert c.sha is not None and c.sha_start is not None and c.sha_end is not None
        was = a.status.get(c.sha, "not-upstream")
        if was == "at-pin":
            continue
        refusal = _refusal(d.rel, c, was, a)
        if refusal is not None:
            return FilePlan(d.file, d.rel, (), refusal, d.text, d.text)
        changes[(c.sha_start, c.sha_end)] = Change(
            _line_of(d.text, c.sha_start), c.path, c.sha, new_token(c.sha, a.target, a.unique),
            c.sha_start, c.sha_end, a.audit.get(c.sha, "not-upstream"))
    ordered = sorted(changes.values(), key=lambda ch: ch.start)
    new = d.text
    for ch in reversed(ordered):
        new = new[: ch.start] + ch.new + new[ch.end:]
    return FilePlan(d.file, d.rel, tuple(ordered), None, d.text, new)


def _refusal(rel: str, c: headers.Citation, was: sha_verify.ShaStatus,
             a: _Against) -> SyncError | None:
    """Why a citation must not be bumped: it is ahead of the target, or the target lacks it."""
    if was == "ahead":
        return BlockedCycle(
            f"{rel}:{c.line}: {c.path} is cited at {c.sha}, which is ahead of the "
            f"target {short(a.target)}: a bump would move it back",
            "leave this file out (it is a hot-fix port ahead of the target)")
    if c.path in a.gone:
        return BlockedCycle(
            f"{rel}:{c.line}: the target {short(a.target)} has no {c.path} (upstream "
            "moved or deleted it; see the report's moves section)",
            "port the move and fix the header's path by hand, then bump")
    return None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def write(plans: list[FilePlan]) -> int:
    """Write every planned bump; refuses (writing nothing) when any plan was refused."""
    for p in plans:
        if p.refusal is not None:
            raise p.refusal
    n = 0
    for p in plans:
        if p.changes:
            write_text(p.file, p.new_text)
            n += 1
    return n
