"""One agent turn: text streams from a language model, speech streams back to the caller.

``bidi``: the model's tokens go, as they arrive, into one streamed message of a speech session; the server
cuts them into pieces (its chunker: fast first piece, abbreviation and number rules, quiet cut) and speaks
each as soon as it is cut, so synthesis overlaps generation and audio is forwarded the moment it arrives.
``batch``: the baseline the AWS reference sample measured against; wait for the whole answer, then one
synthesis request.

A turn is a ``Turn``: ``produce`` is how the model's text goes to the speech session (one streamed message,
cut by the server). ``bench.e2e`` compares other ways through the same pipeline by giving it another
``Turn`` (the agent cutting pieces itself, one message each); nothing at run time does.

The pipeline speaks to the speech server only through ``streamvoice.client`` (the protocol), never its
insides, so the same code drives a local server or a SageMaker endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from streamvoice.agent import events as ev
from streamvoice.agent.llm import History, LLMError, TextSource
from streamvoice.client import AudioChunk, ControlEvent, SpeechClient
from streamvoice.client.transports import TransportClosed
from streamvoice.protocol import SAMPLE_RATE, ErrorCode, ProtocolError

log = logging.getLogger("streamvoice.agent")

# bidi: the LLM's answer, streamed into speech as it is written; batch: the whole answer, then speech;
# say: the prompt itself, spoken (the page's voice samples, in any language), streamed like bidi.
Mode = Literal["bidi", "batch", "say"]
Connect = Callable[[], Awaitable[SpeechClient]]

# The id of the one streamed message a bidi turn speaks (each turn has its own session).
ANSWER_ID = "answer"


# Audio events a turn may hold for a caller who reads slowly; past this the turn stops reading speech,
# which pushes back on the speech server (it paces, then gives up on a reader that never catches up).
MAX_QUEUED_EVENTS = 256


class _Events:
    """The turn's events for the caller: control events always fit, audio waits for room."""

    def __init__(self, limit: int = MAX_QUEUED_EVENTS) -> None:
        self.queue: asyncio.Queue[ev.TurnEvent | None] = asyncio.Queue()
        self._limit = limit
        self._room = asyncio.Event()
        self._room.set()

    def put(self, event: ev.TurnEvent | None) -> None:
        self.queue.put_nowait(event)
        if self.queue.qsize() >= self._limit:
            self._room.clear()

    async def room(self) -> None:
        await self._room.wait()

    async def get(self) -> ev.TurnEvent | None:
        event = await self.queue.get()
        if self.queue.qsize() < self._limit:
            self._room.set()
        return event


@dataclass(frozen=True)
class TurnOptions:
    mode: Mode = "bidi"
    voice: str | None = None
    speed: float | None = None
    timeout_s: float = 120.0


class SpeechPipeline:
    def __init__(self, source: TextSource, connect: Connect, turn: type[Turn] | None = None) -> None:
        self.source = source
        self._connect = connect
        self._turn = turn or Turn

    async def run(
        self, prompt: str, options: TurnOptions = TurnOptions(), history: History = ()
    ) -> AsyncIterator[ev.TurnEvent]:
        """Yield caller events, each stamped with ``t_ms`` since ``agent_start``. Never raises, never hangs.
        ``history``: the conversation so far, for the model (``conversations``)."""
        t0 = time.perf_counter()
        queue = _Events()

        def emit(event: ev.TurnEvent) -> float:
            event["t_ms"] = t_ms = round((time.perf_counter() - t0) * 1000, 1)
            queue.put(event)
            return t_ms

        emit(ev.AgentStart(type="agent_start", mode=options.mode, model=self.source.name))
        turn = self._turn(self, prompt, options, emit, queue.room, history)
        task = asyncio.create_task(turn.run_guarded(queue))
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class Turn:
    """One prompt's answer, spoken: the model's text into a speech session, its audio and word times out as
    the caller's events."""

    def __init__(
        self,
        pipeline: SpeechPipeline,
        prompt: str,
        options: TurnOptions,
        emit: Callable[[ev.TurnEvent], float],
        room: Callable[[], Awaitable[None]],
        history: History = (),
    ):
        self.room = room
        self.history = history
        self.p = pipeline
        self.prompt = prompt
        self.options = options
        self.emit = emit
        self.text: list[str] = []
        self.seq = 0
        self.audio_bytes = 0
        self.message_start_ms = 0.0  # where the message being received starts in the turn's audio
        self.first_audio_ms: float | None = None
        self.pieces = 0  # the pieces spoken: cut by the server (its alignment frames), or sent by us
        self.sent = 0  # messages sent to the session
        self.answered = 0  # of those, answered
        self.audio_started = False

    async def run_guarded(self, queue: _Events) -> None:
        try:
            async with asyncio.timeout(self.options.timeout_s):
                await self._run()
        except ProtocolError as exc:
            self._fail(exc.code, exc.message)
        except LLMError as exc:
            self._fail(ErrorCode.LLM_FAILED, str(exc))
        except TimeoutError:
            self._fail(ErrorCode.TIMEOUT, f"the turn did not finish within {self.options.timeout_s:g} s")
        except Exception:
            log.exception("agent turn failed")
            self._fail(ErrorCode.INTERNAL, "the agent failed on this request; try again")
        finally:
            queue.put(None)

    def _fail(self, code: ErrorCode | str, message: str) -> None:
        self._end_audio()
        self.emit(ev.Failure(type="error", code=str(code), message=message))

    async def _run(self) -> None:
        try:
            client = await self.p._connect()
        except Exception as exc:
            log.warning("speech server unreachable: %r", exc)
            raise ProtocolError(
                ErrorCode.SPEECH_UNAVAILABLE, "the speech server is not reachable; try again shortly"
            ) from None
        try:
            if self.options.mode in ("bidi", "say"):
                await self._bidi(client)
            else:
                await self._batch(client)
        except TransportClosed:
            raise ProtocolError(
                ErrorCode.SPEECH_DISCONNECTED,
                "the speech server closed the session before the answer was spoken",
            ) from None
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()
        self._end_audio()
        self.emit(
            ev.AgentEnd(
                type="agent_end",
                text="".join(self.text),
                pieces=self.pieces,
                audio_bytes=self.audio_bytes,
                time_to_first_audio_ms=self.first_audio_ms,
            )
        )

    async def deltas(self) -> AsyncIterator[str]:
        """The answer's text as it is written (``say``: the prompt itself, word by word)."""
        if self.options.mode != "say":
            async for delta in self.p.source.stream(self.prompt, self.history):
                yield delta
            return
        for i, word in enumerate(self.prompt.split(" ")):
            yield word if i == 0 else " " + word

    async def send(self, client: SpeechClient, piece: str) -> None:
        """One piece as one message of the session."""
        self.emit(ev.SpeechPiece(type="speech_piece", index=self.pieces, text=piece))  # what went, and when
        o = self.options
        await client.synthesize(
            piece, voice=o.voice, speed=o.speed, format=ev.AUDIO_FORMAT, id=f"p{self.sent}"
        )
        self.pieces += 1
        self.sent += 1

    def took(self, delta: str) -> None:
        """A delta of the answer, told to the caller as it arrives."""
        self.text.append(delta)
        self.emit(ev.TextDelta(type="text_delta", text=delta))

    async def produce(self, client: SpeechClient, produced: asyncio.Event) -> None:
        """Every token into one streamed message; the server decides when to speak. ``produced`` is set once
        everything has been sent."""
        o = self.options
        await client.synthesize(
            "", voice=o.voice, speed=o.speed, format=ev.AUDIO_FORMAT, id=ANSWER_ID, stream=True
        )
        self.sent = 1
        async for delta in self.deltas():
            self.took(delta)
            await client.append(ANSWER_ID, delta)
        await client.end(ANSWER_ID)
        produced.set()

    async def _bidi(self, client: SpeechClient) -> None:
        produced = asyncio.Event()
        producer = asyncio.create_task(self.produce(client, produced))
        consumer = asyncio.create_task(self._consume(client, produced))
        try:
            done, _ = await asyncio.wait({producer, consumer}, return_when=asyncio.FIRST_COMPLETED)
            if consumer in done:
                consumer.result()  # the speech leg failed while the model was still writing
            producer.result() if producer in done else await producer
            if self.answered >= self.sent:
                consumer.cancel()  # everything was already spoken while the model finished
            else:
                await consumer
        finally:
            for task in (producer, consumer):
                task.cancel()
            await asyncio.gather(producer, consumer, return_exceptions=True)

    async def _batch(self, client: SpeechClient) -> None:
        async for delta in self.p.source.stream(self.prompt, self.history):
            self.took(delta)
        answer = " ".join("".join(self.text).split())
        produced = asyncio.Event()
        if answer:
            await self.send(client, answer)
        produced.set()
        await self._consume(client, produced)

    async def _consume(self, client: SpeechClient, produced: asyncio.Event) -> None:
        """Forward audio as it arrives until every message sent has been answered."""
        if produced.is_set() and self.answered >= self.sent:
            return
        async for event in client.events():
            if isinstance(event, AudioChunk):
                await self.room()  # a slow caller slows our reading of the speech session, not our memory
                self._audio(event.data)
                continue
            assert isinstance(event, ControlEvent)
            if event.type == "error" and self._said_nothing(event.payload):
                self.answered += 1  # the model's answer had nothing speakable (empty, emoji): no audio
            elif event.type == "error":
                raise ProtocolError(
                    ErrorCode.SPEECH_FAILED,
                    f"speech synthesis failed: {event.payload.get('message', 'unknown error')}",
                )
            if event.type == "synthesis_started":
                self.message_start_ms = ev.pcm_ms(self.audio_bytes)
            elif event.type == "alignment":
                words = event.payload.get("words") or []
                if event.payload.get("id") == ANSWER_ID:  # one frame per piece the server cut
                    text = " ".join(str(w.get("word", "")) for w in words)
                    self.emit(ev.SpeechPiece(type="speech_piece", index=self.pieces, text=text))
                    self.pieces += 1
                self._words(words)
            elif event.type == "synthesis_complete":
                self.answered += 1
            if produced.is_set() and self.answered >= self.sent:
                return
        raise ProtocolError(
            ErrorCode.SPEECH_DISCONNECTED, "the speech server closed the session before the answer was spoken"
        )

    def _said_nothing(self, error: dict[str, Any]) -> bool:
        """The streamed answer ended with nothing to say: a turn with no audio, as in ``batch``."""
        return error.get("code") == ErrorCode.EMPTY_TEXT and error.get("id") == ANSWER_ID and self.pieces == 0

    def _audio(self, data: bytes) -> None:
        if not self.audio_started:
            self.audio_started = True
            self.emit(ev.AudioStart(type="audio_start", format=ev.AUDIO_FORMAT, sample_rate=SAMPLE_RATE))
        t_ms = self.emit(ev.AudioChunk(type="audio_chunk", seq=self.seq, data=data))
        if self.first_audio_ms is None:
            self.first_audio_ms = t_ms
        self.seq += 1
        self.audio_bytes += len(data)

    def _words(self, words: list[dict[str, Any]]) -> None:
        """Relay the speech server's word times, counted from the turn's first audio sample (the pieces'
        messages play back to back), so a caller can caption or tell what was heard before a barge-in."""
        offset = self.message_start_ms
        timed = [
            ev.TimedWord(
                word=w.get("word"),
                start_ms=round(float(w.get("start_ms", 0)) + offset, 1),
                end_ms=round(float(w.get("end_ms", 0)) + offset, 1),
            )
            for w in words
        ]
        self.emit(ev.Alignment(type="alignment", words=timed))

    def _end_audio(self) -> None:
        if self.audio_started:
            self.audio_started = False
            self.emit(ev.AudioEnd(type="audio_end", chunks=self.seq, bytes=self.audio_bytes))
