import pytest

from streamvoice.server.window_cost import (
    FRAME_S,
    SUSTAINABLE_LOAD,
    WindowCost,
    sustainable_frames,
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
