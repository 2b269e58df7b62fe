"""The benchmark's lower bounds (`dev/floors.py`): the symbol pass's parses are shared among
the processes it is split across, and the row says so."""

from __future__ import annotations

import pytest

from sync.dev import floors


def _bound(jobs: int) -> floors.Bound:
    t = floors.Timing((0.5,), (0.5,), 50.0)
    floor = floors.Floor(10, 1.0, floors.Timing((0.1,), (0.1,), 10.0),
                         floors.Trace((), ("sync.cli",), 40, 2.0))
    result = floors.Result("real case", "sync", floors.Timing((4.0,), (4.0,), 90.0), floor, 3.0)
    return floors.Bound(result, t, 0.05, 2.0, 40, jobs)


@pytest.mark.parametrize(("jobs", "seconds", "said"), [
    (1, 2.55, "| 2.00 (40 sources) |"),
    (2, 1.55, "| 2.00 (40 sources, 1.00 on each of 2 cores) |"),
])
def test_the_parses_are_shared_among_the_processes_of_the_pass(
        jobs: int, seconds: float, said: str) -> None:
    b = _bound(jobs)
    assert b.seconds == pytest.approx(seconds)
    row = floors.bound_row(b)
    assert said in row and row.endswith("| over the bar |")
    assert b.as_doc()["jobs"] == jobs
