"""The engine's seam below its face (``engine.graphs``): both graphs take the same ``Decoding`` and say what
the exported file says; only the split one windows, and trimming decodes only the frames around speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.engine import KokoroEngine
from streamvoice.engine.graphs import Decoding, WholeGraph
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME

SENTENCE = "The museum opens at nine in the morning, and the guided tours start every half hour after that."


def test_both_graphs_say_what_the_exported_file_says(kokoro_dir: Path, exported_engine: KokoroEngine) -> None:
    """Split into front and decoder, the graph as exported (``int8``) decodes a whole piece as the file does
    run whole (the static-int8 decoder is judged against it: ``test_static_decoder``)."""
    engine = exported_engine
    assert engine.streams_in_piece and engine.decoder_graph == "exported"
    spec = engine.parse_voice("af_heart")
    piece = engine.planner.plan(SENTENCE, "en-us")[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    exported = WholeGraph(
        kokoro_dir / "kokoro-v1.0.int8.onnx", ort.SessionOptions(), ["CPUExecutionProvider"]
    )
    assert not exported.windows and exported.inputs == engine.graph.inputs
    reference = exported.decode_piece(feeds, style, Decoding(windowed=True))  # it cannot window: one chunk
    ((audio, last),) = list(reference.chunks)
    assert last and reference.durations is None and reference.first_frame == 0
    split = engine.graph.decode_piece(feeds, style, Decoding(windowed=False))
    ((split_audio, _),) = list(split.chunks)
    assert split_audio.shape == audio.shape and split.frames * SAMPLES_PER_FRAME == audio.size
    assert log_spectral_distance(split_audio, audio) < 0.5
    assert float(np.abs(split_audio - audio).max()) < 1e-2
    assert split.durations is not None and int(split.durations.sum()) == split.frames


def test_windows_cover_the_voiced_frames_only(engine: KokoroEngine) -> None:
    spec = engine.parse_voice("af_heart")
    piece = engine.planner.plan(SENTENCE, "en-us")[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    every = engine.graph.decode_piece(feeds, style, Decoding(plan=engine.window_plan))
    voiced = engine.graph.decode_piece(feeds, style, Decoding(plan=engine.window_plan, voiced=piece.voiced))
    all_chunks, voiced_chunks = list(every.chunks), list(voiced.chunks)
    assert len(all_chunks) > 1 and [last for _, last in voiced_chunks][-1]
    assert sum(a.size for a, _ in all_chunks) == every.frames * SAMPLES_PER_FRAME
    assert sum(a.size for a, _ in voiced_chunks) == voiced.frames * SAMPLES_PER_FRAME
    # The model's leading pad and trailing silence are not decoded at all
    assert voiced.first_frame > 0 and voiced.first_frame + voiced.frames < every.frames
