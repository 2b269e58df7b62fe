"""The one runner for processes other than git: oracle builds and probes, golden
scripts, parity suites, the GPU probe.

A process is described by a `Command` (an argument list, never a shell line) and
run with `Command.run()`; it either comes back `Completed` (whatever its exit
status) or raises `ProcessFailed` when it could not start or ran out of time.
`Completed.check()` turns a non-zero exit into the same `ProcessFailed`, which
carries the command, the exit status and the last lines the process wrote. A command
with a `log` streams into it; with `progress` as well, the runner calls it every
`every` seconds with the elapsed time and the log's last line, so a long build is
never silent (`first_error` finds the line a failure message quotes).
Git goes through `sync.upstream.gitio` instead: it adds `--end-of-options` and a
scrubbed environment that only git needs.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from sync.infra.errors import EnvironmentUnresolved

TAIL = 20  # lines of a failed process's output its error keeps
_LOG_TAIL_BYTES = 64 * 1024
Failure = Literal["exit", "start", "timeout"]
Progress = Callable[[float, str], None]  # (seconds elapsed, the log's last line)
# A line that states an error: `error: ...`, `CMake Error at ...`, `fatal: ...`, or the
# last line of a Python traceback (`RuntimeError: ...`). Pip's own summary lines
# (`error: subprocess-exited-with-error`) come after the cause and are skipped.
_ERROR = re.compile(r"^\s*(?:error|ERROR|fatal|CMake Error\b[^:]*|[A-Z]\w*(?:Error|Exception)"
                    r"|(?:[a-z_]\w*\.)+\w*(?:Error|Exception|error))\s*:")
_GENERIC = re.compile(r"^\s*(?:error|ERROR): (?:subprocess-exited-with-error|"
                      r"metadata-generation-failed|failed-wheel-build-for-install)")


def lines(data: bytes) -> tuple[str, ...]:
    """`data` as text lines (bad UTF-8 replaced), blank space around them dropped."""
    return tuple(data.decode("utf-8", "replace").strip().splitlines())


@dataclass(frozen=True)
class Command:
    """One process to run: its arguments and everything it runs with."""

    argv: tuple[str, ...]
    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # None: this process's environment
    timeout: float | None = None  # seconds; ProcessFailed when it runs longer
    log: Path | None = None  # stream stdout and stderr into this file instead of capturing
    what: str | None = None  # how messages name it (default: the program)
    fix: str | None = None  # what to do when it fails
    progress: Progress | None = None  # with `log`: called every `every` seconds while it runs
    every: float = 10.0

    @property
    def label(self) -> str:
        return self.what if self.what is not None else Path(self.argv[0]).name

    def run(self) -> Completed:
        try:
            if self.log is None:
                proc = subprocess.run(self.argv, cwd=self.cwd, env=self.env, timeout=self.timeout,
                                      capture_output=True, check=False)
                return Completed(self, proc.returncode, proc.stdout, proc.stderr)
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log, "ab") as fh:
                return Completed(self, self._streamed(fh), b"", b"")
        except subprocess.TimeoutExpired:
            raise ProcessFailed(self, "timeout", None, _log_tail(self.log)) from None
        except OSError as exc:
            raise ProcessFailed(self, "start", None, cause=str(exc)) from None


    def _streamed(self, fh: IO[bytes]) -> int:
        """Run with output into the open log `fh`; the exit status."""
        started = time.monotonic()
        with subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=fh,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL) as child:
            while True:
                elapsed = time.monotonic() - started
                left = None if self.timeout is None else self.timeout - elapsed
                wait = self.every if left is None else max(0.0, min(self.every, left))
                try:
                    return child.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    if left is not None and left <= wait:
                        child.kill()
                        raise
                if self.progress is not None:
                    tail = _log_tail(self.log)
                    self.progress(time.monotonic() - started, tail[-1] if tail else "")


@dataclass(frozen=True)
class Completed:
    command: Command
    returncode: int
    stdout: bytes  # empty when the output went to the command's log
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def tail(self) -> tuple[str, ...]:
        """The last lines it wrote: the log's, else stderr's, else (stderr empty) stdout's."""
        if self.command.log is not None:
            return _log_tail(self.command.log)
        return lines(self.stderr or self.stdout)[-TAIL:]

    def check(self) -> Completed:
        """Self, or ProcessFailed when the process exited non-zero."""
        if not self.ok:
            raise ProcessFailed(self.command, "exit", self.returncode, self.tail)
        return self


class ProcessFailed(EnvironmentUnresolved):
    """A process exited non-zero (`returncode`), could not start or ran out of time.

    One line: `<what> failed: <its last lines, or the exit status>`, `<what> could
    not start: <why>` or `<what> timed out after <n> s`; `tail` keeps the last
    `TAIL` lines it wrote for whoever shows more.
    """

    def __init__(self, command: Command, failure: Failure, returncode: int | None,
                 tail: tuple[str, ...] = (), *, cause: str = "") -> None:
        self.command = command
        self.failure = failure
        self.returncode = returncode
        self.tail = tail
        self.cause = cause  # the operating system's reason a process could not start
        super().__init__(_message(command, failure, returncode, tail, cause), command.fix)


def _message(command: Command, failure: Failure, returncode: int | None,
             tail: tuple[str, ...], cause: str) -> str:
    if failure == "start":
        return f"{command.label} could not start: {cause}"
    if failure == "timeout":
        return f"{command.label} timed out after {command.timeout} s"
    said = " | ".join(line.strip() for line in tail[-3:])
    return f"{command.label} failed: {said or f'exit {returncode}'}"


def _log_tail(log: Path | None) -> tuple[str, ...]:
    if log is None or not log.is_file():
        return ()
    with open(log, "rb") as fh:
        fh.seek(max(0, log.stat().st_size - _LOG_TAIL_BYTES))
        return lines(fh.read())[-TAIL:]


def _log_lines(log: Path) -> Iterator[str]:
    with open(log, "rb") as fh:
        for raw in fh:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")


def first_error(log: Path | None) -> str | None:
    """The first line of `log` that states an error (stripped), None when none does."""
    if log is None or not log.is_file():
        return None
    generic = None
    lines = _log_lines(log)
    for line in lines:
        if _ERROR.match(line):
            if not _GENERIC.match(line):
                # CMake states the message on the lines after `CMake Error at f:1 (message):`.
                said = next((x.strip() for x in lines if x.strip()), "") \
                    if line.rstrip().endswith(":") and "CMake Error" in line else ""
                return f"{line.strip()} {said}".strip()
            generic = generic or line.strip()
    return generic
