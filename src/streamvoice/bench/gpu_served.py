"""The GPU's served path without the transport: K listeners, each an answer arriving at LLM pace, every piece
through the one ``GpuScheduler`` (earliest deadline first, batched) onto the model, each listener played by
a real-time player. What it reports is what ``bench.capacity`` reports over the wire: who heard their first
sentence within 1 s and stalled at most 100 ms in all, and audio seconds made per second.

It runs where the speech server's own dependencies cannot travel: a device call carries 64 MiB, and the
model alone is 58 of them, so the G2P, the encoders and the web stack stay on this side. Pieces are tokens
prepared here (``bench.gpu_torch --prepare``); encoding (MP3, Opus) happens on the host's cores in the
server and is not counted. ``python -m streamvoice.bench.gpu_torch`` runs it on the device.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamvoice.engine.torch_kokoro.scheduler import GpuScheduler

SAMPLE_RATE = 24_000
HEARD_TARGET_S = 1.0
STALL_TARGET_S = 0.1


@dataclass
class Listener:
    joined: float
    pieces: int
    first_audio: float | None = None
    play_end: float = 0.0  # when its player runs out of what it has been handed
    stalled_s: float = 0.0
    audio_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def hand(self, now: float, seconds: float) -> None:
        """Audio arrives at ``now``: played at once if the player had run dry (a stall once it started)."""
        if self.first_audio is None:
            self.first_audio = now
            self.play_end = now
        elif now > self.play_end:
            self.stalled_s += now - self.play_end
            self.play_end = now
        self.play_end += seconds
        self.audio_s += seconds

    @property
    def heard_s(self) -> float | None:
        return None if self.first_audio is None else self.first_audio - self.joined

    @property
    def fed(self) -> bool:
        heard = self.heard_s
        return (
            heard is not None
            and heard <= HEARD_TARGET_S
            and self.stalled_s <= STALL_TARGET_S
            and not self.errors
        )


def serve(
    run: Callable[[list[Any]], list[Any]],
    rows: Sequence[Any],
    tokens: Callable[[Any], int],
    samples: Callable[[Any], int],
    k: int,
    *,
    pieces: int = 4,
    piece_every_s: float = 0.4,
    stagger_s: float = 0.01,
    max_rows: int = 32,
    buckets: Sequence[int] = (32, 64, 128, 256, 512),
) -> dict[str, Any]:
    """K listeners joining ``stagger_s`` apart, each handed ``pieces`` pieces ``piece_every_s`` apart (an LLM
    writing a sentence every 0.4 s is ~50 tokens/s), all through one scheduler over ``run``."""
    listeners = [Listener(0.0, pieces) for _ in range(k)]
    batches: list[int] = []
    start = time.monotonic()

    def one(i: int) -> None:
        me = listeners[i]
        me.joined = start + i * stagger_s
        for j in range(pieces):
            ready = me.joined + j * piece_every_s
            time.sleep(max(0.0, ready - time.monotonic()))
            row = rows[(i + j) % len(rows)]
            deadline = max(time.monotonic(), me.play_end)
            try:
                spoken = scheduler.speak(row, tokens(row), deadline)
            except Exception as exc:  # a failed piece is that listener's failure, reported
                me.errors.append(repr(exc))
                return
            me.hand(time.monotonic(), samples(spoken) / SAMPLE_RATE)

    with GpuScheduler(run, max_rows, buckets, batches.append) as scheduler:
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.monotonic() - start
    heard = [x.heard_s for x in listeners if x.heard_s is not None]
    return {
        "k": k,
        "fed": sum(x.fed for x in listeners),
        "heard_p50_ms": round(statistics.median(heard) * 1000) if heard else None,
        "heard_max_ms": round(max(heard) * 1000) if heard else None,
        "worst_stall_ms": round(max(x.stalled_s for x in listeners) * 1000),
        "calls": len(batches),
        "rows_per_call": round(sum(batches) / len(batches), 1) if batches else 0,
        "audio_s_per_s": round(sum(x.audio_s for x in listeners) / wall, 1),
        "errors": sum(len(x.errors) for x in listeners),
    }
