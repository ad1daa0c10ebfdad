"""``server.load``: what admission and window sizing read: listeners with work, the speed of full windows
measured alone, the capacity that follows."""

from __future__ import annotations

from streamvoice.server.core.load import Load


def test_capacity_is_configured_or_follows_the_measured_speed() -> None:
    assert Load(workers=1, configured_listeners=3).capacity() == 3
    load = Load(workers=1)
    load.calibrate(0.2)  # 0.2 s of work per second of audio, 0.04 more for piece starts: 0.85 / 0.24 -> 3
    assert load.capacity() == 3


def test_only_full_windows_decoded_alone_change_the_speed() -> None:
    load = Load(workers=1)
    load.calibrate(0.2)
    load.observe_decode(seconds=5.0, audio_s=1.0, alone=False)  # contended: not the machine's speed
    load.observe_decode(seconds=5.0, audio_s=0.25, alone=True)  # a short window: costs more per second
    assert load.capacity() == 3
    for _ in range(200):
        load.observe_decode(seconds=1.0, audio_s=1.0, alone=True)  # real time: one listener per core
    assert load.capacity() == 1


def test_overloaded_means_two_more_listeners_than_are_fed() -> None:
    load = Load(workers=1, configured_listeners=2)
    load.lane_activity(+3)
    assert not load.overloaded  # one beyond the estimate: windows stay as they were
    load.lane_activity(+1)
    assert load.overloaded and load.active_lanes == 4
