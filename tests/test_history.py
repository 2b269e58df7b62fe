"""Range enumeration against real fast-import repositories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.dev.fastimport import History, git
from sync.infra.errors import SyncError
from sync.upstream import gitio, history
from sync.upstream.history import Change, RangeStats

LINES = "".join(f"line {i}\n" for i in range(20))


def _base(h: History) -> int:
    h.modify("keep.py", LINES).modify("gone.py", "a\nb\n").modify("moved.py", LINES)
    h.modify("partly.py", LINES).modify("edit.py", "1\n2\n3\n4\n5\n")
    return h.commit("base")


def _open(h: History, tmp: Path, name: str = "up") -> gitio.Reference:
    h.write(tmp / name)
    return gitio.open_repo(tmp / name)


def test_changes_of_every_kind_oldest_first(tmp: Path) -> None:
    h = History()
    base = _base(h)
    h.modify("new.py", "x\ny\nz\n")
    first = h.commit("[Core] add new (#1)")
    h.modify("edit.py", "1\n2\nthree\n4\n5\n").delete("gone.py")
    second = h.commit("[Bugfix] edit and delete (#2)")
    h.rename("moved.py", "pkg/moved.py")
    third = h.commit("pure rename (#3)")
    h.delete("partly.py").modify("pkg/partly.py", LINES.replace("line 3\n", "line three\n"))
    fourth = h.commit("partial rename (#4)")
    ref = _open(h, tmp)
    m = h.marks
    commits = history.log_range(ref, m[base], m[fourth])
    assert [c.sha for c in commits] == [m[first], m[second], m[third], m[fourth]]
    assert commits[0].changes == (Change("A", "new.py"),)
    assert set(commits[1].changes) == {Change("M", "edit.py"), Change("D", "gone.py")}
    assert commits[2].changes == (Change("R", "pkg/moved.py", "moved.py", 100),)
    (partial,) = commits[3].changes
    assert (partial.status, partial.path, partial.old_path) == ("R", "pkg/partly.py", "partly.py")
    assert partial.score is not None and 50 <= partial.score < 100
    assert commits[3].paths == ("partly.py", "pkg/partly.py")
    assert commits[1].paths == ("edit.py", "gone.py")
    assert commits[0].parents == (m[base],)
    assert commits[1].parents == (m[first],)
    assert commits[0].author == "Upstream Dev <dev@example.invalid>"
    assert commits[0].date == "2026-01-01T00:02:00+00:00"
    assert [c.pr for c in commits] == [1, 2, 3, 4]
    assert commits[0].tags == ("Core",)


def test_awkward_paths_come_through_intact(tmp: Path) -> None:
    names = ["with space.py", "tab\there.py", "new\nline.py", "ünïcødé/файл.py", 'quo"te.py',
             "back\\slash.py", " leading.py", "\nM"]
    h = History()
    base = _base(h)
    for name in names:
        h.modify(name, f"{name}\n")
    added = h.commit("awkward names")
    h.rename("keep.py", "dir with space/kept \t\"é\".py")
    renamed = h.commit("rename to an awkward name")
    ref = _open(h, tmp)
    commits = history.log_range(ref, h.marks[base], h.marks[renamed])
    assert commits[0].sha == h.marks[added]
    assert sorted(c.path for c in commits[0].changes) == sorted(names)
    assert {c.status for c in commits[0].changes} == {"A"}
    assert commits[1].changes == (Change("R", "dir with space/kept \t\"é\".py", "keep.py", 100),)


def test_messages_are_kept_as_written(tmp: Path) -> None:
    long = "y" * 10_000
    subjects = ["pipes | in | table", "back`ticks` and ``double``",
                "<script>alert(1)</script> & co", long, "trailing space   "]
    h = History()
    base = _base(h)
    for i, subject in enumerate(subjects):
        h.modify("edit.py", f"{i}\n")
        h.commit(subject)
    h.modify("edit.py", "body\n")
    h.commit("multi\nline subject\n\n  Paragraph one\nstill one.\n\n- bullet\n- bullet  \n\n\n")
    last = h.commit("empty commit with no changes")
    ref = _open(h, tmp)
    commits = history.log_range(ref, h.marks[base], h.marks[last])
    # git's subject: trailing whitespace dropped, a wrapped first paragraph joined.
    assert [c.subject for c in commits[:5]] == [*subjects[:4], "trailing space"]
    assert all(c.body == "" for c in commits[:5])
    assert commits[5].subject == "multi line subject"
    assert commits[5].body == "Paragraph one\nstill one.\n\n- bullet\n- bullet"
    assert commits[6].subject == "empty commit with no changes"
    assert commits[6].changes == ()
    assert commits[6].paths == ()


def test_non_utf8_messages_decode_without_failing(tmp: Path) -> None:
    h = History(author="J\xe9r\xf4me <j@example.invalid>")
    base = _base(h)
    h.modify("edit.py", "x\n")
    raw = h.commit(b"Latin-1 \xe9t\xe9 [caf\xe9] (#7)\n\nBody \xff end\n")
    ref = _open(h, tmp)
    # A commit that declares its encoding is converted by git, not replaced.
    tree = git(ref.path, "rev-parse", f"{h.marks[raw]}^{{tree}}").strip()
    obj = (f"tree {tree}\nparent {h.marks[raw]}\n".encode()
           + b"author J\xe9r\xf4me <j@example.invalid> 1767225600 +0000\n"
           + b"committer J\xe9r\xf4me <j@example.invalid> 1767225600 +0000\n"
           + b"encoding ISO-8859-1\n\nDeclared \xe9t\xe9 (#8)\n")
    declared = git(ref.path, "hash-object", "-t", "commit", "-w", "--stdin", input=obj).strip()
    git(ref.path, "update-ref", "refs/heads/main", declared)
    commits = history.log_range(ref, h.marks[base], "main")
    assert [c.sha for c in commits] == [h.marks[raw], declared]
    assert commits[0].subject == "Latin-1 \ufffdt\ufffd [caf\ufffd] (#7)"
    assert commits[0].body == "Body \ufffd end"
    assert commits[0].pr == 7
    assert commits[1].subject == "Declared été (#8)"
    assert commits[1].author == "Jérôme <j@example.invalid>"
    assert commits[1].changes == ()


def test_merge_commits_are_excluded(tmp: Path) -> None:
    h = History()
    base = _base(h)
    h.modify("side.py", "s\n")
    side = h.commit("side work (#10)", branch="side", parent=base)
    h.modify("edit.py", "m\n")
    main = h.commit("main work (#11)")
    merge = h.commit("Merge branch side", merge=[side])
    ref = _open(h, tmp)
    commits = history.log_range(ref, h.marks[base], h.marks[merge])
    assert {c.sha for c in commits} == {h.marks[side], h.marks[main]}
    assert all(len(c.parents) == 1 for c in commits)


def test_log_range_refuses_option_like_revisions(tmp: Path) -> None:
    h = History()
    _base(h)
    ref = _open(h, tmp)
    with pytest.raises(SyncError):
        history.log_range(ref, "--output=/tmp/x", "main")
    with pytest.raises(SyncError):
        history.range_stats(ref, "main", "-p", 0)


def test_range_stats_match_the_changes_made(tmp: Path) -> None:
    h = History()
    base = _base(h)
    h.modify("new.py", "x\ny\nz\n")                       # 1 file, +3
    h.commit("add")
    h.modify("edit.py", "1\n2\nthree\n4\n5\n")             # 1 file, +1 -1
    h.delete("gone.py")                                   # 1 file, -2
    h.commit("edit and delete")
    h.rename("moved.py", "pkg/moved.py")                  # 1 file, no lines
    h.commit("rename")
    empty = h.commit("nothing")
    ref = _open(h, tmp)
    m = h.marks
    assert history.range_stats(ref, m[base], m[empty], 4) == RangeStats(4, 4, 4, 3)
    assert history.range_stats(ref, m[empty], m[empty], 0) == RangeStats(0, 0, 0, 0)
    assert history.range_stats(ref, m[base], m[base + 1], 1) == RangeStats(1, 1, 3, 0)


@pytest.mark.parametrize(("text", "expected"), [
    ("", (0, 0, 0)),
    ("\n", (0, 0, 0)),
    (" 1 file changed, 1 insertion(+)\n", (1, 1, 0)),
    (" 1 file changed, 1 deletion(-)\n", (1, 0, 1)),
    (" 2 files changed, 10 insertions(+), 3 deletions(-)\n", (2, 10, 3)),
    (" 1 file changed, 0 insertions(+), 0 deletions(-)\n", (1, 0, 0)),
    (" 3 files changed\n", (3, 0, 0)),
])
def test_parse_shortstat(text: str, expected: tuple[int, int, int]) -> None:
    assert history.parse_shortstat(text) == expected


@pytest.mark.parametrize("text", ["garbage", "1 insertion(+)", " 1 file changed; 2 insertions(+)"])
def test_parse_shortstat_refuses_unknown_shapes(text: str) -> None:
    with pytest.raises(SyncError):
        history.parse_shortstat(text)


@given(st.text())
def test_parse_shortstat_fuzz(text: str) -> None:
    try:
        files, ins, dels = history.parse_shortstat(text)
    except SyncError:
        return
    assert min(files, ins, dels) >= 0


_TOKENS = st.sampled_from([
    b"\x1e" + b"a" * 40, b"\x1e", b"\x1exyz", b"", b"\nM", b"M", b"R100", b"R", b"C07", b"X",
    b"A9999", b"path", b"\n", b"2026-01-01T00:00:00+00:00",
])


@given(st.one_of(st.binary(), st.lists(_TOKENS).map(b"\0".join),
                 st.lists(_TOKENS).map(lambda t: b"\0".join(t) + b"\0")))
def test_parse_log_fuzz(data: bytes) -> None:
    try:
        commits = history.parse_log(data)
    except SyncError:
        return
    for commit in commits:
        assert re.fullmatch(r"[0-9a-f]{7,64}", commit.sha)
        assert all(c.status in "AMDRCT" for c in commit.changes)


def test_parse_log_reads_a_hand_written_record() -> None:
    sha, parent = "a" * 40, "b" * 40
    data = (b"\x1e" + sha.encode() + b"\0" + parent.encode() + b"\0A <a@x>\0"
            b"2026-01-01T00:00:00+00:00\0s (#5)\0body\n\0\nM\0f\0R091\0old\0new\0"
            b"\x1e" + parent.encode() + b"\0\0A <a@x>\0d\0empty\0\0")
    first, second = history.parse_log(data)
    assert first.changes == (Change("M", "f"), Change("R", "new", "old", 91))
    assert (first.body, first.pr, first.parents) == ("body", 5, (parent,))
    assert (second.sha, second.changes, second.parents) == (parent, (), ())
    assert history.parse_log(b"") == []


@pytest.mark.parametrize(("subject", "pr", "tags"), [
    ("[Core][Bugfix] Fix x (#123)", 123, ("Core", "Bugfix")),
    ("[V1] [Spec Decode] y (#1) (#45)", 45, ("V1", "Spec Decode")),
    ('Revert "[Core] Foo (#100)"', None, ()),
    ('Revert "[Core] Foo (#100)" (#101)', 101, ()),
    ("Fix (#12) in the middle", None, ()),
    ("[] [ ] [Misc]: thing", None, ("Misc",)),
    ("no tags (#9)  ", 9, ()),
    ("x [NotLeading] y (#a1)", None, ()),
    ("", None, ()),
])
def test_pr_and_tags(subject: str, pr: int | None, tags: tuple[str, ...]) -> None:
    assert history.parse_pr(subject) == pr
    assert history.parse_tags(subject) == tags


@given(st.text())
def test_subject_parsing_never_raises(subject: str) -> None:
    pr = history.parse_pr(subject)
    assert pr is None or pr >= 0
    assert all(tag and "[" not in tag and "]" not in tag for tag in history.parse_tags(subject))


_TAG = st.text(st.characters(blacklist_characters="[]"),
               min_size=1).filter(lambda t: t == t.strip() and bool(t))
_TITLE = st.text().filter(
    lambda t: not t.lstrip().startswith("[") and history.parse_pr(t + " (#0)") == 0)


@given(st.lists(_TAG, max_size=5), _TITLE, st.integers(min_value=0, max_value=10**9))
def test_subject_round_trip(tags: list[str], title: str, pr: int) -> None:
    subject = "".join(f"[{t}]" for t in tags) + f" {title} (#{pr})"
    assert history.parse_tags(subject) == tuple(tags)
    assert history.parse_pr(subject) == pr


def _commit(sha: str, subject: str, body: str = "") -> history.Commit:
    return history.Commit(sha, (), "A <a@x>", "2026-01-01T00:00:00+00:00", subject, body, ())


def test_find_reverts() -> None:
    a, b, c, d, e, f, g, h = (ch * 40 for ch in "abcdef01")
    outside = "9" * 40
    commits = [
        _commit(a, "[Core] Foo (#100)"),
        _commit(b, 'Revert "[Core] Foo (#100)" (#101)', f"This reverts commit {a}."),
        _commit(c, 'Revert "Revert "[Core] Foo (#100)" (#101)" (#102)',
                f"This reverts commit {b}."),
        _commit(d, "Bar (#103)"),
        _commit(e, 'Revert "Bar (#103)"'),                 # no SHA in the body: by subject
        _commit(f, 'Revert "Baz (#5)" (#104)', f"This reverts commit {outside}."),
        _commit(g, 'Revert "[Core] Foo (#100)"', f"This reverts commit {outside}."),
        _commit(h, 'Reapply "Bar (#103)"'),
    ]
    assert history.find_reverts(commits) == {b: a, c: b, e: d, h: e}
    assert history.find_reverts([commits[1]]) == {}


def test_find_reverts_by_abbreviated_sha_and_bare_subject() -> None:
    a, b = "ab" * 20, "cd" * 20
    commits = [_commit(a, "[Core] Foo (#100)"),
               _commit(b, "Revert foo", f"This reverts commit {a[:10]}.")]
    assert history.find_reverts(commits) == {b: a}
    assert history.find_reverts([commits[0], _commit(b, 'Revert "[Core] Foo"')]) == {b: a}


def _duplicates_repo(tmp: Path, fillers: int) -> tuple[History, gitio.Reference, int, int]:
    two = LINES.replace("line 2\n", "line two\n")
    h = History()
    _base(h)
    h.modify("partly.py", two)
    first = h.commit("[Bugfix] fix line 2 (#200)")
    h.modify("partly.py", LINES)
    h.commit('Revert "[Bugfix] fix line 2 (#200)"')
    for i in range(fillers):
        h.modify(f"filler/{i}.py", f"{i}\n")
        h.commit(f"filler {i} (#{300 + i})")
    h.modify("partly.py", LINES.replace("line 19\n", "end\n"))
    h.commit("[Bugfix] fix line 19 (#201)")
    # The same patch as `first`, applied to a different state of the file.
    h.modify("partly.py", two.replace("line 19\n", "end\n"))
    second = h.commit("[Bugfix] fix line 2 (#200) (#250)")
    ref = _open(h, tmp, f"dup{fillers}")
    return h, ref, first, second


def test_find_duplicates_groups_the_same_patch_on_different_bases(tmp: Path) -> None:
    h, ref, first, second = _duplicates_repo(tmp, 3)
    commits = history.log_range(ref, h.marks[1], "main")
    assert history.find_duplicates(ref, commits) == [(h.marks[first], h.marks[second])]


def test_find_duplicates_follows_a_real_cherry_pick(tmp: Path) -> None:
    h = History()
    base = _base(h)
    h.modify("edit.py", "1\n2\n3\n4\nfive\n")
    origin = h.commit("original wording (#1)")
    h.modify("keep.py", LINES + "tail\n")
    h.commit("unrelated")
    h.modify("edit.py", "1\n2\n3\n4\n5\n").modify("keep.py", LINES)
    h.commit("put both back")
    h.modify("edit.py", "1\n2\n3\n4\nfive\n").modify("keep.py", LINES + "tail\n")
    h.commit("not the same patch: two files")
    ref = _open(h, tmp)
    who = ["-c", "user.name=Picker", "-c", "user.email=p@example.invalid"]
    git(ref.path, *who, "reset", "-q", "--hard", "HEAD~1")
    git(ref.path, *who, "cherry-pick", "-x", h.marks[origin])
    message = git(ref.path, "log", "-1", "--format=%B").replace("original wording (#1)",
                                                                 "other wording")
    git(ref.path, *who, "commit", "-q", "--amend", "-m", message)
    pick = git(ref.path, "rev-parse", "HEAD").strip()
    commits = history.log_range(ref, h.marks[base], "main")
    assert commits[-1].sha == pick
    assert f"(cherry picked from commit {h.marks[origin]})" in commits[-1].body
    assert history.find_duplicates(ref, commits) == [(h.marks[origin], pick)]


def test_find_duplicates_without_candidates_keeps_the_process_count(tmp: Path) -> None:
    h = History()
    base = _base(h)
    for i in range(5):
        h.modify(f"f{i}.py", f"{i}\n")
        h.commit(f"distinct {i}")
    h.commit("empty")
    h.commit("empty")
    ref = _open(h, tmp)
    commits = history.log_range(ref, h.marks[base], "main")
    assert len(commits) == 7
    before = gitio.PROCESS_COUNT
    assert history.find_duplicates(ref, commits) == []
    # Still the same two processes as with candidates: the count never depends on the range.
    assert gitio.PROCESS_COUNT - before == 2


def test_git_process_count_is_independent_of_commit_count(tmp: Path) -> None:
    used = []
    for fillers in (3, 200):
        h, ref, first, second = _duplicates_repo(tmp, fillers)
        before = gitio.PROCESS_COUNT
        commits = history.log_range(ref, h.marks[1], "main")
        after_log = gitio.PROCESS_COUNT
        groups = history.find_duplicates(ref, commits)
        history.range_stats(ref, h.marks[1], "main", len(commits))
        assert groups == [(h.marks[first], h.marks[second])]
        used.append((after_log - before, gitio.PROCESS_COUNT - after_log))
    assert used[0] == used[1] == (1, 3)


@settings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                          st.sampled_from(["x", 'Revert "x"', 'Revert "Revert "x""', "y (#1)",
                                           'Reapply "x"', 'Revert "y (#1)" (#2)']),
                          st.booleans()), max_size=12))
def test_find_reverts_fuzz(spec: list[tuple[str, str, bool]]) -> None:
    shas = [f"{i:040x}" for i in range(len(spec))]
    commits = [_commit(sha, subject, f"This reverts commit {shas[0]}." if with_sha else body)
               for sha, (body, subject, with_sha) in zip(shas, spec, strict=True)]
    pairs = history.find_reverts(commits)
    index = {sha: i for i, sha in enumerate(shas)}
    for reverting, reverted in pairs.items():
        assert reverting != reverted
        assert reverted in index


def test_same_paths_with_different_patches_are_not_duplicates(tmp: Path) -> None:
    h = History()
    base = _base(h)
    h.modify("blob.bin", b"\0\1\2" * 10)
    h.commit("binary")
    for i in range(3):
        h.modify("blob.bin", b"\0\1" + bytes([i + 3]) * 30)
        h.commit("update blob")          # same subject, same path, different bytes
    h.rename("keep.py", "kept.py")
    h.commit("rename keep")
    h.modify("kept.py", LINES + "x\n").rename("kept.py", "keep.py")
    h.commit("rename keep")
    ref = _open(h, tmp)
    commits = history.log_range(ref, h.marks[base], "main")
    before = gitio.PROCESS_COUNT
    assert history.find_duplicates(ref, commits) == []
    assert gitio.PROCESS_COUNT - before == 2
