"""The sync commit: exactly the cycle's records, nothing else (`--commit`).

What goes in is every sync record (`records/owned`, the definition `check-commit`
uses too) that differs from HEAD, plus the files the command is about to write: the
pin surfaces, the report and its JSON, decisions, the cycle, gate records, state
events, the carry-over record, the ledger rows and inventory annotations the cycle
added, the goldens the gates wrote. A commit is refused, before anything is written,
when a path outside them is staged (a sync commit carries sync records only) or when
the ledger lost or changed a row since HEAD (rows are appended, never edited).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.infra.errors import EnvironmentUnresolved, UsageError
from sync.port import Port
from sync.records import owned
from sync.upstream import gitio


@dataclass(frozen=True)
class Commit:
    subject: str
    body: str


def require_git(port: Port) -> None:
    """The port is in a git work tree: its own repository's root, or a subfolder of a bigger
    one (a monorepo), or a worktree."""
    if gitio.work_tree_prefix(port.root) is None:
        raise UsageError(f"{port.root} is not a git repository", "drop --commit")


def _porcelain(port: Port) -> list[tuple[str, str]]:
    """(status, port-relative path) of every path of the port that differs from HEAD or is
    untracked (git names them from the repository's root: the port's prefix comes off)."""
    prefix = gitio.work_tree_prefix(port.root) or ""
    out = gitio.run(port.root, ["status", "--porcelain", "-z", "--untracked-files=all",
                                "--no-renames", "--", "."]).stdout.decode("utf-8",
                                                                          "surrogateescape")
    return [(item[:2], item[3 + len(prefix):]) for item in out.split("\0")
            if len(item) > 3 and item[3:].startswith(prefix)]


def staged(port: Port) -> list[str]:
    """The staged paths of the port, relative to it (a path staged outside the port is no
    commit's of the port's: `git commit -- PATHS` leaves it staged)."""
    out = gitio.run(port.root, ["diff", "--cached", "--name-only", "--relative",
                                "-z"]).stdout.decode()
    return [p for p in out.split("\0") if p]


def changed_records(port: Port, writes: Mapping[Path, bytes | None]) -> list[str]:
    """The sync records this commit carries: those changed since HEAD, `writes` among them
    (a removed file only as git sees it: one it never tracked is in no commit). A write
    that left a file as HEAD holds it is in none either: a re-run over records a commit
    already holds has nothing to commit."""
    records = owned.of(port)
    mine = {port.rel(p) for p, data in writes.items() if data is not None}
    return sorted({p for _, p in _porcelain(port) if records.owns(p) or p in mine})


def refuse(port: Port, commit: bool, writes: Mapping[Path, bytes | None]) -> None:
    """Refuse `--commit` before anything is written: foreign staged paths, edited ledger."""
    if not commit:
        return
    require_git(port)
    records = owned.of(port)
    mine = {port.rel(k) for k in writes}
    other = [p for p in staged(port) if p not in mine and not records.owns(p)]
    if other:
        raise UsageError(f"other paths are staged: {', '.join(other[:5])}",
                         "unstage them: a sync commit carries sync records only")
    edited = _ledger_edits(port)
    if edited:
        raise UsageError(f"{port.config.ledger} changed rows since HEAD (e.g. "
                         f"{edited[0][:60]!r}); ledger rows are appended, never edited",
                         "restore the changed rows (git diff shows them), then commit again")


def _ledger_edits(port: Port) -> list[str]:
    """Lines of the ledger at HEAD that its work-tree copy no longer has."""
    rel = port.config.ledger
    path = port.root / rel
    head = gitio.run(port.root, ["show", f"HEAD:./{rel}"], check=False)  # ./: from the port
    if head.returncode != 0 or not path.exists():
        return []
    old = head.stdout.decode("utf-8", "replace").splitlines()
    new = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line[1:] for line in difflib.ndiff(old, new) if line.startswith("- ")]


def by_hand(port: Port, rels: list[str]) -> str:
    """The git commands that commit `rels` (shown cut at eight)."""
    shown = " ".join(rels[:8]) + (" ..." if len(rels) > 8 else "")
    return f"git -C {port.root} add -A -- {shown} && git -C {port.root} commit"


def owed(port: Port, event: Path) -> str | None:
    """What commits the records of a command that wrote `event` (its state event) and did
    not commit them (killed between its writes and its commit); None when `event` is in
    HEAD, or the port is in no git work tree."""
    if gitio.work_tree_prefix(port.root) is None:  # a monorepo's subfolder is in one
        return None
    rels = changed_records(port, {})
    if port.rel(event) not in rels:
        return None
    return (f"{port.rel(event)} and the records beside it are written but not committed "
            f"(was the run that wrote them stopped?) — commit them: {by_hand(port, rels)}")


@dataclass(frozen=True)
class Committed:
    sha: str  # the new HEAD
    files: int  # the sync records it holds
    left_out: tuple[str, ...]  # other paths with uncommitted changes, not in the commit
    # Records in the commit that this command did not write: changed since HEAD before it
    # ran (a ledger row `ledger add` appended, or a person's edit), named so none goes in
    # unread (walk-s11 D10).
    also: tuple[str, ...] = ()


def as_doc(done: Committed | None) -> dict[str, Any]:
    """A command's JSON keys for its commit (`commit` null when it made none)."""
    return {"commit": done.sha if done else None,
            "left_out": list(done.left_out) if done else [],
            "also": list(done.also) if done else []}


def tell(done: Committed | None, say: Callable[[str], None],
         note: Callable[[str], None]) -> None:
    """What a maintainer reads after a commit (nothing when none was made)."""
    if done is None:
        return
    say(f"committed {gitio.short(done.sha)} ({done.files} file(s))")
    if done.also:
        note(f"note: the commit also holds {len(done.also)} record(s) changed before this "
             f"command ran (review them: git show --stat HEAD): {_few(done.also)}")
    if done.left_out:
        note(f"note: {len(done.left_out)} other path(s) have uncommitted changes and are not "
             f"in the commit (the records were checked against the work tree as it is): "
             f"{_few(done.left_out)}")


def _few(paths: tuple[str, ...]) -> str:
    return ", ".join(paths[:5]) + (" …" if len(paths) > 5 else "")


def commit(port: Port, writes: Mapping[Path, bytes | None], message: Commit,
           wrote: tuple[Path, ...] = ()) -> Committed | None:
    """Commit every changed sync record (after `writes`, and `wrote`, were written); None
    when none differs from HEAD (`git commit` of nothing fails: a re-run of a committed
    stall exited 3 saying to commit no path by hand)."""
    rels = changed_records(port, writes)
    if not rels:
        return None
    mine = {port.rel(p) for p in (*writes, *wrote)}
    try:
        gitio.run(port.root, ["add", "-A", "--", *rels])
        gitio.run(port.root, ["commit", "-q", "-m", message.subject, "-m", message.body, "--",
                              *rels])
    except EnvironmentUnresolved as exc:
        # The records are written (all of them: the transaction is done); only the commit
        # failed, so the fix is to commit them, never to run the command again.
        raise EnvironmentUnresolved(
            f"the records are written, but committing them failed: {exc.message}",
            f"fix what git says, then commit them by hand: {by_hand(port, rels)}") from None
    sha = gitio.run(port.root, ["rev-parse", "HEAD"]).stdout.decode().strip()
    records = owned.of(port)
    others = tuple(p for _, p in _porcelain(port) if not records.owns(p))
    return Committed(sha, len(rels), others, tuple(r for r in rels if r not in mine))
