"""A LiveKit Agents TTS plugin: ``streamvoice.integrations.livekit.TTS`` (extra ``livekit``).

``stream()`` keeps one speech session per stream: tokens pushed with ``push_text`` go to the server as one
streamed message (``append``), which the server cuts into pieces as they arrive (its chunker and quiet cut,
no chunker here), and audio reaches the emitter as the server decodes it, with each word's time (``aligned_transcript``) so LiveKit's transcript
follows what the listener hears. ``synthesize()`` uses the server's streamed HTTP route.
Interrupting a stream closes its own session, which cancels only its own messages.

    from livekit.agents import AgentSession
    from streamvoice.integrations.livekit import TTS

    session = AgentSession(tts=TTS(base_url="http://127.0.0.1:8080", voice="af_heart"), ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    APIConnectionError,
    APIConnectOptions,
    APIError,
    APIStatusError,
    tts,
    utils,
)
from livekit.agents.types import TimedString

from streamvoice.client import AudioChunk, SpeechClient
from streamvoice.protocol import SAMPLE_RATE

FRAME_MS = 20  # the emitter's frame: WebRTC's, so the first frame leaves with the first decoded window
RETRYABLE = {"server_busy", "not_ready", "going_away", "queue_full"}


class TTS(tts.TTS[Any]):
    def __init__(
        self,
        *,
        base_url: str = "http://127.0.0.1:8080",
        voice: str = "af_heart",
        speed: float = 1.0,
        token: str | None = None,
        lang: str | None = None,
        sample_rate: int = SAMPLE_RATE,
    ) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.base_url = base_url.rstrip("/")
        self.voice = voice
        self.speed = speed
        self.token = token
        self.lang = lang

    @property
    def model(self) -> str:
        return "kokoro-82m"

    @property
    def provider(self) -> str:
        return "streamvoice"

    def options(self) -> dict[str, Any]:
        """The synthesis options every message carries (voice, speed, PCM at the plugin's rate)."""
        out: dict[str, Any] = {"voice": self.voice, "speed": self.speed, "format": "pcm"}
        out["sample_rate"] = self.sample_rate
        if self.lang:
            out["lang"] = self.lang
        return out

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> ChunkedStream:
        return ChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> SynthesizeStream:
        return SynthesizeStream(tts=self, conn_options=conn_options)


def _api_error(payload: dict[str, Any], status: int = -1) -> APIError:
    """Our error as LiveKit's: the stable code and message; busy or starting servers are worth a retry."""
    error = payload.get("error", payload)
    code = str(error.get("code", "error")) if isinstance(error, dict) else "error"
    message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
    return APIStatusError(f"{code}: {message}", status_code=status, body=payload, retryable=code in RETRYABLE)


class ChunkedStream(tts.ChunkedStream):
    """One text over ``POST /invocations``: raw PCM streamed as the server decodes it."""

    def __init__(self, *, tts: TTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._plugin = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        plugin = self._plugin
        headers = {"authorization": f"Bearer {plugin.token}"} if plugin.token else {}
        body = {"text": self.input_text, **plugin.options()}
        timeout = httpx.Timeout(30.0, connect=self._conn_options.timeout)
        try:
            async with (
                httpx.AsyncClient(timeout=timeout) as http,
                http.stream("POST", plugin.base_url + "/invocations", json=body, headers=headers) as r,
            ):
                if r.status_code != 200:
                    raise _api_error(json.loads(await r.aread()), r.status_code)
                output_emitter.initialize(
                    request_id=utils.shortuuid(),
                    sample_rate=plugin.sample_rate,
                    num_channels=1,
                    mime_type="audio/pcm",
                    frame_size_ms=FRAME_MS,
                )
                async for chunk in r.aiter_raw():
                    output_emitter.push(chunk)
            output_emitter.flush()
        except httpx.TimeoutException as exc:
            raise APIConnectionError(f"the speech server at {plugin.base_url} did not answer") from exc
        except httpx.HTTPError as exc:
            raise APIConnectionError(f"cannot reach the speech server at {plugin.base_url}") from exc


class SynthesizeStream(tts.SynthesizeStream):
    """Tokens in, audio and word times out, over one speech session."""

    def __init__(self, *, tts: TTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._plugin = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        plugin = self._plugin
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=plugin.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            frame_size_ms=FRAME_MS,
            stream=True,
        )
        try:
            client = await asyncio.wait_for(
                SpeechClient.connect(plugin.base_url, plugin.token), self._conn_options.timeout
            )
        except (OSError, TimeoutError) as exc:
            raise APIConnectionError(f"cannot open a speech session at {plugin.base_url}") from exc
        except Exception as exc:  # the transport's own errors (refused upgrade: bad token, full server)
            raise APIConnectionError(f"the speech server at {plugin.base_url} refused the session") from exc
        state = _Segment(output_emitter, request_id, plugin.sample_rate)
        sender = asyncio.create_task(self._send(client, state))
        try:
            await self._receive(client, state, sender)
            await sender
        finally:
            sender.cancel()
            if state.pending:  # interrupted: this session's messages only
                with contextlib.suppress(Exception):
                    await client.cancel()
            await client.aclose()

    async def _send(self, client: SpeechClient, state: _Segment) -> None:
        """The pushed tokens as one streamed message: the server cuts it into pieces as they arrive (its
        chunker and quiet cut, the same as every surface's); LiveKit's flush speaks what is buffered."""
        options = self._plugin.options()
        msg_id: str | None = None
        waiting = ""  # text before the first letter or digit: a message of only that would be refused

        async for data in self._input_ch:
            if isinstance(data, self._FlushSentinel):
                if msg_id is not None:
                    await client.flush(msg_id)
                continue
            assert isinstance(data, str)
            if msg_id is None:
                waiting += data
                if not any(ch.isalnum() for ch in waiting):
                    continue
                state.start()
                self._mark_started()
                msg_id = await client.synthesize(waiting, stream=True, **options)
                state.pending.add(msg_id)
            else:
                await client.append(msg_id, data)
        if msg_id is not None:
            await client.end(msg_id)
        state.input_done = True
        state.check_done()

    async def _receive(self, client: SpeechClient, state: _Segment, sender: asyncio.Task[None]) -> None:
        """Frames until every message sent is complete; the sender's failure (or the session's end)
        stops it. The frame being awaited is never cancelled: that would close the session's iterator."""
        events = client.events()
        done = asyncio.ensure_future(state.done.wait())
        watched: set[asyncio.Future[Any]] = {done, sender}
        nxt: asyncio.Future[Any] | None = None
        try:
            while not done.done():
                nxt = nxt or asyncio.ensure_future(anext(events))
                finished, _ = await asyncio.wait({nxt, *watched}, return_when=asyncio.FIRST_COMPLETED)
                if sender in finished:
                    watched.discard(sender)
                    if (failure := sender.exception()) is not None:
                        raise failure
                if nxt not in finished:
                    continue
                try:
                    event = nxt.result()
                except StopAsyncIteration:
                    raise APIConnectionError("the speech session closed before the audio ended") from None
                nxt = None
                self._handle(event, state)
        finally:
            done.cancel()
            if nxt is not None:
                nxt.cancel()
        state.end()

    @staticmethod
    def _handle(event: Any, state: _Segment) -> None:
        if isinstance(event, AudioChunk):
            state.audio(event.data)
            return
        payload = event.payload
        if event.type == "synthesis_started":
            state.message_offset = state.seconds
        elif event.type == "alignment":
            state.words(payload.get("words") or [])
        elif event.type == "synthesis_complete":
            state.pending.discard(str(payload.get("id")))
            state.check_done()
        elif event.type == "error":
            raise _api_error(payload)


class _Segment:
    """The stream's one segment: audio pushed, words timed from its first sample, messages outstanding."""

    def __init__(self, emitter: tts.AudioEmitter, segment_id: str, sample_rate: int) -> None:
        self.emitter = emitter
        self.segment_id = segment_id
        self.bytes_per_second = 2 * sample_rate
        self.started = False
        self.pushed = 0
        self.message_offset = 0.0
        self.pending: set[str] = set()
        self.input_done = False
        self.done = asyncio.Event()

    @property
    def seconds(self) -> float:
        return self.pushed / self.bytes_per_second

    def start(self) -> None:
        if not self.started:
            self.started = True
            self.emitter.start_segment(segment_id=self.segment_id)

    def audio(self, data: bytes) -> None:
        self.emitter.push(data)
        self.pushed += len(data)

    def words(self, words: list[dict[str, Any]]) -> None:
        self.emitter.push_timed_transcript(
            [
                TimedString(
                    f"{w['word']} ",
                    start_time=self.message_offset + w["start_ms"] / 1000,
                    end_time=self.message_offset + w["end_ms"] / 1000,
                )
                for w in words
            ]
        )

    def check_done(self) -> None:
        if self.input_done and not self.pending:
            self.done.set()

    def end(self) -> None:
        if self.started:
            self.emitter.end_segment()
