"""What a server does with its engine before it takes a caller: warm it up, and time its steady windows.

Health means audio, not a socket: an engine that produces silence fails its warm-up. The warm-up's own speed
includes loading every language's G2P, the front model and small first windows, so it reads slower than
steady decoding and would size the server for fewer listeners than it keeps fed: admission
(``server.core.load``) is calibrated on ``time_windows`` instead.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from streamvoice.engine.greeting import calibration_text
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.options import EngineError
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME, WindowPlan
from streamvoice.engine.voices import SUPPORTED_LANGS, default_lang
from streamvoice.protocol import DEFAULT_VOICE, SAMPLE_RATE
from streamvoice.text.normalize import warm as warm_rules


def warm_up(engine: KokoroEngine, voices: tuple[str, ...] = (DEFAULT_VOICE,)) -> float:
    """Synthesise a short greeting per voice; returns seconds of audio produced. Blocking.

    Each installed language's G2P and number engine load first (num2words, cn2an: 60-200 ms to import),
    not on a caller's time; a stock voice whose decoder statistics are not known yet is calibrated
    (``KokoroEngine.calibrate``)."""
    for lang in SUPPORTED_LANGS:
        if engine.g2p.installed(lang):
            engine.g2p.phonemize(calibration_text(lang), lang)
            warm_rules(lang)
    seconds = 0.0
    for voice in voices:
        spec = engine.parse_voice(voice)
        for name, _ in spec.parts:
            if engine.voice_stats(name) is None:
                engine.calibrate(name)
        lang = default_lang(spec)
        audio = engine.synthesize(calibration_text(lang), voice, lang=lang)
        if audio.size == 0 or not np.isfinite(audio).all() or float(np.abs(audio).max()) < 1e-4:
            raise EngineError(f"warm-up synthesis with {voice} produced no audible audio")
        seconds += audio.size / SAMPLE_RATE
    return seconds


def time_windows(
    engine: KokoroEngine, voice: str = DEFAULT_VOICE, frames: int = 40, passes: int = 2
) -> list[tuple[float, float]]:
    """(seconds of audio, seconds of work) of each full-size window of the calibration text, said
    ``passes`` times, each piece's first window (the front model runs in it) and last (it decodes the
    trimmed tail) left out. Blocking."""
    spec = engine.parse_voice(voice)
    lang = default_lang(spec)
    plan = WindowPlan(first=frames, second=frames, growth=1.0, largest=frames)
    pieces = engine.planner.plan(calibration_text(lang), lang)
    timed: list[tuple[float, float]] = []
    for piece in pieces * passes:
        windows = engine.stream_piece(piece, spec, 1.0, plan=plan)
        these: list[tuple[float, float]] = []
        while True:
            started = time.perf_counter()
            window = next(windows, None)
            if window is None:
                break
            these.append((window.size / SAMPLE_RATE, time.perf_counter() - started))
        timed += [t for t in these[1:-1] if t[0] >= 0.75 * frames * SAMPLES_PER_FRAME / SAMPLE_RATE]
    return timed


def time_pieces_at_once(
    engine: KokoroEngine, voice: str = DEFAULT_VOICE, workers: int = 1, passes: int = 1
) -> list[tuple[float, float]]:
    """(seconds of audio, seconds it took) of each whole piece of the calibration text, ``workers`` pieces
    in flight at once: the cost of a piece to its model worker when every worker is busy. An engine that
    does not window (the PyTorch engine batching pieces on a GPU) is measured this way: one piece alone
    would price a shared, batching GPU as if each listener had it to himself. Blocking."""
    spec = engine.parse_voice(voice)
    lang = default_lang(spec)
    pieces = engine.planner.plan(calibration_text(lang), lang)

    def timed(i: int) -> tuple[float, float]:
        started = time.perf_counter()
        audio = engine.synthesize_piece(pieces[i % len(pieces)], spec, 1.0)
        return audio.size / SAMPLE_RATE, time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="calibrate") as pool:
        list(pool.map(timed, range(workers)))  # the first pass captures each new shape: not timed
        return list(pool.map(timed, range(workers * passes)))
