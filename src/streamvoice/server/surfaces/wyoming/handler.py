"""Home Assistant's Wyoming protocol, served from the speech server's process: the same model, scheduler,
admission and connection runtime as every other wire (``streamvoice serve --wyoming-uri tcp://127.0.0.1:10200``).

- ``describe`` -> ``info``: one TTS program, every voice with its language, streaming supported.
- ``synthesize`` (one shot) -> ``audio-start``, ``audio-chunk`` per decoded window, ``audio-stop``.
- ``synthesize-start`` / ``synthesize-chunk`` ... / ``synthesize-stop`` -> text goes through the incremental
  chunker as it arrives and each piece is queued the moment it is complete, so speech starts while Home
  Assistant's LLM is still writing; audio per piece (``audio-start`` .. ``audio-stop``, as wyoming-piper
  does per sentence), then ``synthesize-stopped``. Home Assistant's repeat of the whole text as
  ``synthesize`` inside a stream is ignored.
- A closed socket cancels the connection's work; bad input gets an ``error`` event with our stable code.

Utterances are answered in order by the runtime's writer; the reader never waits for one to finish. Every
other event (``info``, an ``error``, a refused stream's ``synthesize-stopped``) is written at once, between
audio events, as Wyoming servers do: an error never waits behind minutes of audio. Bounds, as
on every other wire: event lengths are read by ``wire`` (integers within caps, never what the client declares),
one-shot text by ``max_text_chars`` and a streamed utterance by ``max_stream_chars``; a stream whose text
stops for ``stream_text_timeout_s`` is spoken as it stands and ended; idle and lifetime timeouts, the
pending-reply cap, drain and a client that reads nothing (``send_timeout_s``) are the runtime's; at most
``wyoming_max_connections`` are open at once; each utterance holds a room (the session cap) from its start
to its last audio, and the connection a listener slot (admission, refused at once: Wyoming has no "queued").

Wyoming has no authentication, so the default URI binds to loopback; expose it only on a trusted network
(with ``AUTH_TOKEN`` set, a non-loopback URI needs ``WYOMING_ALLOW_UNAUTHENTICATED``).
Checked by ``pytest tests/test_wyoming.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from streamvoice import __version__
from streamvoice.protocol import ErrorCode, ProtocolError, check_text, validate_voice
from streamvoice.server.core.events import Completed
from streamvoice.server.core.requests import SessionDefaults
from streamvoice.server.core.rooms import holding
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.surfaces.answer import Answer
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.transport import Disconnected
from streamvoice.server.surfaces.wyoming.transport import Frame, TcpTransport
from streamvoice.server.surfaces.wyoming.wire import WireError

log = logging.getLogger("streamvoice.wyoming")

WIDTH, CHANNELS = 2, 1  # 16-bit mono PCM, constant for the connection (Home Assistant writes one header)
KOKORO = Attribution(name="hexgrad (Kokoro-82M)", url="https://huggingface.co/hexgrad/Kokoro-82M")


def describe(service: SpeechService) -> Info:
    voices = [
        TtsVoice(
            name=v.name,
            attribution=KOKORO,
            installed=service.engine.g2p.installed(v.lang),
            description=f"{v.language}, {v.gender}",
            version=None,
            languages=[v.lang],
        )
        for v in service.engine.voices()
    ]
    program = TtsProgram(
        name="streamvoice",
        attribution=KOKORO,
        installed=True,
        description="Kokoro-82M, streamed: speech starts while the text is still arriving",
        version=__version__,
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program])


def error_event(code: ErrorCode | str, message: str) -> Event:
    return Error(text=message, code=str(code)).event()


@dataclass(eq=False)
class Spoken(Answer):
    """One Wyoming utterance: whether it streams (audio per piece, then ``synthesize-stopped``), whether an
    ``audio-start`` is open (its room in the session cap is its seat's: ``Seat.open(own_room=True)``)."""

    streaming: bool = field(default=False, kw_only=True)
    open_block: bool = field(default=False, kw_only=True)


class Refused:
    """A stream whose start was refused (or that was ended early): its chunks are dropped, its stop still
    answered."""


class WyomingConnection(Connection[Frame, Spoken]):
    name = "wyoming"

    def __init__(self, transport: TcpTransport, service: SpeechService) -> None:
        super().__init__(transport, service, uuid.uuid4().hex[:12])
        self.tcp = transport
        self.rate = service.engine.sample_rate
        # Between synthesize-start and synthesize-stop: the utterance, or a Refused when the start failed
        # (its error is sent; the chunks that follow are dropped and the stop still gets its answer).
        self._stream: Utterance | Refused | None = None

    # -- reading ------------------------------------------------------------------------------------
    async def on_frame(self, frame: Frame) -> bool:
        if isinstance(frame, WireError):
            self.count_error(ProtocolError(frame.code, frame.message))
            self.notice(error_event(frame.code, frame.message))
            if frame.fatal:
                self.tcp.linger = True
            return frame.fatal
        try:
            self._handle(frame)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ProtocolError(
                ErrorCode.INVALID_MESSAGE,
                f"{frame.type[:40]!r} event has fields of the wrong shape (see the Wyoming spec)",
            ) from None
        return False

    def refused(self, error: ProtocolError) -> None:
        self.notice(error_event(error.code, error.message))

    def closing_frame(self, code: ErrorCode, message: str) -> Frame | None:
        return error_event(code, message)

    def _handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            self.notice(describe(self.service).event())
        elif SynthesizeStart.is_type(event.type):
            self._begin(SynthesizeStart.from_event(event).voice, streaming=True)
        elif SynthesizeChunk.is_type(event.type):
            text = SynthesizeChunk.from_event(event).text
            if self._stream is None:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, "synthesize-chunk before synthesize-start")
            if isinstance(self._stream, Utterance):
                self._feed(self._stream, text)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is None:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, "synthesize-stop without synthesize-start")
            if isinstance(self._stream, Utterance):
                self._stream.end()  # synthesize-stopped follows the utterance's last audio
            else:
                self.notice(SynthesizeStopped().event())
            self._stream = None
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return  # Home Assistant repeats the streamed text as one synthesize: already spoken
            one = Synthesize.from_event(event)
            if not isinstance(one.text, str):
                raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string')
            check_text(one.text, self.service.config.limits)
            utterance = self._begin(one.voice, streaming=False)
            if utterance is not None:
                utterance.append(one.text)  # through the chunker, as a stream would be: fast first piece
                utterance.end()
        else:
            log.debug("ignoring wyoming event %s", event.type)

    def _feed(self, utterance: Utterance, text: Any) -> None:
        """One streamed chunk: checked and fed (the utterance bounds it: ``StreamBounds``)."""
        if not isinstance(text, str):
            raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string')
        check_text(text, self.service.config.limits, speakable=False)
        try:
            utterance.append(text)
        except ProtocolError:
            # What fits is spoken; the rest of this stream is refused once, and its stop still answered.
            self._stream = Refused()
            raise

    def _stream_went_quiet(self, utterance: Utterance) -> None:
        """No text for ``stream_text_timeout_s``: the utterance spoke what came and ended; say so, so a
        client that sent synthesize-start and nothing more knows why."""
        if self._stream is not utterance:
            return
        self._stream = Refused()
        timeout = self.service.config.stream_text_timeout_s
        message = f"no synthesize-chunk for {timeout:g} s: the stream was spoken as it stood and ended"
        self.count_error(ProtocolError(ErrorCode.IDLE_TIMEOUT, message))
        self.notice(error_event(ErrorCode.IDLE_TIMEOUT, message))

    def _begin(self, voice: Any, streaming: bool) -> Utterance | None:
        """An utterance with a room of its own (the session cap) and the connection's listener slot, or the
        error told."""
        try:
            name = validate_voice(voice.name) if voice is not None and voice.name else None
            lang = voice.language if voice is not None and voice.language else None
            if lang is not None and not isinstance(lang, str):
                raise ProtocolError(ErrorCode.INVALID_FIELD, '"voice.language" must be a string')
            request = self.service.requests.resolve(SessionDefaults(), name, None, "pcm", lang)
            refused = self.refusal("utterances", "wait for synthesize-stopped or audio-stop")
            if refused is not None:
                raise refused
            # Wyoming has no "queued"; its connections are capped apart, so each answer takes a room
            utterance = self.begin(request, None, can_wait=False, own_room=True).utterance
        except ProtocolError as exc:
            self.count_error(exc)
            self.notice(error_event(exc.code, exc.message))
            if streaming:
                self._stream = Refused()
            return None
        if streaming:
            self._stream = utterance
            utterance.on_idle = lambda: self._stream_went_quiet(utterance)
        self.open_answer(Spoken(None, request, utterance, time.monotonic(), streaming=streaming))
        return utterance

    # -- rendering ----------------------------------------------------------------------------------
    def render_audio(self, spoken: Spoken, data: bytes, samples: int) -> list[Frame]:
        frames: list[Frame] = []
        if not spoken.open_block:
            spoken.open_block = True
            frames.append(AudioStart(rate=self.rate, width=WIDTH, channels=CHANNELS).event())
        frames.append(AudioChunk(rate=self.rate, width=WIDTH, channels=CHANNELS, audio=data).event())
        return frames

    def render_piece_ended(self, spoken: Spoken, index: int) -> list[Frame]:
        if spoken.streaming and spoken.open_block:  # a block per piece, as wyoming-piper does
            spoken.open_block = False
            return [AudioStop().event()]
        return []

    def render_completed(self, spoken: Spoken, done: Completed) -> list[Frame]:
        return self._ending(spoken)

    def render_cancelled(self, spoken: Spoken, error: ProtocolError) -> list[Frame]:
        return self._ending(spoken)  # its own cancel: not an error to the client

    def render_failed(self, spoken: Spoken, error: ProtocolError) -> list[Frame]:
        if spoken.streaming and error.code == ErrorCode.EMPTY_TEXT:  # a stream with nothing speakable
            return self._ending(spoken)
        self.count_error(error)
        return [error_event(error.code, error.message), *self._ending(spoken)]

    def _ending(self, spoken: Spoken) -> list[Frame]:
        frames: list[Frame] = []
        if spoken.open_block:
            spoken.open_block = False
            frames.append(AudioStop().event())
        if spoken.streaming:
            frames.append(SynthesizeStopped().event())
        return frames


class SpeechHandler(AsyncEventHandler):
    """One Wyoming connection, as ``wyoming.server.AsyncServer`` runs it: refused at once over the
    connection cap, otherwise a ``WyomingConnection`` on the runtime until the client leaves."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        service: SpeechService,
        refuse: ProtocolError | None = None,
        on_close: Callable[[], None] | None = None,
    ):
        super().__init__(reader, writer)
        self.service = service
        self._refuse = refuse  # the connection is over the cap: told so and closed
        self._on_close = on_close

    async def run(self) -> None:
        with holding("wyoming connection"):  # every room its utterances took is given back at its end
            await self._serve()

    async def _serve(self) -> None:
        transport = TcpTransport(self.reader, self.writer, self.service)
        try:
            if self._refuse is not None:
                self.service.metrics.count_error(str(self._refuse.code))
                with contextlib.suppress(Disconnected):
                    await transport.send(error_event(self._refuse.code, self._refuse.message))
                return
            await WyomingConnection(transport, self.service).run()
        finally:
            self.writer.close()
            if self._on_close is not None:
                self._on_close()

    async def handle_event(self, event: Event) -> bool:
        raise NotImplementedError("events are read by WyomingConnection")  # run() replaces the base loop
