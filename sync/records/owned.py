"""Which of a port's files are sync records: the one definition.

`check-commit` refuses a commit that mixes them with feature work, and `advance
--commit` (and `advance --stall --commit`, `rollback --commit`) commits exactly those
of them a cycle changed; both ask `of(port)`. The sync records are the pin surfaces
(the protocol file with its pin block and PARITY PIN paragraph, the oracle files,
every file holding a pin span), everything under the sync directory (reports and their
JSON, decisions, the cycle, gate records, state events, the carry-over record), the
parity ledger, the porting inventory and the goldens the gates write. The lock and the
transaction scratch files under the sync directory are never records.
"""

from __future__ import annotations

from dataclasses import dataclass

from sync.infra.globs import match as glob_match
from sync.records import spans
from sync.records.layout import Layout

_SCRATCH = (".lock", ".txn-")


@dataclass(frozen=True)
class SyncRecords:
    exact: frozenset[str]  # port-relative POSIX paths
    globs: tuple[str, ...]
    sync_dir: str

    def owns(self, rel: str) -> bool:
        if rel.startswith(self.sync_dir + "/") and rel.rsplit("/", 1)[-1].startswith(_SCRATCH):
            return False
        return rel in self.exact or any(glob_match(rel, g) for g in self.globs)


def of(port: Layout) -> SyncRecords:
    cfg = port.config
    exact = {cfg.protocol, cfg.ledger, cfg.inventory}
    exact.update(port.rel(p) for p in spans.files(port.root, cfg.span_globs)
                 if "<!--pin:" in p.read_text(encoding="utf-8", errors="replace"))
    sync_dir = cfg.sync_dir.rstrip("/")
    globs = (cfg.oracles, sync_dir + "/**", cfg.golden_dir.rstrip("/") + "/**")
    return SyncRecords(frozenset(exact), globs, sync_dir)
