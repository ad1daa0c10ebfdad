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

Wyoming has no authentication, so the default URI binds to loopback; expose it only on a trusted network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from streamvoice import __version__
from streamvoice.audio.encoders import to_pcm16
from streamvoice.protocol import ErrorCode, ProtocolError, validate_voice
from streamvoice.server.guards import unavailable
from streamvoice.server.piece_audio import PieceAudio, Words
from streamvoice.server.service import ResolvedRequest, SessionDefaults, SpeechService
from streamvoice.text.chunker import FAST_FIRST, IncrementalSentenceChunker

log = logging.getLogger("streamvoice.wyoming")

DEFAULT_URI = "tcp://127.0.0.1:10200"
WIDTH, CHANNELS = 2, 1  # 16-bit mono PCM, constant for the connection (Home Assistant writes one header)
KOKORO = Attribution(name="hexgrad (Kokoro-82M)", url="https://huggingface.co/hexgrad/Kokoro-82M")


def info(service: SpeechService) -> Info:
    voices = [
        TtsVoice(
            name=v.name,
            attribution=KOKORO,
            installed=True,
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


class Utterance:
    """Text in, pieces out: one lane, planned in order, each piece queued as soon as its text is complete.

    One-shot requests are an utterance fed once and finished.
    """

    def __init__(self, service: SpeechService, template: ResolvedRequest) -> None:
        self.service = service
        self.template = template
        self.chunker = IncrementalSentenceChunker(FAST_FIRST)
        self.lane = service.lane()
        self.texts: asyncio.Queue[str | None] = asyncio.Queue()
        self.ready: asyncio.Queue[PieceAudio | None] = asyncio.Queue()
        self.submitted: list[PieceAudio] = []
        self.spoken = 0  # pieces with something speakable
        self._planner = asyncio.create_task(self._plan())
        self._planner.add_done_callback(lambda _: self.ready.put_nowait(None))

    def feed(self, text: str) -> None:
        for piece in self.chunker.feed(text):
            self.texts.put_nowait(piece)

    def finish(self) -> None:
        for piece in self.chunker.flush():
            self.texts.put_nowait(piece)
        self.texts.put_nowait(None)

    async def _plan(self) -> None:
        while (text := await self.texts.get()) is not None:
            if not any(ch.isalnum() for ch in text):
                continue  # bare punctuation between deltas: nothing to say
            request = replace(self.template, text=text)
            before = len(self.submitted)
            with contextlib.suppress(ProtocolError):  # a chunk of bare punctuation: nothing to say
                await self.service.plan_into(request, self.lane, self.submitted, self.ready)
            self.spoken += len(self.submitted) > before

    def cancel(self) -> None:
        self._planner.cancel()
        for piece in self.submitted:
            piece.cancel()


class Refused:
    """A stream whose start was refused: its chunks are dropped, its stop still answered."""


class SpeechHandler(AsyncEventHandler):
    """One Wyoming connection. Events are read in order; audio is written by a task per utterance, so a
    closed socket is noticed (and the work cancelled) even while audio is being made."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, service: SpeechService):
        super().__init__(reader, writer)
        self.service = service
        self.rate = service.engine.sample_rate
        # Between synthesize-start and synthesize-stop: the utterance, or REFUSED when the start failed
        # (its error is sent; the chunks that follow are dropped and the stop still gets its answer).
        self._stream: Utterance | Refused | None = None
        self._speaking: asyncio.Task[None] | None = None
        self._utterances: set[Utterance] = set()

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(info(self.service).event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            await self._begin(start.voice, streaming=True)
        elif SynthesizeChunk.is_type(event.type):
            if self._stream is None:
                await self._error(ErrorCode.INVALID_MESSAGE, "synthesize-chunk before synthesize-start")
            elif isinstance(self._stream, Utterance):
                self._stream.feed(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is None:
                await self._error(ErrorCode.INVALID_MESSAGE, "synthesize-stop without synthesize-start")
            elif isinstance(self._stream, Utterance):
                self._stream.finish()  # synthesize-stopped follows the utterance's last audio
            else:
                await self.write_event(SynthesizeStopped().event())
            self._stream = None
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return True  # Home Assistant repeats the streamed text as one synthesize: already spoken
            one = Synthesize.from_event(event)
            if not any(ch.isalnum() for ch in one.text):
                await self._error(
                    ErrorCode.EMPTY_TEXT, "the text has nothing speakable (no letters or digits)"
                )
                return True
            utterance = await self._begin(one.voice, streaming=False)
            if utterance is not None:
                utterance.feed(one.text)
                utterance.finish()
        else:
            log.debug("ignoring wyoming event %s", event.type)
        return True

    async def _begin(self, voice: Any, streaming: bool) -> Utterance | None:
        if self._speaking is not None and not self._speaking.done():
            await self._speaking  # one utterance at a time, in order, as Wyoming clients expect
        try:
            if (problem := unavailable(self.service)) is not None:
                raise problem
            if self.service.admission.enter(self, can_wait=False) == "refused":
                raise self.service.admission.busy("no listener slot is free")
            name = validate_voice(voice.name) if voice is not None and voice.name else None
            lang = voice.language if voice is not None and voice.language else None
            template = self.service.resolve(" ", SessionDefaults(), name, None, "pcm", lang)
        except ProtocolError as exc:
            await self._error(exc.code, exc.message)
            if streaming:
                self._stream = Refused()
            return None
        utterance = Utterance(self.service, template)
        self._utterances.add(utterance)
        if streaming:
            self._stream = utterance
        self._speaking = asyncio.create_task(self._speak(utterance, streaming))
        return utterance

    async def _speak(self, utterance: Utterance, streaming: bool) -> None:
        """Write the utterance's audio as it is decoded: per piece while streaming, as one otherwise."""
        metrics = self.service.metrics
        metrics.active_streams += 1
        started = False
        try:
            while (piece := await utterance.ready.get()) is not None:
                async for window in piece.windows():
                    if isinstance(window, Words) or window.size == 0:
                        continue
                    if not started:
                        await self.write_event(
                            AudioStart(rate=self.rate, width=WIDTH, channels=CHANNELS).event()
                        )
                        started = True
                    pcm = to_pcm16(window).tobytes()
                    await self.write_event(
                        AudioChunk(rate=self.rate, width=WIDTH, channels=CHANNELS, audio=pcm).event()
                    )
                if streaming and started:
                    await self.write_event(AudioStop().event())
                    started = False
            if not utterance.spoken and not streaming:
                await self._error(
                    ErrorCode.EMPTY_TEXT, "the text has nothing speakable (no letters or digits)"
                )
        except ProtocolError as exc:
            metrics.count_error(str(exc.code))
            await self._error(exc.code, exc.message)
        except (ConnectionError, OSError):
            utterance.cancel()
            return
        finally:
            metrics.active_streams -= 1
            self._utterances.discard(utterance)
            self.service.admission.idle(self)  # the slot goes unless the next utterance comes
        if started:
            await self.write_event(AudioStop().event())
        if streaming:
            await self.write_event(SynthesizeStopped().event())

    async def _error(self, code: str, message: str) -> None:
        self.service.metrics.count_error(str(code))
        await self.write_event(Error(text=message, code=str(code)).event())

    async def disconnect(self) -> None:
        """The client left (Home Assistant cancels this way): nothing more is decoded for it."""
        self.service.admission.leave(self)
        for utterance in list(self._utterances):
            utterance.cancel()
        if self._speaking is not None:
            self._speaking.cancel()


class WyomingServer:
    """The Wyoming listener, started and stopped with the speech server's lifespan."""

    def __init__(self, uri: str, service: SpeechService) -> None:
        self.uri = uri
        self.service = service
        self._server = AsyncServer.from_uri(uri)

    async def start(self) -> None:
        # start(), not run(): run() would take over SIGTERM, which belongs to the HTTP server's drain.
        await self._server.start(lambda r, w: SpeechHandler(r, w, self.service))
        log.info("wyoming: listening on %s", self.uri)

    async def stop(self) -> None:
        await self._server.stop()
