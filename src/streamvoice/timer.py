"""A one-shot call on the running event loop that can be armed again or disarmed: an utterance's quiet cut and
idle end (``server.core.utterance``), an HTTP connection's deadline for its request head (``request_head``).
Checked by ``pytest tests/test_utterance.py tests/test_request_head.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Timer:
    """Calls ``fire`` ``after_s`` from the last ``arm``, unless disarmed first."""

    def __init__(self, fire: Callable[[], None]) -> None:
        self._fire = fire
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, after_s: float) -> None:
        self.disarm()
        self._handle = asyncio.get_running_loop().call_later(after_s, self._fired)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fired(self) -> None:
        self._handle = None
        self._fire()
