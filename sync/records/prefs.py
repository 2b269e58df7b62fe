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

from sync.infra.atomic import read_record
from sync.infra.errors import EnvironmentUnresolved, MalformedRecord
from sync.records import blocks
from sync.upstream import gitio

INFO = "sync-preferences"


@dataclass(frozen=True)
class Key:
    """One preference, declared once: the refusal of a missing value, the docs table and
    the example `init` writes are all rendered from it."""

    variable: str  # the environment variable that overrides the file
    meaning: str  # a noun phrase without parentheses: a refusal puts it in parentheses
    form: str  # the shape of a value, as a refusal shows the line to add
    sample: str  # the value in the example `init` writes
    default: str | None = None  # None: a command that needs the value refuses without it


KEYS: dict[str, Key] = {
    "reference_checkout": Key("VLLM_SOURCE", "a full clone of upstream vLLM, never a shallow "
                              "one", "<path>", "~/src/vllm"),
    "fetch_remote": Key("SYNC_FETCH_REMOTE", "the remote fetched in the reference checkout",
                        "<remote>", "origin", default="origin"),
    "branch": Key("SYNC_BRANCH", "the upstream branch the target is taken from", "<branch>",
                  "main", default="main"),
    "gate_hosts": Key("SYNC_GATE_HOSTS", "the host names eligible to run gates, "
                      "comma-separated", "<host>,<host>", "dgx"),
    "oracle_home": Key("SYNC_ORACLE_HOME", "the directory holding the oracle virtualenvs, "
                       "outside every checkout", "<directory>", "~/venvs"),
    "omni_source": Key("VLLM_OMNI_SOURCE", "a clone of vllm-omni, for the omni oracle",
                       "<path>", "~/src/vllm-omni"),
    "oracle_checkouts": Key("SYNC_ORACLE_CHECKOUTS", "clones of other oracles' upstreams, to "
                            "verify the SHAs the port cites them at", "<oracle id>=<path>,...",
                            "llama.cpp=~/src/llama.cpp"),
}


def keys_table() -> str:
    """The preferences as the markdown table of docs/adopting.md §4."""
    lines = ["| key | environment variable | value | meaning |", "|---|---|---|---|"]
    for name, k in KEYS.items():
        default = f"; default `{k.default}`" if k.default is not None else ""
        lines.append(f"| `{name}` | `{k.variable}` | `{k.form}` | {k.meaning}{default} |")
    return "\n".join(lines) + "\n"


def example_files(file: Path) -> tuple[Path, Path]:
    """Where a port keeps the example of `file`: `init` writes `<file>.example`; a port may
    have its own `<stem>.example.md`."""
    return file.with_name(file.name + ".example"), file.with_name(f"{file.stem}.example.md")


def missing(key: str, file: Path) -> EnvironmentUnresolved:
    """The refusal of a needed preference that is unset: what it is, and exactly which line
    goes where (the file may not exist yet)."""
    k = KEYS[key]
    line = f"'{key} = {k.form}'"
    if file.exists():
        where = f"add the line {line} to the ```{INFO} block of {file}"
    else:
        example = next((e for e in example_files(file) if e.exists()), None)
        where = (f"copy {example} to {file} and set {line} in its ```{INFO} block"
                 if example is not None else
                 f"create {file} holding a ```{INFO} block with the line {line}")
    return EnvironmentUnresolved(f"{key} is not set ({k.meaning})",
                                 f"set {k.variable}, or {where}")


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
            raise missing(key, self.file)
        return value

    def path(self, key: str) -> Path:
        return Path(self.require(key)).expanduser()

    @property
    def remote(self) -> str:
        return self.get("fetch_remote") or str(KEYS["fetch_remote"].default)

    @property
    def branch(self) -> str:
        return self.get("branch") or str(KEYS["branch"].default)

    @property
    def gate_hosts(self) -> tuple[str, ...]:
        raw = self.get("gate_hosts") or ""
        return tuple(h.strip() for h in raw.split(",") if h.strip())

    @property
    def oracle_checkouts(self) -> dict[str, Path]:
        """Other oracles' checkouts by oracle id (`oracle_checkouts = llama.cpp=~/src/l`); a
        value that is not `ID=PATH, ...` is refused, never read as fewer checkouts."""
        found, problem = checkout_entries(self.get("oracle_checkouts") or "")
        if problem is not None:  # the file's value was checked when it was read: the variable
            raise EnvironmentUnresolved(
                f"{self.source_of('oracle_checkouts')}: oracle_checkouts {problem}",
                f"set {KEYS['oracle_checkouts'].variable} to ID=PATH, ID=PATH (each oracle once)")
        return found

    def reference(self) -> gitio.Reference:
        """The reference checkout, refused when unset, missing, not git, or shallow."""
        var = KEYS["reference_checkout"].variable
        path = self.path("reference_checkout")
        # Every refusal names where the path came from and the variable: the fix may be
        # pointing it elsewhere, in that file or by the variable (walk-s13 U4).
        source = self.source_of("reference_checkout")
        fix = (f"set {var} to a full clone of the upstream" if source.startswith("env ") else
               f"point reference_checkout in {source} at a full clone of the upstream, or set "
               f"{var}")
        ref = gitio.open_repo(path, variable=var, allow_shallow=True, source=source, fix=fix)
        gitio.fetches_from(ref.path, self.remote)
        if gitio.is_shallow(ref):
            raise EnvironmentUnresolved(
                f"reference checkout {path} (from {source}) is a shallow clone: history "
                "before its cut is invisible",
                f"run 'git -C {path} fetch --unshallow' or set {var} to a full clone",
            )
        return ref


def checkout_entries(raw: str) -> tuple[dict[str, Path], str | None]:
    """`ID=PATH, ID=PATH` by id, and what is wrong with the first entry that is not one (or
    names an id again): such an entry was dropped without a word (walk-s14 R2)."""
    out: dict[str, Path] = {}
    for item in raw.split(","):
        oid, eq, path = (x.strip() for x in item.partition("="))
        if not item.strip():
            continue  # `a=/x,` or an empty value: nothing named
        if not (eq and oid and path):
            return out, f"entry {item.strip()[:60]!r} is not ID=PATH"
        if oid in out:
            return out, f"names {oid[:60]!r} twice"
        out[oid] = Path(path).expanduser()
    return out, None


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
        problem = checkout_entries(e.value)[1] if e.key == "oracle_checkouts" else None
        if problem is not None:
            raise MalformedRecord(f"oracle_checkouts {problem}", "write oracle_checkouts = "
                                  "ID=PATH, ID=PATH (each oracle once)", path=path, line=e.line)
    return values


def load(file: Path, environ: dict[str, str] | None = None,
         variables: tuple[tuple[str, str], ...] = ()) -> Preferences:
    """The preferences: the file, then the environment (`variables` adds the port's own
    variable names, `gate_hosts = GATE_HOST`; upstream-sync's own names win)."""
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    if file.exists():
        text = read_record(file, rel=str(file))
        for k, v in parse(text, path=str(file)).items():
            if v:
                values[k], sources[k] = v, str(file)
    for key, var in variables:
        if key in KEYS and env.get(var):
            values[key], sources[key] = env[var], f"env {var}"
    for key, declared in KEYS.items():
        var = declared.variable
        if env.get(var):
            values[key], sources[key] = env[var], f"env {var}"
    return Preferences(tuple(sorted(values.items())), tuple(sorted(sources.items())), file)


def example_text() -> str:
    lines = [
        "# Developer preferences (machine-specific; copy to developer-preferences.md, untracked)",
        "",
        "Environment variables override each key: " + ", ".join(
            f"`{k.variable}` for `{name}`" for name, k in KEYS.items()) + ".",
        "",
        f"```{INFO}",
    ]
    lines += [f"{name} = {k.sample}" for name, k in KEYS.items()]
    lines += ["```", ""]
    return "\n".join(lines)
