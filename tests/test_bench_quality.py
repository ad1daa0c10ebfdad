"""``bench.quality``: what its modes refuse before any model loads, and how its DNSMOS judges a short clip."""

from __future__ import annotations

import pytest

from streamvoice.bench import quality


def test_sentence_leads_needs_two_leads_for_a_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        quality.main(["--sentence-leads", "1"])
    assert exited.value.code == 2
    assert "--sentence-leads takes 2 or more leads" in capsys.readouterr().err


def test_a_short_clip_is_judged_once_in_silence_and_a_long_one_as_it_is() -> None:
    """DNSMOS repeats a clip shorter than 9.01 s end to end; ``in_silence`` judges it once, then silence."""
    import numpy as np

    rng = np.random.default_rng(0)
    t = np.arange(24_000, dtype=np.float32) / 24_000
    reply = (0.2 * np.sin(2 * np.pi * 180 * t) * np.sin(np.pi * t)).astype(np.float32)
    reply += 0.01 * np.sin(np.pi * t) * rng.standard_normal(reply.size).astype(np.float32)
    reply = np.concatenate([reply, np.zeros(2_400, np.float32)])  # ends in silence, as a trimmed piece does
    seconds = int(quality.DNSMOS_SECONDS * 24_000) + 2_400
    padded = np.concatenate([reply, np.zeros(seconds - reply.size, np.float32)])
    assert quality.dnsmos(reply, in_silence=True) == pytest.approx(quality.dnsmos(padded), abs=1e-3)
    assert quality.dnsmos(reply, in_silence=True) != quality.dnsmos(reply)
    assert quality.dnsmos(padded, in_silence=True) == quality.dnsmos(padded)
