from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.dev.fastimport import History
from sync.infra.errors import EnvironmentUnresolved, MalformedRecord, SyncError
from sync.records import prefs

DOC = (
    "# My machine\n"
    "\n"
    "```sync-preferences\n"
    "# comments and blank lines are skipped\n"
    "reference_checkout = ~/src/vllm\n"
    "\n"
    "fetch_remote = upstream\n"
    "branch = main\n"
    "gate_hosts = dgx-1, dgx-2 ,\n"
    "oracle_home = /opt/venvs\n"
    "omni_source =\n"
    "```\n"
)


def write(tmp: Path, text: str) -> Path:
    path = tmp / "developer-preferences.md"
    path.write_text(text, newline="")
    return path


def malformed(text: str) -> str:
    with pytest.raises(MalformedRecord) as exc:
        prefs.parse(text, path="p.md")
    message = str(exc.value)
    assert "\n" not in message and message.startswith("p.md:")
    assert exc.value.exit_code == 4
    return message


def test_parse_block() -> None:
    assert prefs.parse(DOC, path="p.md") == {
        "reference_checkout": "~/src/vllm", "fetch_remote": "upstream", "branch": "main",
        "gate_hosts": "dgx-1, dgx-2 ,", "oracle_home": "/opt/venvs", "omni_source": "",
    }
    assert prefs.parse("```sync-preferences\n```\n", path="p.md") == {}
    assert prefs.parse(DOC.replace("\n", "\r\n"), path="p.md")["branch"] == "main"


def test_load_from_file(tmp: Path) -> None:
    file = write(tmp, DOC)
    p = prefs.load(file, environ={})
    assert p.get("reference_checkout") == "~/src/vllm"
    assert p.path("reference_checkout") == Path.home() / "src/vllm"
    assert p.remote == "upstream" and p.branch == "main"
    assert p.gate_hosts == ("dgx-1", "dgx-2")
    assert p.get("omni_source") is None  # an empty value is unset, not ""
    assert p.source_of("oracle_home") == str(file)
    assert p.source_of("omni_source") == "unset"
    assert p.file == file


def test_defaults_without_a_file(tmp: Path) -> None:
    p = prefs.load(tmp / "absent.md", environ={})
    assert p.values == () and p.remote == "origin" and p.branch == "main"
    assert p.gate_hosts == ()


def test_environment_overrides_file(tmp: Path) -> None:
    file = write(tmp, DOC)
    env = {"VLLM_SOURCE": "/work/vllm", "SYNC_FETCH_REMOTE": "origin", "SYNC_BRANCH": "dev",
           "SYNC_GATE_HOSTS": "gpu-a", "SYNC_ORACLE_HOME": "/o", "VLLM_OMNI_SOURCE": "/omni",
           "UNRELATED": "x"}
    p = prefs.load(file, environ=env)
    assert dict(p.values) == {"reference_checkout": "/work/vllm", "fetch_remote": "origin",
                              "branch": "dev", "gate_hosts": "gpu-a", "oracle_home": "/o",
                              "omni_source": "/omni"}
    assert p.source_of("reference_checkout") == "env VLLM_SOURCE"
    assert p.source_of("omni_source") == "env VLLM_OMNI_SOURCE"
    # An empty variable does not blank the file's value.
    assert prefs.load(file, environ={"VLLM_SOURCE": ""}).get("reference_checkout") == "~/src/vllm"


def test_process_environment_is_the_default(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_BRANCH", "release")
    assert prefs.load(tmp / "absent.md").branch == "release"


@pytest.mark.parametrize(("text", "expect"), [
    ("no block here\n", "p.md: expected one ```sync-preferences block, found 0"),
    ("```sync-preferences\nbranch = a\n```\n```sync-preferences\nbranch = b\n```\n",
     "p.md: expected one ```sync-preferences block, found 2"),
    ("```sync-preferences\nreference_checkout ~/vllm\n```\n",
     "p.md:2: malformed line 'reference_checkout ~/vllm' (expected 'key = value')"),
    ("```sync-preferences\nRemote = origin\n```\n", "p.md:2: malformed key 'Remote'"),
    ("```sync-preferences\nremote = origin\n```\n",
     "p.md:2: unknown key 'remote' in ```sync-preferences"),
    ("```sync-preferences\nbranch = a\nbranch = b\n```\n",
     "p.md:3: duplicate key 'branch' (first on line 2)"),
    ("```sync-preferences\nbranch = a\n", "p.md:1: ```sync-preferences block is never closed"),
    ("```sync-preferences\nfetch_remote = --upload-pack=x\n```\n",
     "p.md:2: fetch_remote = '--upload-pack=x' is not a usable git name"),
    ("```sync-preferences\nbranch = a..b\n```\n", "p.md:2: branch = 'a..b' is not a usable"),
])
def test_malformed_block(text: str, expect: str) -> None:
    assert malformed(text).startswith(expect)


def test_malformed_file_is_refused_on_load(tmp: Path) -> None:
    file = write(tmp, "```sync-preferences\nbogus = 1\n```\n")
    with pytest.raises(MalformedRecord, match="unknown key 'bogus'"):
        prefs.load(file, environ={"VLLM_SOURCE": "/x"})
    file.write_bytes(b"```sync-preferences\nbranch = \xff\n```\n")
    with pytest.raises(MalformedRecord, match="not UTF-8"):
        prefs.load(file, environ={})
    file.unlink()
    file.mkdir()
    with pytest.raises(MalformedRecord, match="cannot read it"):
        prefs.load(file, environ={})


def test_example_parses_and_names_every_variable() -> None:
    text = prefs.example_text()
    values = prefs.parse(text, path="x.example")
    assert set(values) == set(prefs.KEYS)
    for k in prefs.KEYS.values():
        assert f"`{k.variable}`" in text


# -- the reference checkout ------------------------------------------------------------------


def upstream(tmp: Path) -> Path:
    h = History()
    for i in range(5):
        h.modify(f"vllm/m{i}.py", f"x = {i}\n").commit(f"[Core] step {i} (#{100 + i})")
    repo = tmp / "upstream"
    h.write(repo)
    return repo


def refused(p: prefs.Preferences) -> str:
    with pytest.raises(EnvironmentUnresolved) as exc:
        p.reference()
    assert exc.value.exit_code == 3
    message = str(exc.value)
    assert "\n" not in message and "VLLM_SOURCE" in message
    return message


def test_reference_checkout_unset(tmp: Path) -> None:
    message = refused(prefs.load(tmp / "absent.md", environ={}))
    assert message.startswith("reference_checkout is not set")


@pytest.mark.parametrize("key", list(prefs.KEYS))
def test_an_unset_preference_says_which_line_goes_where(tmp: Path, key: str) -> None:
    """One pair of parentheses (the meaning), and the exact line, block and file: a file to
    add it to, an example to copy, or a file to create."""
    k = prefs.KEYS[key]
    file = tmp / "developer-preferences.md"
    head = f"{key} is not set ({k.meaning}) — set {k.variable}, or "
    line = f"'{key} = {k.form}'"

    def said() -> str:
        with pytest.raises(EnvironmentUnresolved) as exc:
            prefs.load(file, environ={}).require(key)
        message = str(exc.value)
        assert message.count("(") == message.count(")") == 1 + k.form.count("(")
        return message

    assert said() == f"{head}create {file} holding a ```sync-preferences block with the line {line}"
    for example in prefs.example_files(file):
        example.write_text(prefs.example_text())
        assert said() == (f"{head}copy {example} to {file} and set {line} in its "
                          "```sync-preferences block")
        example.unlink()
    file.write_text("```sync-preferences\n```\n")
    assert said() == f"{head}add the line {line} to the ```sync-preferences block of {file}"


def test_every_preference_is_declared_readably() -> None:
    for name, k in prefs.KEYS.items():
        assert "(" not in k.meaning and ")" not in k.meaning, name
        assert k.meaning == " ".join(k.meaning.split()) and k.form and k.sample


def test_reference_checkout_missing(tmp: Path) -> None:
    message = refused(prefs.load(tmp / "absent.md", environ={"VLLM_SOURCE": str(tmp / "nope")}))
    assert message == (f"reference checkout {tmp / 'nope'} (from env VLLM_SOURCE) does not "
                       "exist — set VLLM_SOURCE to a full clone of the upstream")


def test_a_reference_checkout_from_the_preferences_file_is_refused_naming_it(tmp: Path) -> None:
    """walk-s13 U4: a wrong path copied from the .example was refused with "set
    VLLM_SOURCE", as though the variable had given it; the file did."""
    file = tmp / "developer-preferences.md"
    file.write_text(f"```sync-preferences\nreference_checkout = {tmp / 'nope'}\n```\n")
    assert refused(prefs.load(file, environ={})) == (
        f"reference checkout {tmp / 'nope'} (from {file}) does not exist — point "
        f"reference_checkout in {file} at a full clone of the upstream, or set VLLM_SOURCE")
    (tmp / "plain").mkdir()
    file.write_text(f"```sync-preferences\nreference_checkout = {tmp / 'plain'}\n```\n")
    assert refused(prefs.load(file, environ={})).startswith(
        f"reference checkout {tmp / 'plain'} (from {file}) is not a git repository — point ")


def test_reference_checkout_not_git(tmp: Path) -> None:
    (tmp / "plain").mkdir()
    message = refused(prefs.load(tmp / "absent.md", environ={"VLLM_SOURCE": str(tmp / "plain")}))
    assert "is not a git repository" in message


def test_reference_checkout_shallow(tmp: Path) -> None:
    repo = upstream(tmp)
    shallow = tmp / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)],
                   check=True, capture_output=True)
    assert (shallow / ".git/shallow").exists()
    message = refused(prefs.load(tmp / "absent.md", environ={"VLLM_SOURCE": str(shallow)}))
    assert "is a shallow clone" in message and "fetch --unshallow" in message


def test_reference_checkout_from_file(tmp: Path) -> None:
    repo = upstream(tmp)
    file = write(tmp, f"```sync-preferences\nreference_checkout = {repo}\n```\n")
    ref = prefs.load(file, environ={}).reference()
    assert ref.path == repo


def test_reference_checkout_full_clone(tmp: Path) -> None:
    repo = upstream(tmp)
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", f"file://{repo}", str(clone)], check=True,
                   capture_output=True)
    ref = prefs.load(tmp / "absent.md", environ={"VLLM_SOURCE": str(clone)}).reference()
    assert ref.path == clone


# -- property tests --------------------------------------------------------------------------

_line = st.one_of(
    st.text(max_size=40),
    st.builds(lambda k, v: f"{k} = {v}", st.sampled_from([*prefs.KEYS, "x", "Branch", ""]),
              st.text(max_size=20)),
    st.sampled_from(["```", "```sync-preferences", "# note", "", "=", "branch = -x"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_parse_gives_only_sync_errors(lines: list[str], nl: str) -> None:
    text = nl.join(lines)
    try:
        values = prefs.parse(text, path="p.md")
    except SyncError as exc:
        assert "\n" not in str(exc)
    else:
        assert set(values) <= set(prefs.KEYS)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_random_text(text: str) -> None:
    with contextlib.suppress(SyncError):
        prefs.parse("```sync-preferences\n" + text + "\n```\n", path="p.md")


@pytest.mark.parametrize(("value", "problem"), [
    ("llama.cpp", "entry 'llama.cpp' is not ID=PATH"),
    ("=/tmp/x", "entry '=/tmp/x' is not ID=PATH"),
    ("a=/x, b", "entry 'b' is not ID=PATH"),
    ("a=/x, a=/y", "names 'a' twice"),
])
def test_an_oracle_checkouts_entry_that_is_not_id_path_is_refused(tmp: Path, value: str,
                                                                    problem: str) -> None:
    """walk-s14 R2: such an entry was dropped without a word (the symptom U3 had)."""
    file = tmp / "developer-preferences.md"
    file.write_text(f"```sync-preferences\nbranch = main\noracle_checkouts = {value}\n```\n")
    with pytest.raises(MalformedRecord) as exc:
        prefs.load(file, environ={})
    assert str(exc.value) == (f"{file}:3: oracle_checkouts {problem} — write oracle_checkouts = "
                              "ID=PATH, ID=PATH (each oracle once)")
    p = prefs.load(tmp / "absent.md", environ={"SYNC_ORACLE_CHECKOUTS": value})
    with pytest.raises(EnvironmentUnresolved) as env_exc:
        p.oracle_checkouts  # noqa: B018 - the property refuses
    assert str(env_exc.value).startswith(
        f"env SYNC_ORACLE_CHECKOUTS: oracle_checkouts {problem} — set SYNC_ORACLE_CHECKOUTS ")


@given(st.lists(st.tuples(st.text("ab.-_", max_size=3), st.sampled_from(["=", ""]),
                          st.text("/xy ", max_size=3)), max_size=4))
def test_oracle_checkouts_read_every_entry_or_say_which_is_not_one(
        items: list[tuple[str, str, str]]) -> None:
    raw = ",".join(a + eq + b for a, eq, b in items)
    found, problem = prefs.checkout_entries(raw)
    named = [i for i in raw.split(",") if i.strip()]
    if problem is None:  # every entry read, in order, none twice
        assert list(found) == [i.partition("=")[0].strip() for i in named]
        assert list(found.values()) == [Path(i.partition("=")[2].strip()) for i in named]
    else:  # the entries before the first bad one, and no more
        assert len(found) < len(named)
