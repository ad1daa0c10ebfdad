"""How a speech client carries on when its server leaves: the rules, kept pure so they are easy to test.

A replica that scales in drains: it finishes the messages it holds, answers later ones ``going_away`` and
closes with 1001. A crashed one just drops the connection (1006). A full one refuses new sessions with
``server_busy`` (close 1013). In each case the client reconnects to the same URL (the load balancer picks
a live replica) and re-sends, with their ids, the messages that got no answer; a refusal is retried with
jittered exponential backoff, up to a bound. Third-party clients should do the same; see docs/protocol.md ("Reconnecting").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Close codes after which a new session is worth opening: going away (drain), abnormal (dropped),
# internal error, and try again later (refused: full or still starting).
RECONNECT_CODES = frozenset({1001, 1006, 1011, 1012, 1013})
# Errors without a message id that mean "this session is refused or ending; try another".
REFUSALS = frozenset({"server_busy", "not_ready", "going_away"})


@dataclass(frozen=True)
class Reconnect:
    """Reconnection policy: ``attempts`` in a row without a working session before giving up; the wait
    before attempt n (n >= 1) is a random share of ``min(max_delay_s, base_delay_s * 2**n)`` (full
    jitter, so clients refused together do not return together). The first attempt after a drain is
    immediate: another replica is usually ready."""

    attempts: int = 6
    base_delay_s: float = 0.1
    max_delay_s: float = 2.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        if attempt <= 0:
            return 0.0
        cap = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return (rng or random).uniform(0.0, cap)


def should_reconnect(close_code: int | None, refused: bool, unanswered: int) -> bool:
    """After the connection ended: open a new session?

    Yes after a drain, a drop or a refusal; yes after any other close while messages are still owed an
    answer (nothing may be lost); no after a clean close with nothing outstanding (``close``, an idle
    timeout, a bad token).
    """
    if refused or close_code in RECONNECT_CODES:
        return True
    return unanswered > 0 and close_code not in (1000, 1008)
