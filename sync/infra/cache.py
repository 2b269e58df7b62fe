"""A cache of what was computed from content, outside every tracked tree, safe to delete.

A re-run over an unchanged port should cost little more than reading it: what a step
derives from bytes that do not change (a port file's parsed header, an upstream commit's
symbol-level changes) is kept here between runs, keyed by those bytes (a digest of a
file's content, an upstream commit's SHA). Nothing here is a record: deleting the cache,
or any failure to read or write it, only makes the next run do the work again.

Where: `$SYNC_CACHE_DIR`, else `$XDG_CACHE_HOME/upstream-sync`, else
`~/.cache/upstream-sync`; one folder per port (by its resolved root), one file per kind.
`SYNC_CACHE_DIR=off` turns it off. A cache written by another version of this package
(another source fingerprint) is ignored.

Files are pickles, read back with an unpickler that builds only plain containers and this
package's own classes: a planted file cannot make loading run anything else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import io
import pickle
from pathlib import Path
from typing import Any

from sync.infra import atomic, cachedir

OFF = cachedir.OFF
_SAFE_BUILTINS = frozenset({"dict", "list", "tuple", "set", "frozenset", "str", "bytes", "int",
                            "float", "bool", "complex", "NoneType"})
_FINGERPRINT: list[str] = []


def fingerprint() -> str:
    """This package's sources, by name, size and modification time (a code change starts
    every cache afresh)."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.blake2b(digest_size=12)
        for path in sorted(root.rglob("*.py")):
            st = path.stat()
            h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        _FINGERPRINT.append(h.hexdigest())
    return _FINGERPRINT[0]


def digest(data: bytes) -> str:
    """The key of some content."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if module == "sync" or module.startswith("sync."):
            found = super().find_class(module, name)
            # Only records of data: a function or any other callable could be invoked by
            # the pickle's REDUCE.
            if isinstance(found, type) and (dataclasses.is_dataclass(found)
                                            or issubclass(found, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in the cache")


def location(port_root: Path, environ: dict[str, str] | None = None) -> Path | None:
    """The port's cache folder; None when the cache is off."""
    base = cachedir.base(environ)
    if base is None:
        return None
    key = hashlib.blake2b(str(port_root.resolve()).encode(), digest_size=8).hexdigest()
    return Path(base) / f"{port_root.name[:40]}-{key}"


class Store:
    """One kind of cached value for one port: a dict loaded whole and saved whole."""

    def __init__(self, port_root: Path, name: str) -> None:
        folder = location(port_root)
        self.path = None if folder is None else folder / f"{name}.pickle"

    def load(self) -> dict[Any, Any]:
        """What was saved by this version of the package; {} on any problem."""
        if self.path is None:
            return {}
        try:
            data = self.path.read_bytes()
            stored = _Unpickler(io.BytesIO(data)).load()
        except (OSError, EOFError, ValueError, TypeError, AttributeError, ImportError,
                IndexError, pickle.UnpicklingError, RecursionError, MemoryError):
            return {}
        if (not isinstance(stored, tuple) or len(stored) != 2 or stored[0] != fingerprint()
                or not isinstance(stored[1], dict)):
            return {}
        return stored[1]

    def save(self, values: dict[Any, Any]) -> None:
        """Replace what is stored (atomically); a failure leaves the cache as it was."""
        if self.path is None:
            return
        # A cache that cannot be written (`atomic.Unwritable`) is only a slower next run.
        with contextlib.suppress(OSError, atomic.Unwritable, pickle.PicklingError,
                                 RecursionError, TypeError, AttributeError):
            data = pickle.dumps((fingerprint(), values), protocol=pickle.HIGHEST_PROTOCOL)
            atomic.sweep([(self.path.parent, False)])  # a killed save's temp file
            atomic.write_bytes(self.path, data)
