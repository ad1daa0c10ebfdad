"""The GPU served-path benchmark's accounting, on a scripted model: a fast one keeps everyone fed, one slower
than real time is caught stalling, and the scheduler batches what waits together."""

from __future__ import annotations

import time

from streamvoice.bench.gpu_served import Listener, serve


def test_a_player_counts_stalls_only_after_its_first_audio() -> None:
    me = Listener(joined=10.0, pieces=2)
    me.hand(10.3, 1.0)  # heard 0.3 s after joining, plays until 11.3
    me.hand(11.0, 1.0)  # arrived in time: plays until 12.3
    me.hand(12.5, 1.0)  # 0.2 s late
    assert abs(me.heard_s - 0.3) < 1e-9 and abs(me.stalled_s - 0.2) < 1e-9 and not me.fed


def scripted(cost_per_call_s: float, audio_s: float):  # type: ignore[no-untyped-def]
    def run(rows: list[int]) -> list[int]:
        time.sleep(cost_per_call_s)
        return [int(audio_s * 24_000)] * len(rows)

    return run


def test_a_fast_model_keeps_every_listener_fed_and_batches_them() -> None:
    result = serve(scripted(0.02, 1.0), [10, 20], lambda r: r, lambda s: s, k=8, pieces=3, piece_every_s=0.3)
    assert result["fed"] == 8 and result["errors"] == 0
    assert result["rows_per_call"] > 1  # listeners joining together shared calls


def test_a_model_slower_than_real_time_is_seen_to_stall() -> None:
    result = serve(scripted(0.5, 0.2), [10], lambda r: r, lambda s: s, k=2, pieces=3, piece_every_s=0.05)
    assert result["fed"] == 0 and result["worst_stall_ms"] > 100
