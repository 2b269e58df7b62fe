#!/usr/bin/env python3
# Ported from: vllm/v1/sample/sampler.py
#   @ 147b89ac92 (golden dump of the sampler's logprobs)
"""Dump sampler goldens from the vLLM oracle for the port's parity suite.

Run by `upstream-sync golden` with the oracle's interpreter:
`{python} tools/parity/dump_sampler.py --out {out}` writes `{out}/sampler/`.
"""

import argparse
import json
import math
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from vllm.v1.sample.sampler import Sampler  # the oracle's, never the port's

    logits = [2.0, 1.0, 0.5, -1.0]
    z = math.log(sum(math.exp(x) for x in logits))
    case = Path(args.out) / "sampler"
    case.mkdir(parents=True, exist_ok=True)
    (case / "logprobs.json").write_text(json.dumps(
        {"sampler": Sampler.__name__, "logprobs": [round(x - z, 6) for x in logits]},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
