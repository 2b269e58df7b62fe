"""Build modes of an oracle, as vLLM's own build knows them.

A mode is named three times: in the port's configuration (`[oracles.<id>] build_mode`),
by the pin block's distribution version (the suffix vLLM's `setup.py` adds to the local
segment) and in an environment's build record. This module is the one table that ties
them together: the suffix each mode adds, the variables the build sets for it, and
whether it installs FlashInfer (vLLM lists FlashInfer only in `requirements/cuda.txt`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

BuildMode = Literal["source", "precompiled", "empty", "cpu"]
MODES: tuple[BuildMode, ...] = get_args(BuildMode)


@dataclass(frozen=True)
class Mode:
    name: BuildMode
    suffix: re.Pattern[str]  # what the distribution version adds (fullmatch; "" for none)
    shown: str  # the suffix as a person reads it
    environ: tuple[tuple[str, str], ...]  # what the build sets (VLLM_TARGET_DEVICE never unset)
    flashinfer: bool  # the mode installs FlashInfer (what require_flashinfer defaults to)
    python_only: bool  # no binaries: every installed file is in the commit's tree


# vLLM adds `.cu<ver>` to a CUDA source build whose nvcc is not the main CUDA version.
TABLE: dict[BuildMode, Mode] = {
    "source": Mode("source", re.compile(r"(?:cu\d+)?"), "no suffix (or .cu<version>)",
                   (("VLLM_TARGET_DEVICE", "cuda"),), flashinfer=True, python_only=False),
    "precompiled": Mode("precompiled", re.compile("precompiled"), ".precompiled",
                        (("VLLM_TARGET_DEVICE", "cuda"), ("VLLM_USE_PRECOMPILED", "1")),
                        flashinfer=True, python_only=False),
    "empty": Mode("empty", re.compile("empty"), ".empty", (("VLLM_TARGET_DEVICE", "empty"),),
                  flashinfer=False, python_only=True),
    "cpu": Mode("cpu", re.compile("cpu"), ".cpu", (("VLLM_TARGET_DEVICE", "cpu"),),
                flashinfer=False, python_only=False),
}


def mode(name: BuildMode) -> Mode:
    return TABLE[name]


def a_build(name: BuildMode) -> str:
    """`an empty build`, `a cpu build`: a mode named in a sentence."""
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} build"


def fits(name: BuildMode, suffix: str | None) -> bool:
    """Whether a distribution version adding `suffix` (None: nothing) is a `name` build."""
    return TABLE[name].suffix.fullmatch(suffix or "") is not None


def from_suffix(suffix: str | None) -> BuildMode | None:
    """The mode whose builds add `suffix`; None for a suffix no mode here adds (`.tpu`)."""
    return next((m for m in MODES if fits(m, suffix)), None)
