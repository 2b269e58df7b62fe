"""The console script: one command, then the process ends.

A command whose last run over the same inputs was kept (`infra.memo`) is replayed before
anything else of the tool is imported; any other is run by the command line (`sync.cli`)
and, when it is one whose runs are kept, recorded.
"""

from __future__ import annotations

import gc
import os
import sys

from sync.infra import memo


def entry() -> None:
    """Run the command `sys.argv` names and exit with its code."""
    # Without the cyclic collector: what a command holds (the cache's values, the parsed
    # headers, the ledger's rows) lives until the process ends and forms no cycles worth
    # collecting, yet every full collection walks all of it: a quarter of a re-run's time
    # at 3,000 commits, for the same peak memory. `cli.main` called in-process keeps it.
    gc.disable()
    plan = memo.plan(sys.argv[1:])
    if plan is not None:
        try:
            code = plan.replay(sys.stdout, sys.stderr)
        except BrokenPipeError:
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the reader went away: `| head`)
            sys.exit(0)
        if code is not None:
            sys.exit(code)
    from sync import cli

    if plan is None:
        sys.exit(cli.main())
    with plan.recording() as run:
        code = cli.main()
    said = run.finish(code)
    if plan.debug:
        print(f"upstream-sync: memo: {said} (a run without --debug is replayed when kept)",
              file=sys.stderr)
    sys.exit(code)
