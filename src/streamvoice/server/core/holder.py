"""What admission reads of whoever holds a listener slot: when its queued speech will have played, and whether
it can hand its slot over at a pause. The full face (its lane, how to shed it) is ``core.listener``;
admission is generic over it, so it stays below the lane in the import graph."""

from __future__ import annotations

from typing import Protocol


class Holder(Protocol):
    @property
    def hands_over(self) -> bool:
        """It can give its slot to a waiting caller at a pause and take it back after (a socket can; a
        streamed HTTP answer cannot pause its body, so it keeps its slot to its end)."""
        ...

    def speaking_until(self) -> float | None:
        """When (monotonic) the audio it has queued will have played; None when it cannot tell."""
        ...
