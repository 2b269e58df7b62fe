"""Developer preferences: machine-specific values, never tracked.

`.agents/developer-preferences.md` holds one ```sync-preferences block; the
tracked `.example` beside it documents the keys. Environment variables win over
the file. A missing value is a refusal that names the variable to set, never a
silent default path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sync.infra.atomic import read_text
from sync.infra.errors import EnvironmentUnresolved, MalformedRecord
from sync.records import blocks
from sync.upstream import gitio

INFO = "sync-preferences"
# key -> (environment variable, meaning)
KEYS: dict[str, tuple[str, str]] = {
    "reference_checkout": ("VLLM_SOURCE", "full (never shallow) clone of the upstream vLLM"),
    "fetch_remote": ("SYNC_FETCH_REMOTE", "remote to fetch in the reference checkout"),
    "branch": ("SYNC_BRANCH", "upstream branch the target is taken from"),
    "gate_hosts": ("SYNC_GATE_HOSTS", "comma-separated host names eligible to run gates"),
    "oracle_home": ("SYNC_ORACLE_HOME", "directory holding oracle virtualenvs (outside checkouts)"),
    "omni_source": ("VLLM_OMNI_SOURCE", "clone of vllm-omni, for the omni oracle"),
    "oracle_checkouts": ("SYNC_ORACLE_CHECKOUTS", "comma-separated <oracle id>=<path> clones of "
                         "other oracles' upstreams (llama.cpp=~/src/llama.cpp), to verify the "
                         "SHAs the port cites them at"),
}


@dataclass(frozen=True)
class Preferences:
    values: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...]  # key -> "env VAR" or the file path
    file: Path

    def get(self, key: str) -> str | None:
        return dict(self.values).get(key)

    def source_of(self, key: str) -> str:
        return dict(self.sources).get(key, "unset")

    def require(self, key: str) -> str:
        value = self.get(key)
        if not value:
            var = KEYS[key][0]
            raise EnvironmentUnresolved(
                f"{key} is not set ({KEYS[key][1]})",
                f"set {var} or add '{key} = ...' to {self.file}",
            )
        return value

    def path(self, key: str) -> Path:
        return Path(self.require(key)).expanduser()

    @property
    def remote(self) -> str:
        return self.get("fetch_remote") or "origin"

    @property
    def branch(self) -> str:
        return self.get("branch") or "main"

    @property
    def gate_hosts(self) -> tuple[str, ...]:
        raw = self.get("gate_hosts") or ""
        return tuple(h.strip() for h in raw.split(",") if h.strip())

    @property
    def oracle_checkouts(self) -> dict[str, Path]:
        """Other oracles' checkouts by oracle id (`oracle_checkouts = llama.cpp=~/src/l`)."""
        out: dict[str, Path] = {}
        for item in (self.get("oracle_checkouts") or "").split(","):
            oid, eq, path = item.partition("=")
            if eq and oid.strip() and path.strip():
                out[oid.strip()] = Path(path.strip()).expanduser()
        return out

    def reference(self) -> gitio.Reference:
        """The reference checkout, refused when unset, missing, not git, or shallow."""
        var = KEYS["reference_checkout"][0]
        path = self.path("reference_checkout")
        ref = gitio.open_repo(path, variable=var, allow_shallow=True)
        if gitio.is_shallow(ref):
            # Every refusal names the variable: the fix may be pointing it elsewhere.
            raise EnvironmentUnresolved(
                f"reference checkout {path} (from {self.source_of('reference_checkout')}) is a "
                "shallow clone: history before its cut is invisible",
                f"run 'git -C {path} fetch --unshallow' or set {var} to a full clone",
            )
        return ref


def parse(text: str, *, path: str) -> dict[str, str]:
    found = blocks.find(text, INFO, path=path)
    if len(found) != 1:
        raise MalformedRecord(f"expected one ```{INFO} block, found {len(found)}",
                              f"see {path}.example for the format", path=path)
    values = blocks.check_keys(found[0], (), optional=tuple(KEYS), path=path)
    for e in found[0].entries:
        if e.key in ("fetch_remote", "branch") and e.value:
            try:
                gitio.check_rev(e.value)
            except Exception:
                raise MalformedRecord(f"{e.key} = {e.value!r} is not a usable git name",
                                      "fix the value", path=path, line=e.line) from None
    return values


def load(file: Path, environ: dict[str, str] | None = None,
         variables: tuple[tuple[str, str], ...] = ()) -> Preferences:
    """The preferences: the file, then the environment (`variables` adds the port's own
    variable names, `gate_hosts = GATE_HOST`; upstream-sync's own names win)."""
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    if file.exists():
        try:
            text = read_text(file)
        except UnicodeDecodeError:
            raise MalformedRecord("not UTF-8", "re-save it as UTF-8", path=str(file)) from None
        except OSError as exc:
            raise MalformedRecord(f"cannot read it: {exc.strerror}", "make it a readable file",
                                  path=str(file)) from None
        for k, v in parse(text, path=str(file)).items():
            if v:
                values[k], sources[k] = v, str(file)
    for key, var in variables:
        if key in KEYS and env.get(var):
            values[key], sources[key] = env[var], f"env {var}"
    for key, (var, _) in KEYS.items():
        if env.get(var):
            values[key], sources[key] = env[var], f"env {var}"
    return Preferences(tuple(sorted(values.items())), tuple(sorted(sources.items())), file)


def example_text() -> str:
    lines = [
        "# Developer preferences (machine-specific; copy to developer-preferences.md, untracked)",
        "",
        "Environment variables override each key: " + ", ".join(
            f"`{var}` for `{k}`" for k, (var, _) in KEYS.items()) + ".",
        "",
        f"```{INFO}",
    ]
    samples = {"reference_checkout": "~/src/vllm", "fetch_remote": "origin", "branch": "main",
               "gate_hosts": "dgx", "oracle_home": "~/venvs", "omni_source": "~/src/vllm-omni",
               "oracle_checkouts": "llama.cpp=~/src/llama.cpp"}
    lines += [f"{k} = {samples[k]}" for k in KEYS]
    lines += ["```", ""]
    return "\n".join(lines)
