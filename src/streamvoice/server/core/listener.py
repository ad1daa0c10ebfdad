"""A listener, as the core sees it: whoever holds a listener slot, which is always a seat (``core.seat``: a
socket wire's connection's, or an HTTP answer's). Admission (over ``Holder``, what it
reads), the slowdown watch and the service read every holder through this one face, never by sniffing
attributes (``pytest tests/test_admission.py tests/test_watch.py``)."""

from __future__ import annotations

from typing import Protocol

from streamvoice.protocol import ProtocolError
from streamvoice.server.core.holder import Holder
from streamvoice.server.core.lane import Lane
from streamvoice.store.keys import Tenant


class Listener(Holder, Protocol):
    @property
    def lane(self) -> Lane | None:
        """Its work on the model (None before it has any): what the watch reads to see it starve."""
        ...

    @property
    def tenant(self) -> Tenant | None:
        """Whose key it serves: when the machine is full, a tenant below its share is admitted first."""
        ...

    def shed(self, error: ProtocolError) -> None:
        """Stop its answers with ``error`` (told in its wire's shape) and give its slot back."""
        ...
