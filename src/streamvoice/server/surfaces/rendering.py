"""One way from an utterance's events to any wire: its audio encoded in the format the caller asked for, the
first audio timed (the time-to-first-audio metric, on every surface), the encoder's tail before the end.

Every wire renders these events, never the utterance's raw ones: a socket wire through ``connection``'s
render methods, an HTTP answer through ``http_stream``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass

import numpy as np

from streamvoice.audio.output import AudioOutput
from streamvoice.server.core.events import Completed, Failed, Marked, PieceEnded, PieceStarted
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance


@dataclass(frozen=True)
class Sound:
    """Encoded audio: ``data`` (may be empty while an encoder such as MP3 holds it) covers ``samples`` of
    the model's audio (0 for the encoder's tail)."""

    data: bytes
    samples: int


Encoded = PieceStarted | Words | Sound | PieceEnded | Marked | Completed | Failed


async def encoded_events(
    utterance: Utterance, request: ResolvedRequest, on_first_audio: Callable[[], None]
) -> AsyncGenerator[Encoded]:
    """The utterance's events in speaking order with its audio encoded; ``on_first_audio`` when the first
    bytes of audio are ready. Closing this generator stops the utterance's work (a client that left)."""
    output = AudioOutput(request.format, request.sample_rate, request.bitrate_kbps)
    heard = False
    async with aclosing(utterance.events()) as events:
        async for event in events:
            if isinstance(event, np.ndarray):
                data = output.encode(event)
                if data and not heard:
                    heard = True
                    on_first_audio()
                yield Sound(data, event.size)
            elif isinstance(event, Completed):
                tail = output.flush()
                if tail:
                    yield Sound(tail, 0)
                yield event
            else:
                yield event
