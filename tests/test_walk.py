"""The whole multi-cycle walk on the bundled example: carry-over is a record across cycles.

Cycle 1 syncs to the release tag v0.24.0 (on `origin/releases/v0.24.0`, off main), ports
and ledgers most PORT-NOW items, carries two over by decision, leaves one INVENTORY item
unannotated, passes the gates and advances with `--commit`: a fresh clone of that commit
passes `check` and holds the evidence. Cycle 2 (tag v0.25.0rc1 on main) imports the
carried items, ports one of them, is refused (exit 6, nothing stalled) and is stalled
explicitly. Cycle 3 (origin/main, a retarget) imports the rest; each carried item shows in
every later report and queue until a ledger row or an annotation closes it.
"""

from __future__ import annotations

import io
import json
import re
import socket
from pathlib import Path

import pytest

from sync import cli
from sync.dev import example
from sync.dev.fastimport import git

REPO = Path(__file__).resolve().parents[1]
ME = ("-c", "user.name=Port Dev", "-c", "user.email=port@example.invalid")
STALE = (" The advance re-validated the T0 goldens with zero drift (Qwen3-0.6B greedy and top-p "
         "traces bit-identical).")
PORTED_1 = {37766: "src/vllm/config/cache.h", 37857: "src/vllm/entrypoints/openai/protocol.h",
            38035: "src/vllm/sampling_params.h", 38292: "src/vllm/v1/sample/sampler.cpp",
            40422: "src/vllm/model_executor/layers/layernorm.cpp"}


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def ok(*argv: str) -> str:
    rc, out, err = call(*argv)
    assert rc == 0, f"{argv}: exit {rc}\n{out}\n{err}"
    return out


def doc(*argv: str) -> dict[str, object]:
    got = json.loads(ok(*argv, "--json"))
    assert isinstance(got, dict)
    return got


def port_commit(port: Path, rel: str, message: str) -> str:
    git(port, "add", "--", rel)
    git(port, *ME, "commit", "-q", "-m", message, "--", rel)
    return git(port, "rev-parse", "HEAD").strip()


def port_pr(port: Path, rel: str, pr: int, status: str = "✅", *, bump: bool = False) -> None:
    """Port vllm#`pr` into `rel` as a maintainer does: edit, (bump the header,) commit, and
    add its ledger row."""
    with (port / rel).open("a") as fh:
        fh.write(f"// ported vllm#{pr}\n")
    if bump:
        ok("bump-headers", rel)
    sha = port_commit(port, rel, f"Port vllm#{pr}")
    ok("ledger", "add", "--commit", sha[:10], "--what", f"Port vllm#{pr}", "--pr", str(pr),
       "--status", status)


def carry_section(report: Path) -> list[str]:
    text = report.read_text(encoding="utf-8")
    section = text.split("## Carry-over", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def mentions(lines: list[str], sha: str) -> list[str]:
    return [line for line in lines if f"`{sha[:10]}`" in line]


def queue_shas(port: Path) -> dict[str, str | None]:
    q = json.loads(ok("queue", "--json"))
    return {i["sha"]: i["carried_since"] for i in q["items"]}


@pytest.fixture
def walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Port Dev\n\temail = port@example.invalid\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("VLLM_SOURCE", "SYNC_FETCH_REMOTE", "SYNC_BRANCH", "SYNC_ORACLE_HOME"):
        monkeypatch.delenv(var, raising=False)
    ex = tmp_path / "ex"
    example.build(ex, REPO / "examples")
    monkeypatch.setenv("SYNC_PORT", str(ex / "port"))
    monkeypatch.setenv("SYNC_GATE_HOSTS", socket.gethostname())
    return ex


def _cycle_1(ex: Path) -> tuple[Path, dict[int, str]]:
    port = ex / "port"
    ok("fetch", "--target", "v0.24.0")
    rep = doc("sync")
    assert rep["target_from"] == ("tag `v0.24.0` on `origin/releases/v0.24.0` (not on "
                                  "`origin/main`)")
    by_pr = {e["pr"]: e["sha"] for e in rep["entries"]}  # type: ignore[attr-defined]
    ok("decide", "#37215", "PORT-NOW", "carry-over: the scheduler rework lands next cycle")
    ok("decide", "#37580", "PORT-NOW", "carry-over: needs the new block pool first")
    for pr, rel in PORTED_1.items():
        # The target is a release tag: bumping the header to it is valid for every step.
        port_pr(port, rel, pr, "✅ goldens", bump=True)
    ok("inventory", "annotate", "--pr", "38122", "--tier", "T2")
    ok("inventory", "annotate", "--pr", "38200", "--tier", "T2")
    ok("oracle", "build", "--commit", "target")
    ok("golden")
    ok("parity")
    # The paragraph claims zero drift; the golden gate compared nothing (a new case): reword it.
    rc, out, _ = call("advance", "--json")
    assert rc == 6 and "'zero drift' (the golden gate measured nothing to compare" in out
    assert not (port / ".agents/sync/events").exists()  # refused, not stalled
    protocol = port / ".agents/upstream-sync.md"
    protocol.write_text(protocol.read_text().replace(STALE, ""))
    advanced = doc("advance", "--commit")
    assert advanced["reference"] == "checked out (detached)"
    return Path(str(advanced["report"])), by_pr


def test_carried_items_show_in_every_later_report_and_queue_until_closed(
        walk: Path, tmp_path: Path) -> None:
    port = walk / "port"
    report_1, by_pr = _cycle_1(walk)
    carried = {pr: by_pr[pr] for pr in (37215, 37580, 37404)}
    record = (port / ".agents/sync/carry-over.toml").read_text()
    assert all(sha in record for sha in carried.values())

    # The sync commit carries its evidence: a fresh clone passes check and has it all.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(port), str(clone))
    names = set(git(clone, "show", "--format=", "--name-only", "HEAD").split())
    assert {".agents/parity-ledger.md", ".agents/porting-inventory.md",
            ".agents/sync/decisions.toml", ".agents/sync/carry-over.toml",
            ".agents/sync/cycle.toml", f".agents/sync/gates/{by_pr[40770][:7]}.json",
            ".agents/sync/events/0001-advance.toml", str(report_1),
            "goldens/sampler/manifest.json"} <= names
    rc, out, err = call("--port", str(clone), "check")
    assert rc == 0, out + err
    paragraph = next(line for line in (clone / ".agents/upstream-sync.md").read_text()
                     .splitlines() if line.startswith("Active pin"))
    assert "(vLLM 0.24.0" in paragraph and "FLIPPED from the prior 147b89ac/0.24.0.dev0 pin" \
        in paragraph and "measured nothing to compare: 1 new case (sampler)" in paragraph

    # -- cycle 2: a tag on main (divergent from the release pin); it stalls.
    ok("sync", "--target", "v0.25.0rc1", "--allow-divergent")
    report_2 = port / str(doc("status")["cycle"]["report"])  # type: ignore[index]
    lines = carry_section(report_2)
    for sha in carried.values():
        (line,) = mentions(lines, sha)
        assert line.startswith("- carried ") and f"since {Path(report_1).name}" in line
    assert {s for s in queue_shas(port)} >= {carried[37215], carried[37580]}
    port_pr(port, "src/vllm/v1/core/kv_cache_manager.cpp", 37580)
    ok("sync")
    lines = carry_section(report_2)
    assert mentions(lines, carried[37580]) == []  # ported: closed
    assert len(mentions(lines, carried[37215])) == 1 and len(mentions(lines, carried[37404])) == 1
    assert carried[37580] not in queue_shas(port)
    rc, _, _ = call("advance")
    assert rc == 6 and [p.name for p in (port / ".agents/sync/events").iterdir()] == [
        "0001-advance.toml"]
    ok("advance", "--stall", "--commit")
    ok("advance", "--stall")
    assert sorted(p.name for p in (port / ".agents/sync/events").iterdir()) == [
        "0001-advance.toml", "0002-stall.toml"]
    # A stalled report lists each unported commit once: as its unmet line.
    stalled_open = re.findall(r"^- unmet: PORT-NOW `([0-9a-f]{10})`",
                              report_2.read_text(), re.MULTILINE)
    assert stalled_open

    # -- cycle 3: the one after, a retarget to origin/main.
    rc, _, err = call("sync", "--target", "origin/main")
    assert rc == 2 and "pass --retarget" in err
    ok("sync", "--target", "origin/main", "--retarget", "--allow-divergent")
    report_3 = port / str(doc("status")["cycle"]["report"])  # type: ignore[index]
    assert "- Cycle state: STALLED" in report_2.read_text()
    lines = carry_section(report_3)
    for short in stalled_open:  # the stalled cycle's open items: in range, each once
        (line,) = mentions(lines, short)
        assert f"carried since {report_2.name}" in line
    tip = str(doc("status")["cycle"]["target"])  # type: ignore[index]
    (line,) = mentions(lines, carried[37215])  # cycle 1's: outside the range, each once
    assert line.startswith("- carried PORT-NOW: ") and f"up to `{tip[:10]}`" in line
    (line,) = mentions(lines, carried[37404])
    assert line.startswith("- carried INVENTORY: ")
    queue = queue_shas(port)
    assert queue[carried[37215]] == Path(report_1).name
    # Close the last two: an annotation and a ledger row.
    ok("inventory", "annotate", "--pr", "37404", "--tier", "T1")
    port_pr(port, "src/vllm/v1/core/sched/scheduler.cpp", 37215)
    ok("sync")
    lines = carry_section(report_3)
    assert not any(line.startswith("- carried ") for line in lines)
    assert all(mentions(lines, sha) == [] for sha in carried.values())
    assert not set(carried.values()) & set(queue_shas(port))
