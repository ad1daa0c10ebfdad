import math

import pytest

from streamvoice.engine.streaming.windows import FRAME_S
from streamvoice.server.core.window_sizing import (
    COST_SPREAD,
    LARGEST_WINDOW_FRAMES,
    PAST_CAPACITY_WINDOW_FRAMES,
    SMALLEST_WINDOW_FRAMES,
    SUSTAINABLE_LOAD,
    WindowCost,
    batch_bucket,
    sustainable_frames,
    window_cap,
    window_frames,
)


def test_the_fit_finds_the_fixed_part_and_the_part_per_frame() -> None:
    cost = WindowCost(rtf=0.5)
    for _ in range(40):
        for frames in (12, 16, 40, 60):
            cost.observe(frames, 0.09 + 0.0075 * frames)
    assert cost.fixed_s == pytest.approx(0.09, rel=0.05)
    assert cost.per_frame_s == pytest.approx(0.0075, rel=0.05)
    assert cost.seconds(40) == pytest.approx(0.39, rel=0.02)


def test_windows_of_one_size_move_the_level_and_keep_the_shape() -> None:
    cost = WindowCost(rtf=0.4)
    share = cost.fixed_s / cost.seconds(40)
    for _ in range(200):
        cost.observe(40, 0.8)  # a machine twice as slow as the prior, seen at one size only
    assert cost.seconds(40) == pytest.approx(0.8, rel=0.05)
    assert cost.fixed_s / cost.seconds(40) == pytest.approx(share, rel=0.2)


def test_noise_never_gives_a_negative_fixed_part_or_a_free_frame() -> None:
    cost = WindowCost(rtf=0.4)
    for _ in range(10):
        for frames in (12, 40):
            cost.observe(frames, 0.1 + 0.0075 * frames)
    for _ in range(30):  # large windows faster than small ones: the fit's slope turns negative
        before = (cost.fixed_s, cost.per_frame_s)
        cost.observe(60, 0.05)
        assert cost.fixed_s >= 0 and cost.per_frame_s > 0
        if cost.per_frame_s >= before[1]:  # a negative fit is not taken: the last sensible one stays
            assert (cost.fixed_s, cost.per_frame_s) == before


def test_the_prior_follows_the_measured_speed() -> None:
    cost = WindowCost(rtf=0.4)
    assert cost.seconds(40) == pytest.approx(0.4 * 40 * FRAME_S)
    cost.reset(0.2)
    assert cost.seconds(40) == pytest.approx(0.2 * 40 * FRAME_S)


def test_frames_within_a_time() -> None:
    cost = WindowCost(rtf=0.4)
    frames = cost.frames_within(0.3)
    assert cost.seconds(frames) <= 0.3 < cost.seconds(frames + 1)
    assert cost.frames_within(cost.fixed_s / 2) == 0


def test_the_floor_is_the_smallest_window_the_listeners_can_sustain() -> None:
    # 2 cores, int8: ~95 ms per window plus ~7.6 ms per frame (context included in the fixed part)
    fixed, per_frame = 0.095, 0.0076
    floor = sustainable_frames(fixed, per_frame, 2, SUSTAINABLE_LOAD)
    assert floor is not None
    at_floor = 2 * (fixed + per_frame * floor) / (floor * FRAME_S)
    assert at_floor == pytest.approx(SUSTAINABLE_LOAD)
    assert sustainable_frames(fixed, per_frame, 1, SUSTAINABLE_LOAD) < floor  # type: ignore[operator]
    assert sustainable_frames(fixed, per_frame, 3, SUSTAINABLE_LOAD) is None  # 3 x 0.3 s/s > 0.85
    assert sustainable_frames(fixed, per_frame, 0, SUSTAINABLE_LOAD) == 0.0


def test_a_window_never_asks_for_more_decoding_than_the_audio_buffered() -> None:
    """A piece's second window once took 0.18-0.22 s to decode after a first window of 0.185 s of audio:
    a gap in the middle of a word. Each window now fits in what its listener has buffered (and, when
    another listener waits, in what that one has left less its own smallest window), with the measured
    spread of window costs to spare."""
    cost = WindowCost(rtf=0.33)  # 2 cores: 40 frames ~0.33 s
    for own_s in (0.3, 0.5, 0.8):
        frames = window_frames(cost, own_s=own_s, waiting_s=None, floor=cost.floor_frames(1))
        assert SMALLEST_WINDOW_FRAMES <= frames <= LARGEST_WINDOW_FRAMES
        assert COST_SPREAD * cost.seconds(frames) <= own_s
    assert window_frames(cost, own_s=5.0, waiting_s=None, floor=0.0) == LARGEST_WINDOW_FRAMES
    # Another listener runs out in 0.6 s: this window and that one's smallest both end before then.
    frames = window_frames(cost, own_s=5.0, waiting_s=0.6, floor=cost.floor_frames(2))
    assert COST_SPREAD * (cost.seconds(frames) + cost.seconds(SMALLEST_WINDOW_FRAMES)) <= 0.6
    assert frames > SMALLEST_WINDOW_FRAMES


def test_two_listeners_short_of_audio_never_get_windows_smaller_than_they_can_sustain() -> None:
    """Both short of audio: windows stay large enough that the machine makes audio faster than both play
    it, whatever the budgets say. Smaller windows cost more per second of audio: two listeners whose
    buffers shrank together had their windows shrunk further and stayed behind (6-12 s of stalls with
    12-frame windows)."""
    cost = WindowCost(rtf=0.4)  # 40 frames: 0.1 s fixed + 0.3 s; 12 frames: 0.19 s
    floor = cost.floor_frames(2)
    assert floor is not None and floor > SMALLEST_WINDOW_FRAMES
    for own_s, waiting_s in ((0.0, 0.0), (-0.5, 0.1), (2.0, 0.0), (0.2, 0.3)):
        frames = window_frames(cost, own_s=own_s, waiting_s=waiting_s, floor=floor)
        assert frames >= floor
        assert 2 * cost.seconds(frames) <= frames * 0.025  # both keep up
    assert cost.floor_frames(3) is None  # no size sustains three: the largest
    assert window_frames(cost, own_s=0.0, waiting_s=0.0, floor=None) == LARGEST_WINDOW_FRAMES


def test_a_listener_short_of_audio_is_kept_fed_from_the_others_spare() -> None:
    """A newcomer, or a piece's start, while the other listener has audio to spare: the floor there made a
    12-frame second window 16 (a 43 ms gap) and a 31-frame window a 240 ms stall (traced, two listeners,
    a busy loop on half a core). Then the listener's own budget decides."""
    cost = WindowCost(rtf=0.33)
    floor = cost.floor_frames(2)
    assert floor is not None and COST_SPREAD * cost.seconds(math.ceil(floor)) > 0.185
    for waiting_s in (None, 1.0, 3.0):
        frames = window_frames(cost, own_s=0.185, waiting_s=waiting_s, floor=floor)
        assert frames == SMALLEST_WINDOW_FRAMES < floor
    frames = window_frames(cost, own_s=0.3, waiting_s=1.0, floor=floor)
    assert COST_SPREAD * cost.seconds(frames) <= 0.3


def test_the_cap_follows_the_load() -> None:
    cost = WindowCost(rtf=0.33)
    args = {"cost": cost, "own_s": 5.0, "listeners": 1, "batched": False}
    assert window_cap(waiting_s=0.1, overloaded=True, **args) == PAST_CAPACITY_WINDOW_FRAMES
    assert window_cap(waiting_s=None, overloaded=False, **args) == LARGEST_WINDOW_FRAMES
    short = {**args, "own_s": 0.3}
    frames = window_cap(waiting_s=None, overloaded=False, **short)
    assert COST_SPREAD * cost.seconds(frames) <= 0.3
    batched = window_cap(waiting_s=None, overloaded=False, **{**short, "batched": True})
    assert batched == batch_bucket(frames) <= frames
