"""`bump-headers`: move ported files' per-file pins to a target by rewriting SHA tokens only.

The header parser gives each citation's SHA as offsets into the original text, so
a bump replaces exactly those characters: wrapped headers, `@ pin <sha>`, several
citations, CRLF files all keep every other byte. Anything that would make the
header wrong instead of current is refused with the reason, and a refusal in any
file means nothing is written: a SHA split over lines (no single token to
rewrite), a citation without a SHA, a SHA that is no commit of the upstream line,
a path the target no longer has (renamed: to what; deleted: in which commit; the
header must follow the move by hand), a citation ahead of the target (a bump would
move it back), a byte that is not UTF-8 on the header's lines (elsewhere such bytes are
kept as they are). Only the core oracle's citations are rewritten: a citation of
llama.cpp keeps its llama.cpp SHA. `unchanged_only` (`--unchanged`) bumps only files
whose every cited upstream file is byte-identical at the target, and leaves the
others alone; the files are written in one journaled transaction, all or none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from sync.headers import citations as headers
from sync.headers import oracles
from sync.headers import verify as sha_verify
from sync.headers.citations import CORE
from sync.infra import atomic, txn
from sync.infra.errors import (
    BlockedCycle,
    EnvironmentUnresolved,
    MalformedRecord,
    SyncError,
    UsageError,
)
from sync.steps import audit, scan
from sync.upstream import gitio
from sync.upstream.gitio import short

MIN_LEN = 8  # a shorter abbreviation is ambiguous in a repository of vLLM's size
FULL_LEN = 40

PlanStatus = Literal["bump", "unchanged", "other-oracle", "refused", "skipped"]


class Skipped(UsageError):
    """A file `--unchanged` leaves alone (its cited upstream file changed): not an error."""


@dataclass(frozen=True)
class Change:
    """One SHA token's rewrite. A token may pin several cited paths (`a.py and b.py @ sha`,
    a route list under one SHA): it is said once, in the worst state of any of them."""

    line: int  # 1-based line of the SHA token
    path: str  # the path the change is named by: the first of `changed`, else of `paths`
    old: str
    new: str
    start: int
    end: int
    was: str  # where the old SHA stood, in audit's words (against the parity pin): the worst
    content: str = "unchanged"  # what became of the cited files up to the target: the worst
    paths: tuple[str, ...] = ()  # every upstream path the token pins, in header order
    changed: tuple[str, ...] = ()  # those of `paths` whose file changed up to the target


@dataclass(frozen=True)
class FilePlan:
    file: Path
    rel: str
    changes: tuple[Change, ...]
    refusal: SyncError | None
    text: str
    new_text: str
    oracles: tuple[str, ...] = ()  # the upstreams the header's citations cite, in order

    @property
    def status(self) -> PlanStatus:
        """bump; unchanged (every vLLM SHA already at the target); other-oracle (no vLLM SHA
        to move: only another upstream's citations); skipped; refused."""
        if isinstance(self.refusal, Skipped):
            return "skipped"
        if self.refusal is not None:
            return "refused"
        if self.changes:
            return "bump"
        return "unchanged" if CORE in self.oracles else "other-oracle"


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
        raise gitio.no_remote(ref, upstream_ref) or EnvironmentUnresolved(
            f"{upstream_ref} does not resolve in {ref.path}", "run 'upstream-sync fetch' first")
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

    @property
    def moving(self) -> tuple[headers.Citation, ...]:
        """The citations a bump rewrites: the core oracle's (another oracle's SHA is never
        rewritten to a vLLM commit)."""
        return tuple(c for c in self.header.pins if c.oracle == CORE)


HeaderReader = Callable[[str, str], headers.Header]


def _plain(rel: str, text: str) -> headers.Header:
    return oracles.attribute(headers.parse_header(text, rel), oracles.Upstreams(), rel)


def _read(file: Path, rel: str, read: HeaderReader = _plain) -> _Draft:
    try:
        data = atomic.read_record_bytes(file, rel=rel)
        atomic.refuse_wide(data, rel=rel)
    except MalformedRecord as exc:
        return _Draft(file, rel, "", headers.NO_HEADER, exc)
    # A byte that is not UTF-8 (a Latin-1 comment) is one character here, as it is one
    # replacement character where sync and check read the file (`atomic.decode_lenient`): the
    # header they read has its offsets in this text, and `write` gives the byte back.
    text = atomic.decode_kept(data)
    header = read(rel, atomic.shown(text))
    d = _Draft(file, rel, text, header)
    d.refusal = _not_utf8(d, data) or _header_refusal(d)
    return d


def _not_utf8(d: _Draft, data: bytes) -> SyncError | None:
    """A byte that is not UTF-8 on the header's lines (with no header read, anywhere: one
    inside 'Ported from' hides it): the header read there is not what the file says, so it
    is not rewritten. Such bytes elsewhere are kept as they are."""
    if not atomic.has_kept(d.text):
        return None
    bad = scan.header_not_utf8(data, d.header)
    return None if bad is None else MalformedRecord(bad[1], atomic.RESAVE, path=d.rel,
                                                    line=bad[0])


def _header_refusal(d: _Draft) -> SyncError | None:
    header, rel = d.header, d.rel
    if header.kind == "NONE":
        local = "; its comment names only the port's own files" if header.mentions else ""
        return MalformedRecord(
            f"no per-file pin header (no 'Ported from: <path> @ <sha>' in the leading "
            f"comment{local})", "write the header by hand first; bump-headers only rewrites "
            "existing SHAs", path=rel)
    if header.kind == "ORIGINAL":
        return MalformedRecord(
            f"the header declares the file original (no upstream mirror), line "
            f"{header.start_line}", "leave it out: only ported files carry per-file pins",
            path=rel, line=header.start_line)
    for c in d.moving:
        if c.sha is None:
            return MalformedRecord(f"the citation of {c.path} has no SHA to rewrite",
                                   "add '@ <sha>' to it by hand", path=rel, line=c.line)
        if c.sha_start is None or c.sha_end is None:
            return MalformedRecord(
                f"ambiguous header: the SHA {c.sha} citing {c.path} is split across lines, "
                "so there is no single token to rewrite",
                "join the SHA onto one line by hand, then bump again", path=rel, line=c.line)
        if d.text[c.sha_start:c.sha_end] != c.sha:
            return MalformedRecord(
                f"the header's SHA {c.sha} for {c.path} is not where the parser located it",
                "report this header; bump it by hand", path=rel, line=c.line)
    return None


@dataclass(frozen=True)
class _Against:
    """The target a plan bumps to, and where every cited SHA and path stands against it."""

    target: str
    probe: sha_verify.Probe
    content: dict[sha_verify.Cited, sha_verify.Content]
    unique: int  # the target's shortest unambiguous abbreviation
    audit: dict[tuple[str, str, str | None], str]  # (sha, path, near) -> audit's word (pin)

    def word(self, c: headers.Citation) -> str:
        """Where the citation's SHA stood against the parity pin, in audit's words."""
        return self.audit.get((c.sha or "", c.upstream_path, c.near), "not-upstream")

    def of(self, c: headers.Citation) -> sha_verify.Content | None:
        full = self.probe.full.get(c.sha or "")
        if full is None:
            return None
        return self.content.get(sha_verify.Cited(full, c.upstream_path, c.near))


@dataclass(frozen=True)
class How:
    """How a bump reads headers and which it takes."""

    read: HeaderReader = _plain
    unchanged_only: bool = False  # bump only headers whose cited files are unchanged
    # The files were named: each is ported up to the target. Unnamed (every ported file), a
    # file whose cited upstream file changed is refused: bumping it would claim the change
    # was ported (the protocol bumps the headers of what was ported, by name).
    named: bool = True


@dataclass(frozen=True)
class Request:
    """What a bump is asked: the target, the files, how their headers are read."""

    target: str
    upstream_ref: str
    files: list[tuple[Path, str]]
    pin: str | None = None  # the parity pin: each change says where its SHA stood against it
    read: HeaderReader = _plain
    unchanged_only: bool = False
    named: bool = True


def plan(ref: gitio.Reference, target: str, upstream_ref: str,
         files: list[tuple[Path, str]], pin: str | None = None, *,
         how: How | None = None) -> list[FilePlan]:
    """What bumping each (file, rel) to the full SHA `target` would change; writes nothing.

    Each change says where its old SHA stood in audit's words, against `pin` (the parity
    pin; the target when none is given). A constant number of git processes whatever the
    number of files: three (six with `pin`) for the SHA statuses, at most five for the
    cited files' content, one for the abbreviation length.
    """
    h = how or How()
    req = Request(target, upstream_ref, files, pin, h.read, h.unchanged_only, h.named)
    drafts = [_read(f, rel, req.read) for f, rel in req.files]
    against = _against(ref, req, [d for d in drafts if d.refusal is None])
    plans = [_plan_file(d, against, req) for d in drafts]
    if req.unchanged_only:  # a file that is not of the safe kind is left alone, not refused
        plans = [p if p.refusal is None or isinstance(p.refusal, Skipped) else
                 replace(p, refusal=Skipped(p.refusal.message, p.refusal.fix)) for p in plans]
    return plans


def _against(ref: gitio.Reference, req: Request, live: list[_Draft]) -> _Against:
    shas = sorted({c.sha for d in live for c in d.moving if c.sha})
    probe = sha_verify.probe(ref, req.target, shas, req.upstream_ref)
    moving = [sha_verify.Cited(probe.full[c.sha], c.upstream_path, c.near)
              for d in live for c in d.moving
              if c.sha and probe.status.get(c.sha) == "behind"]
    content = sha_verify.content(ref, probe.pin, moving) if moving else {}
    if req.pin is None or req.pin == req.target or not shas:
        words = _words(live, probe, content)
    else:
        at_pin = sha_verify.probe(ref, req.pin, shas, req.upstream_ref)
        behind = [sha_verify.Cited(at_pin.full[c.sha], c.upstream_path, c.near)
                  for d in live for c in d.moving
                  if c.sha and at_pin.status.get(c.sha) == "behind"]
        words = _words(live, at_pin, sha_verify.content(ref, at_pin.pin, behind)
                       if behind else {})
    return _Against(req.target, probe, content, unique_length(ref, req.target), words)


_CONTENT_WORD = {"unchanged": "behind-unchanged", "changed": "behind-changed"}


def _words(live: list[_Draft], probe: sha_verify.Probe,
           content: dict[sha_verify.Cited, sha_verify.Content]
           ) -> dict[tuple[str, str, str | None], str]:
    """Each citation's status as `audit` words it: at-pin, behind-unchanged, behind-changed,
    path-gone, ahead, not-upstream."""
    out: dict[tuple[str, str, str | None], str] = {}
    for d in live:
        for c in d.moving:
            if not c.sha:
                continue
            cited = sha_verify.Cited(probe.full.get(c.sha, c.sha), c.upstream_path, c.near)
            status = probe.status.get(c.sha, "not-upstream")
            got = content.get(cited)
            word = (_CONTENT_WORD.get(got.kind, "path-gone") if got is not None else
                    "behind-unchanged") if status == "behind" else status
            out[(c.sha, c.upstream_path, c.near)] = word
    return out


def _plan_file(d: _Draft, a: _Against, req: Request) -> FilePlan:
    if d.refusal is not None:
        return FilePlan(d.file, d.rel, (), d.refusal, d.text, d.text)
    tokens: dict[tuple[int, int], list[Change]] = {}
    for c in d.moving:
        assert c.sha is not None and c.sha_start is not None and c.sha_end is not None
        was = a.probe.status.get(c.sha, "not-upstream")
        if was == "at-pin":
            continue
        got = a.of(c)
        refusal = _refusal(d.rel, c, was, got, a.target) or _unported(d.rel, c, got, req)
        if refusal is not None:
            return FilePlan(d.file, d.rel, (), refusal, d.text, d.text)
        tokens.setdefault((c.sha_start, c.sha_end), []).append(Change(
            _line_of(d.text, c.sha_start), c.path, c.sha, new_token(c.sha, a.target, a.unique),
            c.sha_start, c.sha_end, a.word(c),
            got.kind if got is not None else "unchanged"))
    ordered = sorted((_one_token(cs) for cs in tokens.values()), key=lambda ch: ch.start)
    new = d.text
    for ch in reversed(ordered):
        new = new[: ch.start] + ch.new + new[ch.end:]
    oracles = tuple(dict.fromkeys(c.oracle for c in d.header.pins))
    return FilePlan(d.file, d.rel, tuple(ordered), None, d.text, new, oracles)


def _unported(rel: str, c: headers.Citation, got: sha_verify.Content | None,
              req: Request) -> SyncError | None:
    """A file whose cited upstream file changed, bumped without being named as ported:
    skipped under --unchanged, refused when every ported file is bumped."""
    if req.unchanged_only and (got is None or got.kind != "unchanged"):
        return Skipped(f"{rel}:{c.line}: {c.upstream_path} changed upstream since "
                       f"{c.sha}: not bumped with --unchanged",
                       "port the change, then bump this file by name")
    if not req.named and got is not None and got.kind == "changed":
        return BlockedCycle(
            f"{rel}:{c.line}: {c.upstream_path} changed upstream since {c.sha}: a bump "
            "would say the change is ported",
            f"port it, then bump the file by name ('upstream-sync bump-headers {rel}'); "
            "'--unchanged' bumps only the files whose cited upstream files did not change")
    return None


def _one_token(per_path: list[Change]) -> Change:
    """The change of one SHA token from each path it pins: the worst content (a changed file
    is never hidden behind an unchanged one cited at the same SHA) and the worst `was`."""
    paths = tuple(dict.fromkeys(ch.path for ch in per_path))
    changed = tuple(dict.fromkeys(ch.path for ch in per_path if ch.content != "unchanged"))
    was = max((ch.was for ch in per_path), key=lambda w: audit.RANK.get(w, len(audit.RANK)))
    return replace(per_path[0], path=(changed or paths)[0], was=was,
                   content="changed" if changed else "unchanged", paths=paths, changed=changed)


def _refusal(rel: str, c: headers.Citation, was: sha_verify.ShaStatus,
             got: sha_verify.Content | None, target: str) -> SyncError | None:
    """Why a citation must not be bumped: its SHA is no upstream commit, it is ahead of the
    target, or the target no longer has the cited path."""
    if was == "not-upstream":
        return BlockedCycle(
            f"{rel}:{c.line}: {c.path} is cited at {c.sha}, which is not a commit of the "
            "upstream line in the reference checkout (a PR head, another project, a typo)",
            "fix the header's SHA by hand (or name the project it cites), then bump")
    if was == "ahead":
        return BlockedCycle(
            f"{rel}:{c.line}: {c.path} is cited at {c.sha}, which is ahead of the "
            f"target {short(target)}: a bump would move it back",
            "leave this file out (it is a hot-fix port ahead of the target)")
    if got is not None and got.kind in ("renamed", "deleted", "missing"):
        return BlockedCycle(
            f"{rel}:{c.line}: the target {short(target)} has no {c.upstream_path}: "
            + audit_gone(c, got, target),
            "port the move and fix the header's path by hand, then bump")
    return None


def audit_gone(c: headers.Citation, got: sha_verify.Content, target: str) -> str:
    if got.kind == "renamed":
        return f"upstream renamed it to {got.new_path} in {short(got.gone_in or '')}"
    if got.kind == "deleted":
        return ("upstream deleted it" + (f" in {short(got.gone_in)}" if got.gone_in else ""))
    hint = f"; the target has {', '.join(got.namesakes)}" if got.namesakes else ""
    return (f"it is not in upstream at {c.sha} either (a wrong or relative path the tree "
            f"does not resolve{hint})")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def write(plans: list[FilePlan], state_dir: Path) -> int:
    """Write every planned bump in one journaled transaction (all files or none); refuses,
    writing nothing, when any plan was refused (a skipped file is only left alone)."""
    for p in plans:
        if p.refusal is not None and not isinstance(p.refusal, Skipped):
            raise p.refusal
    writes = {p.file: atomic.encode_kept(p.new_text) for p in plans if p.changes}
    if writes:
        state_dir.mkdir(parents=True, exist_ok=True)
        txn.commit(state_dir, writes)
    return len(writes)
