"""How the fit chooses each voice's share of the estimate (``bench.fit_speech_estimate.chosen_share``), and
that its calibration sentences stay out of the voice's own part of the corpus and out of the benchmarks'."""

from __future__ import annotations

import zlib

from streamvoice.bench import fit_speech_estimate as fit
from streamvoice.bench.quality import SENTENCES as QUALITY
from streamvoice.bench.stream_breakdown import SENTENCES as BREAKDOWN
from tests.test_streaming_engine import CLOSE_TO_WHOLE


def scores(per_share: list[tuple[float, float]], sentences: int = 3) -> list[list[tuple[float, float]]]:
    assert len(per_share) == len(fit.SHARES)
    return [list(per_share) for _ in range(sentences)]


def test_the_best_sounding_share_that_keeps_the_loudness_wins() -> None:
    # (loudness, PESQ) at each of SHARES, largest first: the largest is best but too loud.
    got = fit.chosen_share(scores([(1.6, 3.4), (1.1, 3.3), (1.0, 3.1), (0.95, 2.9)]))
    assert got == fit.SHARES[1]


def test_one_sentence_out_of_bounds_rules_a_share_out() -> None:
    table = scores([(1.0, 3.5), (1.0, 3.0), (1.0, 2.9), (1.0, 2.8)])
    table[2][0] = (0.7, 3.5)  # the largest share leaves one sentence too quiet
    assert fit.chosen_share(table) == fit.SHARES[1]


def test_without_a_share_in_the_tight_bounds_the_guards_bounds_decide() -> None:
    # None keeps 0.85-1.18; two keep the guard's 0.8-1.25, and the better sounding of those wins.
    got = fit.chosen_share(scores([(1.24, 3.1), (1.22, 2.9), (1.3, 3.5), (0.7, 3.6)]))
    assert got == fit.SHARES[0]


def test_without_a_share_in_any_bounds_the_loudness_nearest_whole_wins() -> None:
    got = fit.chosen_share(scores([(1.7, 3.0), (1.4, 2.0), (1.3, 2.0), (1.35, 3.9)]))
    assert got == fit.SHARES[2]


def test_no_voice_takes_the_estimate_alone() -> None:
    assert max(fit.SHARES) < 1.0


def test_calibration_sentences_are_outside_the_voices_corpus_and_every_benchmark() -> None:
    held = set(QUALITY) | set(BREAKDOWN) | set(CLOSE_TO_WHOLE)
    for voice in ("af_bella", "am_michael", "bf_emma", "jf_alpha"):
        key = zlib.crc32(voice.encode())
        chosen = fit.share_sentences(key)
        assert len(chosen) == 6 and all(len(text) > 50 for text in chosen)
        own = {text for text, _ in fit.corpus(key, "en-us")}
        assert not (set(chosen) & own) and not (set(chosen) & held), voice


def test_the_sentences_heard_per_language_are_outside_the_fit_and_cover_every_language() -> None:
    from streamvoice.bench.languages import SENTENCES as SAID
    from streamvoice.bench.stream_breakdown import HEARD_MORE, HEARD_VOICES

    fitted = {text for lang in SAID for key in range(3) for text, _ in fit.corpus(key, lang)}
    for lang, (first, _, texts) in SAID.items():
        assert HEARD_VOICES[lang][0] == first, lang  # the voice the language's other benchmarks hear
        assert HEARD_MORE[lang] and not (set(texts) | set(HEARD_MORE[lang])) & fitted, lang
    assert set(HEARD_VOICES) == set(HEARD_MORE) == set(SAID)
