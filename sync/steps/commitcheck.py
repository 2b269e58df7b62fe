"""`check-commit`: never mix a sync cycle with feature work in one commit.

A commit fails when it touches both sync records (`records/owned`: the definition
`advance --commit` commits by) and feature paths (configurable globs). One
`git log -z --name-only` for the whole range.
"""

from __future__ import annotations

from sync.infra.errors import UsageError
from sync.infra.globs import match as glob_match
from sync.port import Port
from sync.records import owned
from sync.upstream import gitio


def parse_range(spec: str) -> tuple[list[str], list[str]]:
    """(git log options, revisions) for `A..B` or one commit."""
    if ".." in spec:
        a, _, b = spec.partition("..")
        if b.startswith("."):
            raise UsageError(f"range {spec!r}: use A..B", "three-dot ranges are not supported")
        return [], [f"{gitio.check_rev(a)}..{gitio.check_rev(b)}"]
    # The option must stay before --end-of-options (after it, "-1" is read as a revision),
    # and --no-walk means that commit itself, not the newest non-merge one below a merge.
    return ["--no-walk"], [gitio.check_rev(spec)]


Offender = tuple[str, str, list[str], list[str]]  # sha, subject, sync paths, feature paths


def offenders(port: Port, spec: str) -> tuple[int, list[Offender]]:
    """(how many non-merge commits the range holds, those that mix)."""
    records = owned.of(port)
    options, revisions = parse_range(spec)
    # --relative: paths as the port names them, for a port in a subfolder of its repository
    # (git names them from the repository's root); a path outside the port is no path of it.
    proc = gitio.run(port.root, ["log", "--no-merges", "--format=%x1e%H%x1f%s", "--name-only",
                                 "--relative", "-z", *options, "--end-of-options", *revisions,
                                 "--"], check=False)
    if proc.returncode != 0:
        raise _unreadable(port, spec)
    out = []
    commits = proc.stdout.decode("utf-8", "replace").split("\x1e")[1:]
    for record in commits:
        head, _, rest = record.partition("\0")
        sha, _, subject = head.partition("\x1f")
        subject = subject.split("\n")[0]
        paths = [p.strip("\n") for p in rest.split("\0") if p.strip("\n")]
        mine = [p for p in paths if records.owns(p)]
        feature = [p for p in paths if p not in mine
                   and any(glob_match(p, g) for g in port.config.feature_globs)]
        if mine and feature:
            out.append((sha, subject, mine, feature))
    return len(commits), out


def _unreadable(port: Port, spec: str) -> UsageError:
    """Why the range does not read: no repository, no commit yet, or the range itself."""
    fix = "check-commit reads the port's commits: commit the port first"
    if gitio.work_tree_prefix(port.root) is None:
        return UsageError(f"{port.root} is in no git repository", fix)
    head = gitio.run(port.root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
                     check=False)
    if head.returncode != 0:
        return UsageError(f"the repository of {port.root} has no commit yet", fix)
    return UsageError(f"cannot read the range {spec!r} in {port.root}",
                      "give A..B or one commit that exists in the port repository")
