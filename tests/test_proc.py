"""The process runner: argv only, one error type with the command, exit status and tail."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from sync.infra import proc
from sync.infra.errors import EnvironmentUnresolved


def py(code: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code, *args)


def test_captures_output_env_and_cwd(tmp_path: Path) -> None:
    done = proc.Command(py("import os, sys; print(os.getcwd()); print(os.environ['X']); "
                           "sys.stderr.write('e\\n')"), cwd=tmp_path, env={"X": "1"}).run()
    assert done.ok and done.returncode == 0
    assert done.stdout.decode().splitlines() == [str(tmp_path.resolve()), "1"]
    assert done.stderr == b"e\n"
    assert done.check() is done


def test_arguments_never_go_through_a_shell(tmp_path: Path) -> None:
    done = proc.Command(py("import sys; print(sys.argv[1])", "$(touch x); echo hi"),
                        cwd=tmp_path).run()
    assert done.stdout == b"$(touch x); echo hi\n"
    assert not (tmp_path / "x").exists()


def test_non_zero_exit_is_one_error_with_the_tail() -> None:
    body = "; ".join(f"sys.stderr.write('line {i}\\n')" for i in range(30))
    done = proc.Command(py(f"import sys; {body}; sys.exit(4)"), what="the step",
                        fix="fix it").run()
    assert not done.ok and done.returncode == 4
    with pytest.raises(proc.ProcessFailed) as info:
        done.check()
    exc = info.value
    assert isinstance(exc, EnvironmentUnresolved) and exc.exit_code == 3
    assert (exc.failure, exc.returncode) == ("exit", 4)
    assert exc.tail == tuple(f"line {i}" for i in range(30 - proc.TAIL, 30))
    assert str(exc) == "the step failed: line 27 | line 28 | line 29 — fix it"
    assert exc.command.argv[0] == sys.executable


def test_tail_falls_back_to_stdout_then_to_the_exit_status() -> None:
    with pytest.raises(proc.ProcessFailed, match=r"^python\S* failed: only out$"):
        proc.Command(py("import sys; print('only out'); sys.exit(2)")).run().check()
    with pytest.raises(proc.ProcessFailed, match=r"failed: exit 2$"):
        proc.Command(py("import sys; sys.exit(2)")).run().check()


def test_a_program_that_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(proc.ProcessFailed) as info:
        proc.Command((str(tmp_path / "missing"),), what="the tool").run()
    exc = info.value
    assert (exc.failure, exc.returncode) == ("start", None)
    assert "No such file" in exc.cause
    assert exc.message == f"the tool could not start: {exc.cause}"


def test_timeout() -> None:
    with pytest.raises(proc.ProcessFailed, match=re.escape("slow timed out after 0.2 s")) as info:
        proc.Command(py("import time; time.sleep(30)"), timeout=0.2, what="slow").run()
    assert (info.value.failure, info.value.returncode) == ("timeout", None)


def test_streaming_into_a_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "build.log"
    log.parent.mkdir()
    log.write_bytes(b"earlier run\n")
    done = proc.Command(py("import sys; print('out'); sys.stdout.flush(); "
                           "sys.stderr.write('err\\n'); sys.exit(1)"), log=log).run()
    assert (done.stdout, done.stderr) == (b"", b"")
    assert log.read_bytes() == b"earlier run\nout\nerr\n"
    assert done.tail == ("earlier run", "out", "err")
    with pytest.raises(proc.ProcessFailed, match=re.escape("failed: earlier run | out | err")):
        done.check()


def test_lines_replace_bad_utf8_and_trim() -> None:
    assert proc.lines(b"\n a\xff\nb  \n\n") == ("a\ufffd", "b")


def test_progress_while_streaming_into_a_log(tmp_path: Path) -> None:
    """A long step is never silent: elapsed time and the log's last line, every `every` s."""
    seen: list[tuple[float, str]] = []
    code = ("import sys, time\nfor i in range(4):\n    print('step', i, flush=True)\n"
            "    time.sleep(0.2)\n")
    done = proc.Command(py(code), log=tmp_path / "build.log", every=0.1,
                        progress=lambda t, line: seen.append((t, line))).run()
    assert done.ok
    assert seen  # it ran 0.8 s, reporting every 0.1 s
    assert [t for t, _ in seen] == sorted(t for t, _ in seen)
    assert {line for _, line in seen} <= {"", "step 0", "step 1", "step 2", "step 3"}
    assert any(line.startswith("step") for _, line in seen)


def test_timeout_while_streaming(tmp_path: Path) -> None:
    with pytest.raises(proc.ProcessFailed, match=re.escape("timed out after 0.3 s")):
        proc.Command(py("import time; print('x', flush=True); time.sleep(5)"), timeout=0.3,
                     log=tmp_path / "l.log", every=0.1, progress=lambda t, line: None).run()


@pytest.mark.parametrize(("log", "first"), [
    # pip's own summary comes after the cause; the cause is quoted.
    ("Building wheel\n  Traceback (most recent call last):\n    File \"setup.py\"\n"
     "  RuntimeError: Unknown runtime environment\n  error: subprocess-exited-with-error\n",
     "RuntimeError: Unknown runtime environment"),
    ("  copying vllm/entrypoints/openai/errors.py\n  socket.gaierror: [Errno -2] Name\n"
     "  urllib.error.URLError: <urlopen error>\n", "socket.gaierror: [Errno -2] Name"),
    ("-- Configuring\nCMake Error at cmake/cpu_extension.cmake:135 (message):\n\n"
     "  X86 backend requires gcc/g++ >= 12.3\n", "CMake Error at cmake/cpu_extension.cmake:135 "
     "(message): X86 backend requires gcc/g++ >= 12.3"),
    ("error: subprocess-exited-with-error\n", "error: subprocess-exited-with-error"),
    ("all fine\nwarning: -Werror is not an error\n", None),
])
def test_first_error_line(tmp_path: Path, log: str, first: str | None) -> None:
    path = tmp_path / "build.log"
    path.write_text(log)
    assert proc.first_error(path) == first
    assert proc.first_error(tmp_path / "absent.log") is None
