"""Batched decoder windows with the real model: the decoder graph takes a batch, rows of a batch are the same
speech as windows decoded alone (speech-to-text and spectral distance), and a speech server with
``decode_batch`` serves several listeners through one batcher and counts its batches in ``/metrics``.

Rows through the rewritten graph are bit-identical to the graph as exported (the surgery rewrites shapes and
the inverse STFT's normalisation, not arithmetic): ``test_the_batch_surgery_changes_no_sample``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from numpy.typing import NDArray
from websockets.asyncio.client import connect

from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.engine.static_int8.static_decoder import CALIBRATION
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.engine.streaming.windows import WindowPlan
from streamvoice.engine.surgery import graph_split
from streamvoice.engine.surgery.batch_graph import BatchGraphError
from streamvoice.engine.surgery.graph_split import split_model
from streamvoice.server.core.config import ConfigError, ServerConfig
from streamvoice.server.core.window_sizing import BATCH_BUCKETS, batch_bucket
from tests.helpers import RunningServer, collect, metric, start_speech_server, worker_engine_options

SENTENCES = {
    "af_heart": "The museum opens at nine, and tours start every half hour after that.",
    "am_michael": "Please bring your passport, or you cannot board the plane this evening.",
}
PLAN = WindowPlan(first=24, second=24, growth=1.0, largest=24)  # windows of one size, so rows meet
OTHER_PLAN = WindowPlan(first=28, second=28, growth=1.0, largest=28)


def stream(engine: KokoroEngine, voice: str, text: str, plan: WindowPlan) -> NDArray[np.float32]:
    """The model's windowed audio, silences and all (untrimmed, so renditions align sample for sample)."""
    spec = engine.parse_voice(voice)
    pieces = engine.planner.plan(text, engine.resolve_lang(spec, None))
    return np.concatenate(
        [c for p in pieces for c in engine.stream_piece(p, spec, 1.0, plan=plan, trim=False)]
    )


def test_kokoro_decoder_takes_a_batch(engine: KokoroEngine) -> None:
    split = engine.split
    assert split is not None and split.batchable
    batch_dims = [i.shape[0] for i in split.decoder.get_inputs()]
    assert set(batch_dims) == {"batch"}


def test_the_batch_surgery_changes_no_sample(engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export's normalisation (``NonZero`` + ``ScatterND``, one row only) and its elementwise rewrite give
    the same samples; the rewrite leaves no data-dependent shape behind. (Rows of a batch share the int8
    graph's dynamic quantisation scales, so they are compared by ear below, not sample by sample.)"""
    batched = split_model(engine.files.model)

    def refuse(model: object) -> None:
        raise BatchGraphError("the export as it is")

    monkeypatch.setattr(graph_split, "make_batchable", refuse)
    exported = split_model(engine.files.model)
    assert batched.batchable and not exported.batchable
    ops = {n.op_type for n in onnx.load_from_string(batched.decoder).graph.node}
    assert not ops & {"NonZero", "ScatterND"}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    new, old = (ort.InferenceSession(graph, so) for graph in (batched.decoder, exported.decoder))
    windows = engine.decoder_windows(CALIBRATION[:2], 24, 4)[:2]
    rows = [new.run(None, w)[0] for w in windows]
    ranks = {i.name: len(i.shape) for i in old.get_inputs()}  # the export's blend weights are scalars
    for window, row in zip(windows, rows, strict=True):
        feeds = {name: v.reshape(-1) if ranks[name] == 1 else v for name, v in window.items()}
        assert np.array_equal(row.reshape(-1), old.run(None, feeds)[0].reshape(-1))


def test_batched_rows_are_the_same_speech_as_windows_decoded_alone(
    engine: KokoroEngine,
    transcriber,  # type: ignore[no-untyped-def]
) -> None:
    split = engine.split
    assert split is not None
    alone = {voice: stream(engine, voice, text, PLAN) for voice, text in SENTENCES.items()}
    other = {voice: stream(engine, voice, text, OTHER_PLAN) for voice, text in SENTENCES.items()}
    batched: dict[str, NDArray[np.float32]] = {}
    live = {"n": len(SENTENCES)}
    lock = threading.Lock()

    def one(voice: str, text: str) -> None:
        try:
            batched[voice] = stream(engine, voice, text, PLAN)
        finally:
            with lock:
                live["n"] -= 1

    # Every live stream is waited for (up to 2 s), so both sentences' windows go in shared calls.
    split.enable_batching(len(SENTENCES), 2.0, lambda: live["n"])
    try:
        threads = [threading.Thread(target=one, args=pair) for pair in SENTENCES.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        batcher = split.batcher
        assert batcher is not None
        # Windows of one size meet; a piece's last window (its own size) and a front call on the other
        # stream make some go alone.
        assert batcher.rows >= batcher.calls + 3, "the two streams' windows should share calls"
    finally:
        split.batcher = None
    for voice, text in SENTENCES.items():
        assert batched[voice].size == alone[voice].size
        heard = transcriber.transcribe(batched[voice])
        assert (
            word_error_rate(text, heard) <= word_error_rate(text, transcriber.transcribe(alone[voice])) + 0.05
        )
        # Rows of a batch differ from a lone call by rounding (the sine source's phase, the shared int8
        # quantisation scale), which the decoder amplifies in near-silent bins: no more than decoding the
        # same piece with other window boundaries changes it (bench.batching: 4-7 dB for both).
        assert log_spectral_distance(alone[voice], batched[voice]) <= (
            log_spectral_distance(alone[voice], other[voice]) + 2.0
        )


def test_capped_windows_take_batch_sizes() -> None:
    assert [batch_bucket(n) for n in (1, 12, 15, 16, 23, 24, 39, 40)] == [12, 12, 12, 16, 16, 24, 32, 40]
    assert set(map(batch_bucket, range(0, 60))) == set(BATCH_BUCKETS)


def test_decode_batch_is_validated() -> None:
    with pytest.raises(ConfigError, match="STREAMVOICE_DECODE_BATCH=0 is out of range: it takes 1-16"):
        ServerConfig(decode_batch=0)


@pytest.fixture(scope="module")
def batching_server(kokoro_dir: Path) -> Iterator[RunningServer]:
    engine = KokoroEngine.load(
        kokoro_dir, options=worker_engine_options()
    )  # its own engine: the server turns batching on in it
    prepare(engine)
    # Three listeners at once, each admitted: what is tested is that their windows meet in batches.
    server = start_speech_server(engine, decode_batch=2, warm_up=False, admission_listeners=3)
    yield server
    server.stop()


@pytest.mark.slow
async def test_a_batching_server_serves_every_listener_and_counts_its_batches(
    batching_server: RunningServer,
) -> None:
    url = batching_server.url.replace("http", "ws") + "/invocations-bidirectional-stream"

    async def listener(i: int) -> dict[str, int]:
        async with connect(url, max_size=None) as ws:
            for k, text in enumerate(SENTENCES.values()):
                await ws.send(json.dumps({"text": text, "id": f"{i}-{k}"}))
            controls, audio = await collect(ws, until=len(SENTENCES))
            assert [c["type"] for c in controls if c["type"] in ("synthesis_complete", "error")] == [
                "synthesis_complete"
            ] * len(SENTENCES)
            return audio

    heard = await asyncio.gather(*(listener(i) for i in range(3)))
    for audio in heard:
        assert len(audio) == len(SENTENCES) and all(n > 24_000 for n in audio.values())  # > 0.5 s each
    calls = metric(batching_server, "streamvoice_decoder_batched_calls_total")
    windows = metric(batching_server, "streamvoice_decoder_batched_windows_total")
    assert calls > 0 and windows >= calls
