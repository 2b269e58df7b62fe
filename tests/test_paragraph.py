from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.infra.errors import MalformedRecord, SyncError, UsageError
from sync.records import paragraph, pins

COMMIT = "5559679229bc961848b121ccdeaa8fa5d79bec98"
PIN = pins.Pin(COMMIT, "0.23.1rc1.dev1511+g555967922",
               "0.23.1rc1.dev1511+g555967922.precompiled", "0.6.15.post1", "precompiled")
REAL = (
    "Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0 + "
    "transformers 5.14.1, Torch 2.13.0, FlashInfer 0.6.15.post1, CUTLASS DSL 4.6.0), FLIPPED "
    "from the prior e24d1b24/0.25.0 pin at W5 (bc415a3e), see specs/pin-advance.md §7."
)
TEXT = (
    "Upstream sync protocol\n"
    "\n"
    "The parity pin and classification rules are repository-wide.\n"
    "\n"
    f"{REAL}\n"
    "\n"
    "The pin, as a running oracle reports itself.\n"
)


def refused(text: str) -> MalformedRecord:
    with pytest.raises(MalformedRecord) as info:
        paragraph.find(text, path="p.md")
    assert "\n" not in str(info.value) and " — " in str(info.value)
    return info.value


def test_find_real_line() -> None:
    para = paragraph.find(TEXT, path="p.md")
    assert (para.date, para.sha, para.release_label, para.line) == (
        "2026-07-26", "555967922", "0.26.0.dev0", 5)
    assert TEXT[para.start:para.end] == (
        "Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0")
    assert paragraph.agrees(para, PIN) == []


def test_find_without_release_label() -> None:
    text = TEXT.replace(" (vLLM 0.26.0.dev0 + transformers", ", transformers")
    para = paragraph.find(text, path="p.md")
    assert para.release_label is None
    assert text[para.start:para.end].endswith("current parity pin 555967922")


def test_no_paragraph() -> None:
    err = refused("nothing here\n")
    assert "no PARITY PIN line" in str(err)


def test_near_miss_names_its_line() -> None:
    err = refused(TEXT.replace("2026-07-26): current", "2026-07-26) current"))
    assert "line 5 starts like one but does not match" in str(err) and err.line == 5


def test_uppercase_sha_is_not_a_paragraph() -> None:
    refused(TEXT.replace("pin 555967922", "pin 555967922ABC"))


def test_short_sha_is_not_a_paragraph() -> None:
    refused(TEXT.replace("pin 555967922", "pin 555967"))


def test_two_paragraphs() -> None:
    err = refused(TEXT + REAL + "\n")
    assert "2 PARITY PIN lines (lines 5, 8)" in str(err)


def test_indented_line_does_not_count() -> None:
    para = paragraph.find(TEXT + "  " + REAL + "\n", path="p.md")
    assert para.line == 5


def test_impossible_date() -> None:
    err = refused(TEXT.replace("2026-07-26", "2026-02-30"))
    assert "'2026-02-30' is not a calendar date" in str(err)


def test_sha_not_a_prefix() -> None:
    para = paragraph.find(TEXT.replace("pin 555967922", "pin 555967923"), path="p.md")
    assert paragraph.agrees(para, PIN, path="p.md") == [
        f"p.md:5: the PARITY PIN paragraph's pin 555967923 is not a prefix of the pin block's "
        f"vllm_commit {COMMIT} — write {COMMIT[:9]} there by hand (an advance rewrites this "
        "line itself, but not while it disagrees with the block)"
    ]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_render_unchanged_is_byte_identical(newline: str) -> None:
    text = TEXT.replace("\n", newline)
    para = paragraph.find(text, path="p.md")
    assert paragraph.render(text, para, date=para.date, sha=para.sha,
                            release_label=para.release_label) == text


def test_render_golden() -> None:
    text = TEXT.replace("\n", "\r\n")
    para = paragraph.find(text, path="p.md")
    out = paragraph.render(text, para, date="2026-08-14", sha="e24d1b24aa",
                           release_label="0.27.0.dev3")
    assert out == text.replace(
        "Active pin (advanced 2026-07-26): current parity pin 555967922 (vLLM 0.26.0.dev0",
        "Active pin (advanced 2026-08-14): current parity pin e24d1b24aa (vLLM 0.27.0.dev3",
    )
    again = paragraph.find(out, path="p.md")
    assert (again.date, again.sha, again.release_label) == ("2026-08-14", "e24d1b24aa",
                                                            "0.27.0.dev3")


def test_render_adds_a_label_where_there_was_none() -> None:
    text = TEXT.replace(" (vLLM 0.26.0.dev0 + transformers", ", transformers")
    para = paragraph.find(text, path="p.md")
    out = paragraph.render(text, para, date=para.date, sha=para.sha, release_label="0.26.0")
    assert "current parity pin 555967922 (vLLM 0.26.0), transformers 5.14.1" in out
    assert paragraph.find(out, path="p.md").release_label == "0.26.0"


def test_render_refuses_to_drop_a_label() -> None:
    para = paragraph.find(TEXT, path="p.md")
    with pytest.raises(UsageError, match="no new release label was given"):
        paragraph.render(TEXT, para, date=para.date, sha=para.sha, release_label=None)


@pytest.mark.parametrize(("date", "sha", "label", "what"), [
    ("2026-8-14", "e24d1b24", "0.27.0", "date"),
    ("2026-08-14", "E24D1B24", "0.27.0", "sha"),
    ("2026-08-14", "e24d1b", "0.27.0", "sha"),
    ("2026-08-14", "e24d1b24", "0.27 (final)", "release label"),
])
def test_render_refuses_bad_values(date: str, sha: str, label: str, what: str) -> None:
    para = paragraph.find(TEXT, path="p.md")
    with pytest.raises(UsageError, match=what):
        paragraph.render(TEXT, para, date=date, sha=sha, release_label=label)


def test_render_refuses_a_stale_paragraph() -> None:
    para = paragraph.find(TEXT, path="p.md")
    with pytest.raises(UsageError, match="changed since it was read"):
        paragraph.render("x" + TEXT, para, date=para.date, sha=para.sha,
                         release_label=para.release_label)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_only_raises_sync_errors(text: str) -> None:
    with contextlib.suppress(SyncError):
        paragraph.find(text, path="p.md")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789abcdefABC-() :.,\r\nvLLM"), max_size=40))
def test_random_tails_only_raise_sync_errors(tail: str) -> None:
    text = "Active pin (advanced 2026-07-26): current parity pin " + tail
    try:
        para = paragraph.find(text, path="p.md")
    except SyncError:
        return
    out = paragraph.render(text, para, date="2026-08-01", sha="abcdef0",
                           release_label=para.release_label)
    assert paragraph.find(out, path="p.md").sha == "abcdef0"


# -- the rewrite of an advance -------------------------------------------------------------------

NEW = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
NARRATIVE = (" The advance re-validated with zero real golden drift (27B-W4A4 + 32B-NVFP4A16 "
             "bit-identical, 35B/Coder byte-stable) and unblocked DFlash (vllm#40898); a "
             "vllm-oracle-v0.25.0-stage rollback is preserved.")


# The real paragraph with what no advance can check taken out (the reworded form).
CLEAN = (REAL.replace(" + transformers 5.14.1, Torch 2.13.0, FlashInfer 0.6.15.post1, CUTLASS "
                      "DSL 4.6.0", " + Torch 2.13.0, FlashInfer 0.6.15.post1")
         .replace(" at W5 (bc415a3e)", ""))


def measured(**kw: object) -> paragraph.Measured:
    args: dict[str, object] = {
        "date": "2026-08-14", "commit": NEW, "release_label": "0.27.0", "prior": COMMIT,
        "prior_label": "0.26.0.dev0",
        "versions": (("Torch", "2.13.0"), ("FlashInfer", "0.6.15.post1")),
        "drift": "zero drift (4 cases)", "target": NEW, "prs": frozenset({40898})}
    args.update(kw)
    return paragraph.Measured(**args)  # type: ignore[arg-type]


def rewrite(text: str, **kw: object) -> paragraph.Rewrite:
    return paragraph.rewrite(text, paragraph.find(text, path="p.md"), measured(**kw))


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_rewrite_names_what_was_measured_and_keeps_every_other_byte(newline: str) -> None:
    text = TEXT.replace(REAL, CLEAN + " See the notes.").replace("\n", newline)
    r = rewrite(text)
    assert r.unchecked == ()
    assert r.paragraph == (
        "Active pin (advanced 2026-08-14): current parity pin a1b2c3d4e (vLLM 0.27.0 + Torch "
        "2.13.0, FlashInfer 0.6.15.post1), FLIPPED from the prior 55596792/0.26.0.dev0 pin, "
        "see specs/pin-advance.md §7. The golden gate at a1b2c3d4e5 measured zero drift (4 "
        "cases). See the notes.")
    before, after = text.split(CLEAN + " See the notes.")
    assert r.text.startswith(before) and r.text.endswith(after)
    assert paragraph.restore(r.text, paragraph.find(r.text, path="p.md"), r.old) == text


def test_rewrite_asks_for_rewording_naming_each_unchecked_phrase() -> None:
    r = rewrite(TEXT.replace(REAL, REAL + NARRATIVE), drift="drift in 1 of 4 cases: changed a",
                prs=frozenset())
    assert "'transformers 5.14.1' (a version the oracle probe does not measure)" in r.unchecked
    assert "'CUTLASS DSL 4.6.0' (a version the oracle probe does not measure)" in r.unchecked
    joined = "; ".join(r.unchecked)
    assert "'bc415a3e' (a commit that is neither the new nor the prior pin)" in joined
    assert ("'zero real golden drift' (the golden gate measured drift in 1 of 4 cases: "
            "changed a)") in joined
    assert "'bit-identical'" in joined and "'byte-stable'" in joined
    assert "'vllm#40898' (a PR outside the cycle's range)" in joined
    assert "'v0.25.0' (a version the advance did not measure)" in joined


# The late-july port's own paragraph, after the hand rewording an advance asked for.
OLD_CYCLE = (" The exact 145-commit pin delta is classified (94 `INVENTORY`, 51 `IGNORE`, no "
             "trace-independent `PORT-NOW` change in the implemented Qwen T0 slice). The pin "
             "remains unchanged until target goldens/model behavior gates are re-run.")


def test_another_cycles_tallies_and_a_pin_that_stays_are_unchecked() -> None:
    counts = (("commits", 113), ("PORT-NOW", 5), ("INVENTORY", 70), ("IGNORE", 38))
    r = rewrite(TEXT.replace(REAL, CLEAN + OLD_CYCLE), tallies=counts)
    assert r.unchecked == (
        '"The exact 145-commit pin delta is classified (94 `INVENTORY`, 51 `IGNORE`, no '
        'trace-independent …" names \'145-commit\' (this cycle\'s range has 113 commits), '
        "'94 `INVENTORY`' (this cycle has 70 INVENTORY), '51 `IGNORE`' (this cycle has 38 "
        "IGNORE)",
        '"The pin remains unchanged until target goldens/model behavior gates are re-run." '
        "names 'remains unchanged' (the advance moves the pin)")
    # A value named twice is listed once.
    twice = rewrite(TEXT.replace(REAL, CLEAN + " See bc415a3e and bc415a3e."), tallies=counts)
    assert twice.unchecked == ('"See bc415a3e and bc415a3e." names \'bc415a3e\' (a commit that '
                               'is neither the new nor the prior pin)',)
    # This cycle's own tallies are checkable, and kept.
    own = (" The exact 113-commit pin delta is classified (70 `INVENTORY`, 38 `IGNORE`, 5 "
           "PORT-NOW).")
    kept = rewrite(TEXT.replace(REAL, CLEAN + own), tallies=counts)
    assert kept.unchecked == () and own.strip() in kept.paragraph


@pytest.mark.parametrize("claim", ["The pin has not advanced yet.", "The pin stays unchanged.",
                                   "It is not yet advanced.", "The pin has not been moved."])
def test_a_claim_that_the_pin_stayed_is_unchecked(claim: str) -> None:
    r = rewrite(TEXT.replace(REAL, CLEAN + " " + claim))
    assert any("(the advance moves the pin)" in u for u in r.unchecked), r.unchecked


def test_rewrite_drops_a_version_the_oracle_does_not_have() -> None:
    text = TEXT.replace(" + transformers 5.14.1, Torch 2.13.0, FlashInfer 0.6.15.post1, CUTLASS "
                        "DSL 4.6.0", " + Torch 2.13.0, FlashInfer 0.6.15.post1")
    r = rewrite(text, versions=(("Torch", None), ("FlashInfer", "0.6.16")))
    assert r.dropped == ("Torch 2.13.0 (the oracle has no Torch)",)
    assert "(vLLM 0.27.0 + FlashInfer 0.6.16)" in r.paragraph and "Torch" not in r.paragraph


def test_rewrite_of_its_own_output_is_stable() -> None:
    once = rewrite(TEXT.replace(REAL, CLEAN))
    again = paragraph.rewrite(once.text, paragraph.find(once.text, path="p.md"),
                              measured(prior=NEW, prior_label="0.27.0"))
    assert again.unchecked == ()
    assert again.paragraph.count("The golden gate at") == 1
    assert "FLIPPED from the prior a1b2c3d4/0.27.0 pin" in again.paragraph


@pytest.mark.parametrize("torch", ["2.13.0+cpu", "2.13.0+cu128"])
def test_a_local_version_is_one_version_and_its_rewrite_is_stable(torch: str) -> None:
    # walk-s9 D2: `Torch 2.13.0+cpu`, written by one advance, was split at its `+` by the next.
    versions = (("Torch", torch), ("FlashInfer", "0.6.15.post1"))
    once = rewrite(TEXT.replace(REAL, CLEAN), versions=versions)
    assert f"(vLLM 0.27.0 + Torch {torch}, FlashInfer 0.6.15.post1)" in once.paragraph
    again = paragraph.rewrite(once.text, paragraph.find(once.text, path="p.md"),
                              measured(prior=NEW, prior_label="0.27.0", versions=versions))
    assert again.unchecked == () and again.dropped == ()
    assert f"+ Torch {torch}, FlashInfer" in again.paragraph


def test_no_golden_gate_says_so_and_a_drift_claim_is_then_unchecked() -> None:
    r = rewrite(TEXT.replace(REAL, REAL + " Goldens are bit-identical."), drift=None)
    assert "No golden gate ran for this advance." in r.paragraph
    assert any("'bit-identical' (no golden gate measured drift)" in u for u in r.unchecked)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6000), st.sampled_from(["vllm#{n}", "{n}-commit", "{n} `PORT-NOW`"]))
def test_a_number_of_any_length_in_the_kept_prose_is_checked(digits: int, shape: str) -> None:
    """`vllm#`, a commit count or a tally of over 4300 digits in the PARITY PIN paragraph made
    the advance say 'internal error: ValueError' (int()); one that long is no PR or count of
    this cycle, so it is named as unchecked."""
    claim = shape.format(n="9" * digits)
    r = rewrite(TEXT.replace(REAL, CLEAN + f" See {claim} here."),
                tallies=(("commits", 113), ("PORT-NOW", 5)))
    assert any(claim in u for u in r.unchecked)
