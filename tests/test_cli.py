"""The one error boundary: `cli.main(argv) -> int`."""

from __future__ import annotations

import argparse
import gc
import io
import subprocess
import sys
import types
from pathlib import Path

import pytest

from sync import cli, launch
from sync.cli.context import Context
from sync.infra.errors import MalformedRecord, SyncError

ROOT = Path(__file__).resolve().parents[1]


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def boom(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command `boom KIND` that raises what it is told to, to exercise the boundary."""

    def run(args: argparse.Namespace, ctx: Context) -> int:
        if args.kind == "sync":
            raise MalformedRecord("bad\nthing", "fix\tit", path="a.md", line=3)
        if args.kind == "base":
            raise SyncError("plain failure")
        if args.kind == "crash":
            raise ValueError("no such\nthing")
        if args.kind == "interrupt":
            raise KeyboardInterrupt
        print("ok", file=ctx.out)
        return 0

    def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        p = sub.add_parser("boom")
        p.add_argument("kind")
        p.set_defaults(func=run)

    module = types.ModuleType("sync._boom")
    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sync._boom", module)
    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "sync._boom"))


def test_unknown_subcommand() -> None:
    code, out, err = call(["frobnicate"])
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith("upstream-sync: error: argument COMMAND: invalid choice: 'frobnicate'")
    assert line.endswith("— see 'upstream-sync --help'")


def test_unknown_option_and_missing_argument() -> None:
    code, _, err = call(["--colour", "status"])
    assert code == 2
    assert "unrecognized arguments: --colour" in one_error_line(err)
    code, _, err = call(["decide"])
    assert code == 2
    assert one_error_line(err).startswith("upstream-sync: error: the following arguments are "
                                          "required")
    # An unknown option of a command points at that command's help, as a missing value does.
    code, _, err = call(["sync", "--jsno"])
    assert code == 2 and one_error_line(err).endswith(
        "unrecognized arguments: --jsno — see 'upstream-sync sync --help'")


def test_no_command_prints_help() -> None:
    code, out, err = call([])
    assert code == 2 and err == ""
    assert out.startswith("usage: upstream-sync")
    for name in ("init", "status", "fetch", "sync", "decide", "check"):
        assert name in out


def test_help_exits_through_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse prints --help itself and raises SystemExit(0); main lets it through on purpose
    # (entry() would sys.exit anyway), so the console script exits 0 with the help on stdout.
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: upstream-sync")


def test_help_from_the_console_entry() -> None:
    proc = subprocess.run([sys.executable, "-m", "sync", "status", "--help"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: upstream-sync status")


def test_the_console_entry_runs_its_command_without_the_cyclic_collector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A command's objects live until the process ends; full collections only walked them.
    seen: list[bool] = []

    def command(argv: list[str] | None = None) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(cli, "main", command)
    monkeypatch.setattr(sys, "argv", ["upstream-sync", "explain"])
    try:
        with pytest.raises(SystemExit) as exc:
            launch.entry()
    finally:
        gc.enable()
    assert exc.value.code == 0 and seen == [False]


def test_sync_error_exit_code_and_one_line(boom: None) -> None:
    code, out, err = call(["boom", "sync"])
    assert (code, out) == (4, "")
    assert one_error_line(err) == "upstream-sync: error: a.md:3: bad thing — fix it"
    code, _, err = call(["boom", "base"])
    assert code == 1
    assert one_error_line(err) == "upstream-sync: error: plain failure"
    assert call(["boom", "fine"]) == (0, "ok\n", "")


def test_debug_shows_the_traceback(boom: None) -> None:
    code, _, err = call(["--debug", "boom", "sync"])
    assert code == 4
    assert err.startswith("Traceback (most recent call last):")
    assert "sync.infra.errors.MalformedRecord" in err
    assert err.splitlines()[-1] == "upstream-sync: error: a.md:3: bad thing — fix it"
    code, _, err = call(["boom", "sync", "--debug"])  # accepted after the subcommand too
    assert code == 4 and err.startswith("Traceback")


def test_unexpected_exception_is_an_internal_error(boom: None) -> None:
    code, out, err = call(["boom", "crash"])
    assert (code, out) == (1, "")
    assert one_error_line(err) == ("upstream-sync: internal error: ValueError: no such thing — "
                                   "rerun with --debug and report it")
    code, _, err = call(["--debug", "boom", "crash"])
    assert code == 1
    assert "Traceback" in err and "ValueError" in err
    assert err.splitlines()[-1].startswith("upstream-sync: internal error: ValueError")


def test_keyboard_interrupt(boom: None) -> None:
    assert call(["boom", "interrupt"]) == (130, "", "upstream-sync: interrupted — no record was "
                                           "left half written; run the command again\n")


def test_real_usage_error(tmp: Path) -> None:
    code, _, err = call(["--port", str(tmp / "nowhere"), "status"])
    assert code == 2
    assert one_error_line(err) == (f"upstream-sync: error: port {tmp / 'nowhere'} is not a "
                                   "directory — pass --port DIR or set SYNC_PORT")
    code, _, err = call(["--port", str(tmp), "status"])
    assert code == 2
    assert "has no .agents/upstream-sync.md" in one_error_line(err)


def minimal_port(tmp: Path) -> Path:
    (tmp / ".agents").mkdir()
    (tmp / ".agents/upstream-sync.md").write_text(
        "# Protocol\n\n```parity-pin\nvllm_commit = " + "5" * 40 + "\n```\n")
    return tmp


def test_real_environment_error(tmp: Path) -> None:
    port = minimal_port(tmp)
    code, _, err = call(["--port", str(port), "fetch"])
    assert code == 3
    line = one_error_line(err)
    assert line.startswith("upstream-sync: error: reference_checkout is not set")
    assert "set VLLM_SOURCE" in line


def test_real_malformed_record(tmp: Path) -> None:
    port = minimal_port(tmp)
    (port / ".agents/sync").mkdir()
    (port / ".agents/sync/cycle.toml").write_text("schema = [\n")
    code, _, err = call(["--port", str(port), "decide", "abcdef12", "IGNORE", "docs"])
    assert code == 4
    assert one_error_line(err).startswith(
        "upstream-sync: error: .agents/sync/cycle.toml: not valid TOML")


def test_real_config_error(tmp: Path) -> None:
    port = minimal_port(tmp)
    (port / ".agents/upstream-sync.toml").write_text("[paths]\nledger = '../ledger.md'\n")
    code, _, err = call(["--port", str(port), "status"])
    assert code == 2
    assert one_error_line(err) == (
        "upstream-sync: error: paths.ledger = '../ledger.md' escapes the port — use a path "
        "relative to the port root in .agents/upstream-sync.toml")


def test_a_command_imports_only_the_steps_it_runs(tmp_path: Path) -> None:
    """`status` loads the status step, not every command's steps (start-up stays light)."""
    script = ("import sys\nfrom sync import cli\n"
              "cli.main(['--port', sys.argv[1], 'status'])\n"
              "print(' '.join(sorted(m for m in sys.modules if m.startswith('sync.steps'))))\n")
    (tmp_path / ".agents").mkdir()
    (tmp_path / ".agents/upstream-sync.md").write_text("no pin block here\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, check=True, cwd=tmp_path)
    # status shows the oracle's build mode and record: verify.oracle, which imports no step;
    # and the advance's blockers that need no measurement, not the advance itself.
    assert proc.stdout.split() == ["sync.steps", "sync.steps.advance",
                                   "sync.steps.advance.blockers", "sync.steps.status",
                                   "sync.steps.verify", "sync.steps.verify.oracle"]


def test_every_command_registers_the_name_it_is_listed_under() -> None:
    for module in cli.COMMAND_MODULES:
        parser = cli.build_parser([cli.command_name(module)])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        chosen = sub.choices[cli.command_name(module)]
        registered = chosen.get_default("func") is not None or any(
            isinstance(a, argparse._SubParsersAction) for a in chosen._actions)
        assert registered, module


def _parsers(parser: argparse.ArgumentParser, name: str
             ) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, child in action.choices.items():
                found += _parsers(child, f"{name} {word}")
    return found


def test_every_argument_of_every_command_is_explained() -> None:
    # A newcomer reads --help: each command says what it does, and each option and
    # positional says what it takes (a bare `{PORT-NOW,...}` or `--tier {T0,...}` does not).
    bare = []
    for name, parser in _parsers(cli.build_parser(), "upstream-sync"):
        if not parser.description:
            bare.append(f"{name}: no description")
        bare += [f"{name}: {a.option_strings or a.dest} has no help" for a in parser._actions
                 if a.help is None
                 and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    assert bare == []
