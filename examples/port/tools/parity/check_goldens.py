#!/usr/bin/env python3
"""Original: no upstream mirror. The example's op parity suite.

Checks every golden case has a manifest naming the oracle that produced it and that
the sampler's logprobs are a normalised distribution. Exit 0 on PASS, 1 on FAIL.
"""

import json
import math
import sys
from pathlib import Path


def main() -> int:
    goldens = Path(sys.argv[1]) / "goldens"
    cases = sorted(p for p in goldens.iterdir() if p.is_dir()) if goldens.is_dir() else []
    if not cases:
        print(f"FAIL: no golden cases under {goldens}")
        return 1
    for case in cases:
        manifest = json.loads((case / "manifest.json").read_text())
        if not manifest.get("oracle", {}).get("commit"):
            print(f"FAIL: {case.name} has no oracle identity")
            return 1
    logprobs = json.loads((goldens / "sampler" / "logprobs.json").read_text())["logprobs"]
    total = sum(math.exp(x) for x in logprobs)
    if abs(total - 1.0) > 1e-4:
        print(f"FAIL: sampler probabilities sum to {total}")
        return 1
    print(f"PASS: {len(cases)} case(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
