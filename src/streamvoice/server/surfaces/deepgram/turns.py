"""What Deepgram's two sockets (Aura ``/v1/speak`` and Flux ``/v2/speak``) share: one turn open at a time.
``Speak`` goes into the turn taking text, opening one when none is; ``Flush`` ends it. Checked by
``pytest tests/test_deepgram.py tests/test_deepgram_flux.py``."""

from __future__ import annotations

from collections.abc import Callable

from starlette.websockets import WebSocket

from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import Context, ContextSocket


class TurnSocket[S](ContextSocket[S]):
    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        super().__init__(ws, service, connection_id)
        self.current: Context[S] | None = None  # the turn taking text

    def speak(self, text: str, request: ResolvedRequest, new_id: Callable[[], str]) -> Context[S] | None:
        """``text`` into the open turn, or a new one (``new_id``); None when refused (the client was told)."""
        if self.current is None or not self.current.taking_text:
            self.current = self.start(new_id(), request)
            if self.current is None:
                return None
        self.append(self.current, text)
        return self.current

    def flushed(self) -> Context[S] | None:
        """The turn a ``Flush`` ends, if one takes text; none is open after it."""
        turn, self.current = self.current, None
        return turn if turn is not None and turn.taking_text else None
