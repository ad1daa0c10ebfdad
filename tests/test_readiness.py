"""What a server does before its first caller (``engine.readiness``), over the scripted engine: which windows
the machine's measure counts. The warm-up on the real model runs in ``test_admission.py``'s server as
shipped; what the measure says about this machine is ``bench.capacity``'s."""

from __future__ import annotations

import numpy as np
import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import EngineError
from streamvoice.engine.readiness import time_windows, warm_up
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME
from streamvoice.protocol import SAMPLE_RATE


def test_only_full_windows_are_timed_each_pass(scripted: KokoroEngine) -> None:
    frames = 20
    once = time_windows(scripted, "af_heart", frames=frames, passes=1)
    twice = time_windows(scripted, "af_heart", frames=frames, passes=2)
    full_s = frames * SAMPLES_PER_FRAME / SAMPLE_RATE
    assert once and len(twice) == 2 * len(once)
    assert all(audio >= 0.75 * full_s and work >= 0 for audio, work in twice)  # a short window is not counted


def test_a_warm_up_that_hears_nothing_fails(scripted: KokoroEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    assert warm_up(scripted, ("af_heart",)) > 0
    monkeypatch.setattr(scripted, "synthesize", lambda *args, **kwargs: np.zeros(2400, np.float32))
    with pytest.raises(EngineError, match="no audible audio"):
        warm_up(scripted, ("af_heart",))
