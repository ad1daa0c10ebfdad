"""A Pipecat TTS service: ``streamvoice.integrations.pipecat.StreamvoiceTTSService`` (extra ``pipecat``).

One speech session for the service's life. Each sentence Pipecat hands over becomes a message on it,
tagged with its audio context; audio frames and word timestamps go to that context as the server decodes
them, and the context ends (``TTSStoppedFrame``) once the turn is flushed and its messages are complete.
An interruption cancels the interrupted context's messages only (``cancel`` by id): a reply queued
behind it goes on. A dropped session is reopened on the next sentence.

    from streamvoice.integrations.pipecat import StreamvoiceTTSService

    tts = StreamvoiceTTSService(base_url="http://127.0.0.1:8080", voice="af_heart")
    pipeline = Pipeline([transport.input(), stt, user_aggregator, llm, tts, transport.output(), ...])
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import ErrorFrame, Frame, StartFrame, TTSAudioRawFrame, TTSStoppedFrame
from pipecat.services.settings import NOT_GIVEN, NotGiven, TTSSettings
from pipecat.services.tts_service import TTSService

from streamvoice.client import AudioChunk, ControlEvent, SpeechClient


@dataclass
class StreamvoiceTTSSettings(TTSSettings):
    """``voice`` is a Kokoro voice or blend (``af_heart``, ``af_heart(2)+am_michael(1)``); ``speed`` 0.5-2."""

    speed: float | NotGiven = field(default_factory=lambda: NOT_GIVEN)


@dataclass
class _Context:
    """What the service tracks per audio context: its messages still due, and where its audio is."""

    pending: set[str] = field(default_factory=set)
    flushed: bool = False  # the turn is over: no more sentences will join this context
    seconds: float = 0.0  # audio appended so far; word times count from the context's first sample


class StreamvoiceTTSService(TTSService):
    Settings = StreamvoiceTTSSettings
    _settings: StreamvoiceTTSSettings

    def __init__(
        self,
        *,
        base_url: str = "http://127.0.0.1:8080",
        voice: str = "af_heart",
        speed: float = 1.0,
        token: str | None = None,
        sample_rate: int | None = None,
        settings: StreamvoiceTTSSettings | None = None,
        **kwargs: Any,
    ) -> None:
        defaults = StreamvoiceTTSSettings(model="kokoro-82m", voice=voice, language=None, speed=speed)
        if settings is not None:
            defaults.apply_update(settings)
        # Word timestamps make the text frames (push_text_frames=False, or every word would come twice).
        super().__init__(
            push_text_frames=False,
            push_start_frame=True,
            sample_rate=sample_rate,
            settings=defaults,
            **kwargs,
        )
        self._base_url = base_url
        self._token = token
        self._client: SpeechClient | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._contexts: dict[str, _Context] = {}
        self._message_context: dict[str, str] = {}  # message id -> its audio context
        self._message_offset: dict[str, float] = {}  # message id -> its context's seconds at its start

    def can_generate_metrics(self) -> bool:
        return True

    # --- the session ------------------------------------------------------------------------------------

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self._connect()

    async def stop(self, frame: Frame) -> None:
        await super().stop(frame)
        await self._disconnect()

    async def cancel(self, frame: Frame) -> None:
        await super().cancel(frame)
        await self._disconnect()

    async def _connect(self) -> None:
        if self._client is not None:
            return
        try:
            self._client = await SpeechClient.connect(self._base_url, self._token)
        except Exception as exc:
            await self.push_error(error_msg=f"cannot open a speech session at {self._base_url}: {exc}")
            return
        self._receiver = self.create_task(self._receive(self._client))

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if self._receiver is not None:
            await self.cancel_task(self._receiver)
            self._receiver = None
        if client is not None:
            await client.aclose()

    # --- Pipecat's interface ------------------------------------------------------------------------------

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None]:
        await self._connect()
        if self._client is None:
            yield ErrorFrame(error=f"no speech session at {self._base_url}")
            return
        context = self._contexts.setdefault(context_id, _Context())
        msg_id = f"{context_id}/{next(self._ids)}"
        options: dict[str, Any] = {
            "voice": self._settings.voice,
            "format": "pcm",
            "sample_rate": self.sample_rate,
        }
        if isinstance(self._settings.speed, int | float):
            options["speed"] = self._settings.speed
        self._message_context[msg_id] = context_id
        context.pending.add(msg_id)
        try:
            await self._client.synthesize(text, id=msg_id, **options)
        except Exception as exc:
            context.pending.discard(msg_id)
            await self._disconnect()  # reopened on the next sentence
            yield ErrorFrame(error=f"the speech session failed: {exc}")
            return
        await self.start_tts_usage_metrics(text)
        yield None  # the audio arrives through the receive task

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn is over: the context ends once its messages are complete."""
        ctx_id = context_id or self.get_active_audio_context_id()
        if ctx_id and ctx_id in self._contexts:
            self._contexts[ctx_id].flushed = True
            await self._finish_if_done(ctx_id)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Barge-in: cancel this context's messages on the server, nothing else."""
        await self.stop_all_metrics()
        context = self._contexts.pop(context_id, None)
        if context is not None and self._client is not None:
            for msg_id in sorted(context.pending):
                try:
                    await self._client.cancel(msg_id)
                except Exception:
                    break  # the session is gone, and its work with it
        await super().on_audio_context_interrupted(context_id)

    # --- what the server sends ----------------------------------------------------------------------------

    async def _receive(self, client: SpeechClient) -> None:
        async for event in client.events():
            if isinstance(event, AudioChunk):
                await self._audio(event)
            else:
                await self._control(event)
        if self._client is client:  # the server ended the session: reopen on the next sentence
            self._client = None
            self._receiver = None
            for ctx_id, context in list(self._contexts.items()):
                if context.pending:
                    context.pending.clear()
                    await self.push_error(error_msg="the speech session closed before the audio ended")
                    await self._finish_if_done(ctx_id)

    async def _audio(self, chunk: AudioChunk) -> None:
        ctx_id = self._message_context.get(chunk.id or "")
        if ctx_id is None or ctx_id not in self._contexts or not self.audio_context_available(ctx_id):
            return  # an interrupted context's last frames
        self._contexts[ctx_id].seconds += len(chunk.data) / (2 * self.sample_rate)
        frame = TTSAudioRawFrame(
            audio=chunk.data, sample_rate=self.sample_rate, num_channels=1, context_id=ctx_id
        )
        await self.append_to_audio_context(ctx_id, frame)

    async def _control(self, event: ControlEvent) -> None:
        payload = event.payload
        msg_id = str(payload.get("id") or "")
        ctx_id = self._message_context.get(msg_id)
        context = self._contexts.get(ctx_id) if ctx_id else None
        if event.type == "synthesis_started" and context is not None:
            await self.stop_ttfb_metrics()
            self._message_offset[msg_id] = context.seconds
        elif event.type == "alignment" and context is not None and ctx_id is not None:
            offset = self._message_offset.get(msg_id, context.seconds)
            words = [(w["word"], offset + w["start_ms"] / 1000) for w in payload.get("words") or []]
            await self.add_word_timestamps(words, ctx_id)
        elif event.type in ("synthesis_complete", "error") and msg_id in self._message_context:
            self._message_context.pop(msg_id, None)
            self._message_offset.pop(msg_id, None)
            if event.type == "error" and payload.get("code") != "cancelled":
                await self.push_error(error_msg=f"{payload.get('code')}: {payload.get('message')}")
            if context is not None and ctx_id is not None:
                context.pending.discard(msg_id)
                await self._finish_if_done(ctx_id)
        elif event.type == "error":  # not about one of our messages (the session itself)
            await self.push_error(error_msg=f"{payload.get('code')}: {payload.get('message')}")

    async def _finish_if_done(self, ctx_id: str) -> None:
        context = self._contexts.get(ctx_id)
        if context is None or not context.flushed or context.pending:
            return
        del self._contexts[ctx_id]
        if self.audio_context_available(ctx_id):
            await self.append_to_audio_context(ctx_id, TTSStoppedFrame(context_id=ctx_id))
            await self.remove_audio_context(ctx_id)
