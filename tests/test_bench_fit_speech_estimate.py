"""How the fit chooses each voice's share of the estimate (``bench.fit_speech_estimate.chosen_share``), and
that its calibration sentences stay out of the voice's own part of the corpus and out of the benchmarks'."""

from __future__ import annotations

import math
import zlib

from streamvoice.bench import fit_speech_estimate as fit
from streamvoice.bench.quality import SENTENCES as QUALITY
from streamvoice.bench.stream_breakdown import SENTENCES as BREAKDOWN
from tests.test_streaming_engine import CLOSE_TO_WHOLE


def scores(per_share: list[tuple[tuple[float, ...], float]]) -> list[list[tuple[float, float]]]:
    """``chosen_share``'s table from each share's loudness on every sentence and its PESQ."""
    assert len(per_share) == len(fit.SHARES)
    sentences = len(per_share[0][0])
    return [[(loud[k], pesq) for loud, pesq in per_share] for k in range(sentences)]


def test_a_voice_loud_by_one_factor_takes_the_best_sounding_share_and_a_gain() -> None:
    # Every sentence equally loud at each share: the gain takes the factor out, so the sound decides.
    got = fit.chosen_share(
        scores([((1.6,) * 3, 3.4), ((1.1,) * 3, 3.3), ((1.0,) * 3, 3.1), ((0.95,) * 3, 2.9)])
    )
    assert got[0] == fit.SHARES[0]
    assert math.isclose(got[1], 1 / 1.6)


def test_a_spread_no_gain_takes_out_rules_a_share_out() -> None:
    # The best sounding share leaves one sentence at 0.7 and one at 1.3 of whole: no one gain mends both.
    table = scores([((0.7, 1.0, 1.3), 3.5), ((1.2, 1.25, 1.3), 3.0), ((1.0,) * 3, 2.9), ((1.0,) * 3, 2.8)])
    share, gain = fit.chosen_share(table)
    assert share == fit.SHARES[1]
    assert all(0.85 <= r * gain <= 1.18 for r in (1.2, 1.25, 1.3))


def test_without_a_share_in_the_tight_bounds_the_guards_bounds_decide() -> None:
    # None keeps 0.85-1.18 once gained; two keep the guard's 0.8-1.25, and the better sounding of those wins.
    got = fit.chosen_share(
        scores([((1.0, 1.45), 3.1), ((1.0, 1.45), 2.9), ((0.6, 1.5), 3.5), ((0.5, 1.0), 3.6)])
    )
    assert got[0] == fit.SHARES[0]


def test_without_a_share_in_any_bounds_the_loudness_nearest_whole_wins() -> None:
    got = fit.chosen_share(
        scores([((0.5, 1.5), 3.0), ((0.6, 1.5), 2.0), ((0.7, 1.5), 2.0), ((0.5, 2.0), 3.9)])
    )
    assert got[0] == fit.SHARES[2]


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


def test_the_short_replies_measured_are_outside_the_fit() -> None:
    from streamvoice.bench.stream_breakdown import SHORT_REPLIES

    fitted = {text for key in range(3) for text, _ in fit.corpus(key, "en-us")}
    assert not set(SHORT_REPLIES) & fitted
    assert not set(SHORT_REPLIES) & {t for key in range(3) for t in fit.share_sentences(key)}
