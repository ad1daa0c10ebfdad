"""A listener, as the core sees it: whoever holds a listener slot, a socket wire's connection
(``surfaces.connection``) or an HTTP answer's slot (``core.slots.Slot``). Admission, the slowdown watch and
the service read every holder through this one face, never by sniffing attributes
(``pytest tests/test_admission.py tests/test_watch.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from streamvoice.protocol import ProtocolError
    from streamvoice.server.core.lane import Lane


class Listener(Protocol):
    @property
    def hands_over(self) -> bool:
        """It can give its slot to a waiting caller at a pause and take it back after (a socket can; a
        streamed HTTP answer cannot pause its body, so it keeps its slot to its end)."""
        ...

    @property
    def lane(self) -> Lane | None:
        """Its work on the model (None before it has any): what the watch reads to see it starve."""
        ...

    def speaking_until(self) -> float | None:
        """When (monotonic) the audio it has queued will have played; None when it cannot tell."""
        ...

    def shed(self, error: ProtocolError) -> None:
        """Stop its answers with ``error`` (told in its wire's shape) and give its slot back."""
        ...
