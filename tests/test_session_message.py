"""``server.session_message``: a message's moves (one table), why a session takes no more, and when a
listener's queued speech will have played (what admission plans with)."""

from __future__ import annotations

from dataclasses import dataclass

from streamvoice.engine.voices import parse_voice_spec
from streamvoice.protocol import ErrorCode
from streamvoice.server.core.requests import CHARS_PER_SECOND, ResolvedRequest, speech_ends
from streamvoice.server.surfaces.session.message import TRANSITIONS, MessageState, refusal


def test_a_finished_message_never_moves_again() -> None:
    finished = {MessageState.DONE, MessageState.FAILED, MessageState.CANCELLED}
    assert not finished & set(TRANSITIONS)
    assert all(
        MessageState.CANCELLED in moves for moves in TRANSITIONS.values()
    )  # cancel works from anywhere open
    assert (
        MessageState.STREAMING not in TRANSITIONS[MessageState.QUEUED]
    )  # audio only after synthesis_started


def test_a_draining_or_full_session_says_why_with_the_messages_id() -> None:
    assert refusal(draining=False, open_messages=3, limit=4, msg_id="a") is None
    full = refusal(draining=False, open_messages=4, limit=4, msg_id="a")
    assert (
        full is not None and full.code is ErrorCode.QUEUE_FULL and full.id == "a" and "limit 4" in str(full)
    )
    going = refusal(draining=True, open_messages=0, limit=4, msg_id="b")
    assert going is not None and going.code is ErrorCode.GOING_AWAY


@dataclass
class Held:
    chars: int


@dataclass
class Job:
    request: ResolvedRequest
    utterance: Held
    first_audio_at: float | None = None


def job(chars: int, first_audio_at: float | None = None) -> Job:
    """A queued answer holding ``chars`` of text; its request carries none, as a vendor context's does."""
    voice = parse_voice_spec("af_heart", {"af_heart"})
    return Job(ResolvedRequest(voice, 1.0, "pcm", "en-us"), Held(chars), first_audio_at)


def test_queued_speech_ends_after_all_of_it_less_what_was_said() -> None:
    """Counted from the text each utterance holds: every vendor context counted 0 s when the estimate read
    the request's text (a template the sockets fill with "")."""
    second = CHARS_PER_SECOND  # characters of one second of speech
    now = 100.0
    assert speech_ends([], play_end=0.0, now=now) == now
    assert speech_ends([job(int(10 * second)), job(int(5 * second))], play_end=0.0, now=now) == now + 15
    speaking = job(int(10 * second), first_audio_at=now - 4)  # four seconds of it already played
    assert speech_ends([speaking], play_end=0.0, now=now) == now + 6
    assert speech_ends([speaking], play_end=now + 8, now=now) == now + 8  # decoded ahead: that counts
