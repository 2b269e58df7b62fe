"""Per-file pin audit: where every ported file's header pin stands against the parity pin.

A file may be ahead of the pin (a hot-fix port) but never behind it without a
ledger note (a ledger row naming the file or its upstream path). Counts come with
a positive control: a synthetic header citing the pin goes through the same parse
and the same SHA probe and must come out at-pin, or the counts are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sync.headers import citations as headers
from sync.headers import verify as sha_verify
from sync.port import Port
from sync.records import ledger
from sync.records.mdtext import code, escape
from sync.steps.surface import Surface
from sync.upstream import gitio
from sync.upstream.gitio import short

Status = Literal["at-pin", "behind", "ahead", "not-upstream", "original", "no-header"]
ORDER: tuple[Status, ...] = ("at-pin", "behind", "ahead", "not-upstream", "original", "no-header")
_RANK = {"at-pin": 0, "ahead": 1, "behind": 2, "not-upstream": 3}
CONTROL_PATH = "vllm/__upstream_sync_control__.py"


@dataclass(frozen=True)
class FileStatus:
    path: str
    status: Status
    citations: tuple[headers.Citation, ...]
    sha_status: tuple[tuple[str, str], ...]
    noted: bool  # a ledger row names the file or an upstream path it cites

    @property
    def finding(self) -> bool:
        return self.status == "behind" and not self.noted


@dataclass(frozen=True)
class Audit:
    files: tuple[FileStatus, ...]
    control_ok: bool

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {s: 0 for s in ORDER}
        for f in self.files:
            out[f.status] += 1
        return out

    @property
    def findings(self) -> tuple[FileStatus, ...]:
        return tuple(f for f in self.files if f.finding)


def run_audit(port: Port, ref: gitio.Reference, pin: str, upstream_ref: str,
              surf: Surface) -> Audit:
    control = headers.parse_header(f"// Ported from: {CONTROL_PATH} @ {short(pin)}\n",
                                   "<control>")
    shas = {c.sha for h in surf.file_headers.values() for c in h.citations if c.sha}
    shas.update(c.sha for c in control.citations if c.sha)
    status = sha_verify.classify_shas(ref, pin, sorted(shas), upstream_ref)
    table = port.ledger()
    files = tuple(_file_status(rel, h, status, table)
                  for rel, h in sorted(surf.file_headers.items()))
    return Audit(files, _control_ok(control, status))


def _control_ok(control: headers.Header, status: dict[str, sha_verify.ShaStatus]) -> bool:
    """The control goes through the same aggregation as every real file, not just the probe."""
    return (control.kind == "PORTED" and len(control.citations) == 1
            and control.citations[0].path == CONTROL_PATH
            and _file_status(CONTROL_PATH, control, status, None).status == "at-pin")


def _file_status(rel: str, h: headers.Header, status: dict[str, sha_verify.ShaStatus],
                 table: ledger.Table | None) -> FileStatus:
    cites = h.citations
    pairs = tuple((c.sha, status.get(c.sha, "not-upstream")) for c in cites if c.sha)
    st: Status
    if h.kind == "NONE":
        st = "no-header"
    elif h.kind == "ORIGINAL":
        st = "original"
    elif not pairs:
        st = "no-header"
    else:
        worst = max((s for _, s in pairs), key=lambda s: _RANK[s])
        st = worst
    noted = table is not None and (ledger.mentions(table, rel)
                                   or any(ledger.mentions(table, c.path) for c in cites))
    return FileStatus(rel, st, cites, pairs, noted)


@dataclass(frozen=True)
class Summary:
    lines: tuple[str, ...]
    counts: tuple[tuple[str, int], ...]


def summary_lines(a: Audit) -> Summary:
    counts = a.counts()
    head = (", ".join(f"{s} {counts[s]}" for s in ORDER) + f" (of {len(a.files)} files; "
            + ("positive control counted at-pin" if a.control_ok else
               "POSITIVE CONTROL FAILED: counts are not trustworthy") + ")")
    lines = [f"- Counts: {head}"]
    for f in a.files:
        if f.status in ("behind", "ahead", "not-upstream"):
            # Paths are the port's file names and what their headers cite: escaped.
            cited = ", ".join(f"{escape(c.path, reason=True)} @ {escape(c.sha)}"
                              for c in f.citations if c.sha)
            note = "" if f.status != "behind" else (
                "; ledger note: yes" if f.noted else "; ledger note: MISSING")
            lines.append(f"- {code(f.path)} {f.status}: {cited}{note}")
    return Summary(tuple(lines), tuple(counts.items()))
