"""Where a precompiled build's binaries came from, as vLLM's `setup.py` says in the build log.

vLLM's precompiled build takes its compiled extensions from another wheel: the one
`VLLM_PRECOMPILED_WHEEL_LOCATION` names, or the per-commit nightly wheel on
wheels.vllm.ai for `VLLM_PRECOMPILED_WHEEL_COMMIT` (the tool always sets it to the
commit being built, so the build never falls back to "nightly", the newest wheel). Its
`setup.py` prints what it used (`pip wheel -v` keeps it in the log):

    Using user-specified precompiled wheel location: <path or URL>
    Using precompiled wheel commit <sha> with variant <variant>
    Found precompiled wheel metadata: {'version': '0.11.2.dev278+gdbc3d9991', ...}
    Using precompiled wheel URL: <URL>
    [extract] vllm/_C.abi3.so

The binaries prove nothing about their commit by themselves: the provenance is recorded
in the build record, shown by `status` and the gate record, and a warning names binaries
whose wheel does not say it was built at the oracle's commit.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from sync.infra.hashing import file_sha256
from sync.upstream.gitio import short

_LOCATION = re.compile(r"Using user-specified precompiled wheel location: (\S+)")
_COMMIT = re.compile(r"Using precompiled wheel commit (\S+)")
_METADATA = re.compile(r"Found precompiled wheel metadata: (\{.*\})\s*$")
_URL = re.compile(r"Using precompiled wheel URL: (\S+)")
_EXTRACT = re.compile(r"\[extract\] (\S+)")
_LOCAL_SHA = re.compile(r"g([0-9a-f]{7,40})")


@dataclass(frozen=True)
class Provenance:
    location: str | None  # the wheel's path or URL
    wheel: str | None  # its file name
    version: str | None  # the version the wheel (or its index entry) carries
    commit: str | None  # the hex its version names (+g<hex>), when it names one
    requested: str | None  # the commit the build asked the index for
    sha256: str | None  # of the wheel file, when it was a local file
    files: tuple[str, ...]  # what was extracted from it

    def as_doc(self) -> dict[str, str | None]:
        return {"location": self.location, "wheel": self.wheel, "version": self.version,
                "commit": self.commit, "requested": self.requested, "sha256": self.sha256,
                "files": str(len(self.files))}

    def summary(self) -> str:
        said = f"version {self.version}" if self.version else "no version"
        return (f"binaries from {self.wheel or self.location or 'an unnamed wheel'} ({said}, "
                f"{'commit g' + self.commit if self.commit else 'no commit'}, "
                f"{len(self.files)} files)")


def _metadata(line: str) -> dict[str, object]:
    m = _METADATA.search(line)
    if m is None:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _wheel_version(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return str(parse_wheel_filename(name)[1])
    except InvalidWheelFilename:
        return None


def _local_file(location: str | None) -> Path | None:
    if not location:
        return None
    url = urlparse(location)
    path = Path(unquote(url.path)) if url.scheme == "file" else Path(location)
    return path if not url.scheme or url.scheme == "file" else None


def _sha256(path: Path | None) -> str | None:
    return None if path is None or not path.is_file() else file_sha256(path)


def from_log(lines: list[str]) -> Provenance | None:
    """The provenance a build log states; None when the build used no precompiled wheel."""
    location = requested = None
    meta: dict[str, object] = {}
    files: list[str] = []
    for line in lines:
        for pattern in (_LOCATION, _URL):
            found = pattern.search(line)
            location = found.group(1) if found else location
        got = _COMMIT.search(line)
        requested = got.group(1) if got else requested
        meta = _metadata(line) or meta
        extracted = _EXTRACT.search(line)
        if extracted and extracted.group(1) not in files:  # pip runs setup.py more than once
            files.append(extracted.group(1))
    if location is None and not files:
        return None
    name = str(meta.get("filename") or "") or (
        Path(unquote(urlparse(location).path)).name if location else None)
    version = str(meta["version"]) if "version" in meta else _wheel_version(name)
    local = _LOCAL_SHA.fullmatch(version.partition("+")[2].split(".")[0]) if version else None
    return Provenance(location, name, version, local.group(1) if local else None, requested,
                      _sha256(_local_file(location)), tuple(files))


def warning(p: Provenance, commit: str) -> str | None:
    """Why the binaries may not be the oracle's commit's; None when their wheel says so."""
    if p.commit is not None and commit.startswith(p.commit):
        return None
    if p.commit is None:
        return (f"the precompiled binaries ({p.wheel or p.location}) do not say which commit "
                f"they were built at, not necessarily {short(commit)}")
    return (f"the precompiled binaries come from {p.wheel or p.location} (commit g{p.commit}), "
            f"not from {short(commit)}: the Python is the commit's, the compiled code is not")
