"""`queue`: the PORT-NOW worklist of the open cycle, in upstream order (sync step 5).

The work queue is the sync report (protocol step 4), so the entries come from the
report's JSON companion for the cycle's frozen target, refused when it is missing
or was written for another pin or target. Per item: the port files, their current
per-file pins read from the headers now, and per upstream path the diff to read
(`git diff <file-pin>..TARGET -- <path>`) with its diffstat. Git work is grouped
by base commit, so the number of git processes depends on how many distinct
per-file pins are cited, never on the number of items.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.headers import citations as headers
from sync.headers import verify as sha_verify
from sync.infra.atomic import read_text, write_bytes
from sync.infra.errors import MalformedRecord, UsageError
from sync.port import Port
from sync.records import cycle, ledger
from sync.steps import carry
from sync.steps.classify import Entry
from sync.upstream import gitio

SHOW_LEN = 12
_SHA = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class FilePin:
    port_file: str
    upstream_path: str
    sha: str | None  # as cited in the header; None when the file has no pin for this path
    status: str  # at-pin / behind / ahead / not-upstream (against the parity pin), or
    # "missing file" / "no pin"


@dataclass(frozen=True)
class Diff:
    upstream_path: str
    base: str  # full SHA the diff starts from
    base_from: str  # "file pin <token>" or "parity pin"
    insertions: int
    deletions: int
    binary: bool
    command: str


@dataclass(frozen=True)
class Item:
    index: int
    entry: Entry
    pins: tuple[FilePin, ...]
    diffs: tuple[Diff, ...]
    ledgered: bool  # a ledger row names its PR or SHA already
    patch: str | None  # the patch file written for it, if any


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


def entries_from_json(text: str, *, path: str) -> tuple[str, str, list[Entry]]:
    """(pin, target, entries) from a report's JSON companion; malformed shapes are refused."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedRecord(f"not valid JSON ({exc.msg} at line {exc.lineno})",
                              "run 'upstream-sync sync' to rewrite it", path=path) from None
    if not isinstance(doc, dict):
        raise MalformedRecord("not a report JSON object", "run 'upstream-sync sync' to rewrite it",
                              path=path)
    pin, target, raw = doc.get("pin"), doc.get("target"), doc.get("entries")
    if not isinstance(pin, str) or not isinstance(target, str) or not isinstance(raw, list):
        raise MalformedRecord("missing pin, target or entries",
                              "run 'upstream-sync sync' to rewrite it", path=path)
    out: list[Entry] = []
    for i, e in enumerate(raw):
        ok = isinstance(e, dict)
        sha = e.get("sha") if ok else None
        pr = e.get("pr") if ok else None
        subject = e.get("subject") if ok else None
        disposition = e.get("disposition") if ok else None
        reason = e.get("reason", "") if ok else None
        rule = e.get("rule") if ok else None
        ups = _str_list(e.get("upstream_paths")) if ok else None
        files = _str_list(e.get("port_files")) if ok else None
        if (not isinstance(sha, str) or _SHA.fullmatch(sha) is None
                or not (pr is None or (isinstance(pr, int) and not isinstance(pr, bool)))
                or not isinstance(subject, str) or not isinstance(reason, str)
                or disposition not in ("PORT-NOW", "INVENTORY", "IGNORE", "UNCLASSIFIED")
                or not (rule is None or isinstance(rule, str)) or ups is None or files is None):
            raise MalformedRecord(f"entry {i} is malformed",
                                  "run 'upstream-sync sync' to rewrite it", path=path)
        out.append(Entry(sha, pr, subject, disposition, reason, rule, rule is not None, ups,
                         files))
    return pin, target, out


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
    stats: dict[str, tuple[int, int, bool]] = {}
    for rec in out.decode("utf-8", "replace").split("\0"):
        fields = rec.split("\t", 2)
        if len(fields) != 3:
            continue
        added, deleted, path = fields
        if added == "-" and deleted == "-":
            stats[path] = (0, 0, True)
        elif added.isdigit() and deleted.isdigit():
            stats[path] = (int(added), int(deleted), False)
    return stats


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
    sections: dict[str, bytes] = {}
    current: str | None = None
    chunk: list[bytes] = []
    for line in out.splitlines(keepends=True):
        if line.startswith(b"diff --git "):
            if current is not None:
                sections[current] = b"".join(chunk)
            current, chunk = _header_path(line), []
        chunk.append(line)
    if current is not None:
        sections[current] = b"".join(chunk)
    return sections


def build(port: Port, ref: gitio.Reference, upstream_ref: str, *,
          patch_dir: Path | None = None) -> Queue:
    c = cycle.require(port)
    pin = port.pin_record().pin.commit
    jpath = report_json(port, c)
    rel = port.rel(jpath)
    if not jpath.exists():
        raise UsageError(f"the cycle's report {rel} does not exist",
                         "run 'upstream-sync sync' first")
    try:
        text = read_text(jpath)
    except UnicodeDecodeError:
        raise MalformedRecord("not UTF-8", "run 'upstream-sync sync' to rewrite it",
                              path=rel) from None
    rpin, rtarget, entries = entries_from_json(text, path=rel)
    if rpin != pin or rtarget != c.target:
        raise UsageError(f"{rel} was written for {rpin[:10]}..{rtarget[:10]}, but the cycle is "
                         f"{pin[:10]}..{c.target[:10]}", "run 'upstream-sync sync' again")
    work = [e for e in entries if e.disposition == "PORT-NOW"]
    notes: list[str] = []
    # Per-file pins, read from the headers as they are now.
    file_headers: dict[str, headers.Header | None] = {}
    for e in work:
        for f in e.port_files:
            if f not in file_headers:
                path = port.root / f
                if Path(f).is_absolute() or ".." in Path(f).parts:
                    file_headers[f] = None
                    continue
                try:
                    file_headers[f] = headers.parse_header(read_text(path), f)
                except (OSError, UnicodeDecodeError):
                    file_headers[f] = None
    cited = sorted({ct.sha for h in file_headers.values() if h for ct in h.citations if ct.sha})
    status = sha_verify.classify_shas(ref, pin, cited, upstream_ref) if cited else {}
    full = _resolve_many(ref, cited)
    plans: list[tuple[Entry, list[FilePin], list[tuple[str, str, str]]]] = []
    for e in work:
        fps: list[FilePin] = []
        bases: list[tuple[str, str, str]] = []  # (upstream path, base SHA, base_from)
        for up in e.upstream_paths:
            seen: set[str] = set()
            for f in e.port_files:
                h = file_headers[f]
                if h is None:
                    fps.append(FilePin(f, up, None, "missing file"))
                    continue
                mine = [ct for ct in h.citations if ct.path == up]
                if not mine:
                    continue
                for ct in mine:
                    fps.append(FilePin(f, up, ct.sha, status.get(ct.sha, "not-upstream")
                                       if ct.sha else "no pin"))
                    base = full.get(ct.sha) if ct.sha else None
                    if ct.sha and base is None:
                        notes.append(f"{f}:{ct.line}: cited SHA {ct.sha} is not a commit in the "
                                     f"reference checkout; diffing {up} from the parity pin")
                    key = base or pin
                    if key not in seen:
                        seen.add(key)
                        label = f"file pin {ct.sha}" if base else "parity pin"
                        bases.append((up, key, label))
            if not seen:
                bases.append((up, pin, "parity pin"))
        plans.append((e, fps, bases))
    by_base: dict[str, list[str]] = {}
    for _, _, bases in plans:
        for up, base, _label in bases:
            by_base.setdefault(base, [])
            if up not in by_base[base]:
                by_base[base].append(up)
    stats = {b: numstat(ref, b, c.target, ps) for b, ps in by_base.items()}
    sections = ({b: patches(ref, b, c.target, ps) for b, ps in by_base.items()}
                if patch_dir is not None else {})
    led = carry.LedgerRefs.of(ledger.rows_text(port.root / port.config.ledger,
                                               rel=port.config.ledger))
    items: list[Item] = []
    for index, (e, fps, bases) in enumerate(plans, start=1):
        diffs = []
        for up, base, label in bases:
            ins, dels, binary = stats[base].get(up, (0, 0, False))
            cmd = f"git diff {base[:SHOW_LEN]}..{c.target[:SHOW_LEN]} -- {up}"
            diffs.append(Diff(up, base, label, ins, dels, binary, cmd))
        patch = None
        if patch_dir is not None:
            patch = _write_patch(patch_dir, index, e, diffs, sections, c.target)
        items.append(Item(index, e, tuple(fps), tuple(diffs), carry.ported(e, led), patch))
    return Queue(pin, c.target, port.rel(jpath.with_suffix(".md")), str(ref.path), tuple(items),
                 tuple(dict.fromkeys(notes)))


def patch_name(index: int, e: Entry) -> str:
    pr = f"-vllm{e.pr}" if e.pr is not None else ""
    return f"{index:03d}-{e.sha[:10]}{pr}.patch"


def _write_patch(directory: Path, index: int, e: Entry, diffs: list[Diff],
                 sections: dict[str, dict[str, bytes]], target: str) -> str:
    pr = f"vllm#{e.pr} " if e.pr is not None else ""
    head = [f"# {index}. {e.sha} {pr}{' '.join(e.subject.split())}",
            *(f"# {d.command}   ({d.base_from})" for d in diffs)]
    body = [sections.get(d.base, {}).get(d.upstream_path, b"") for d in diffs]
    if not any(body):
        head.append(f"# no upstream change to these paths up to {target[:SHOW_LEN]}")
    path = directory / patch_name(index, e)
    write_bytes(path, ("\n".join(head) + "\n").encode() + b"".join(body))
    return str(path)


def to_json(q: Queue) -> dict[str, Any]:
    return {
        "pin": q.pin, "target": q.target, "report": q.report, "reference": q.reference,
        "items": [{
            "index": it.index, "sha": it.entry.sha, "pr": it.entry.pr,
            "subject": it.entry.subject, "upstream_paths": list(it.entry.upstream_paths),
            "port_files": list(it.entry.port_files), "ledgered": it.ledgered,
            "pins": [{"port_file": p.port_file, "upstream_path": p.upstream_path,
                      "sha": p.sha, "status": p.status} for p in it.pins],
            "diffs": [{"upstream_path": d.upstream_path, "base": d.base,
                       "base_from": d.base_from, "insertions": d.insertions,
                       "deletions": d.deletions, "binary": d.binary, "command": d.command}
                      for d in it.diffs],
            "patch": it.patch,
        } for it in q.items],
        "notes": list(q.notes),
    }


def render(q: Queue) -> list[str]:
    lines = [f"PORT-NOW queue: {len(q.items)} item(s), pin {q.pin[:10]} → target "
             f"{q.target[:10]} (report {q.report}; run the diffs in {q.reference})"]
    for it in q.items:
        e = it.entry
        pr = f"vllm#{e.pr}" if e.pr is not None else "(no PR)"
        state = "ledgered" if it.ledgered else "open"
        lines.append(f"{it.index}. `{e.sha[:10]}` {pr} {' '.join(e.subject.split())} [{state}]")
        for p in it.pins:
            pin = f" @ {p.sha}" if p.sha else ""
            lines.append(f"   {p.port_file}: {p.upstream_path}{pin} ({p.status})")
        if not it.pins:
            lines.append("   no port file cites these paths in its header yet")
        for d in it.diffs:
            stat = "binary" if d.binary else f"+{d.insertions} -{d.deletions}"
            lines.append(f"   {d.command}   ({stat}; from the {d.base_from})")
        if it.patch:
            lines.append(f"   patch: {it.patch}")
    return lines
