"""One listener's queue of answers on one lane (a session's messages, a vendor connection's contexts, a
raw socket's utterances), in the order they were opened; it owns the barge-in rule: cancelling the
one being spoken restarts the listener's playback clock. Checked by ``pytest tests/test_utterance.py``."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from streamvoice.server.core.lane import Lane
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.tenancy import Tenancy
from streamvoice.server.core.utterance import PieceSource, Utterance
from streamvoice.server.core.utterance_bounds import StreamBounds


class Utterances:
    """The utterances open on one lane, in the order they were opened: one listener's queue of answers."""

    def __init__(
        self,
        source: PieceSource,
        lane: Lane,
        quiet_cut_s: float = 0.0,
        bounds: StreamBounds | None = None,
        tenancy: Tenancy | None = None,
    ) -> None:
        self.source = source
        self.tenancy = tenancy
        self.lane = lane
        self.quiet_cut_s = quiet_cut_s
        self.bounds = bounds
        self.open: list[Utterance] = []
        # Told when a barge-in restarts the listener's playback (a surface's own send pacing follows it).
        self.on_restart: Callable[[], None] | None = None

    def start(
        self,
        request: ResolvedRequest,
        uid: str | None = None,
        gate: Callable[[], Awaitable[None]] | None = None,
        prepare: Prepare | None = None,
    ) -> Utterance:
        utterance = Utterance(
            self.source, request, self.lane, gate, self.quiet_cut_s, uid, self.bounds, self.tenancy, prepare
        )
        self.open.append(utterance)
        return utterance

    def done(self, utterance: Utterance) -> None:
        with contextlib.suppress(ValueError):
            self.open.remove(utterance)

    def cancel(self, uid: str | None = None) -> list[Utterance]:
        """Cancel every open utterance (``uid`` None: barge-in) or the one with that id; those cancelled.

        Only when the utterance being spoken is among them does the listener's playback restart (what is
        queued after it was not playing yet)."""
        return self.cancel_these([u for u in self.open if (uid is None or u.id == uid) and not u.cancelled])

    def cancel_these(self, chosen: list[Utterance]) -> list[Utterance]:
        """Cancel exactly these (an id can name two: a context reused right after it was closed)."""
        restart = bool(chosen) and self.open[0] in chosen
        for utterance in chosen:  # abandoned first: a window the worker finishes now is not played
            utterance.cancel()
        if restart:
            self.restart()
        return chosen

    def restart(self) -> None:
        """The listener's playback starts again (a barge-in, or its answers shed)."""
        self.lane.restart_playback()
        if self.on_restart is not None:
            self.on_restart()
