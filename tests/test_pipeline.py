"""The agent pipeline over a stand-in transport behind the client's ``Transport`` seam: the pipeline's own
logic (tokens into one streamed message, relaying, one answer per message, failures) without a speech
server. The real server's cutting is checked by ``tests/test_agent.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.agent.pipeline import SpeechPipeline, Turn, TurnOptions
from streamvoice.bench.e2e import agent_cuts
from streamvoice.client import SpeechClient
from streamvoice.client.transports import TransportClosed
from streamvoice.text.chunker import FAST_FIRST


class FakeSpeech:
    """Answers as a speech server would: a whole synthesize at once; a streamed one once it ends, a piece
    (its alignment frame, then its audio) per sentence; an error when a text holds ``fail_on``."""

    def __init__(self, fail_on: str | None = None, hang_up_after: int | None = None) -> None:
        self.received: list[dict[str, Any]] = []
        self._out: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self._fail_on = fail_on
        self._hang_up_after = hang_up_after
        self._streamed: dict[str, str] = {}

    async def send(self, frame: str | bytes) -> None:
        msg = json.loads(frame)
        self.received.append(msg)
        if self._hang_up_after is not None and len(self.received) > self._hang_up_after:
            self._out.put_nowait(None)
            return
        if msg.get("stream"):
            self._streamed[msg["id"]] = msg["text"]
        elif msg["type"] == "append":
            self._streamed[msg["id"]] += msg["text"]
        elif msg["type"] == "end":
            self._answer(msg["id"], [s + "." for s in self._streamed.pop(msg["id"]).split(".") if s.strip()])
        else:
            self._answer(msg["id"], [msg["text"]])

    def _answer(self, msg_id: str, pieces: list[str]) -> None:
        if not pieces:  # as the server answers a streamed message with nothing speakable in it
            error = {"type": "error", "code": "empty_text", "message": "nothing speakable", "id": msg_id}
            self._out.put_nowait(json.dumps(error))
            return
        if self._fail_on and any(self._fail_on in piece for piece in pieces):
            error = {"type": "error", "code": "unknown_voice", "message": "no such voice", "id": msg_id}
            self._out.put_nowait(json.dumps(error))
            return
        self._out.put_nowait(json.dumps({"type": "synthesis_started", "id": msg_id, "sequence": 0}))
        for piece in pieces:
            words = [{"word": w, "start_ms": 0, "end_ms": 1} for w in piece.split()]
            self._out.put_nowait(json.dumps({"type": "alignment", "id": msg_id, "words": words}))
            self._out.put_nowait(b"\x01\x00" * 480 * len(words))
        self._out.put_nowait(json.dumps({"type": "synthesis_complete", "id": msg_id, "sequence": 0}))

    async def recv(self) -> str | bytes:
        frame = await self._out.get()
        if frame is None:
            raise TransportClosed("1011 gone")
        return frame

    async def close(self) -> None:
        self._out.put_nowait(None)


async def _turn(
    speech: FakeSpeech, text: str, mode: str = "bidi", turn: type[Turn] | None = None
) -> list[dict[str, Any]]:
    async def connect() -> SpeechClient:
        return SpeechClient(speech)

    pipeline = SpeechPipeline(ScriptedTextSource(text, ttft_s=0.0, tokens_per_s=500), connect, turn)
    options = TurnOptions(mode=mode)  # type: ignore[arg-type]
    return [e async for e in pipeline.run("hi", options)]


ANSWER = (
    "Leaves change colour because chlorophyll fades in autumn. Other pigments then show through. That is all."
)


async def test_bidi_streams_every_token_into_one_message_and_reports_the_servers_pieces() -> None:
    speech = FakeSpeech()
    events = await _turn(speech, ANSWER)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    first, *appends, last = speech.received
    assert first["stream"] is True and last == {"type": "end", "id": first["id"]}
    assert len(appends) > 10 and {m["type"] for m in appends} == {"append"}  # token by token, uncut
    assert first["text"] + "".join(m["text"] for m in appends) == ANSWER  # nothing lost, nothing repeated
    pieces = [e["text"] for e in events if e["type"] == "speech_piece"]
    assert len(pieces) == 3 == events[-1]["pieces"] and pieces[1] == "Other pigments then show through."
    assert sum(1 for e in events if e["type"] == "alignment") == 3
    audio = sum(len(e["data"]) for e in events if e["type"] == "audio_chunk")
    assert audio == events[-1]["audio_bytes"] > 0
    assert kinds.index("audio_start") < kinds.index("audio_chunk") < kinds.index("audio_end")


async def test_a_turn_that_cuts_the_pieces_itself_sends_one_message_each() -> None:
    """How ``bench.e2e`` composes its baselines: another ``Turn`` through the same pipeline."""
    speech = FakeSpeech()
    events = await _turn(speech, ANSWER, turn=agent_cuts(FAST_FIRST))
    assert len(speech.received) >= 2 and all("stream" not in m for m in speech.received)
    assert " ".join(m["text"] for m in speech.received).split() == ANSWER.split()
    assert events[-1]["type"] == "agent_end" and events[-1]["pieces"] == len(speech.received)


async def test_batch_sends_one_message_after_the_whole_answer() -> None:
    speech = FakeSpeech()
    events = await _turn(speech, ANSWER, mode="batch")
    assert [m["text"] for m in speech.received] == [" ".join(ANSWER.split())]
    assert events[-1]["type"] == "agent_end"


async def test_an_answer_with_nothing_to_say_ends_the_turn_without_audio_or_error() -> None:
    events = await _turn(FakeSpeech(), "")
    assert events[-1]["type"] == "agent_end" and events[-1]["pieces"] == 0
    assert not [e for e in events if e["type"] in ("error", "audio_chunk")]


async def test_a_speech_error_ends_the_turn_with_speech_failed() -> None:
    events = await _turn(FakeSpeech(fail_on="pigments"), ANSWER)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "speech_failed"
    assert "no such voice" in events[-1]["message"]


async def test_a_dropped_session_is_speech_disconnected_not_an_internal_error() -> None:
    events = await _turn(FakeSpeech(hang_up_after=1), ANSWER)
    assert events[-1]["type"] == "error" and events[-1]["code"] == "speech_disconnected"


class ChattySpeech(FakeSpeech):
    """Answers with a thousand small audio frames per message, counting how many the turn has read."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    async def send(self, frame: str | bytes) -> None:
        msg = json.loads(frame)
        self.received.append(msg)
        self._out.put_nowait(json.dumps({"type": "synthesis_started", "id": msg["id"], "sequence": 0}))
        for _ in range(1000):
            self._out.put_nowait(b"\x01\x00" * 240)
        self._out.put_nowait(json.dumps({"type": "synthesis_complete", "id": msg["id"], "sequence": 0}))

    async def recv(self) -> str | bytes:
        self.read += 1
        return await super().recv()


async def test_a_slow_caller_makes_the_turn_stop_reading_speech_instead_of_queueing_it() -> None:
    from streamvoice.agent.pipeline import MAX_QUEUED_EVENTS

    speech = ChattySpeech()

    async def connect() -> SpeechClient:
        return SpeechClient(speech)

    pipeline = SpeechPipeline(ScriptedTextSource("One short answer.", ttft_s=0.0), connect)
    events = pipeline.run("hi", TurnOptions(mode="batch"))
    assert (await anext(events))["type"] == "agent_start"
    await asyncio.sleep(0.5)  # the caller reads nothing for a while
    assert speech.read <= MAX_QUEUED_EVENTS + 8  # held back, not 1,000 frames queued for the caller
    rest = [e async for e in events]  # reading resumes: nothing was lost
    assert sum(1 for e in rest if e["type"] == "audio_chunk") == 1000 and rest[-1]["type"] == "agent_end"
