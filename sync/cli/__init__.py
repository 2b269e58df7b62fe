"""The command line: argparse subcommands and the one error boundary."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from sync import __version__
from sync.cli.context import Context
from sync.infra import memo
from sync.infra.errors import SyncError, UsageError
from sync.upstream import gitio

# Each module under sync.cli.commands defines `register(subparsers)`, which adds the parser of
# the command named after it and sets `func=run(args, ctx) -> int`. Listed in cycle order:
# this is `--help`'s order. Only the command being run is imported (with the steps it runs);
# the others stand in as bare names so a typo still lists every command.
COMMANDS = (
    "init", "status", "fetch", "sync", "explain", "decide",
    "queue", "bump_headers", "ledger", "inventory", "audit",
    "oracle", "golden", "parity", "gates",
    "advance", "rollback", "advance_omni",
    "check", "check_commit",
)
COMMAND_MODULES = tuple(f"sync.cli.commands.{name}" for name in COMMANDS)


class _Parser(argparse.ArgumentParser):
    chosen: str | None = None  # the top parser's command word: its unknown options are that
    # command's (argparse reports them from the top, after every parser has parsed)

    def error(self, message: str) -> Any:  # argparse's own exit would bypass our boundary
        for action in self._actions:
            # A missing sub-action ("ledger" alone) says which actions there are.
            if (isinstance(action, argparse._SubParsersAction)
                    and message == f"the following arguments are required: {action.metavar}"):
                names = list(action.choices)
                listed = names[0] if len(names) == 1 else (
                    ", ".join(names[:-1]) + " or " + names[-1])
                message = f"{self.prog.split()[-1]} needs an action: {listed}"
        prog = self.prog
        if self.chosen and message.startswith("unrecognized arguments"):
            prog = f"{prog} {self.chosen}"
        raise UsageError(message, f"see '{prog} --help'")


def command_name(module: str) -> str:
    """The command a module registers: `sync.cli.commands.bump_headers` -> `bump-headers`."""
    return module.rsplit(".", 1)[-1].lstrip("_").replace("_", "-")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv`, with only its command's module imported and registered."""
    chosen = None if argv is None else memo.command_word(argv)
    if chosen not in {command_name(m) for m in COMMAND_MODULES}:
        chosen = None  # no command, or an unknown one: every command, for help and errors
    parser = _Parser(
        prog="upstream-sync",
        description="Automate the upstream sync cycle of a hand port "
        "(fetch, enumerate, classify, report, port, re-verify, advance).",
    )
    parser.chosen = chosen
    parser.add_argument("--port", help="the port's root (default: $SYNC_PORT, then the "
                        "current directory; inside this repository, the bundled example)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        if chosen is None or command_name(name) == chosen:
            importlib.import_module(name).register(sub)
        else:
            sub.add_parser(command_name(name))
    _share_globals(sub)
    return parser


def _share_globals(sub: argparse._SubParsersAction[Any]) -> None:
    """Accept --port/--debug after the subcommand too (`nox -s sync -- --port DIR`)."""
    for child in set(sub.choices.values()):
        child.add_argument("--port", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                           help=argparse.SUPPRESS)
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                _share_globals(action)


def main(argv: list[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run one command; every error ends here, as one line on stderr and its exit code.

    Under `--json` stdout holds exactly one JSON document whatever happens: the command's
    own, or (on a refusal) that document with `ok: false`, the error, its fix and the
    exit code merged in (`refusal_doc`), or the refusal alone when the command set none.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    words = sys.argv[1:] if argv is None else argv
    debug = "--debug" in words
    wants_json = "--json" in words
    gitio.scrub_environ()
    ctx: Context | None = None
    try:
        parser = build_parser(words)
        args = parser.parse_args(words)
        if not getattr(args, "func", None):
            parser.print_help(err if wants_json else out)
            return _refused(out, None, UsageError("no command given",
                                                  f"see '{parser.prog} --help'"), wants_json)
        ctx = Context(port_arg=args.port, json=getattr(args, "json", False), debug=args.debug,
                      out=out, err=err)
        func: Callable[[argparse.Namespace, Context], int] = args.func
        code = func(args, ctx)
        if wants_json:
            _print_doc(out, _success_doc(ctx.document, code))
        return code
    except SyncError as exc:
        if debug:
            traceback.print_exc(file=err)
        print(f"upstream-sync: error: {exc}", file=err)
        return _refused(out, ctx, exc, wants_json)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours, and nothing left to say.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except KeyboardInterrupt:
        # Every record is written whole or not at all (infra/atomic), and an interrupted
        # advance is finished by the next command: say so, a maintainer wonders.
        print("upstream-sync: interrupted — no record was left half written; run the command "
              "again", file=err)
        return _refused(out, ctx, SyncError("interrupted", "run the command again"),
                        wants_json, code=130)
    except Exception as exc:
        if debug:
            traceback.print_exc(file=err)
        internal = SyncError(f"internal error: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())}", "rerun with --debug and report it")
        print(f"upstream-sync: {internal}", file=err)
        return _refused(out, ctx, internal, wants_json)


def _success_doc(doc: dict[str, Any] | None, code: int) -> dict[str, Any]:
    """The command's document with `ok` (true when it exited 0) unless it says it itself:
    every document answers `ok`, a refusal's too."""
    if doc is None:
        return {"ok": code == 0}
    return doc if "ok" in doc else {**doc, "ok": code == 0}


def refusal_doc(doc: Any, exc: SyncError, code: int) -> dict[str, Any]:
    """The one document of a refused `--json` run: the command's own (if it set one) with
    `ok: false`, the exit code and the error (kind, message, fix) merged in."""
    base: dict[str, Any] = dict(doc) if isinstance(doc, dict) else {}
    return {**base, "ok": False, "exit_code": code,
            "error": {"kind": type(exc).__name__, "message": exc.message, "fix": exc.fix,
                      "text": str(exc), "exit_code": code}}


def _refused(out: TextIO, ctx: Context | None, exc: SyncError, wants_json: bool,
             code: int | None = None) -> int:
    rc = exc.exit_code if code is None else code
    if wants_json:
        _print_doc(out, refusal_doc(ctx.document if ctx is not None else None, exc, rc))
    return rc


def _print_doc(out: TextIO, doc: Any) -> None:
    from sync.steps.report import dump_json

    out.write(dump_json(doc))
    out.flush()


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    from sync.launch import entry

    entry()
