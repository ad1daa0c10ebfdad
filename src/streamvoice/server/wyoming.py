"""Home Assistant's Wyoming protocol, served from the speech server's process: the same model, scheduler
and admission as the HTTP routes (``streamvoice serve --wyoming-uri tcp://127.0.0.1:10200``).

- ``describe`` -> ``info``: one TTS program, every voice with its language, streaming supported.
- ``synthesize`` (one shot) -> ``audio-start``, ``audio-chunk`` per decoded window, ``audio-stop``.
- ``synthesize-start`` / ``synthesize-chunk`` ... / ``synthesize-stop`` -> text goes through the incremental
  chunker as it arrives and each piece is queued the moment it is complete, so speech starts while Home
  Assistant's LLM is still writing; audio per piece (``audio-start`` .. ``audio-stop``, as wyoming-piper
  does per sentence), then ``synthesize-stopped``. Home Assistant's repeat of the whole text as
  ``synthesize`` inside a stream is ignored.
- A closed socket cancels the connection's work; bad input gets an ``error`` event with our stable code.

Bounds, as on every other surface: event lengths are read by ``wyoming_wire`` (integers within caps, never
what the client declares), one-shot text by ``max_text_chars`` and a streamed utterance by
``max_stream_chars``; a stream whose text stops for ``stream_text_timeout_s`` is spoken as it stands and
ended; a connection idle for ``idle_timeout_s`` or that reads nothing for ``send_timeout_s`` is closed;
at most ``wyoming_max_connections`` are open at once; each utterance holds a ``Slot`` (the session cap
and admission) from its start to its last audio, released however it ends.

Wyoming has no authentication, so the default URI binds to loopback; expose it only on a trusted network
(with ``AUTH_TOKEN`` set, a non-loopback URI needs ``WYOMING_ALLOW_UNAUTHENTICATED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from streamvoice import __version__
from streamvoice.audio.encoders import to_pcm16
from streamvoice.protocol import ErrorCode, ProtocolError, check_text, validate_voice
from streamvoice.server.guards import Slot, reserve
from streamvoice.server.requests import SessionDefaults
from streamvoice.server.service import SpeechService
from streamvoice.server.utterance import Failed, PieceEnded, Utterance
from streamvoice.server.wyoming_wire import WireError, WireLimits, read_event

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


class Refused:
    """A stream whose start was refused (or that was ended early): its chunks are dropped, its stop still
    answered."""


class SpeechHandler(AsyncEventHandler):
    """One Wyoming connection. Events are read in order; audio is written by a task per utterance, so a
    closed socket is noticed (and the work cancelled) even while audio is being made."""

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
        self.rate = service.engine.sample_rate
        self._refuse = refuse  # the connection is over the cap: told so and closed
        self._on_close = on_close
        # Between synthesize-start and synthesize-stop: the utterance, or REFUSED when the start failed
        # (its error is sent; the chunks that follow are dropped and the stop still gets its answer).
        self._stream: Utterance | Refused | None = None
        self._speaking: asyncio.Task[None] | None = None
        self._utterances: dict[Utterance, Slot] = {}  # each holds its slot until its last audio
        config = service.config
        self._wire = WireLimits(max_data_bytes=config.max_message_bytes)

    async def run(self) -> None:
        """Events until the client leaves, idles out, sends what cannot be framed, or stops reading."""
        try:
            if self._refuse is not None:
                await self._error(self._refuse.code, self._refuse.message)
                return
            while True:
                try:
                    async with asyncio.timeout(self.service.config.idle_timeout_s):
                        event = await read_event(self.reader, self._wire)
                except TimeoutError:
                    await self._error(
                        ErrorCode.IDLE_TIMEOUT, "no event for a while; the connection is closed"
                    )
                    return
                except WireError as exc:
                    await self._error(exc.code, exc.message)
                    if exc.fatal:
                        await self._linger()
                        return
                    continue
                if event is None:
                    return
                try:
                    await self.handle_event(event)
                except ProtocolError as exc:
                    await self._error(exc.code, exc.message)
                except (KeyError, TypeError, ValueError, AttributeError):
                    await self._error(
                        ErrorCode.INVALID_MESSAGE,
                        f"{event.type[:40]!r} event has fields of the wrong shape (see the Wyoming spec)",
                    )
        except (ConnectionError, OSError):
            pass  # the client left, or stopped reading (``write_event``)
        finally:
            await self.disconnect()
            self.writer.close()
            if self._on_close is not None:
                self._on_close()

    async def _linger(self, max_bytes: int = 16 << 20, max_s: float = 1.0) -> None:
        """Before closing on a stream that cannot be framed: stop writing and discard what the client is
        still sending, within bounds, so the error just sent is not lost to a reset (closing a socket with
        unread bytes resets it, and the peer may drop what it had not read yet)."""
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(max_s):
                discarded = 0
                while discarded < max_bytes and (chunk := await self.reader.read(65536)):
                    discarded += len(chunk)

    async def write_event(self, event: Event) -> None:
        """Every write is bounded: a client that reads nothing for ``send_timeout_s`` is disconnected, and
        the stream and audio it held go with it."""
        try:
            async with asyncio.timeout(self.service.config.send_timeout_s):
                await async_write_event(event, self.writer)
        except TimeoutError:
            self.service.metrics.count_error("slow_consumer")
            log.warning(
                "wyoming: client stopped reading for %.0f s; closing", self.service.config.send_timeout_s
            )
            self.writer.transport.abort()
            raise ConnectionResetError("the client stopped reading") from None

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(describe(self.service).event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            await self._begin(start.voice, streaming=True)
        elif SynthesizeChunk.is_type(event.type):
            text = SynthesizeChunk.from_event(event).text
            if self._stream is None:
                await self._error(ErrorCode.INVALID_MESSAGE, "synthesize-chunk before synthesize-start")
            elif isinstance(self._stream, Utterance):
                await self._feed(self._stream, text)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is None:
                await self._error(ErrorCode.INVALID_MESSAGE, "synthesize-stop without synthesize-start")
            elif isinstance(self._stream, Utterance):
                self._end_stream()  # synthesize-stopped follows the utterance's last audio
            else:
                await self.write_event(SynthesizeStopped().event())
            self._stream = None
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return True  # Home Assistant repeats the streamed text as one synthesize: already spoken
            one = Synthesize.from_event(event)
            if not isinstance(one.text, str):
                raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string')
            check_text(one.text, self.service.config.limits)
            utterance = await self._begin(one.voice, streaming=False)
            if utterance is not None:
                utterance.append(one.text)  # through the chunker, as a stream would be: fast first piece
                utterance.end()
        else:
            log.debug("ignoring wyoming event %s", event.type)
        return True

    async def _feed(self, utterance: Utterance, text: Any) -> None:
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
        task = asyncio.ensure_future(self._error(ErrorCode.IDLE_TIMEOUT, message))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a closed socket: nothing to tell

    def _end_stream(self) -> None:
        if isinstance(self._stream, Utterance):
            self._stream.end()

    async def _begin(self, voice: Any, streaming: bool) -> Utterance | None:
        if self._speaking is not None and not self._speaking.done():
            await self._speaking  # one utterance at a time, in order, as Wyoming clients expect
        slot: Slot | None = None
        try:
            slot = reserve(self.service)  # the session cap and admission, released with the utterance
            slot.admit(can_wait=False)
            name = validate_voice(voice.name) if voice is not None and voice.name else None
            lang = voice.language if voice is not None and voice.language else None
            if lang is not None and not isinstance(lang, str):
                raise ProtocolError(ErrorCode.INVALID_FIELD, '"voice.language" must be a string')
            template = self.service.requests.resolve(" ", SessionDefaults(), name, None, "pcm", lang)
        except ProtocolError as exc:
            if slot is not None:
                slot.release()  # an unknown voice leaked its listener slot before
            await self._error(exc.code, exc.message)
            if streaming:
                self._stream = Refused()
            return None
        utterance = self.service.utterance(template)
        self._utterances[utterance] = slot
        if streaming:
            self._stream = utterance
            utterance.on_idle = lambda: self._stream_went_quiet(utterance)
        self._speaking = asyncio.create_task(self._speak(utterance, streaming))
        return utterance

    async def _speak(self, utterance: Utterance, streaming: bool) -> None:
        """Write the utterance's audio as it is decoded: per piece while streaming, as one otherwise."""
        started = False
        asked_at, heard = time.monotonic(), False
        try:
            async with aclosing(utterance.events()) as events:
                async for event in events:
                    if isinstance(event, np.ndarray) and event.size:
                        if not heard:
                            heard = True
                            self.service.metrics.observe_first_audio(time.monotonic() - asked_at)
                        if not started:
                            await self.write_event(
                                AudioStart(rate=self.rate, width=WIDTH, channels=CHANNELS).event()
                            )
                            started = True
                        pcm = to_pcm16(event).tobytes()
                        await self.write_event(
                            AudioChunk(rate=self.rate, width=WIDTH, channels=CHANNELS, audio=pcm).event()
                        )
                    elif isinstance(event, PieceEnded) and streaming and started:
                        await self.write_event(AudioStop().event())  # per piece, as wyoming-piper does
                        started = False
                    elif isinstance(event, Failed) and not _quietly_ended(event.error, streaming):
                        await self._error(event.error.code, event.error.message)
        except (ConnectionError, OSError):
            utterance.cancel()
            return
        finally:
            slot = self._utterances.pop(utterance, None)
            if slot is not None:
                slot.release()
        if started:
            await self.write_event(AudioStop().event())
        if streaming:
            await self.write_event(SynthesizeStopped().event())

    async def _error(self, code: str, message: str) -> None:
        self.service.metrics.count_error(str(code))
        await self.write_event(Error(text=message, code=str(code)).event())

    async def disconnect(self) -> None:
        """The client left (Home Assistant cancels this way): nothing more is decoded for it."""
        for utterance, slot in list(self._utterances.items()):
            utterance.cancel()
            slot.release()
        if self._speaking is not None:
            self._speaking.cancel()


def _quietly_ended(error: ProtocolError, streaming: bool) -> bool:
    """Errors a Wyoming client is not told: its own cancel, or a stream that carried nothing speakable."""
    return error.code == ErrorCode.CANCELLED or (streaming and error.code == ErrorCode.EMPTY_TEXT)
