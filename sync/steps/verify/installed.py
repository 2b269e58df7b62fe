"""What an oracle's installed distribution is made of, read from outside the oracle.

Three readings, none of which runs the oracle's code:

- its RECORD (what pip or uv wrote at the install): every hashed file in site-packages is
  hashed again, and the RECORD's own digest is what the build record is bound to, so a record copied
  from another environment, or written by hand, no longer matches;
- the `_version.py` setuptools-scm wrote, read as literals (`ast`), never imported: its
  `__commit_id__` is the second measurement of the commit, beside the version string;
- the git blob ids of the module's installed files against `git ls-tree -r <commit>` in
  the source checkout: the one measurement a forged version cannot fake
  (`SETUPTOOLS_SCM_PRETEND_METADATA` forges the version and the commit id alike, but not
  the files). One git process and one read of each file; about 0.1 s for real vLLM.
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sync.infra.errors import EnvironmentUnresolved
from sync.upstream import gitio

VERSION_FILE = "_version.py"


@dataclass(frozen=True)
class VersionFile:
    """The literals of `<module>/_version.py`."""

    version: str | None  # __version__
    commit_id: str | None  # __commit_id__ (None: absent, or written as None)
    has_commit_id: bool  # the file assigns __commit_id__ at all


@dataclass(frozen=True)
class Installed:
    dist_info: Path
    record_sha256: str
    hashed: int  # RECORD entries with a hash
    changed: tuple[str, ...]  # hashed entries whose file is gone or differs
    blobs: dict[str, str]  # module file (site-relative) -> git blob id (SHA-1)
    scripts: tuple[Path, ...]  # the scripts the distribution installed
    version_file: VersionFile | None

    @property
    def site(self) -> Path:
        return self.dist_info.parent


def _urlsafe(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _blob_id(data: bytes, algorithm: str = "sha1") -> str:
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def _rows(record: bytes, dist_info: Path) -> list[list[str]]:
    """The RECORD's rows; one csv cannot read (a field over its 128 KiB limit) refuses the
    environment: the rows after it would go unchecked (it crashed with `_csv.Error`)."""
    text = record.decode("utf-8", "replace")
    try:
        return [row for row in csv.reader(text.splitlines()) if row and row[0]]
    except csv.Error as exc:
        raise EnvironmentUnresolved(
            f"{dist_info / 'RECORD'} is not a RECORD an installer writes ({exc})",
            "rebuild the oracle") from None


def _module_path(rel: str, module: str) -> bool:
    parts = PurePosixPath(rel).parts
    return (len(parts) > 1 and parts[0] == module and "__pycache__" not in parts
            and not rel.endswith(".pyc"))


def _check(site: Path, row: list[str]) -> bool:
    """Whether the file of a hashed RECORD row is there with that hash. A file this user may
    not read is neither: PermissionError goes to the caller, which refuses the environment
    (it was counted as modified after the install, and sent people to rebuild it)."""
    algorithm, _, want = row[1].partition("=")
    try:
        data = (site / row[0]).read_bytes()
        return _urlsafe(hashlib.new(algorithm, data).digest()) == want
    except PermissionError:
        raise
    except (OSError, ValueError):
        return False


def _present(path: Path) -> bool:
    """Whether an installed file outside site-packages is there (a broken link is not)."""
    try:
        return path.is_file()
    except PermissionError:
        raise
    except OSError:
        return False


def read(dist_info: Path, module: str) -> Installed:
    """The installed distribution whose metadata is `dist_info` (a `*.dist-info` folder)."""
    record = (dist_info / "RECORD").read_bytes()
    site = dist_info.parent
    rows = _rows(record, dist_info)
    # Scripts outside site-packages (`../../../bin/vllm`) carry the env's own path in their
    # shebang, which a relocation rewrites: their hash is not checked (`foreign_scripts`
    # reads the shebang), but one that is gone is an installed file that differs.
    hashed = [r for r in rows if len(r) > 1 and r[1] and not r[0].startswith("..")]
    gone = [r[0] for r in rows if r[0].startswith("..") and not _present(site / r[0])]
    changed = tuple([r[0] for r in hashed if not _check(site, r)] + gone)
    blobs: dict[str, str] = {}
    for row in rows:
        path = site / row[0]
        if _module_path(row[0], module) and path.is_file():
            blobs[PurePosixPath(row[0]).as_posix()] = _blob_id(path.read_bytes())
    # A name with a NUL is no file (it is counted gone above); resolve() raised ValueError.
    scripts = tuple((site / r[0]).resolve() for r in rows
                    if r[0].startswith("..") and "/bin/" in r[0] and "\0" not in r[0])
    version = site / module / VERSION_FILE
    return Installed(dist_info, hashlib.sha256(record).hexdigest(), len(hashed), changed,
                     blobs, scripts, read_version_file(version) if version.is_file() else None)


def read_version_file(path: Path) -> VersionFile:
    """`__version__` and `__commit_id__` as the literals the file assigns."""
    found: dict[str, object] = {}
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError, MemoryError, RecursionError):
        # A file nested too deep for the parser reads as one it cannot parse.
        return VersionFile(None, None, has_commit_id=False)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    version, commit_id = found.get("__version__"), found.get("__commit_id__")
    return VersionFile(version if isinstance(version, str) else None,
                       commit_id if isinstance(commit_id, str) else None,
                       has_commit_id="__commit_id__" in found)


@dataclass(frozen=True)
class TreeCheck:
    """The installed module files against the commit's tree."""

    commit: str
    same: int
    differ: tuple[str, ...]  # in the tree, with other content
    not_in_tree: tuple[str, ...]  # installed, not in the tree
    not_installed: tuple[str, ...]  # `.py` files of the tree that were not installed


def against_tree(inst: Installed, module: str, repo: Path, commit: str) -> TreeCheck:
    entries = {e.path: e for e in gitio.tree_entries(repo, commit, module)
               if e.kind == "blob"}
    same: list[str] = []
    differ: list[str] = []
    extra: list[str] = []
    for path, blob in sorted(inst.blobs.items()):
        entry = entries.get(path)
        if entry is None:
            extra.append(path)
        elif entry.mode == "120000" or _blob_matches(inst.site / path, blob, entry.object_id):
            same.append(path)
        else:
            differ.append(path)
    missing = tuple(sorted(p for p in entries if p.endswith(".py") and p not in inst.blobs))
    return TreeCheck(commit, len(same), tuple(differ), tuple(extra), missing)


def _blob_matches(path: Path, sha1_blob: str, tree_id: str) -> bool:
    if len(tree_id) == len(sha1_blob):
        return tree_id == sha1_blob
    return _blob_id(path.read_bytes(), "sha256") == tree_id  # a SHA-256 repository


def foreign_scripts(inst: Installed, env: Path) -> list[tuple[str, str]]:
    """(script, interpreter) for each installed script that runs another env's Python. A
    script this user may not read raises its OSError: which Python it runs cannot be told,
    and the caller refuses the environment (it was skipped, and the check passed)."""
    home = env.resolve()
    out: list[tuple[str, str]] = []
    for script in inst.scripts:
        try:
            with open(script, "rb") as fh:
                first = fh.readline(4096).decode("utf-8", "replace").strip()
        except (FileNotFoundError, NotADirectoryError):
            continue  # a script that is not there runs no Python at all
        interpreter = first[2:].split()[0] if first.startswith("#!") and first[2:].split() \
            else ""
        if "python" in Path(interpreter).name and \
                Path(interpreter).parent.parent.resolve() != home:
            out.append((script.name, interpreter))
    return out
