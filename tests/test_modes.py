"""records/modes.py: vLLM's build modes, their suffixes and what init writes from a pin."""

from __future__ import annotations

import pytest

from sync.records import modes


@pytest.mark.parametrize(("suffix", "mode"), [
    (None, "source"), ("cu129", "source"), ("precompiled", "precompiled"), ("empty", "empty"),
    ("cpu", "cpu"), ("tpu", None), ("rocm644", None), ("cu130.precompiled", None),
])
def test_a_suffix_names_its_mode(suffix: str | None, mode: str | None) -> None:
    assert modes.from_suffix(suffix) == mode
    for name in modes.MODES:
        assert modes.fits(name, suffix) == (name == mode)


def test_each_mode_sets_the_target_device_and_flashinfer_follows_cuda() -> None:
    for name in modes.MODES:
        m = modes.mode(name)
        assert dict(m.environ)["VLLM_TARGET_DEVICE"] == ("cuda" if m.flashinfer else name)
    assert dict(modes.mode("precompiled").environ)["VLLM_USE_PRECOMPILED"] == "1"
    assert [n for n in modes.MODES if modes.mode(n).python_only] == ["empty"]


def test_a_mode_named_in_a_sentence() -> None:
    assert [modes.a_build(n) for n in modes.MODES] == [
        "a source build", "a precompiled build", "an empty build", "a cpu build"]
