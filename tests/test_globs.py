"""Globs (`**`, `*`, `?`, posix paths): one glob, and any of several in one pattern."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sync.infra import globs

_PART = st.text(alphabet="ab*?./", max_size=8)
_PATH = st.text(alphabet="ab./", max_size=12)


def test_the_forms() -> None:
    assert globs.match("src/a/b.cpp", "src/**/*.cpp")
    assert globs.match("src/b.cpp", "src/**/*.cpp")
    assert not globs.match("src/a/b.cpp", "src/*.cpp")
    assert globs.match("vllm/x.py", "vllm/?.py") and not globs.match("vllm/xy.py", "vllm/?.py")
    assert globs.any_of(()).match("") is None  # no glob matches nothing...
    assert globs.match("a.md", "**") and globs.match("", "")  # ...and the empty glob ""


@given(st.lists(_PART, max_size=4).map(tuple), _PATH)
def test_any_of_matches_what_one_of_them_matches(patterns: tuple[str, ...], path: str) -> None:
    one = any(globs.match(path, g) for g in patterns)
    assert (globs.any_of(patterns).match(path) is not None) == one
    for g in patterns:  # building the alternation changes no single glob
        assert globs.match(path, g) == (globs.pattern(g).match(path) is not None)
