"""The one reader of a commit key (`explain`, `decide`): a SHA prefix or #N."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.infra.errors import UsageError
from sync.steps import pick
from sync.upstream.history import Commit

COMMITS = [
    Commit("0d7202ad87" + "a" * 30, (), "", "", "some simple typos (#50001)", "", ()),
    Commit("0d72ff" + "b" * 34, (), "", "", "[Core] Other (#50002)", "", ()),
    Commit("c" * 40, (), "", "", "[Core] Reland (#50002)", "", ()),
]


def refusal(key: str, *, carried: bool = False) -> str:
    with pytest.raises(UsageError) as e:
        pick.index(COMMITS, key, carried=carried)
    return str(e.value)


def test_a_key_names_one_commit() -> None:
    assert pick.index(COMMITS, "0d720") == 0
    assert pick.index(COMMITS, " 0D72F ") == 1
    assert pick.index(COMMITS, "#50001") == 0


def test_neither_a_sha_nor_a_pr_reads_one_way() -> None:
    for key in ("#abc", "nope", "--help", "0d7g", "#", "a" * 41):
        assert refusal(key) == (f"{key!r} is neither a SHA prefix nor #N — give a SHA prefix "
                                "(at least 4 hex digits) or #N (a PR number)")


def test_a_short_hex_prefix_is_too_short_and_says_the_minimum() -> None:
    assert refusal("0d7") == ("'0d7' is too short for a SHA prefix (3 hex digit(s), at least 4 "
                              "needed) — give at least 4 hex digits of the SHA, or #N for a PR")


def test_no_match_and_many_matches() -> None:
    fix = "— pick an entry from the cycle's report ('upstream-sync sync' writes it)"
    assert refusal("dead") == f"commit dead is not in the cycle's range {fix}"
    assert refusal("#9", carried=True) == (
        f"PR #9 is not in the cycle's range (nor carried over into it) {fix}")
    assert refusal("0d72") == ("commit 0d72 matches 2 commits: 0d7202ad87, 0d72ffbbbb — give "
                               "more of the SHA")
    assert refusal("#50002") == ("PR #50002 matches 2 commits: 0d72ffbbbb, cccccccccc — give "
                                 "the SHA of the one you mean")


@given(st.text(max_size=60))
def test_any_key_is_an_index_or_a_one_line_usage_error(key: str) -> None:
    try:
        i = pick.index(COMMITS, key)
    except UsageError as e:
        assert "\n" not in str(e) and " — " in str(e)
    else:
        assert 0 <= i < len(COMMITS)
