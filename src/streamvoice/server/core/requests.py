"""What a caller asked for, made concrete: a voice spec, a language, a format and rate, pauses, a lexicon.

Every surface parses its own wire into fields and hands them here, so "what a valid request is" has one
answer: an unknown voice is ``unknown_voice``, a language without its pack ``language_unavailable``, a rate
the format cannot carry ``invalid_field``, whichever door the request came in by.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from streamvoice.engine.g2p import LanguagePackMissing
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.options import EngineError
from streamvoice.engine.voices import VoiceError, VoiceSpec
from streamvoice.protocol import (
    DEFAULT_FORMAT,
    DEFAULT_VOICE,
    SAMPLE_RATE,
    ErrorCode,
    Pauses,
    ProtocolError,
    Synthesize,
    check_rate_for_format,
    output_rate,
)
from streamvoice.text.lexicon import check_lexicon


@dataclass(frozen=True)
class SessionDefaults:
    """What a caller set once and later messages inherit (a session's ``configure``; empty elsewhere)."""

    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    format: str = DEFAULT_FORMAT
    lang: str | None = None
    sample_rate: int | None = None  # None: the format's own default (8 kHz for G.711, else 24 kHz)
    pauses: Pauses | None = None  # None: the server's
    lexicon: Mapping[str, str] = field(default_factory=dict)  # the session's; over the server's


@dataclass(frozen=True)
class ResolvedRequest:
    """How an answer is spoken: voice, speed, format and rate, language, pauses, lexicon; resolved apart from
    any text. ``text`` is a whole message's own (a one-shot request, a session's ``synthesize``); a streamed
    answer's text is what its utterance is fed (``Utterance.chars`` counts it for admission)."""

    voice: VoiceSpec
    speed: float
    format: str
    lang: str
    sample_rate: int = SAMPLE_RATE
    pauses: Pauses = field(default_factory=Pauses)
    ssml: bool | None = None  # None: SSML when the text starts with <speak>
    lexicon: Mapping[str, str] = field(default_factory=dict)  # the server's, then the session's
    text: str = ""
    bitrate_kbps: int | None = None  # a compressed format's (a vendor's ``mp3_44100_128``); None: its default


# Characters of text per second of served speech at speed 1.0 (silences trimmed, pauses added): 17-20 for
# the bench's English sentences; the lower end, so an estimate errs towards a slot freeing later.
CHARS_PER_SECOND = 17.0


def estimated_speech_s(chars: int, speed: float) -> float:
    """About how long ``chars`` of text take to say at ``speed``, before they are planned (what admission
    plans with)."""
    return chars / CHARS_PER_SECOND / max(speed, 0.1)


class Holds(Protocol):
    @property
    def chars(self) -> int: ...


class Queued(Protocol):
    """An answer queued on a listener's lane: a session's message, a vendor connection's context."""

    @property
    def request(self) -> ResolvedRequest: ...

    @property
    def utterance(self) -> Holds: ...

    @property
    def first_audio_at(self) -> float | None: ...


# The request made whole from the store before planning (an utterance's ``prepare``: a caller's
# pronunciation dictionaries, fetched there and never in a wire's reader).
type Prepare = Callable[[ResolvedRequest], Awaitable[ResolvedRequest]]


def speech_ends(answers: Sequence[Queued], play_end: float, now: float) -> float:
    """When (monotonic) the audio of these queued answers will have played: what is decoded (``play_end``)
    or, if later, an estimate of all of it, less what the one being spoken has already said. Estimated from
    the text each utterance holds (streamed text as it arrived), never the request's."""
    left = sum(estimated_speech_s(a.utterance.chars, a.request.speed) for a in answers)
    if answers and answers[0].first_audio_at is not None:
        left -= now - answers[0].first_audio_at
    return now + max(left, play_end - now, 0.0)


class Resolver:
    """Fields over defaults over the server's settings, checked against what the engine has."""

    def __init__(self, engine: KokoroEngine, pauses: Pauses, lexicon: Mapping[str, str]) -> None:
        self.engine = engine
        self.pauses = pauses
        self.lexicon = lexicon

    def resolve(
        self,
        defaults: SessionDefaults,
        voice: str | None = None,
        speed: float | None = None,
        fmt: str | None = None,
        lang: str | None = None,
        msg_id: str | None = None,
        sample_rate: int | None = None,
        ssml: bool | None = None,
        text: str = "",
        bitrate_kbps: int | None = None,
    ) -> ResolvedRequest:
        try:
            spec = self.engine.parse_voice(voice or defaults.voice)
        except VoiceError as exc:
            raise ProtocolError(ErrorCode.UNKNOWN_VOICE, str(exc), msg_id) from None
        try:
            resolved_lang = self.engine.resolve_lang(spec, lang or defaults.lang)
        except EngineError as exc:
            raise ProtocolError(ErrorCode.INVALID_FIELD, str(exc), msg_id) from None
        except LanguagePackMissing as exc:
            raise ProtocolError(ErrorCode.LANGUAGE_UNAVAILABLE, str(exc), msg_id) from None
        fmt = fmt or defaults.format
        rate = output_rate(fmt, sample_rate or defaults.sample_rate)
        check_rate_for_format(fmt, rate, msg_id)
        return ResolvedRequest(
            voice=spec,
            speed=speed if speed is not None else defaults.speed,
            format=fmt,
            lang=resolved_lang,
            sample_rate=rate,
            pauses=defaults.pauses or self.pauses,
            ssml=ssml,
            lexicon={**self.lexicon, **defaults.lexicon} if defaults.lexicon else self.lexicon,
            text=text,
            bitrate_kbps=bitrate_kbps,
        )

    def message(self, msg: Synthesize, defaults: SessionDefaults) -> ResolvedRequest:
        """A session (or ``/invocations``) synthesize message over the caller's defaults."""
        return self.resolve(
            defaults, msg.voice, msg.speed, msg.format, msg.lang, msg.id, msg.sample_rate, msg.ssml, msg.text
        )


def load_lexicon(path: str | None) -> dict[str, str]:
    """The server's lexicon file (JSON: word -> "/phonemes/" or a respelling); a bad one stops the start
    with a message naming the file, rather than being ignored."""
    if not path:
        return {}
    try:
        return check_lexicon(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ValueError(f"STREAMVOICE_LEXICON_FILE {path}: {exc}") from None
