"""Per-file pin audit: where every ported file's header pin stands against the parity pin.

A SHA behind the pin says nothing by itself: what matters is whether the cited file
changed since. So "behind" splits by content: *behind-unchanged* (the cited file's blob
is the same at the pin: safe to bump to the pin, no warning), *behind-changed* (a warning
naming the commits since, unless a ledger row names the file or its upstream path and is
dated on or after the oldest of them, or names one of them) and *path-gone* (renamed: to
what; deleted: in which commit; or never there: a wrong path).
Citations of another oracle's upstream are attributed to it ("cites llama.cpp at
237ad9b96"), verified against its checkout when the preferences name one, never called
"not an upstream commit" of vLLM. Mentions and watched paths are listed as references.

Counts come with a positive control: a synthetic header citing the pin goes through
the same parse and the same SHA probe and must come out at-pin, or the counts are refused.
Git stays a constant number of processes (`headers.verify`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sync.headers import citations as headers
from sync.headers import verify
from sync.infra.errors import SyncError
from sync.port import Port
from sync.records import blocks, events, ledger
from sync.records.mdtext import code, escape
from sync.steps.surface import Surface
from sync.upstream import gitio
from sync.upstream.gitio import short

Status = Literal["at-pin", "behind-unchanged", "behind-changed", "path-gone", "ahead",
                 "not-upstream", "no-sha", "other-oracle", "original", "no-header"]
ORDER: tuple[Status, ...] = ("at-pin", "behind-unchanged", "behind-changed", "path-gone",
                             "ahead", "not-upstream", "no-sha", "other-oracle", "original",
                             "no-header")
CiteKind = Literal["at-pin", "behind-unchanged", "behind-changed", "path-gone", "ahead",
                   "not-upstream", "no-sha", "other-oracle"]
# How bad a citation's status is: a file's status is its citations' worst. A vLLM citation
# with no SHA pins nothing (the protocol: every ported file's header records the commit it
# matches); a bump cannot move it, so the file is not "safe to bump" either.
RANK: dict[str, int] = {"at-pin": 0, "behind-unchanged": 1, "no-sha": 2, "ahead": 3,
                        "behind-changed": 4, "path-gone": 5, "not-upstream": 6}
CONTROL_PATH = "vllm/__upstream_sync_control__.py"
SHOWN = 3  # commits named per changed citation; the rest are counted


@dataclass(frozen=True)
class CiteStatus:
    citation: headers.Citation
    status: CiteKind
    detail: str  # one phrase for a person: what became of the cited file
    content: verify.Content | None = None
    at_target: bool = False  # ahead: at the open cycle's target (bumped while porting)


@dataclass(frozen=True)
class FileStatus:
    path: str
    status: Status
    cites: tuple[CiteStatus, ...]
    # A ledger row names the file or a path it cites (behind-changed: for each changed
    # citation, a row dated on or after the change); None: the ledger is unreadable.
    noted: bool | None
    references: tuple[headers.Mention, ...] = ()
    watched: tuple[headers.Citation, ...] = ()
    note_gap: str = ""  # behind-changed, rows naming it, no note: the commit they miss, why

    @property
    def citations(self) -> tuple[headers.Citation, ...]:
        return tuple(c.citation for c in self.cites)

    @property
    def at_target(self) -> bool:
        """Ahead of the pin only by citing the open cycle's target: a file ported in step 5."""
        ahead = [c for c in self.cites if c.status == "ahead"]
        return self.status == "ahead" and all(c.at_target for c in ahead)

    @property
    def finding(self) -> bool:
        """Behind a changed upstream file with no ledger note, or citing a path that is gone."""
        return self.status == "path-gone" or (self.status == "behind-changed"
                                              and self.noted is not True)


@dataclass(frozen=True)
class Audit:
    files: tuple[FileStatus, ...]
    control_ok: bool
    ledger_problem: str | None = None  # why ledger notes could not be checked
    pin: str = ""  # the parity pin the files were audited against
    target: str | None = None  # the open cycle's target, if one is open
    # Configured checkouts of other oracles that cannot be used, one line each (what is
    # wrong, where the path came from, what to do): their citations are not verified, or
    # no header cites their oracle.
    unusable_checkouts: tuple[str, ...] = ()
    # Scanned files that are not UTF-8, one warning each (`not_utf8_texts`): audited as read
    # with replacement characters, which `bump-headers` refuses to rewrite.
    not_utf8: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {s: 0 for s in ORDER}
        for f in self.files:
            out[f.status] += 1
        return out

    @property
    def findings(self) -> tuple[FileStatus, ...]:
        return tuple(f for f in self.files if f.finding)


@dataclass(frozen=True)
class _Facts:
    """What git says about every cited SHA and path (a constant number of processes)."""

    core: str
    probe: verify.Probe
    content: dict[verify.Cited, verify.Content]
    others: dict[str, dict[str, bool]]  # oracle -> cited SHA -> a commit of its checkout
    rewrite: dict[str, str]  # near paths as cited -> as upstream has them
    target: str | None = None  # the open cycle's target (full SHA), if one is open
    unusable: tuple[str, ...] = ()  # configured checkouts of other oracles that cannot open


def run_audit(port: Port, ref: gitio.Reference, pin: str, upstream_ref: str,
              surf: Surface, advancing: Advancing | None = None) -> Audit:
    """The audit against `pin`; `advancing`: as if that advance were recorded already (what
    an advance will leave behind, said before it writes)."""
    control = headers.parse_header(f"// Ported from: {CONTROL_PATH} @ {short(pin)}\n",
                                   "<control>")
    facts = _facts(port, ref, pin, upstream_ref, surf, control)
    read = port.ledger_read()
    noted = None if read.table is None else _Noted(
        read.table, _open_carried(port, read), _entered(port, ref, advancing),
        port.config.mirrored)
    files = tuple(_file_status(rel, h, facts, noted)
                  for rel, h in sorted(surf.file_headers.items()))
    problem = read.unreadable("ledger notes were not checked")
    return Audit(files, _control_ok(control, facts), problem, pin, facts.target,
                 facts.unusable, not_utf8_texts(surf))


def not_utf8_texts(surf: Surface) -> tuple[str, ...]:
    """One warning per scanned file that is not UTF-8, located at its first bad byte
    (`check` and `audit` say the same lines)."""
    kept = set(surf.not_utf8_kept)
    return (tuple(f"{where}, outside its header: read as a replacement character (bump-headers "
                  "writes the byte back as it was) — re-save it as UTF-8 unless it is meant"
                  if where in kept else f"{where}, so bump-headers will refuse to rewrite its "
                  "header — re-save it as UTF-8" for where in surf.not_utf8)
            + tuple(f"{where}, and holds no header that could be read (a byte inside 'Ported "
                    "from' hides one) — re-save it as UTF-8" for where in surf.not_utf8_other))


def _open_carried(port: Port, read: ledger.Read) -> frozenset[str]:
    """The carried PORT-NOW commits no ledger row ports and no decision closes (a record
    that does not load is `check`'s finding: then none)."""
    try:
        record, decided = port.carried(), port.decisions()
    except SyncError:
        return frozenset()
    refs = read.refs
    return frozenset(sha for sha, rec in record.items()
                     if rec.disposition == "PORT-NOW" and not refs.names(sha, rec.pr_or_none)
                     and decided.get(sha, rec).disposition == "PORT-NOW")


@dataclass(frozen=True)
class Advancing:
    """An advance about to be made: the pin it moves, and the day its cycle was frozen."""

    pin_before: str
    pin_after: str
    day: str


def _entered(port: Port, ref: gitio.Reference,
             advancing: Advancing | None = None) -> dict[str, Entered]:
    """Each commit a recorded advance (or the one `advancing`) moved the pin past: when its
    cycle was frozen (its report's date) and the first ledger row written in it (the length
    of the ledger the advance before recorded). One `git rev-list` per advance; none a
    rollback undid."""
    try:
        evs = events.load_all(port)
    except SyncError:
        return {}  # the events' own finding says why
    undone = {e.supersedes for e in evs if e.kind == "rollback"}
    moves = [(Advancing(e.pin_before, e.pin_after, Path(e.report).name[:10]), _ledger_rows(e))
             for e in evs if e.kind == "advance" and e.index not in undone]
    moves += [(advancing, None)] if advancing is not None else []
    out: dict[str, Entered] = {}
    rows: int | None = None  # the ledger's length at the advance before
    for move, recorded in moves:
        if blocks.is_date(move.day):
            listed = ref.git("rev-list", "--end-of-options", gitio.check_rev(move.pin_after),
                             f"^{gitio.check_rev(move.pin_before)}", "--")
            for sha in listed.decode("ascii", "replace").split():
                out.setdefault(sha, Entered(move.day, rows))
        rows = recorded
    return out


def _ledger_rows(e: events.Event) -> int | None:
    """How many ledger rows there were when the advance moved the pin, if it recorded it."""
    try:
        doc = json.loads(e.detail)
    except (ValueError, RecursionError):
        return None
    after = doc.get("after") if isinstance(doc, dict) else None
    n = after.get("ledger_rows") if isinstance(after, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def _target(port: Port) -> str | None:
    try:
        c = port.cycle()
    except SyncError:
        return None  # check and status say what is wrong with the cycle record
    return c.target if c is not None else None


def _facts(port: Port, ref: gitio.Reference, pin: str, upstream_ref: str, surf: Surface,
           control: headers.Header) -> _Facts:
    ups = port.upstreams()
    cites = [c for h in surf.file_headers.values() for c in h.citations]
    mine = [c for c in cites if c.oracle == ups.core]
    shas = {c.sha for c in mine if c.sha} | {c.sha for c in control.citations if c.sha}
    probe = verify.probe(ref, pin, sorted(shas), upstream_ref)
    rewrite = {c.near: ups.rewrite(c.near) or c.near for c in mine if c.near}
    ported = [c for h in surf.file_headers.values() if h.kind == "PORTED"
              for c in h.citations if c.oracle == ups.core]
    wanted = [verify.Cited(probe.full[c.sha], c.upstream_path, rewrite.get(c.near or ""))
              for c in ported if c.sha and probe.status.get(c.sha) in ("at-pin", "behind")]
    # A path cited with no SHA is looked up at the pin, in the same batch: one vLLM does not
    # have is likely another project's (ATen's `aten/...`), which a SHA would not fix.
    wanted += [_at_pin(c, probe.pin, rewrite) for c in ported if not c.sha]
    content = verify.content(ref, probe.pin, wanted) if wanted else {}
    others, unusable = _others(port, cites, ups.core)
    return _Facts(ups.core, probe, content, others, rewrite, _target(port), unusable)


def _at_pin(c: headers.Citation, pin: str, rewrite: dict[str, str]) -> verify.Cited:
    return verify.Cited(pin, c.upstream_path, rewrite.get(c.near or ""))


def unusable_checkouts(port: Port, surf: Surface) -> tuple[str, ...]:
    """`Audit.unusable_checkouts` without the rest of the audit (no probe of the cited SHAs):
    what `sync` says of this machine's checkouts when there is no range to audit for."""
    cites = [c for h in surf.file_headers.values() for c in h.citations]
    return _others(port, cites, port.upstreams().core)[1]


def _others(port: Port, cites: list[headers.Citation],
            core: str) -> tuple[dict[str, dict[str, bool]], tuple[str, ...]]:
    """Per other oracle with a checkout in the preferences: which cited SHAs it has; and,
    one line each, the configured checkouts that cannot be used: under an id no header
    cites, or that cannot be opened (missing, not git, shallow)."""
    try:
        prefs = port.preferences()
    except SyncError:
        return {}, ()  # a preferences file that does not parse is refused where it is needed
    out: dict[str, dict[str, bool]] = {}
    unusable: list[str] = []
    cited = {c.oracle for c in cites}
    source = prefs.source_of("oracle_checkouts")
    for oracle, path in sorted(prefs.oracle_checkouts.items()):
        if oracle not in cited:
            # Its checkout verifies nothing, whatever its state: the id is what to look at
            # (a typo of a cited one, or an entry left over), and it is not opened.
            unusable.append(_uncited(oracle, sorted(cited - {core}, key=str.lower), source))
            continue
        shas = sorted({c.sha for c in cites if c.oracle == oracle and c.sha})
        try:
            other = gitio.open_repo(path, what=f"{oracle} checkout",
                                    variable="SYNC_ORACLE_CHECKOUTS")
            rows = gitio.batch_check(other, [f"{s}^{{commit}}" for s in shas]) if shas else []
        except SyncError as exc:
            unusable.append(_unusable(oracle, exc, source))
            continue
        if shas:
            out[oracle] = {s: row is not None for s, row in zip(shas, rows, strict=True)}
    return out, tuple(unusable)


def _unusable(oracle: str, exc: SyncError, source: str) -> str:
    """A configured checkout of another oracle that cannot be opened, where its path came
    from, and what to do."""
    return (f"{exc.message} ({_where(source)}), so the SHAs the port cites {oracle} at are not "
            f"verified — point its entry there at a clone of {oracle}'s upstream, or remove "
            "the entry")


def _uncited(oracle: str, cited: list[str], source: str) -> str:
    """A configured checkout under an oracle id no header cites, the ids they do cite, and
    what to do."""
    ids = ", ".join(cited) or "no other oracle"
    return (f"no header cites {oracle}: nothing to verify against its checkout (the headers "
            f"cite {ids}) — correct the id in {_where(source)} if it is a typo, or remove the "
            "entry")


def _where(source: str) -> str:
    """Where the oracle_checkouts value came from: the variable, or the preferences file."""
    return source if source.startswith("env ") else f"oracle_checkouts in {source}"


def _control_ok(control: headers.Header, facts: _Facts) -> bool:
    """The control goes through the same aggregation as every real file, not just the probe."""
    plain = _Facts(facts.core, facts.probe, {}, {}, {})
    return (control.kind == "PORTED" and len(control.citations) == 1
            and control.citations[0].path == CONTROL_PATH
            and _file_status(CONTROL_PATH, control, plain, None).status == "at-pin")


def _cite_status(c: headers.Citation, facts: _Facts) -> CiteStatus:
    if c.oracle != facts.core:
        return CiteStatus(c, "other-oracle", _other_detail(c, facts))
    if not c.sha:
        got = facts.content.get(_at_pin(c, facts.probe.pin, facts.rewrite))
        if got is not None and got.kind == "missing":
            return CiteStatus(c, "no-sha", f"{_p(c.path)} is cited with no SHA and is not in "
                              "upstream at the pin", got)
        return CiteStatus(c, "no-sha", f"{_p(c.path)} is cited with no SHA")
    sha_status = facts.probe.status.get(c.sha, "not-upstream")
    if sha_status == "not-upstream":
        return CiteStatus(c, "not-upstream", f"{c.sha} is not a commit of the reference "
                          "checkout's upstream line")
    if sha_status == "ahead":
        return CiteStatus(c, "ahead", f"{c.sha} is ahead of the pin",
                          at_target=facts.probe.full.get(c.sha) == facts.target)
    full = facts.probe.full[c.sha]
    got = facts.content.get(verify.Cited(full, c.upstream_path, facts.rewrite.get(c.near or "")))
    if got is None:
        return CiteStatus(c, "at-pin" if sha_status == "at-pin" else "behind-unchanged", "")
    return _content_status(c, sha_status, got)


def _content_status(c: headers.Citation, sha_status: str, got: verify.Content) -> CiteStatus:
    if got.kind == "unchanged":
        if sha_status == "at-pin":
            return CiteStatus(c, "at-pin", "", got)
        return CiteStatus(c, "behind-unchanged", f"{_p(got.path)} unchanged since {c.sha}",
                          got)
    if got.kind == "changed":
        shown = ", ".join(f"`{short(s)}`" for s in got.since[:SHOWN])
        more = f" and {len(got.since) - SHOWN} more" if len(got.since) > SHOWN else ""
        n = len(got.since)
        return CiteStatus(c, "behind-changed", f"{_p(got.path)} changed since {c.sha} by "
                          f"{n} commit{'s' if n != 1 else ''}: {shown}{more}", got)
    return CiteStatus(c, "path-gone", gone_detail(c.sha or "", got), got)


def gone_detail(sha: str, got: verify.Content, against: str = "the pin") -> str:
    """What became of a cited path that `against` no longer has."""
    if got.kind == "renamed":
        return (f"{_p(got.path)} was renamed to {_p(got.new_path or '')} in "
                f"`{short(got.gone_in or '')}`")
    if got.kind == "deleted":
        where = f" in `{short(got.gone_in)}`" if got.gone_in else ""
        return f"{_p(got.path)} was deleted{where}"
    hint = (f" ({against} has {', '.join(_p(n) for n in got.namesakes)})"
            if got.namesakes else "")
    return (f"{_p(got.path)} is not in upstream at {sha} nor at {against}: a wrong or "
            f"relative path{hint}")


def _p(path: str) -> str:
    """A path from a header or from upstream (a rename's new path), as a report shows it."""
    return escape(path, reason=True)


def _other_detail(c: headers.Citation, facts: _Facts) -> str:
    at = f" at {c.sha}" if c.sha else ""
    known = facts.others.get(c.oracle)
    if known is None or not c.sha:
        return f"cites {c.oracle}{at} (not verified here)"
    if known.get(c.sha):
        return f"cites {c.oracle}{at} (a commit of its checkout)"
    return f"cites {c.oracle}{at}, which is NOT a commit of its checkout"


def _worst(cites: tuple[CiteStatus, ...], h: headers.Header) -> Status:
    if h.kind == "NONE":
        return "no-header"
    if h.kind == "ORIGINAL":
        return "original"
    ranked = [c.status for c in cites if c.status in RANK]
    if ranked:
        worst = max(ranked, key=lambda s: RANK[s])
        return worst
    if any(c.status == "other-oracle" for c in cites):
        return "other-oracle"
    return "no-header"


@dataclass(frozen=True)
class Entered:
    """When the port came to see a commit: the cycle that brought it, frozen on `day`, and
    (when the advance before it recorded the ledger's length) the first row written since."""

    day: str
    first_row: int | None = None


class _Noted:
    """The last ledger row naming a path, each path searched for once (many files cite the
    same upstream path)."""

    def __init__(self, table: ledger.Table, open_port_now: frozenset[str] = frozenset(),
                 entered: dict[str, Entered] | None = None,
                 roots: tuple[str, ...] = ("vllm/",)) -> None:
        self.table = table
        self.open = open_port_now  # carried PORT-NOW commits still unported
        self.entered = entered or {}  # commits recorded advances moved the pin past
        self.roots = tuple(r for r in roots if r.endswith("/"))  # `mirrored` folders
        self.seen: dict[str, ledger.Mention | None] = {}

    def __call__(self, *paths: str) -> ledger.Mention | None:
        """The last row naming any of `paths`; None: no row does."""
        return _latest(map(self._one, paths))

    def _one(self, path: str) -> ledger.Mention | None:
        """Ledgers write upstream paths below a mirrored root too (`v1/core/x.py` for
        `vllm/v1/core/x.py`: two parts at least)."""
        if path not in self.seen:
            found = [ledger.latest_mention(self.table, path)]
            rest = next((path[len(r):] for r in self.roots if path.startswith(r)), "")
            if "/" in rest:
                found.append(ledger.latest_mention(self.table, rest, starts_word=True))
            self.seen[path] = _latest(found)
        return self.seen[path]

    def covers(self, rel: str, c: CiteStatus) -> bool:
        return self(rel, c.citation.path) is not None and not self.gap(rel, c)

    def gap(self, rel: str, c: CiteStatus) -> str:
        """Why the rows naming the file or the cited path note not every commit of the change
        ("": they do). A row notes a commit when it names it (its PR or SHA), or when the last
        was written after the port saw the commit: on or after its day, and, for a commit a
        recorded advance moved the pin past, after the cycle that brought it began (rows
        appended since the advance before it; on or after the day it was frozen). A carried
        PORT-NOW still open is noted only by a row naming it: the record says it is not
        ported."""
        last, got = self(rel, c.citation.path), c.content
        if last is None or got is None:
            return ""
        paths = (rel, c.citation.path)
        for sha, pr, day in zip(got.since, got.since_prs, got.since_days, strict=True):
            came = self.entered.get(sha)
            # The cheap test first: most commits a row postdates (a real port's files lack
            # hundreds of commits).
            if (sha not in self.open and _after(last, day, came)) or ledger.names_change(
                    self.table, paths, sha, pr):
                continue
            if sha in self.open:
                return f"`{short(sha)}` is a carried PORT-NOW still open, and no row names it"
            return _unseen(last, sha, day, came)
        return ""


def _latest(mentions: Iterable[ledger.Mention | None]) -> ledger.Mention | None:
    named = [m for m in mentions if m is not None]
    return max(named, key=lambda m: m.row) if named else None


def _after(last: ledger.Mention, day: str, came: Entered | None) -> bool:
    """Whether the last row naming a file was written after the port saw a commit of `day`
    (brought, if `came`, by that recorded cycle)."""
    if came is None:
        return last.day >= day
    return last.day >= came.day and (came.first_row is None or last.row >= came.first_row)


def _unseen(last: ledger.Mention, sha: str, day: str, came: Entered | None) -> str:
    """How the last row naming a file was written before the port saw `sha`."""
    row = f"of {last.day}" if last.day else "undated"
    if came is None:
        return f"the latest row naming it is {row}, before `{short(sha)}` of {day}"
    return (f"the latest row naming it ({row}) was written before the cycle that brought "
            f"`{short(sha)}` (frozen on {came.day})")


def _file_status(rel: str, h: headers.Header, facts: _Facts,
                 noted_in: _Noted | None) -> FileStatus:
    cites = tuple(_cite_status(c, facts) for c in h.pins)
    if noted_in is None:
        return FileStatus(rel, _worst(cites, h), cites, None, h.mentions, h.watched)
    # A note of a change is written after it, or names it: each commit a changed citation
    # lacks needs a row naming the file or its path that notes it (`_Noted.gap`).
    changed = [c for c in cites if c.status == "behind-changed"]
    named = [c for c in changed if noted_in(rel, c.citation.path) is not None]
    gap = next((g for c in named if (g := noted_in.gap(rel, c))), "")
    noted = len(named) == len(changed) and not gap and noted_in(
        rel, *(c.path for c in h.pins)) is not None
    return FileStatus(rel, _worst(cites, h), cites, noted, h.mentions, h.watched, gap)


@dataclass(frozen=True)
class Summary:
    lines: tuple[str, ...]
    counts: tuple[tuple[str, int], ...]


_LISTED: tuple[Status, ...] = ("behind-changed", "path-gone", "ahead", "not-upstream",
                               "no-sha", "other-oracle")


def summary_lines(a: Audit) -> Summary:
    counts = a.counts()
    head = (", ".join(f"{s} {counts[s]}" for s in ORDER) + f" (of {len(a.files)} files; "
            + ("positive control, not counted: at-pin, as it must be" if a.control_ok else
               "POSITIVE CONTROL FAILED: counts are not trustworthy") + ")")
    lines = [f"- Counts: {head}"]
    if a.ledger_problem is not None:
        lines.append(f"- {a.ledger_problem}")
    if counts["behind-unchanged"]:
        # To the pin, named: bare `--unchanged` bumps to an open cycle's target, and skips
        # each of these files whose cited file changed between the pin and the target.
        lines.append(f"- behind-unchanged: {counts['behind-unchanged']} file(s) cite a blob "
                     "identical at the pin — safe to bump to the pin with `upstream-sync "
                     f"bump-headers --unchanged --to {short(a.pin)}`")
    lines += _at_target_line(a)
    for f in a.files:
        if f.status in _LISTED and not f.at_target:
            lines.append(file_line(f))
    return Summary(tuple(lines), tuple(counts.items()))


def _at_target_line(a: Audit) -> list[str]:
    """Files bumped to the open cycle's target while porting (protocol step 5): expected
    until the advance, so counted on one line rather than listed."""
    ported = [f for f in a.files if f.at_target]
    if not ported or not a.target:
        return []
    return [f"- ahead: {len(ported)} file(s) cite the open cycle's target `{short(a.target)}` "
            "(bumped during this cycle; the advance makes it the pin)"]


def file_line(f: FileStatus) -> str:
    """One file's line in the report and in `audit`: what each of its notable pins says."""
    shown = [c for c in f.cites if c.status == f.status] or list(f.cites)
    said = "; ".join(dict.fromkeys(c.detail or f"{_p(c.citation.path)} @ {c.citation.sha}"
                                   for c in shown))
    note = ""
    if f.status == "behind-changed":
        note = ("; ledger note: unknown (ledger unreadable)" if f.noted is None else
                "; ledger note: yes" if f.noted else "; ledger note: MISSING"
                + (f" ({f.note_gap})" if f.note_gap else ""))
    return f"- {code(f.path)} {f.status}: {said}{note}"


def no_sha_texts(a: Audit) -> tuple[str, ...]:
    """One warning per ported file whose header cites vLLM with no SHA (`check` and `audit`
    say the same lines)."""
    return tuple(no_sha_text(f) for f in a.files if f.status == "no-sha")


def no_sha_text(f: FileStatus) -> str:
    """A ported file whose header cites vLLM with no SHA, and what to do, as one sentence."""
    bare = [c for c in f.cites if c.status == "no-sha"]
    line = bare[0].citation.line if bare else 1
    paths = ", ".join(dict.fromkeys(c.citation.path for c in bare))
    text = (f"{f.path}:{line}: the header cites {paths} with no SHA, so it pins nothing — add "
            "'@ <sha>' (the upstream commit the file was ported from) to the citation")
    return text + "".join(_not_at_pin(c.content) for c in bare if c.content is not None)


def _not_at_pin(got: verify.Content) -> str:
    """What a bare citation's path is at the pin, when the pin does not have it."""
    if got.kind != "missing":
        return ""
    if got.outside:
        root = got.path.split("/", 1)[0] + "/"
        return (f"; vLLM has no {root} at the pin: if {_p(got.path)} is another project's, "
                f'attribute it with [oracles.<id>] paths = ["{root}"] in the configuration '
                "instead")
    hint = f" (the pin has {', '.join(got.namesakes)})" if got.namesakes else ""
    return f"; {_p(got.path)} is not in upstream at the pin either{hint}"


def finding_text(f: FileStatus) -> str:
    """What a finding is and what to do, as one sentence."""
    first = f.cites[0].citation.line if f.cites else 1
    if f.status == "path-gone":
        said = "; ".join(c.detail for c in f.cites if c.status == "path-gone")
        return (f"{f.path}:{first}: the header cites a path the parity pin does not have: "
                f"{said} — follow the move (or fix the path) in the header by hand")
    said = "; ".join(c.detail for c in f.cites if c.status == "behind-changed")
    return (f"{f.path}:{first}: per-file pin behind the parity pin, and the upstream file "
            f"changed with no ledger note: {said} — port the change and bump the header, or "
            "add a ledger row naming the file")
