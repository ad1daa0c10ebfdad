"""The speech server on the PyTorch engine (``STREAMVOICE_ENGINE=torch``), end to end on the CPU: listeners
at once, each piece through the GPU scheduler, every answer heard as its words by Whisper."""

from __future__ import annotations

import asyncio
import os

import numpy as np
from tests.helpers import start_speech_server

from streamvoice.bench.asr import Transcriber
from streamvoice.bench.wer import word_error_rate
from streamvoice.client.speech import SpeechClient
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import EngineOptions
from streamvoice.model_files import resolve_model_files

TEXTS = (
    "The train to Lisbon leaves from platform four at nine.",
    "Please hold while I transfer your call.",
    "Your order has shipped and arrives on Tuesday.",
)


def test_listeners_at_once_are_answered_through_the_gpu_scheduler_and_heard() -> None:
    engine = KokoroEngine(
        resolve_model_files(os.environ.get("KOKORO_MODEL_DIR")), EngineOptions(runtime="torch")
    )
    assert engine.decoder_graph == "torch"
    # warmed up as `streamvoice serve` does (its /ping answers 200 only after): the greeting is audible, and
    # the machine is priced on whole pieces with every model worker busy at once (readiness.time_pieces_at_once;
    # on this CPU that is about one listener, so admission is told three)
    server = start_speech_server(engine, synth_workers=3, warm_up=True, admission_listeners=len(TEXTS))
    try:

        async def one(text: str) -> bytes:
            async with await SpeechClient.connect(server.url) as client:
                return (await client.speak(text, voice="af_heart")).audio

        async def all_at_once() -> list[bytes]:
            return list(await asyncio.gather(*(one(t) for t in TEXTS)))

        answers = asyncio.run(all_at_once())
    finally:
        server.stop()
        engine.graph.close()  # type: ignore[attr-defined]
    transcriber = Transcriber.load(threads=2)
    for text, audio in zip(TEXTS, answers, strict=True):
        samples = np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768
        heard = transcriber.transcribe(samples, 24000, language="en")
        assert word_error_rate(text, heard) <= 0.2, (text, heard)
    graph = engine.graph
    assert graph.rows >= len(TEXTS) and graph.calls >= 1  # type: ignore[attr-defined]
