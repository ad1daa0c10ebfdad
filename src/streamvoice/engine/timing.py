"""Where the speech is in a piece, and when each word is said, from the durations Kokoro's front predicts.

The front predicts how many frames (600 samples, 25 ms) every phoneme token lasts before the decoder runs.
Two facts follow, both known before any audio exists:

- The model wraps every call in silence: the leading pad token lasts ~300-450 ms and the final phoneme
  plus its punctuation ~450-500 ms more, measured on the bench sentences and three voices. The decoder does
  not need to run on most of it, and a listener should not wait through it. Onsets start a median 45 ms
  (90th percentile 80 ms) before the first phoneme's frame (a breath, a plosive's closure), so decoding
  starts ``LEAD_FRAMES`` earlier and the audio is cut at the first audible block, less ``LEAD_MARGIN_MS``.
- Word times: the frames of the phoneme characters that spell each word (``alignment.word_spans``).

Pauses are then added back as generated silence sized by the punctuation that ended the piece: the model's
own silences are the same after a comma as after a paragraph.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamvoice.audio.levels import AUDIBLE_DBFS, block_levels
from streamvoice.engine.alignment import WordSpan, WordTime
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME
from streamvoice.protocol import SAMPLE_RATE, Pauses

LEAD_FRAMES = 4  # decode from 100 ms before the first phoneme: 90% of onsets start less than 80 ms early
TAIL_FRAMES = 3  # and three past its predicted end, for a slow decay (af_nicole's "so"; docs/benchmarks.md 7)
# Silence kept before the first audible block: the listener hears it as latency. The 5 ms fade-in at the cut
# covers it, and what lies before the block is below -50 dBFS (streamed-vs-whole PESQ unchanged from 20 ms).
LEAD_MARGIN_MS = 5.0
RELEASE_MS = 30.0  # silence kept after the last audible block (the decay below the threshold)
FADE_MS = 5.0  # faded out at the cut after the release
# A phoneme becomes audible ~2 frames before its predicted frames begin (median 45 ms over 12 sentences and
# 5 voices: first audible sample vs the first phoneme's frame), so word times are moved that much earlier.
SOUND_LEAD_MS = 50.0
MS_PER_SAMPLE = 1000 / SAMPLE_RATE


def decode_range(
    durations: NDArray[np.int64] | None, voiced: tuple[int, int], frames: int
) -> tuple[int, int]:
    """Frames worth decoding: from just before the first voiced phoneme to just after the last.

    ``durations`` has one entry per token including the two pads; ``voiced`` is the range of phoneme
    characters that are not spaces or punctuation. Without durations, everything.
    """
    if durations is None or len(durations) < 3 or voiced[0] >= voiced[1]:
        return 0, frames
    edges = np.concatenate([[0], np.cumsum(durations)])
    first, last = int(edges[voiced[0] + 1]), int(edges[voiced[1] + 1])  # +1: the leading pad token
    return max(0, first - LEAD_FRAMES), min(frames, last + TAIL_FRAMES)


def word_times(
    spans: tuple[WordSpan, ...],
    durations: NDArray[np.int64] | None,
    start_sample: int,
    length: int,
) -> list[WordTime]:
    """Each word's start and end in ms from the piece's first kept sample (model sample ``start_sample``).

    Without durations, the piece's words as one span over its audio: coarse, never wrong.
    """
    if not spans:
        return []
    end_ms = length * MS_PER_SAMPLE
    if durations is None:
        return [WordTime(" ".join(s.word for s in spans), 0.0, round(end_ms, 1))]
    edges = (np.concatenate([[0], np.cumsum(durations)]) * SAMPLES_PER_FRAME - start_sample) * MS_PER_SAMPLE
    edges -= SOUND_LEAD_MS
    times = []
    for span in spans:
        a = float(np.clip(edges[span.first + 1], 0.0, end_ms))
        b = float(np.clip(edges[span.last + 1], a, end_ms))
        times.append(WordTime(span.word, round(a, 1), round(b, 1)))
    return times


def _loud_blocks(audio: NDArray[np.float32]) -> NDArray[np.intp]:
    return np.flatnonzero(block_levels(audio, SAMPLE_RATE) > AUDIBLE_DBFS)


BLOCK = round(SAMPLE_RATE * 5 / 1000)
LEAD_MARGIN = round(SAMPLE_RATE * LEAD_MARGIN_MS / 1000)
RELEASE = round(SAMPLE_RATE * RELEASE_MS / 1000)
FADE = round(SAMPLE_RATE * FADE_MS / 1000)


def _release_cut(audio: NDArray[np.float32], released: int) -> tuple[int, int]:
    """Where a chunk's kept audio ends: ``RELEASE_MS`` after its last audible block or, with none in it, the
    rest of a release that began ``released`` samples ago in an earlier chunk; and the release's length there.
    """
    loud = _loud_blocks(audio)
    if loud.size:
        start, released = (int(loud[-1]) + 1) * BLOCK, 0
    else:
        start = 0
    keep = min(len(audio), start + max(0, RELEASE - released))
    return keep, released + keep - start


def cut_tail(audio: NDArray[np.float32], released: int = RELEASE) -> NDArray[np.float32]:
    """The piece's last chunk, ending ``RELEASE_MS`` after its last audible block, faded at the cut;
    ``released`` as in ``_release_cut`` (by default a chunk without audible sound is cut whole)."""
    out = audio[: _release_cut(audio, released)[0]].copy()
    fade = min(FADE, len(out))
    out[len(out) - fade :] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    return out


@dataclass
class TrimmedPiece:
    """A piece's audio with the model's leading and trailing silence cut, chunk by chunk as it is decoded.

    Leading silence is dropped until the first audible block, which fixes where the piece's audio starts;
    ``on_start`` is told that model sample (word times count from it) before the first chunk is yielded.
    """

    chunks: Iterator[
        tuple[NDArray[np.float32], bool]
    ]  # (audio, is the last chunk) from model sample ``first``
    first_sample: int
    on_start: Callable[[int], None] | None = None

    def __iter__(self) -> Generator[NDArray[np.float32]]:
        position = self.first_sample  # model sample of the next chunk's first sample
        started = False
        # Silence at the end of a chunk is held back until the next chunk shows whether speech follows:
        # the piece's last audible sound may come before its last chunk, or end at a chunk's very end and
        # decay in the next (``released``: samples yielded since the last audible block).
        held = np.zeros(0, dtype=np.float32)
        released = 0
        for audio, last in self.chunks:
            chunk = audio
            if not started:
                loud = _loud_blocks(chunk)
                if loud.size == 0:
                    position += len(chunk)
                    continue
                cut = _lead_cut(loud)
                chunk = fade_in(chunk[cut:])
                position += cut
                started = True
                if self.on_start is not None:
                    self.on_start(position)
            chunk = np.concatenate([held, chunk]) if held.size else chunk
            if last:
                chunk, held = cut_tail(chunk, released), held[:0]
            else:
                keep, released = _release_cut(chunk, released)
                chunk, held = chunk[:keep], chunk[keep:]
            if chunk.size:
                yield chunk


def trim_whole(audio: NDArray[np.float32], first_sample: int = 0) -> tuple[NDArray[np.float32], int]:
    """A whole piece's audio trimmed the same way; also the model sample it now starts at."""
    loud = _loud_blocks(audio)
    if loud.size == 0:
        return audio[:0], first_sample
    cut = _lead_cut(loud)
    return cut_tail(fade_in(audio[cut:])), first_sample + cut


def _lead_cut(loud: NDArray[np.intp]) -> int:
    """Where a piece's audio starts: ``LEAD_MARGIN_MS`` before its first audible block."""
    return max(0, int(loud[0]) * BLOCK - LEAD_MARGIN)


def fade_in(audio: NDArray[np.float32]) -> NDArray[np.float32]:
    """A few milliseconds faded in at a cut: silent in the usual case, no click if sound started sooner."""
    out = audio.copy()
    fade = min(FADE, len(out))
    out[:fade] *= np.linspace(0.0, 1.0, fade, dtype=np.float32)
    return out


def pause_samples(kind: str, pauses: Pauses, sample_rate: int = SAMPLE_RATE) -> NDArray[np.float32]:
    """The silence to add after a piece whose text ended in ``kind``: the pause less the release the piece
    already ends with, so the silence a listener hears after the last sound is the pause itself."""
    ms = pauses.after(kind)
    return np.zeros(max(0, round((ms - RELEASE_MS) * sample_rate / 1000)), dtype=np.float32)
