"""`queue`: the PORT-NOW worklist of the open cycle, in upstream order (sync step 5).

The work queue is the sync report (protocol step 4), so the entries come from the
report's JSON companion for the cycle's frozen target, refused when it is missing
or was written for another pin or target: its PORT-NOW entries, then the PORT-NOW
items earlier cycles carried into it (`carried`, outside the range), shown like every
other item (their drift runs to this cycle's target). Per item: the port files, their current
per-file pins read from the headers now, and that commit's own diff of the cited
paths (`git show <sha> -M -- <paths>`, renames followed) with the definitions it
changes marked (from the report's symbol-pass evidence: which ones a citation
names, and by which port file). All items' diffs come from one `git diff-tree
--stdin`, so a one-line fix never shows an unrelated change of the same file.

`--drift` adds the second view: the cumulative diff since each file's pin (`git
diff <file-pin>..TARGET -- <path>`) with its diffstat, grouped by base commit, so
the number of git processes depends on how many distinct per-file pins are cited,
never on the number of items. A cited path renamed up to the target (the report's moves)
is diffed with both names and renames found (`git diff -M <file-pin>..TARGET -- OLD NEW`),
in one more git process per base that has one. So is one renamed before the parity pin,
where a header lagged while upstream moved its file (the range's moves cannot name that
rename): of the paths a file pin behind the parity pin cites, those neither the pin nor the
target has (one look-up for all) are followed where git's rename detection pairs them
between that base and the target (one listing per base that lost one), and the drift says
so; a path git pairs with nothing stays a deletion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.headers import citations as headers
from sync.headers import verify as sha_verify
from sync.infra.atomic import Unwritable, read_record, read_text, write_bytes
from sync.infra.errors import MalformedRecord, UsageError
from sync.port import Port
from sync.records import cycle
from sync.records.decisions import ALL
from sync.records.mdtext import flat, one_line
from sync.steps import carry, surface
from sync.steps.classify import AUTO, Entry, mentioned_only
from sync.steps.evidence import parse_ranges
from sync.upstream import gitio, history, patch
from sync.upstream.gitio import short

SHOW_LEN = 12
_SHA = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class FilePin:
    port_file: str
    upstream_path: str
    sha: str | None  # as cited in the header; None when the file has no pin for this path
    status: str  # at-pin / behind / ahead / not-upstream (against the parity pin), or
    # "missing file" / "no pin" / "no pin; cited in the body at line N" (no header citation:
    # the symbol pass judged one in the file's body) / "no pin; implied by a mapping rule"


@dataclass(frozen=True)
class Diff:
    upstream_path: str
    base: str  # full SHA the diff starts from
    base_from: str  # "file pin <token>" or "parity pin"
    insertions: int
    deletions: int
    binary: bool
    command: str
    new_path: str | None = None  # the path's name at the target, when the drift follows a rename
    # Renamed between the file pin and the parity pin: the header names a path the pin lacks.
    renamed_before_pin: bool = False

    @property
    def renamed_note(self) -> str:
        """What the drift line adds to its base: a rename the report's moves cannot name."""
        return (f"; renamed → {self.new_path} before the parity pin"
                if self.renamed_before_pin else "")


@dataclass(frozen=True)
class Marked:
    """A definition the item's own diff changes."""

    name: str
    change: str  # modified, added, removed, extended, non-semantic
    cited_by: tuple[str, ...]  # the port files whose citation names it (and hits)
    whole_by: tuple[str, ...] = ()  # those citing its file whole (a hit on every definition)

    @property
    def label(self) -> str:
        return _label(self.name, self.change, self.cited_by, self.whole_by)


@dataclass(frozen=True)
class CommitDiff:
    """The item's own change to one cited path."""

    upstream_path: str
    new_path: str | None  # after a rename
    insertions: int
    deletions: int
    binary: bool
    command: str
    definitions: tuple[Marked, ...]
    hunks: tuple[tuple[str, str, tuple[str, ...]], ...]  # (old lines, new lines, definitions)
    text: bytes  # the patch, each hunk header naming the definitions it changes


@dataclass(frozen=True)
class Item:
    index: int
    entry: Entry
    pins: tuple[FilePin, ...]
    diffs: tuple[Diff, ...]  # the cumulative drift since each file pin (with --drift)
    ledgered: bool  # a ledger row names its PR or SHA already
    patch: str | None  # the patch file written for it, if any
    own: tuple[CommitDiff, ...] = ()  # the commit's own diff of each cited path
    carried_since: str | None = None  # the report that first carried it over, if one did
    mentioned: tuple[str, ...] = ()  # changed paths port files only mention: not shown


@dataclass(frozen=True)
class Queue:
    pin: str
    target: str
    report: str
    reference: str
    items: tuple[Item, ...]
    notes: tuple[str, ...]


def report_json(port: Port, c: cycle.Cycle) -> Path:
    return (port.sync_dir / cycle.report_name(c)).with_suffix(".json")


def _str_list(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _refused(message: str, path: str) -> MalformedRecord:
    return MalformedRecord(message, "run 'upstream-sync sync' to rewrite it", path=path)


def entries_from_json(text: str, *, path: str, key: str = "entries"
                      ) -> tuple[str, str, list[Entry]]:
    """(pin, target, entries) from a report's JSON companion; malformed shapes are refused.

    `key` "carried" reads the carried-over items instead (none in an older report)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refused(f"not valid JSON ({exc.msg} at line {exc.lineno})", path) from None
    except (ValueError, RecursionError):  # a number of more than 4300 digits, deep nesting
        raise _refused("not valid JSON (out of bounds)", path) from None
    if not isinstance(doc, dict):
        raise _refused("not a report JSON object", path)
    pin, target, raw = doc.get("pin"), doc.get("target"), doc.get(key, [] if key != "entries"
                                                                   else None)
    if not isinstance(pin, str) or not isinstance(target, str) or not isinstance(raw, list):
        raise _refused("missing pin, target or entries", path)
    out: list[Entry] = []
    for i, e in enumerate(raw):
        entry = _entry(e)
        if entry is None:
            raise _refused(f"entry {i} is malformed", path)
        out.append(entry)
    return pin, target, out


# What each field of an entry must hold (a missing field reads as None, "reason" as "").
_FIELDS: dict[str, Callable[[Any], bool]] = {
    "sha": lambda v: isinstance(v, str) and _SHA.fullmatch(v) is not None,
    "pr": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    "subject": lambda v: isinstance(v, str),
    "disposition": lambda v: v in ALL,
    "reason": lambda v: isinstance(v, str),
    "rule": lambda v: v is None or isinstance(v, str),
    "upstream_paths": lambda v: _str_list(v) is not None,
    "port_files": lambda v: _str_list(v) is not None,
}


def _entry(raw: object) -> Entry | None:
    """One entry of the JSON, or None when it is malformed."""
    if not isinstance(raw, dict):
        return None
    v: dict[str, Any] = {key: raw.get(key, "" if key == "reason" else None) for key in _FIELDS}
    if not all(ok(v[key]) for key, ok in _FIELDS.items()):
        return None
    return Entry(v["sha"], v["pr"], v["subject"], v["disposition"], v["reason"], v["rule"],
                 v["rule"] is not None, tuple(v["upstream_paths"]), tuple(v["port_files"]))


def _resolve_many(ref: gitio.Reference, shas: list[str]) -> dict[str, str]:
    """Full commit SHA for each cited SHA that names exactly one commit (one git process)."""
    wanted = [s for s in dict.fromkeys(shas) if _SHA.fullmatch(s)]
    if not wanted:
        return {}
    rows = gitio.batch_check(ref, [f"{s}^{{commit}}" for s in wanted])
    return {s: row[0] for s, row in zip(wanted, rows, strict=True)
            if row is not None and row[1] == "commit"}


def numstat(ref: gitio.Reference, base: str, target: str,
            paths: list[str]) -> dict[str, tuple[int, int, bool]]:
    """path -> (insertions, deletions, binary) for `git diff base target -- paths`."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    out = ref.git("diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
                  "--no-relative", "--end-of-options", base, target, "--", *paths)
    return _summed((names[0], added, deleted) for added, deleted, names in _numstat_z(out))


def renamed_numstat(ref: gitio.Reference, base: str, target: str,
                    moves: dict[str, str]) -> dict[str, tuple[int, int, bool]]:
    """old path -> (insertions, deletions, binary) for `git diff -M base target -- OLD NEW`,
    for each rename OLD -> NEW in `moves` (one git process): a rename git pairs is one
    record, one it does not (too little alike) is OLD's deletion plus NEW's addition."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    out = ref.git("diff", "--numstat", "-z", "-M", "--no-ext-diff", "--no-textconv",
                  "--no-relative", "--end-of-options", base, target, "--", *_names(moves))
    owner = _owners(moves)
    return _summed((old, added, deleted) for added, deleted, names in _numstat_z(out)
                   if (old := next((owner[n] for n in names if n in owner), None)) is not None)


def _summed(rows: Iterable[tuple[str, str, str]]) -> dict[str, tuple[int, int, bool]]:
    """key -> (insertions, deletions, binary), summed over its `--numstat` rows."""
    stats: dict[str, tuple[int, int, bool]] = {}
    for key, added, deleted in rows:
        ins, dels, binary = stats.get(key, (0, 0, False))
        if added == "-" and deleted == "-":
            stats[key] = (ins, dels, True)
        elif added.isdigit() and deleted.isdigit():
            stats[key] = (ins + int(added), dels + int(deleted), binary)
    return stats


def _names(moves: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(n for old, new in moves.items() for n in (old, new)))


def _owners(moves: dict[str, str]) -> dict[str, str]:
    """Each name of a rename -> its old name (the cited path its drift is filed under)."""
    return {**{new: old for old, new in moves.items()}, **{old: old for old in moves}}


def _numstat_z(out: bytes) -> list[tuple[str, str, tuple[str, ...]]]:
    """(added, deleted, paths) of each `--numstat -z` record; a rename's paths are two."""
    fields = out.decode("utf-8", "replace").split("\0")
    records: list[tuple[str, str, tuple[str, ...]]] = []
    i = 0
    while i < len(fields):
        stat = fields[i].split("\t", 2)
        i += 1
        if len(stat) != 3:
            continue
        if stat[2]:
            records.append((stat[0], stat[1], (stat[2],)))
        else:  # renamed: the old and the new path follow as fields of their own
            records.append((stat[0], stat[1], tuple(fields[i:i + 2])))
            i += 2
    return records


def _header_path(line: bytes) -> str | None:
    """The path of a `diff --git a/P b/P` line (renames are off, so both sides are P)."""
    rest = line[len(b"diff --git "):].rstrip(b"\n")
    if rest.startswith(b'"'):
        return None
    if len(rest) % 2 != 1 or not rest.startswith(b"a/"):
        return None
    half = (len(rest) - 1) // 2
    a, sep, b = rest[:half], rest[half:half + 1], rest[half + 1:]
    if sep != b" " or a[2:] != b[2:] or not b.startswith(b"b/"):
        return None
    return a[2:].decode("utf-8", "surrogateescape")


def patches(ref: gitio.Reference, base: str, target: str, paths: list[str]) -> dict[str, bytes]:
    """path -> its section of `git diff base target -- paths` (one git process)."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    out = ref.git("-c", "core.quotePath=false", "diff", "--no-renames", "--no-color",
                  "--no-ext-diff", "--no-textconv", "--no-relative", "--binary",
                  "--end-of-options", base, target, "--", *paths)
    return dict(_sections(out, _header_path))


def renamed_patches(ref: gitio.Reference, base: str, target: str,
                    moves: dict[str, str]) -> dict[str, bytes]:
    """old path -> `git diff -M base target -- OLD NEW`, for each rename in `moves` (one git
    process): the rename's section, or OLD's deletion and NEW's addition git did not pair."""
    gitio.check_rev(base)
    gitio.check_rev(target)
    out = ref.git("-c", "core.quotePath=false", "diff", "-M", "--no-color", "--no-ext-diff",
                  "--no-textconv", "--no-relative", "--binary", "--end-of-options", base,
                  target, "--", *_names(moves))
    heads = {f"diff --git a/{a} b/{b}\n".encode("utf-8", "surrogateescape"): old
             for old, new in moves.items() for a, b in ((old, new), (old, old), (new, new))}
    joined: dict[str, bytes] = {}
    for old, text in _sections(out, heads.get):
        joined[old] = joined.get(old, b"") + text
    return joined


def _sections(out: bytes, key: Callable[[bytes], str | None]) -> list[tuple[str, bytes]]:
    """The sections of a diff, each with the `key` of its `diff --git` line (None: left out)."""
    sections: list[tuple[str, bytes]] = []
    current: str | None = None
    chunk: list[bytes] = []
    for line in patch.split_lines(out):
        if line.startswith(b"diff --git "):
            if current is not None:
                sections.append((current, b"".join(chunk)))
            current, chunk = key(line), []
        chunk.append(line)
    if current is not None:
        sections.append((current, b"".join(chunk)))
    return sections


def build(port: Port, ref: gitio.Reference, upstream_ref: str, *,
          patch_dir: Path | None = None, drift: bool = False) -> Queue:
    c = port.open_cycle()
    pin = port.pin_record().pin.commit
    jpath = report_json(port, c)
    listed = _report_entries(port, jpath, pin, c.target)
    entries, found = listed.entries, listed.found
    in_range = {e.sha for e in entries}
    work = [e for e in entries if e.disposition == "PORT-NOW"]
    work += [e for e in listed.carried if e.disposition == "PORT-NOW" and e.sha not in in_range]
    # The own diffs are read with `diff-tree --stdin`, which skips a commit the checkout
    # lacks: without this, a checkout that never fetched the range lists every item empty.
    missing = gitio.lacking(ref, pin, c.target)
    if missing is not None:
        raise missing
    notes: list[str] = []
    cited = _cited(port, ref, work, upstream_ref)
    plans = [_plan(e, cited, notes, found.get(e.sha, {}), listed.moves) for e in work]
    own = _own_diffs(ref, work, found, {p.entry.sha: p.mentioned for p in plans})
    by_base = _by_base(plans) if drift else {}
    moves = _Moves(listed.moves, _renamed_before(ref, (pin, c.target), by_base, cited.behind,
                                                 listed.moves) if by_base else {})
    stats = {b: _drift(numstat, renamed_numstat, ref, (b, c.target), ps, moves.at(b))
             for b, ps in by_base.items()}
    sections = ({b: _drift(patches, renamed_patches, ref, (b, c.target), ps, moves.at(b))
                 for b, ps in by_base.items()} if patch_dir is not None else {})
    led = carry.ledger_refs(port)
    unread = led.unreadable("every item shows as open because no row can be checked")
    if unread is not None:
        notes.insert(0, unread)
    items: list[Item] = []
    for index, p in enumerate(plans, start=1):
        diffs = _diffs(p.bases, stats, c.target, moves) if drift else []
        mine = own.get(p.entry.sha, ())
        written = None
        if patch_dir is not None:
            written = _write_patch(patch_dir, _Patch(index, p.entry, mine, diffs, sections,
                                                     c.target, p.mentioned))
        items.append(Item(index, p.entry, p.pins, tuple(diffs), carry.ported(p.entry, led),
                          written, mine, listed.since.get(p.entry.sha), p.mentioned))
    if patch_dir is not None:
        notes += _prune_patches(patch_dir, {Path(it.patch).name for it in items if it.patch},
                                drift)
    return Queue(pin, c.target, port.rel(jpath.with_suffix(".md")), str(ref.path), tuple(items),
                 tuple(dict.fromkeys(notes)))


# -- the commit's own diff, its definitions marked ----------------------------------------------


_HITS = frozenset(o for o, (_rule, d) in AUTO.items() if d == "PORT-NOW")


def _evidence(raw: object) -> dict[str, Any]:
    """An entry's `evidence` object, or {} when absent or of another shape."""
    if not isinstance(raw, dict):
        return {}
    ok = all(isinstance(raw.get(k), list) for k in ("paths", "citations"))
    return raw if ok else {}


def _paths_of(e: Entry, found: dict[str, Any]) -> list[str]:
    """The cited paths of an entry, with the other name of each rename among them."""
    paths = list(e.upstream_paths)
    for p in found.get("paths", []):
        if isinstance(p, dict):
            paths += [v for v in (p.get("old_path"), p.get("new_path")) if isinstance(v, str)]
    return paths


def _own_diffs(ref: gitio.Reference, work: list[Entry], found: dict[str, dict[str, Any]],
               mentioned: dict[str, tuple[str, ...]]) -> dict[str, tuple[CommitDiff, ...]]:
    """sha -> its own diff of its cited paths (not those only mentioned): one patch listing
    for every item."""
    spec = {p for e in work for p in _paths_of(e, found.get(e.sha, {}))}
    listed = history.commit_patches(ref, [e.sha for e in work], spec)
    return {e.sha: tuple(_own(e, listed.get(e.sha), found.get(e.sha, {}),
                              mentioned.get(e.sha, ()))) for e in work}


def _marks(found: dict[str, Any], path: str) -> list[tuple[str, str, list[str], list[str]]]:
    """(name, change, old line ranges, new line ranges) the evidence gives for `path`."""
    out = []
    for p in found.get("paths", []):
        if not isinstance(p, dict) or p.get("path") != path:
            continue
        for u in p.get("changed", []) if isinstance(p.get("changed"), list) else []:
            if isinstance(u, dict) and isinstance(u.get("name"), str):
                old = [x for x in u.get("old_lines", []) if isinstance(x, str)]
                new = [x for x in u.get("new_lines", []) if isinstance(x, str)]
                out.append((u["name"], str(u.get("change", "")), old, new))
    return out


def _cited_by(found: dict[str, Any], path: str, name: str,
              whole: bool = False) -> tuple[str, ...]:
    """The port files whose hit on `path` names definition `name`: by a citation naming it,
    or (`whole`) by citing the file whole (walk-s12 O3: those were marked as citing it)."""
    files = {c.get("port_file") for c in found.get("citations", []) if isinstance(c, dict)
             and c.get("path") == path and c.get("outcome") in _HITS
             and (c.get("outcome") == "whole-file") == whole
             and name in (c.get("definitions") or [])}
    return tuple(sorted(f for f in files if isinstance(f, str)))


def _marked(found: dict[str, Any], path: str, name: str, change: str) -> Marked:
    return Marked(name, change, _cited_by(found, path, name),
                  _cited_by(found, path, name, whole=True))


def _own(e: Entry, cp: patch.CommitPatch | None, found: dict[str, Any],
         mentioned: tuple[str, ...] = ()) -> list[CommitDiff]:
    out = []
    for path in e.upstream_paths:
        if path in mentioned:
            continue
        fp = cp.for_path(path) if cp is not None else None
        if fp is not None and fp.new_path == path and fp.old_path in e.upstream_paths and (
                fp.old_path != path):
            continue  # one rename, shown once under its old name
        marked = tuple(_marked(found, path, n, ch) for n, ch, _o, _n in _marks(found, path))
        hunks, text = _annotated(fp, found, path) if fp is not None else ((), b"")
        ins = sum(len(h.added) for h in fp.hunks) if fp else 0
        dels = sum(len(h.deleted) for h in fp.hunks) if fp else 0
        moved = fp.new_path if fp and fp.new_path != path else None
        # Both sides of a rename: with OLD alone in the pathspec git cannot pair it, and
        # shows OLD deleted whole instead of the diff counted here.
        spec = f"{path} {moved}" if moved else path
        out.append(CommitDiff(path, moved, ins, dels, bool(fp and fp.binary),
                              f"git show {e.sha[:SHOW_LEN]} -M -- {spec}", marked, hunks, text))
    return out


def _annotated(fp: patch.FilePatch, found: dict[str, Any], path: str) -> tuple[
        tuple[tuple[str, str, tuple[str, ...]], ...], bytes]:
    """Each hunk's definitions, and the file's patch with each hunk header naming them
    (after the second `@@`, where git apply reads nothing)."""
    marks = _marks(found, path)
    out = []
    hunks = []
    for part in fp.halves or (fp,):  # a type change: its deletion, then its addition
        out.append(part.header)
        for h in part.hunks:
            names = tuple(_marked(found, path, n, ch).label for n, ch, old, new in marks
                          if _touches(h.deleted, old) or _touches(h.added, new))
            hunks.append((h.old_range(), h.new_range(), names))
            head, nl, body = h.text.partition(b"\n")
            if names:
                head += ("  [" + "; ".join(names) + "]").encode()
            out.append(head + nl + body)
    return tuple(hunks), b"".join(out)


def _touches(lines: tuple[int, ...], ranges: list[str]) -> bool:
    spans = parse_ranges(",".join(ranges))
    return any(a <= n <= b for n in lines for a, b in spans)


def _label(name: str, change: str, cited_by: tuple[str, ...],
           whole_by: tuple[str, ...] = ()) -> str:
    cited = f"; cited by {', '.join(cited_by)}" if cited_by else ""
    whole = f"; its file cited whole by {', '.join(whole_by)}" if whole_by else ""
    return f"{name} ({change}{cited}{whole})"


@dataclass(frozen=True)
class _Listed:
    """What the cycle's report JSON lists for the queue."""

    entries: list[Entry]
    found: dict[str, dict[str, Any]]  # each entry's symbol-pass evidence, by SHA
    carried: list[Entry]  # the carry-over record's open items
    since: dict[str, str]  # SHA -> the report that first carried it
    moves: dict[str, str]  # cited path -> its name at the target, for one renamed in the range


def _report_entries(port: Port, jpath: Path, pin: str, target: str) -> _Listed:
    """The entries of the cycle's report JSON (and each one's symbol-pass evidence, by SHA)
    and the items carried into it, refused unless it was written for pin..target."""
    rel = port.rel(jpath)
    if not jpath.exists():
        raise UsageError(f"the cycle's report {rel} does not exist",
                         "run 'upstream-sync sync' first")
    text = read_record(jpath, rel=rel)
    rpin, rtarget, entries = entries_from_json(text, path=rel)
    if rpin != pin or rtarget != target:
        raise UsageError(f"{rel} was written for {short(rpin)}..{short(rtarget)}, but the cycle "
                         f"is {short(pin)}..{short(target)}", "run 'upstream-sync sync' again")
    doc = json.loads(text)
    found = {e.sha: _evidence(r.get("evidence"))
             for e, r in zip(entries, doc.get("entries", []), strict=True)}
    carried = entries_from_json(text, path=rel, key="carried")[2]
    since = {c["sha"]: str(c.get("since", "")).rsplit("/", 1)[-1]
             for c in doc.get("carried") or [] if isinstance(c, dict) and "sha" in c}
    return _Listed(entries, found, carried, since, _renamed(doc.get("moves")))


def _renamed(raw: object) -> dict[str, str]:
    """Cited path -> its name at the target, from the report's moves (renames of cited paths
    the range does not bring back; a rename of a renamed path followed). Rows of another
    shape are left out, as an older report without moves lists none."""
    step = {m["path"]: m["new_path"] for m in raw if isinstance(m, dict)
            and m.get("kind") == "renamed" and isinstance(m.get("path"), str)
            and isinstance(m.get("new_path"), str)} if isinstance(raw, list) else {}
    out = {}
    for old, new in step.items():
        seen = {old}
        while new in step and new not in seen:
            seen.add(new)
            new = step[new]
        if new != old:
            out[old] = new
    return out


@dataclass(frozen=True)
class _Cited:
    """The port files' headers as they are now, and where the SHAs they cite stand."""

    pin: str
    headers: dict[str, headers.Header | None]  # port file -> its header; None: unreadable
    status: dict[str, sha_verify.ShaStatus]  # cited SHA -> against the parity pin
    full: dict[str, str]  # cited SHA -> the one commit it names

    @property
    def behind(self) -> frozenset[str]:
        """The cited commits the parity pin reaches: the file pins of headers that lag."""
        return frozenset(self.full[s] for s, st in self.status.items()
                         if st == "behind" and s in self.full)


def _cited(port: Port, ref: gitio.Reference, work: list[Entry], upstream_ref: str) -> _Cited:
    pin = port.pin_record().pin.commit
    file_headers: dict[str, headers.Header | None] = {}
    read = surface.header_reader(port) if work else port.header
    for e in work:
        for f in e.port_files:
            if f not in file_headers:
                file_headers[f] = _header_of(port, f, read)
    core = port.upstreams().core
    shas = sorted({ct.sha for h in file_headers.values() if h for ct in h.citations
                   if ct.sha and ct.oracle == core})
    status = sha_verify.classify_shas(ref, pin, shas, upstream_ref) if shas else {}
    return _Cited(pin, file_headers, status, _resolve_many(ref, shas))


def _header_of(port: Port, f: str,
               read: Callable[[str, str], headers.Header]) -> headers.Header | None:
    """The header of port file `f` (as the report names it), None when it cannot be read."""
    if Path(f).is_absolute() or ".." in Path(f).parts:
        return None
    try:
        return read(f, read_text(port.root / f))
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class _Plan:
    entry: Entry
    pins: tuple[FilePin, ...]
    bases: tuple[tuple[str, str, str], ...]  # (upstream path, base SHA, base_from)
    mentioned: tuple[str, ...] = ()  # paths no port file ports, only mentions: no diff shown


def _plan(e: Entry, cited: _Cited, notes: list[str], found: dict[str, Any],
          moves: dict[str, str]) -> _Plan:
    """Per upstream path: the port files' pins for it, and the bases to diff it from."""
    planned = [(up, *_plan_path(up, e.port_files, cited, notes, _judged(found, up)))
               for up in e.upstream_paths]
    pins = tuple(p for _up, ps, _bs in planned for p in ps)
    # With no port file to port (a decision made it PORT-NOW), every path is shown.
    mentioned = tuple(up for up, ps, _bs in planned
                      if pins and not ps and _mentioned_only(found, up))
    return _Plan(e, pins, _drifted(planned, mentioned, moves), mentioned)


def _drifted(planned: list[tuple[str, list[FilePin], list[tuple[str, str, str]]]],
             mentioned: tuple[str, ...], moves: dict[str, str]
             ) -> tuple[tuple[str, str, str], ...]:
    """The bases of the paths whose drift is shown: not those only mentioned, nor the new
    name of a cited path renamed (in the old name's drift) unless a port file cites it."""
    into = {moves[up] for up, _ps, _bs in planned if up in moves and up not in mentioned}
    return tuple(b for up, ps, bs in planned if up not in mentioned
                 and (ps or up not in into) for b in bs)


def _mentioned_only(found: dict[str, Any], path: str) -> bool:
    """Whether the symbol pass saw port files cite `path` and every one only mentions it
    (`See vllm/x.py`): a reference, never what the item ports."""
    return path in mentioned_only((c.get("path"), c.get("outcome"))
                                  for c in found.get("citations", []) if isinstance(c, dict))


def _judged(found: dict[str, Any], path: str) -> dict[str, tuple[str, int]]:
    """Port file -> (source, line) of its citation of `path` the symbol pass judged (a
    mention is no citation; of several, the first hit, else the first): the body's and a
    mapping rule's too, and a header's written without the path's root (`w/s.py` for
    vllm/w/s.py), which the classification reads."""
    out: dict[str, tuple[str, int]] = {}
    mine = [c for c in found.get("citations", []) if isinstance(c, dict)
            and c.get("path") == path and c.get("outcome") != "mention"]
    for c in sorted(mine, key=lambda c: c.get("outcome") not in _HITS):
        if isinstance(c.get("port_file"), str):
            line = c.get("line")
            out.setdefault(c["port_file"], (str(c.get("source", "header")),
                                            line if isinstance(line, int) else 0))
    return out


def _cites(ct: headers.Citation, up: str) -> bool:
    """Whether header citation `ct` names upstream path `up`: as written, or without its
    root (`w/s.py` names vllm/w/s.py, as the classification files it)."""
    cited = ct.upstream_path
    return cited == up or ("/" in cited and up.endswith("/" + cited))


def _plan_path(up: str, files: tuple[str, ...], cited: _Cited, notes: list[str],
               judged: dict[str, tuple[str, int]]
               ) -> tuple[list[FilePin], list[tuple[str, str, str]]]:
    pins: list[FilePin] = []
    bases: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for f in files:
        h = cited.headers[f]
        if h is None:
            pins.append(FilePin(f, up, None, "missing file"))
            continue
        mine = [ct for ct in h.citations if ct.oracle == headers.CORE and (
            ct.upstream_path == up or (f in judged and _cites(ct, up)))]
        for ct in mine:
            pins.append(FilePin(f, up, ct.sha, cited.status.get(ct.sha, "not-upstream")
                                if ct.sha else "no pin"))
            key, label = _base(f, ct, cited, notes)
            if key not in seen:
                seen.add(key)
                bases.append((up, key, label))
        if not mine and f in judged and judged[f][0] != "header":
            source, line = judged[f]
            where = (f"cited in the body at line {line}" if source == "inline"
                     else "implied by a mapping rule")
            pins.append(FilePin(f, up, None, f"no pin; {where}"))
    if not seen:
        bases.append((up, cited.pin, "parity pin"))
    return pins, bases


def _base(f: str, ct: headers.Citation, cited: _Cited, notes: list[str]) -> tuple[str, str]:
    """(base SHA, what it is) to diff a cited path from: its file pin, else the parity pin."""
    base = cited.full.get(ct.sha) if ct.sha else None
    if ct.sha and base is None:
        notes.append(f"{f}:{ct.line}: cited SHA {ct.sha} is not a commit in the reference "
                     f"checkout; diffing {ct.path} from the parity pin")
    return base or cited.pin, f"file pin {ct.sha}" if base else "parity pin"


def _by_base(plans: list[_Plan]) -> dict[str, list[str]]:
    """Base SHA -> the upstream paths diffed from it: one git process per base."""
    by_base: dict[str, list[str]] = {}
    for p in plans:
        for up, base, _label in p.bases:
            paths = by_base.setdefault(base, [])
            if up not in paths:
                paths.append(up)
    return by_base


def _drift(plain: Callable[[gitio.Reference, str, str, list[str]], dict[str, Any]],
           renamed: Callable[[gitio.Reference, str, str, dict[str, str]], dict[str, Any]],
           ref: gitio.Reference, span: tuple[str, str], paths: list[str],
           moves: dict[str, str]) -> dict[str, Any]:
    """path -> `plain`'s listing of base..target for `paths`, the renamed ones by `renamed`
    (both names, renames found): a git process for each kind present."""
    base, target = span
    kept = [p for p in paths if p not in moves]
    out = plain(ref, base, target, kept) if kept else {}
    pairs = {p: moves[p] for p in paths if p in moves}
    return {**out, **renamed(ref, base, target, pairs)} if pairs else out


@dataclass(frozen=True)
class _Moves:
    """The renames the drift follows: the range's, and those made before the parity pin."""

    in_range: dict[str, str]  # cited path -> its name at the target (the report's moves)
    before: dict[str, dict[str, str]]  # base -> cited path -> its name at the target

    def at(self, base: str) -> dict[str, str]:
        """Cited path -> its name at the target, for the drift from `base`."""
        return {**self.in_range, **self.before.get(base, {})}


def _renamed_before(ref: gitio.Reference, ends: tuple[str, str], by_base: dict[str, list[str]],
                    behind: frozenset[str], moves: dict[str, str]) -> dict[str, dict[str, str]]:
    """Base -> cited path -> its name at the target, for each path a base behind the parity
    pin cites that neither the pin nor the target has, as git's rename detection pairs it
    between that base and the target: the header lagged while upstream renamed the file, a
    rename no move of the range names. One look-up, then one listing per base that lost one."""
    pin, target = ends
    lagging = {b: [p for p in ps if p not in moves] for b, ps in by_base.items() if b in behind}
    gone = _absent(ref, (pin, target), sorted({p for ps in lagging.values() for p in ps}))
    lost = {b: [p for p in ps if p in gone] for b, ps in lagging.items()}
    return {b: found for b, ps in lost.items()
            if ps and (found := history.renamed_since(ref, b, target, ps))}


def _absent(ref: gitio.Reference, revs: tuple[str, ...], paths: list[str]) -> set[str]:
    """Those of `paths` that none of `revs` has (one `git cat-file --batch-check`)."""
    # cat-file reads one name a line: a path with a line break in it is asked about never.
    asked = [p for p in paths if "\n" not in p and "\r" not in p]
    names = [f"{rev}:{p}" for p in asked for rev in revs]
    found = {n for n, row in zip(names, gitio.batch_check(ref, names), strict=True)
             if row is not None}
    return {p for p in asked if not any(f"{rev}:{p}" in found for rev in revs)}


def _diffs(bases: tuple[tuple[str, str, str], ...],
           stats: dict[str, dict[str, tuple[int, int, bool]]], target: str,
           moves: _Moves) -> list[Diff]:
    out = []
    for up, base, label in bases:
        ins, dels, binary = stats[base].get(up, (0, 0, False))
        span = f"{base[:SHOW_LEN]}..{target[:SHOW_LEN]}"
        renamed = moves.at(base)
        cmd = (f"git diff -M {span} -- {up} {renamed[up]}" if up in renamed
               else f"git diff {span} -- {up}")
        out.append(Diff(up, base, label, ins, dels, binary, cmd, renamed.get(up),
                        up in moves.before.get(base, {})))
    return out


def patch_name(index: int, e: Entry) -> str:
    pr = f"-vllm{e.pr}" if e.pr is not None else ""
    return f"{index:03d}-{short(e.sha)}{pr}.patch"


@dataclass(frozen=True)
class _Patch:
    index: int
    entry: Entry
    own: tuple[CommitDiff, ...]
    drift: list[Diff]
    sections: dict[str, dict[str, bytes]]
    target: str
    mentioned: tuple[str, ...] = ()


# A name `patch_name` gives (NNN-<sha>[-vllm<PR>][-drift].patch): the files this tool wrote.
_OURS = re.compile(rf"\d{{3,}}-[0-9a-f]{{{gitio.SHA_LEN}}}(?:-vllm\d+)?(?P<drift>-drift)?\.patch")


def _prune_patches(directory: Path, written: set[str], drift: bool) -> list[str]:
    """Remove the patches an earlier run wrote that this one did not (a queue that shrank, a
    run without --drift), so DIR holds this queue; no other file is touched."""
    gone = []
    for path in sorted(directory.iterdir()):
        m = _OURS.fullmatch(path.name)
        if m is None or not path.is_file() or path.is_symlink():
            continue
        mine = path.name.replace("-drift.patch", ".patch") if m["drift"] else path.name
        if mine in written and (drift or not m["drift"]):
            continue
        try:
            path.unlink()
        except OSError:
            continue  # left as it was: a stale patch is no error of this run
        gone.append(path.name)
    if not gone:
        return []
    return [f"removed {len(gone)} patch file(s) an earlier run left in {directory}: "
            + ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")]


def _write_patch(directory: Path, p: _Patch) -> str:
    """The item's own diff, definitions marked (and with --drift a second file: the drift)."""
    try:
        return _write_patch_files(directory, p)
    except (OSError, Unwritable) as e:
        # e.filename is the temporary file of the atomic write: name the patch it was for.
        why = e.reason if isinstance(e, Unwritable) else e.strerror or e
        raise UsageError(f"--patch {directory}: cannot write {patch_name(p.index, p.entry)} "
                         f"there ({why})", "give a directory you can write") from None


def _write_patch_files(directory: Path, p: _Patch) -> str:
    e = p.entry
    pr = f"vllm#{e.pr} " if e.pr is not None else ""
    title = f"# {p.index}. {e.sha} {pr}{flat(e.subject)}"
    head = [title, *(f"# {d.command}" for d in p.own)]
    head += [f"#   {d.upstream_path}: {m.label}"
             for d in p.own for m in d.definitions]
    head += [f"# mentioned only (no port file ports it; not in this patch): {m}"
             for m in p.mentioned]
    body = [d.text for d in p.own]
    path = directory / patch_name(p.index, e)
    # Header lines quote upstream (subjects, paths): one line each, or a path holding a line
    # break would write lines of its own into the patch.
    write_bytes(path, ("\n".join(map(one_line, head)) + "\n").encode() + b"".join(body))
    if p.drift:
        dhead = [title, *(f"# {d.command}   ({d.base_from}{d.renamed_note})" for d in p.drift)]
        dbody = [p.sections.get(d.base, {}).get(d.upstream_path, b"") for d in p.drift]
        if not any(dbody):
            dhead.append(f"# no upstream change to these paths up to {p.target[:SHOW_LEN]}")
        write_bytes(path.with_name(path.stem + "-drift.patch"),
                    ("\n".join(map(one_line, dhead)) + "\n").encode() + b"".join(dbody))
    return str(path)


def _own_doc(d: CommitDiff) -> dict[str, Any]:
    return {"upstream_path": d.upstream_path, "new_path": d.new_path,
            "insertions": d.insertions, "deletions": d.deletions, "binary": d.binary,
            "command": d.command,
            "definitions": [{"name": m.name, "change": m.change, "cited_by": list(m.cited_by),
                             "whole_by": list(m.whole_by)} for m in d.definitions],
            "hunks": [{"old": o, "new": n, "definitions": list(names)}
                      for o, n, names in d.hunks]}


def to_json(q: Queue) -> dict[str, Any]:
    return {
        "pin": q.pin, "target": q.target, "report": q.report, "reference": q.reference,
        "items": [{
            "index": it.index, "sha": it.entry.sha, "pr": it.entry.pr,
            "subject": it.entry.subject, "reason": it.entry.reason,
            "upstream_paths": list(it.entry.upstream_paths),
            "port_files": list(it.entry.port_files), "ledgered": it.ledgered,
            "pins": [{"port_file": p.port_file, "upstream_path": p.upstream_path,
                      "sha": p.sha, "status": p.status} for p in it.pins],
            "commit_diffs": [_own_doc(d) for d in it.own],
            "diffs": [{"upstream_path": d.upstream_path, "base": d.base,
                       "base_from": d.base_from, "insertions": d.insertions,
                       "deletions": d.deletions, "binary": d.binary, "command": d.command,
                       "new_path": d.new_path, "renamed_before_pin": d.renamed_before_pin}
                      for d in it.diffs],
            "patch": it.patch, "carried_since": it.carried_since,
            "mentioned_paths": list(it.mentioned),
        } for it in q.items],
        "notes": list(q.notes),
    }


def _own_lines(d: CommitDiff) -> list[str]:
    moved = f" (renamed → {d.new_path})" if d.new_path else ""
    stat = "binary" if d.binary else f"+{d.insertions} -{d.deletions}"
    lines = [f"   {d.command}   ({stat}){moved}"]
    for m in d.definitions:
        star = "*" if m.cited_by else " "
        lines.append(f"     {star} {m.label}")
    return lines


def render(q: Queue) -> list[str]:
    lines = [f"PORT-NOW queue: {len(q.items)} item(s), pin {short(q.pin)} → target "
             f"{short(q.target)} (report {q.report}; run the diffs in {q.reference}; "
             "* marks a definition a port file cites by name)"]
    for it in q.items:
        e = it.entry
        pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
        state = "ledgered" if it.ledgered else "open"
        if it.carried_since:
            state += f"; carried since {it.carried_since}"
        lines.append(f"{it.index}. `{short(e.sha)}` {pr} {flat(e.subject)} [{state}]")
        for p in it.pins:
            pin = f" @ {p.sha}" if p.sha else ""
            lines.append(f"   {p.port_file}: {p.upstream_path}{pin} ({p.status})")
        if not it.pins:
            lines.append("   no port file cites these paths in its header yet")
        for own in it.own:
            lines += _own_lines(own)
        for path in it.mentioned:
            lines.append(f"   mentioned only (no port file ports it; not shown): {path} — "
                         f"git show {e.sha[:SHOW_LEN]} -- {path}")
        for d in it.diffs:
            stat = "binary" if d.binary else f"+{d.insertions} -{d.deletions}"
            lines.append(f"   drift: {d.command}   ({stat}; from the {d.base_from}"
                         f"{d.renamed_note})")
        if it.patch:
            lines.append(f"   patch: {it.patch}")
    return lines
