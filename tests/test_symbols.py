"""The symbol pass: hunks mapped to definitions, citations read at their SHA, the decision,
its reasons, `explain`, and a constant number of git processes."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from symbolfixture import CFG, CU, KVU, REG, RUNNER, SCHED, World, build, report_doc, run, synced

from sync.headers.citations import Citation, Header
from sync.port import locate
from sync.records import cycle
from sync.steps import evidence, surface, symbols
from sync.upstream import gitio


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with synced(lambda: build(tmp_path_factory.mktemp("symbols"))) as w:
        yield w


def _doc(world: World) -> dict[str, Any]:
    return report_doc(world)


def entry(world: World, name: str) -> dict[str, Any]:
    sha = world.sha(name)
    return next(e for e in _doc(world)["entries"] if e["sha"] == sha)


def verdict(world: World, name: str) -> tuple[str, str | None, str]:
    e = entry(world, name)
    return e["disposition"], e["rule"], e["reason"]


def changed(e: dict[str, Any], path: str) -> list[tuple[str, str]]:
    (p,) = [p for p in e["evidence"]["paths"] if p["path"] == path]
    return [(u["name"], u["change"]) for u in p["changed"]]


# -- the shapes the issue names ----------------------------------------------------------------


def test_change_inside_a_cited_method_is_port_now(world: World) -> None:
    assert verdict(world, "in_method") == (
        "PORT-NOW", "symbol-hit",
        f"{SCHED}::Scheduler.update_from_output → src/scheduler.cpp")
    e = entry(world, "in_method")
    assert changed(e, SCHED) == [("Scheduler.update_from_output", "modified")]
    cited = {c["port_file"]: c["outcome"] for c in e["evidence"]["citations"]}
    assert cited == {"src/scheduler.cpp": "hit", "src/stats.cpp": "miss",
                     "src/budget.cpp": "miss", "src/init_budget.cpp": "miss"}
    # A line range over two methods and the blank line between names those two only.
    (rng,) = [c for c in e["evidence"]["citations"] if c["port_file"] == "src/init_budget.cpp"]
    assert (rng["how"], rng["names"]) == ("lines", ["Scheduler.__init__", "Scheduler.budget"])


def test_change_beside_the_cited_method_is_not_ported_code(world: World) -> None:
    disp, rule, reason = verdict(world, "beside")
    assert (disp, rule) == ("INVENTORY", "not-mirrored")
    assert reason == (f"touches ported files, not ported code: {SCHED}: changes "
                      "Scheduler.schedule; the port mirrors Scheduler.budget (src/budget.cpp), "
                      "Scheduler.__init__, Scheduler.budget (src/init_budget.cpp) +2")
    e = entry(world, "beside")
    assert e["not_ported_code"] is True
    assert e["port_files"] == ["src/budget.cpp", "src/init_budget.cpp", "src/scheduler.cpp",
                               "src/stats.cpp"]


def test_change_in_a_nested_class_nests_in_the_cited_class(world: World) -> None:
    assert verdict(world, "nested_class")[:2] == ("PORT-NOW", "symbol-hit")
    e = entry(world, "nested_class")
    assert changed(e, SCHED) == [("Scheduler.Stats.total", "modified")]
    (hit,) = [c for c in e["evidence"]["citations"] if c["outcome"] == "hit"]
    assert (hit["port_file"], hit["why"]) == (
        "src/stats.cpp", "Scheduler.Stats.total nests in the cited Scheduler.Stats")


def test_a_decorator_belongs_to_its_definition(world: World) -> None:
    assert verdict(world, "decorator") == (
        "PORT-NOW", "symbol-hit", f"{SCHED}::Scheduler.budget → src/budget.cpp, "
        "src/init_budget.cpp")


def test_a_module_level_dict_row(world: World) -> None:
    # An added row is an addition, even though the port cites the table itself...
    assert verdict(world, "dict_row_added") == (
        "INVENTORY", "adds-only",
        f"only adds: {REG}: adds rows 'KimiForCausalLM' (src/registry.cpp)")
    assert changed(entry(world, "dict_row_added"), REG) == [
        ("_TEXT_GENERATION_MODELS", "extended")]
    # ...a changed row is a change to the cited table...
    assert verdict(world, "dict_row_changed") == (
        "PORT-NOW", "symbol-hit", f"{REG}::_TEXT_GENERATION_MODELS → src/registry.cpp")
    # ...unless it re-points the row to a model the commit changes and no port file cites.
    disp, rule, reason = verdict(world, "dict_row_repointed")
    assert (disp, rule) == ("INVENTORY", "adds-only")
    assert "re-points rows 'LlamaForCausalLM' for models the port has no file for" in reason
    assert entry(world, "dict_row_repointed")["evidence"]["models_without_port_files"] == [
        "llama4"]


def test_addition_only_comes_before_the_whole_file_citation(world: World) -> None:
    assert verdict(world, "adds_only") == (
        "INVENTORY", "adds-only",
        f"only adds: {KVU}: adds chain_hash (src/flags.cpp, src/kv_cache_utils.cpp)")
    # The same whole-file citation makes a changed definition PORT-NOW, and says it is coarse.
    assert verdict(world, "whole_file_change") == (
        "PORT-NOW", "whole-file", f"{KVU} (whole-file citation; changes hash_block) → "
        "src/flags.cpp, src/kv_cache_utils.cpp")


def test_a_rename_with_edits_follows_the_rename(world: World) -> None:
    disp, rule, reason = verdict(world, "rename_with_edits")
    assert (disp, rule) == ("PORT-NOW", "symbol-hit")
    assert reason == "vllm/v1/worker/old_runner.py::OldRunner.step → src/new_runner.cpp"
    (p,) = entry(world, "rename_with_edits")["evidence"]["paths"]
    assert (p["status"], p["old_path"], p["new_path"]) == (
        "R", "vllm/v1/worker/old_runner.py", "vllm/v1/worker/new_runner.py")
    moves = _doc(world)["moves"]
    assert {"path": "vllm/v1/worker/old_runner.py", "kind": "renamed",
            "new_path": "vllm/v1/worker/new_runner.py"}.items() <= next(
        m for m in moves if m["kind"] == "renamed").items()


def test_a_syntax_error_falls_back_to_path_level(world: World) -> None:
    disp, rule, reason = verdict(world, "syntax_error")
    assert (disp, rule) == ("PORT-NOW", "path-level")
    assert reason.startswith("vllm/v1/sample/ops/penalties.py (path level: does not parse "
                             "after the commit (line 2:")
    assert reason.endswith("compared as a whole file) → src/penalties.cpp")


def test_a_cuda_file_is_compared_by_lines(world: World) -> None:
    disp, rule, reason = verdict(world, "cu_outside")
    assert (disp, rule) == ("INVENTORY", "not-mirrored")
    assert "not Python (.cu); changed lines 30 lie outside the cited lines 8-12" in reason
    disp, rule, reason = verdict(world, "cu_inside")
    assert (disp, rule) == ("PORT-NOW", "path-level")
    assert reason == (f"{CU} (path level: not Python (.cu); a hunk overlaps the cited lines "
                      "8-12) → src/kernels.cu")


def test_a_line_range_is_read_at_its_older_sha_where_the_lines_moved(world: World) -> None:
    # src/prepare.cpp cites lines of prepare_inputs at the older SHA; at the pin warm_up
    # sits there. The range names what it named when it was written.
    assert verdict(world, "moved_lines_hit") == (
        "PORT-NOW", "symbol-hit", f"{RUNNER}::GPUModelRunner.prepare_inputs → src/prepare.cpp")
    hit = next(c for c in entry(world, "moved_lines_hit")["evidence"]["citations"]
               if c["port_file"] == "src/prepare.cpp")
    assert (hit["how"], hit["read_at"], hit["names"]) == (
        "lines", world.sha("older")[:10], ["GPUModelRunner.prepare_inputs"])
    disp, rule, _reason = verdict(world, "moved_lines_miss")
    assert (disp, rule) == ("INVENTORY", "not-mirrored")


# -- the signals beyond the list ---------------------------------------------------------


def test_a_change_under_a_feature_the_port_file_defers(world: World) -> None:
    disp, rule, reason = verdict(world, "deferred_branch")
    assert (disp, rule) == ("INVENTORY", "deferred-feature")
    assert reason == (
        "changes only under a feature the port file defers: "
        f"{RUNNER}::GPUModelRunner.execute_model → src/runner.cpp; every changed line is "
        "under an if naming 'speculator' (src/runner.cpp:3)")


def test_comment_and_logging_changes_are_ignore_candidates(world: World) -> None:
    disp, rule, reason = verdict(world, "comment_only")
    assert (disp, rule) == ("IGNORE", "non-semantic")
    assert reason == (f"IGNORE candidate: {SCHED}: Scheduler.update_from_output: comments or "
                      "formatting only (src/scheduler.cpp)")
    assert entry(world, "comment_only")["not_ported_code"] is True
    # Logging only, in a definition no citation names: still only an IGNORE candidate.
    disp, rule, reason = verdict(world, "logging_only")
    assert (disp, rule) == ("IGNORE", "non-semantic")
    assert reason == (f"IGNORE candidate: {SCHED}: Scheduler.schedule: logging only "
                      "(src/budget.cpp, src/init_budget.cpp (+2 port files))")
    assert changed(entry(world, "logging_only"), SCHED) == [("Scheduler.schedule",
                                                             "non-semantic")]


def test_a_cited_definition_deleted_upstream(world: World) -> None:
    assert verdict(world, "cited_deleted") == (
        "INVENTORY", "cited-deleted", "cited definitions deleted upstream (re-point the "
        f"citation): {SCHED}::Scheduler.Stats → src/stats.cpp")
    moves = [m for m in _doc(world)["moves"] if m["sha"] == world.sha("cited_deleted")]
    assert moves == [{"path": f"{SCHED}::Scheduler.Stats", "kind": "deleted", "new_path": None,
                      "sha": world.sha("cited_deleted"), "pr": entry(world, "cited_deleted")["pr"],
                      "port_files": ["src/stats.cpp"]}]


def test_a_long_definition_is_compared_by_the_cited_statements(world: World) -> None:
    disp, rule, reason = verdict(world, "huge_other")
    assert (disp, rule) == ("INVENTORY", "other-statements")
    assert "VllmConfig.__post_init__ changes outside the cited statements" in reason
    assert "(a 201-line definition)" in reason
    assert verdict(world, "huge_cited") == (
        "PORT-NOW", "symbol-hit", f"{CFG}::VllmConfig.__post_init__ → src/config.cpp")


def test_a_mention_is_never_port_now(world: World) -> None:
    disp, rule, reason = verdict(world, "mention_only")
    assert (disp, rule) == ("INVENTORY", "mentioned-only")
    assert reason == ("mentioned in a port file's body, not cited: vllm/engine/arg_utils.py: "
                      "mentioned at src/flags.cpp:4; changes EngineArgs (src/flags.cpp)")


def test_the_report_lists_not_ported_code_in_its_own_section(world: World) -> None:
    (md,) = (world.port / ".agents/sync").glob("*.md")
    text = md.read_text()
    section = text.split("## Touches ported files, not ported code\n\n", 1)[1].split("\n## ")[0]
    assert f"`{world.sha('beside')[:10]}`" in section
    assert f"`{world.sha('in_method')[:10]}`" not in section
    port_now = text.split("## PORT-NOW\n\n", 1)[1].split("\n## ")[0]
    assert all(len(line) < 400 for line in port_now.splitlines())


# -- explain ------------------------------------------------------------------------------------


def test_explain_prints_the_whole_derivation(world: World) -> None:
    rc, out, err = run(world.port, "explain", world.sha("in_method")[:8])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == (f"{world.sha('in_method')[:10]} vllm#100 [Core] Skip aborted requests in "
                        "update_from_output (#100)")
    assert "decision: none recorded" in lines
    assert "rules: none configured" in lines
    assert f"  {SCHED}  [cited]" in lines
    assert ("    hunk @@ -21,7 +21,7 @@ changes old 24, new 24 → Scheduler.update_from_output"
            in lines)
    assert ("      Scheduler.update_from_output [function] modified (old 21-26, new 21-26)"
            in lines)
    assert (f"      src/scheduler.cpp:1 (header): {SCHED}::Scheduler.update_from_output @ "
            f"{world.sha('pin')[:10]}, read at {world.sha('pin')[:10]}; names "
            "Scheduler.update_from_output") in lines
    assert "        → hit: Scheduler.update_from_output is cited" in lines
    assert lines[-2] == (f"result: PORT-NOW: {SCHED}::Scheduler.update_from_output → "
                         "src/scheduler.cpp (auto: symbol-hit)")
    # One git log for the range, one patch listing, one blob read.
    assert lines[-1] == "git processes: 4"


def test_explain_by_pr_and_json(world: World) -> None:
    rc, out, err = run(world.port, "explain", "#101", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["sha"] == world.sha("beside") and doc["rules"] == []
    assert doc["entry"]["rule"] == "not-mirrored"
    assert [c["outcome"] for c in doc["entry"]["evidence"]["citations"]] == ["miss"] * 4
    rc, _out, err = run(world.port, "explain", "#9999")
    assert rc == 2 and "PR #9999 is not in the cycle's range — pick an entry from" in err


def test_explain_names_a_path_port_files_only_mention_as_mentioned_only(world: World) -> None:
    """Real case (explain bed5454eca, vllm/engine/arg_utils.py): a changed path port files only
    mention (`See vllm/engine/arg_utils.py`) was listed as `[cited]`, and in `cited_paths`,
    though queue names it "mentioned only"; explain says it the same way, text and --json."""
    arg_utils = "vllm/engine/arg_utils.py"
    rc, out, err = run(world.port, "explain", world.sha("mention_only")[:10])
    assert rc == 0, err
    assert f"  {arg_utils}  [mentioned only]" in out.splitlines()
    assert f"  {arg_utils}  [cited]" not in out.splitlines()
    rc, out, err = run(world.port, "explain", world.sha("mention_only")[:10], "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["cited_paths"], doc["mentioned_paths"]) == ([], [arg_utils])
    doc = json.loads(run(world.port, "explain", world.sha("in_method")[:8], "--json")[1])
    assert (doc["cited_paths"], doc["mentioned_paths"]) == ([SCHED], [])


def test_git_processes_per_sync_do_not_depend_on_the_range(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_CACHE_DIR", "off")  # a cached commit needs no git at all
    # Each run as a fresh process has it: what git said of full SHAs in earlier runs of this
    # test process (gitio's memo of immutable answers) is not known to a command.
    gitio._KNOWN.clear()
    before = gitio.PROCESS_COUNT
    rc, _out, err = run(world.port, "sync")
    assert rc == 0, err
    many = gitio.PROCESS_COUNT - before
    p = locate(str(world.port))
    (p.sync_dir / "cycle.toml").unlink()
    gitio._KNOWN.clear()
    before = gitio.PROCESS_COUNT
    rc, _out, err = run(world.port, "sync", "--target", world.sha("in_method"))
    assert rc == 0, err
    assert gitio.PROCESS_COUNT - before == many
    assert cycle.load(locate(str(world.port))) is not None


def test_a_basename_citation_resolves_to_the_full_path_of_its_header() -> None:
    full = Citation("vllm/v1/core/sched/scheduler.py", None, None, "abc1234", None, None, 1)
    bare = Citation("scheduler.py", None, "Scheduler.schedule", None, None, None, 2)
    other = Citation("elsewhere.py", None, "f", None, None, None, 3)
    header = Header("PORTED", (full, bare, other), "Ported from", 1, 3)
    assert surface._resolved(bare, header) == "vllm/v1/core/sched/scheduler.py"
    assert surface._resolved(other, header) == "elsewhere.py"  # no full path to join


# -- the ast mapping alone ------------------------------------------------------------------------


def _diff(old: str, new: str, ctx: symbols.Context | None = None) -> list[symbols.UnitChange]:
    import difflib

    a, b = old.splitlines(), new.splitlines()
    deleted: list[int] = []
    added: list[int] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
        if tag != "equal":
            deleted += range(i1 + 1, i2 + 1)
            added += range(j1 + 1, j2 + 1)
    return symbols.changes(symbols.outline(old.encode()), symbols.outline(new.encode()),
                           deleted, added, ctx)


def test_units_name_nested_definitions_and_module_statements() -> None:
    src = ("import os\n\n_MODELS = {\n    'a': 1,\n}\nX, Y = 1, 2\n\nif TYPE_CHECKING:\n"
           "    import typing\n\n\nclass A:\n    @property\n    def m(self):\n"
           "        def inner():\n            return 1\n        return inner()\n\n"
           "    class B:\n        z = 1\n")
    o = symbols.outline(src.encode())
    assert [u.name for u in o.units] == ["<imports>", "_MODELS", "X, Y", "<if TYPE_CHECKING>",
                                         "A", "A.m", "A.m.inner", "A.B"]
    names = [u.name if u else None for u in (o.at(13), o.at(16), o.at(20), o.at(2))]
    assert names == ["A.m", "A.m.inner", "A.B", None]  # 13: the decorator; 2: a blank line
    assert o.find("inner") == ("A.m.inner",) and o.find("A::m") == ("A.m",)


@pytest.mark.parametrize(("old", "new", "want"), [
    ("def f(x):\n    return x\n", "def f(x):\n    # why\n    return x\n",
     ("non-semantic", "comments or formatting only")),
    ('def f(x):\n    """A."""\n    return x\n', 'def f(x: int) -> int:\n    """B."""\n'
     "    return x\n", ("non-semantic", "docstrings or annotations only")),
    ("def f(x):\n    logger.info('a')\n    return x\n",
     "def f(x):\n    logger.warning_once('b')\n    return x\n", ("non-semantic", "logging only")),
    # walk-s12 W8: an assert the annotation now states; asserts are what `python -O` drops.
    ("def f(s: A):\n    assert isinstance(s, B)\n    return s.n\n",
     "def f(s: B):\n    return s.n\n", ("non-semantic", "assertions only")),
    ("def f(x):\n    return x\n", "def f(x):\n    assert x > 0, 'x'\n    logger.info('x')\n"
     "    return x\n", ("non-semantic", "logging and assertions only")),
    # ... but a check that raises is behaviour, and so is what an assert's neighbour does.
    ("def f(x):\n    assert x\n    return x\n",
     "def f(x):\n    if not x:\n        raise ValueError\n    return x\n", ("modified", "")),
    ("def f(x):\n    assert x\n    return x\n", "def f(x):\n    return x + 1\n",
     ("modified", "")),
    ("def f(x):\n    y = g(x)\n    return y\n", "def f(x):\n    z = g(x)\n    return z\n",
     ("non-semantic", "renames only: y→z")),
    ("def f(x):\n    return x\n", "def f(x):\n    return -x\n", ("modified", "")),
    # A call of something else, a different attribute: not renamings.
    ("def f(x):\n    return tuple(x)\n", "def f(x):\n    return list(x)\n", ("modified", "")),
    ("def f(r):\n    return r.token\n", "def f(r):\n    return r.prompt\n", ("modified", "")),
    # Imports under TYPE_CHECKING are for the type checker only.
    ("if TYPE_CHECKING:\n    from a import B\n", "if TYPE_CHECKING:\n    from a import C\n",
     ("non-semantic", "typing-only imports (TYPE_CHECKING)")),
    ("class K:\n    a = 1\n", "class K:\n    a = 1\n    b = 2\n", ("extended", "adds K.b")),
    ("T = Literal['a', 'b']\n", "T = Literal['a', 'b', 'c']\n",
     ("extended", "adds rows 'c'")),
    ("class K:\n    a = 1\n", "class K(Base):\n    a = 1\n    b = 2\n", ("modified", "")),
])
def test_how_a_unit_changed(old: str, new: str, want: tuple[str, str]) -> None:
    (u,) = _diff(old, new)
    assert (u.change, u.detail) == want


def test_a_test_modules_asserts_are_what_it_checks() -> None:
    """walk-s12 W8's fix is for runtime code: in a test module an assert is the check."""
    old, new = "def test_f():\n    assert f() == 1\n", "def test_f():\n    assert f() == 2\n"
    (u,) = _diff(old, new, symbols.Context(tests=True))
    assert (u.change, u.detail) == ("modified", "")
    (u,) = _diff(old, new)
    assert (u.change, u.detail) == ("non-semantic", "assertions only")
    logs = "def test_f():\n    logger.info('a')\n    assert f()\n"
    (u,) = _diff(logs, logs.replace("'a'", "'b'"), symbols.Context(tests=True))
    assert (u.change, u.detail) == ("non-semantic", "logging only")


@pytest.mark.parametrize(("path", "test"), [
    ("tests/v1/test_x.py", True), ("vllm/x/tests/helpers.py", True), ("test_x.py", True),
    ("vllm/x_test.py", True), ("tests/conftest.py", True), ("vllm/testing.py", False),
    ("vllm/v1/attention/backends/gdn_attn.py", False), ("vllm/contest_test/x.py", False)])
def test_which_modules_are_tests(path: str, test: bool) -> None:
    assert evidence._test_module(path) is test


def test_a_definition_renamed_in_the_commit_renames_its_callers() -> None:
    old = "def _params(t):\n    return t\n\n\ndef tags(t):\n    return _params(t)\n"
    new = "def params(t):\n    return t\n\n\ndef tags(t):\n    return params(t)\n"
    changes = {u.name: (u.change, u.detail) for u in _diff(old, new)}
    # The definition itself, its body unchanged, is renamed too (walk-s3 D6): no removal
    # and addition, which a whole-file citation would read as a change to port.
    assert changes == {"_params": ("non-semantic", "renamed to params"),
                       "params": ("non-semantic", "renamed from _params"),
                       "tags": ("non-semantic", "renames only: _params→params")}


def test_a_renamed_definition_whose_callers_still_name_it_is_a_change() -> None:
    """A caller left naming the old definition (or a body that changed with the name) is
    no renaming: the old name is removed, the new one added."""
    old = "def _params(t):\n    return t\n\n\ndef tags(t):\n    return _params(t)\n"
    kept = old.replace("def _params(t):", "def params(t):")
    assert {u.name: u.change for u in _diff(old, kept)} == {"_params": "removed",
                                                            "params": "added"}
    body = "def params(t):\n    return t + 1\n\n\ndef tags(t):\n    return params(t)\n"
    assert {u.name: u.change for u in _diff(old, body)}["params"] == "added"


def test_guards_name_the_if_tests_over_a_changed_line() -> None:
    old = "def f(self):\n    if self.impl.is_sparse:\n        a = 1\n    else:\n        a = 2\n"
    sparse = _diff(old, old.replace("a = 1", "a = 3"))[0]
    assert {"is_sparse", "sparse", "impl", "self"} <= sparse.guards[0]
    # The else branch is not under the test.
    other = _diff(old, old.replace("a = 2", "a = 3"))[0]
    assert all("sparse" not in g for g in other.guards)


def test_an_unparseable_blob_says_where() -> None:
    with pytest.raises(symbols.ParseFailure, match="line 1"):
        symbols.outline(b"def f(:\n")
    with pytest.raises(symbols.ParseFailure):
        symbols.outline(b"x = 1\x00\n")


def test_blank_line_changes_change_no_definition(tmp_path: Path) -> None:
    assert _diff("a = 1\nb = 2\n", "a = 1\n\nb = 2\n") == []


_EVERY_BLOCK = '''
import os
if os.name:
    def in_if(): pass
else:
    class InElse:
        def method(self):
            def inner(): pass
for x in []:
    def in_for(): pass
else:
    def in_for_else(): pass
while False:
    async def in_while(): pass
else:
    def in_while_else(): pass
try:
    def in_try(): pass
except OSError:
    def in_handler(): pass
else:
    def in_try_else(): pass
finally:
    def in_finally(): pass
with open(os.devnull) as f:
    def in_with(): pass
match x:
    case 1:
        def in_case(): pass
    case _:
        class InCase:
            x = lambda: 0
@decorated(lambda: 0)
class Outer:
    class Nested:
        async def deep(self):
            async with x:
                async for y in x:
                    def deepest(): pass
'''
_EVERY_BLOCK += "try:\n    def in_try_star(): pass\nexcept* OSError:\n    def in_star(): pass\n"


def _reference_nested(node: ast.AST, prefix: str) -> Iterator[str]:
    """The definitions under `node`'s statements, by every child node (the definition)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, symbols._DEFS):
            yield prefix + child.name
            yield from _reference_nested(child, prefix + child.name + ".")
        elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
            yield from _reference_nested(child, prefix)


@pytest.mark.parametrize("source", [
    _EVERY_BLOCK, *(inspect.getsource(m) for m in (ast, argparse, dataclasses, symbols))],
    ids=["every-block", "ast", "argparse", "dataclasses", "symbols"])
def test_the_definition_walk_visits_only_blocks_and_keeps_their_order(source: str) -> None:
    # The walk reads only statement lists (a definition is never inside an expression).
    tree = ast.parse(source)
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    for stmt in stmts:
        assert [u.name for u in symbols._nested_defs(stmt, "")] == list(
            _reference_nested(stmt, ""))
    names = [u.name for u in symbols.outline(source.encode()).units]
    if source is _EVERY_BLOCK:
        assert {"in_star", "InCase", "Outer.Nested.deep.deepest", "InElse.method.inner",
                "in_finally", "in_while_else"} <= set(names)


def test_a_citation_of_several_symbols_reads_as_a_list_not_a_nested_name() -> None:
    def cite(symbols: tuple[str, ...] = (), lines: str | None = None,
             sha: str | None = None) -> surface.Cite:
        return surface.Cite("src/a.cpp", "vllm/x.py", 3, symbols, lines, sha)

    assert cite(("A.f", "B")).anchor() == "vllm/x.py (A.f, B)"
    assert cite(("A.f",), sha="abc1234").anchor() == "vllm/x.py::A.f @ abc1234"
    assert cite(lines="10-20").anchor() == "vllm/x.py:10-20"
    assert cite().anchor() == "vllm/x.py (whole file)"
