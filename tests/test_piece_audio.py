"""``server.piece_audio``: a piece's windows cross from the model's thread to the loop in order, with one end,
and the lane hears what the listener took (or what a cancel released)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from streamvoice.server.core.piece_audio import PieceAudio


class Lane:
    """What a piece tells its lane: samples the listener took (or that were released), and an abandon."""

    def __init__(self) -> None:
        self.samples_taken = 0
        self.abandoned_pieces: list[PieceAudio] = []

    def taken(self, samples: int) -> None:
        self.samples_taken += samples

    def abandoned(self, sink: PieceAudio) -> None:
        self.abandoned_pieces.append(sink)


def window(n: int) -> np.ndarray:
    return np.full(n, 0.1, np.float32)


async def test_windows_from_a_thread_arrive_in_order_then_end() -> None:
    lane = Lane()
    piece = PieceAudio(asyncio.get_running_loop(), lane)

    def worker() -> None:
        for n in (10, 20, 30):
            piece.push(window(n))
        piece.finish()
        piece.push(window(99))  # after the end: never delivered

    thread = threading.Thread(target=worker)
    thread.start()
    sizes = [w.size async for w in piece.windows() if isinstance(w, np.ndarray)]
    thread.join()
    assert sizes == [10, 20, 30]
    await asyncio.sleep(0)
    assert lane.samples_taken == 60 + 99  # what the listener took, and the late window given back


async def test_a_cancel_releases_what_was_never_taken_and_ends_the_piece() -> None:
    lane = Lane()
    piece = PieceAudio(asyncio.get_running_loop(), lane)
    piece.push(window(10))
    piece.push(window(20))
    await asyncio.sleep(0)  # delivered to the queue, not taken
    piece.cancel()
    assert [w async for w in piece.windows()] == []
    assert lane.samples_taken == 30 and lane.abandoned_pieces == [piece]


async def test_the_models_error_is_raised_to_the_consumer() -> None:
    piece = PieceAudio(asyncio.get_running_loop())
    piece.push(window(5))
    piece.fail(RuntimeError("decoder failed"))
    with pytest.raises(RuntimeError, match="decoder failed"):
        async for _ in piece.windows():
            pass
