"""`surfaces.deepgram.flux`: Deepgram's ``/v2/speak`` with the official `deepgram-sdk` (``speak.v2``) and
LiveKit's ``deepgram.TTSv2``, unmodified, base URL changed, the key carrying the server's token; what was
heard at an interruption checked against Whisper's word times; the hostile inputs of the interrupt."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.sync.client import connect

from streamvoice.bench.wer import word_error_rate
from streamvoice.bench.wer import words as wer_words
from tests.helpers import TRAIN_SENTENCE as TEXT
from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, livekit_audio, pcm16
from tests.test_deepgram import deepgram_client
from tests.test_heard_audio import ENGLISH, SPANISH, whisper_count

RATE = 24_000


def _socket(
    server: RunningServer, query: str = "model=flux-alexis-en&encoding=linear16&sample_rate=24000"
) -> Any:
    url = server.url.replace("http", "ws", 1) + "/v2/speak?" + query
    return connect(
        url, additional_headers={"Authorization": f"Token {TOKEN}"}, max_size=None, open_timeout=30
    )


def _until(ws: Any, kind: str, audio: bytearray | None = None, timeout: float = 90) -> dict[str, Any]:
    """Read to the next message of this type (audio kept in ``audio``); the messages on the way are dropped."""
    while True:
        frame = ws.recv(timeout=timeout)
        if isinstance(frame, bytes):
            if audio is not None:
                audio += frame
            continue
        message = json.loads(frame)
        if message["type"] == kind:
            return dict(message)


@pytest.mark.slow
def test_the_sdk_streams_a_turn_configures_and_closes(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    from deepgram.speak.v2.types import SpeakV2Configure, SpeakV2Flush, SpeakV2Speak

    client = deepgram_client(vendor_server)
    with client.speak.v2.connect(model="flux-alexis-en", encoding="linear16", sample_rate=16000) as socket:
        for word in TEXT.split(" "):
            socket.send_speak(SpeakV2Speak(text=word + " "))
        socket.send_flush(SpeakV2Flush())
        pcm, kinds = bytearray(), []
        while True:
            message = socket.recv()
            if isinstance(message, bytes):
                pcm += message
                continue
            kinds.append(message.type)
            if message.type == "Flushed":
                break
        socket.send_configure(SpeakV2Configure(speed=1.25))
        applied = socket.recv()
        socket.send_configure(SpeakV2Configure.construct(type="Configure", speed=1.27))
        off_step = socket.recv()
        socket._send({"type": "Configure", "speed": 3})
        too_fast = socket.recv()
    assert kinds[0] == "Connected" and kinds[1] == "SpeechStarted", kinds
    assert kinds[-2:] == ["SpeechMetadata", "Flushed"], kinds
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(bytes(pcm)), 16_000)) < 0.2
    assert applied.type == "ConfigureSuccess" and applied.applied.speed == 1.25
    assert off_step.type == "ConfigureFailure" and off_step.code == "SPEED_INCREMENT_INVALID"
    assert too_fast.type == "ConfigureFailure" and too_fast.code == "SPEED_OUT_OF_RANGE"


@pytest.mark.slow
def test_the_sdk_rest_call(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    client = deepgram_client(vendor_server)
    audio = b"".join(
        client.speak.v2.audio.generate(
            text=TEXT, model="flux-alexis-en", encoding="linear16", container="none", sample_rate=24000
        )
    )
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(audio), 24_000)) < 0.2


# The offsets fall after a word and before the middle of the next (Whisper's times: "watching" ends 4100 ms,
# "from" 4100-4320; "miraba" ends 4360, "desde" 4360-4560), so the listener's count is not a coin toss.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "model", "lang", "offset"),
    [(ENGLISH, "flux-alexis-en", "en", 4150), (SPANISH, "ef_dora", "es", 4300)],
)
def test_an_interrupt_says_what_was_heard(  # type: ignore[no-untyped-def]
    vendor_server: RunningServer, transcriber, text: str, model: str, lang: str, offset: int
) -> None:
    from deepgram.speak.v2.types import SpeakV2Flush, SpeakV2Interrupt, SpeakV2Speak
    from deepgram.speak.v2.types.speak_v2interrupt_playback_offset import SpeakV2InterruptPlaybackOffset

    client = deepgram_client(vendor_server)
    with client.speak.v2.connect(model=model, encoding="linear16", sample_rate=24000) as socket:
        for word in text.split(" "):  # as an LLM writes it
            socket.send_speak(SpeakV2Speak(text=word + " "))
        socket.send_flush(SpeakV2Flush())
        pcm = bytearray()
        while len(pcm) < offset * RATE // 1000 * 2:  # the player played this much
            message = socket.recv()
            if isinstance(message, bytes):
                pcm += message
        socket.send_interrupt(
            SpeakV2Interrupt(playback_offset=SpeakV2InterruptPlaybackOffset(type="time_ms", value=offset))
        )
        while getattr(message := socket.recv(), "type", None) != "SpeechInterrupted":
            pass
        # the same turn again, whole: Whisper times its words (on audio cut mid-sentence it hallucinates)
        for word in text.split(" "):
            socket.send_speak(SpeakV2Speak(text=word + " "))
        socket.send_flush(SpeakV2Flush())
        whole = bytearray()
        while getattr(reply := socket.recv(), "type", None) != "Flushed":
            if isinstance(reply, bytes):
                whole += reply
    assert message.audio_played_ms == offset
    assert message.text_spoken and message.text_remaining
    sent = "".join(word + " " for word in text.split(" "))
    assert (
        message.text_spoken + message.text_remaining == sent
    )  # exactly what was sent: nothing lost at the cut
    assert message.metadata.input_character_count == len(text) + 1  # each word sent with a space
    timed = transcriber.words(pcm16(bytes(whole)), RATE, language=lang)
    before = " ".join(word for word, start, end in timed if (start + end) / 2 <= offset)
    assert abs(whisper_count(text, before) - len(wer_words(message.text_spoken))) <= 1, (
        message.text_spoken,
        before,
    )


def test_interrupt_refusals_follow_deepgrams_codes_and_the_session_goes_on(
    vendor_server: RunningServer,
) -> None:
    with _socket(vendor_server) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "Connected"
        ws.send(json.dumps({"type": "Interrupt"}))
        assert _until(ws, "Warning")["code"] == "NO_AUDIO_GENERATED"
        ws.send(json.dumps({"type": "Flush"}))
        assert _until(ws, "Warning")["code"] == "NO_ACTIVE_SPEECH"
        ws.send(json.dumps({"type": "Speak", "text": ENGLISH}))
        ws.send(json.dumps({"type": "Flush"}))
        audio = bytearray()
        while len(audio) < RATE * 2 * 2:
            frame = ws.recv(timeout=90)
            audio += frame if isinstance(frame, bytes) else b""
        for bad in (-5, "12", {"value": 10}, [1], 1e300):
            ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": bad}}))
            assert _until(ws, "Warning")["code"] == "INVALID_INTERRUPT_OFFSET", bad
        # a flood: the first stops the turn; the rest are refused while it stops, or find nothing playing
        for _ in range(50):
            ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 1000}}))
        first = _until(ws, "SpeechInterrupted")
        assert first["audio_played_ms"] == 1000 and first["text_spoken"], first
        codes = [_until(ws, "Warning")["code"] for _ in range(49)]
        assert set(codes) <= {"INTERRUPT_IN_PROGRESS", "INVALID_INTERRUPT_OFFSET"}, set(codes)
        # backwards, and not past the last: refused; the session speaks on from the interrupt's position
        ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 1000}}))
        assert _until(ws, "Warning")["code"] == "INVALID_INTERRUPT_OFFSET"
        ws.send(json.dumps({"type": "Speak", "text": "A new turn. " * 6}))
        ws.send(json.dumps({"type": "Flush"}))
        audio = bytearray()
        started = _until(ws, "SpeechStarted", audio)
        while len(audio) < RATE * 2:
            frame = ws.recv(timeout=90)
            audio += frame if isinstance(frame, bytes) else b""
        ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 1600}}))
        second = _until(ws, "SpeechInterrupted")
        assert second["metadata"]["speech_id"] == started["speech_id"]
        assert second["text_spoken"].startswith("A new"), second  # 600 ms into the new turn
        # nothing playing now (its audio was dropped), and an offset past everything sent finds nothing
        ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 10**9}}))
        assert _until(ws, "Warning")["code"] == "NO_ACTIVE_SPEECH"
        # without an offset: no texts, the audio generated so far
        ws.send(json.dumps({"type": "Speak", "text": ENGLISH}))
        ws.send(json.dumps({"type": "Flush"}))
        _until(ws, "SpeechStarted")
        while not isinstance(ws.recv(timeout=90), bytes):
            pass  # some audio of it sent
        ws.send(json.dumps({"type": "Interrupt"}))
        bare = _until(ws, "SpeechInterrupted")
        assert "text_spoken" not in bare and bare["audio_played_ms"] > 1600
        ws.send(json.dumps({"type": "Speak", "text": " ,. "}))
        ws.send(json.dumps({"type": "Flush"}))
        assert _until(ws, "Warning")["code"] == "NO_SYNTHESIZABLE_TEXT"
        assert _until(ws, "SpeechMetadata")["audio_duration_ms"] == 0
        ws.send(json.dumps({"type": "Close"}))
        summary = _until(ws, "SessionMetadata")
        assert summary["total_audio_duration_ms"] >= 1600


def test_an_interrupt_behind_one_that_found_nothing_playing_is_refused_not_crashed(
    vendor_server: RunningServer,
) -> None:
    """An Interrupt past everything moved the timeline's floor without an ``interrupted_at``: the next one,
    backwards, formatted ``None`` and answered ``INTERNAL_ERROR``."""
    with _socket(vendor_server) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "Connected"
        ws.send(json.dumps({"type": "Speak", "text": "Hi there."}))
        ws.send(json.dumps({"type": "Flush"}))
        _until(ws, "Flushed")
        ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 999999}}))
        assert _until(ws, "Warning")["code"] == "NO_ACTIVE_SPEECH"
        ws.send(json.dumps({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 10}}))
        warning = _until(ws, "Warning")
        assert (
            warning["code"] == "INVALID_INTERRUPT_OFFSET"
            and "does not advance past" in warning["description"]
        )
        ws.send(json.dumps({"type": "Close"}))
        assert _until(ws, "SessionMetadata")["total_audio_duration_ms"] > 0  # the session went on to its end


async def test_a_burst_of_answered_frames_from_a_client_that_reads_is_answered_whole(
    vendor_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5,000 ``Interrupt``/``Configure`` frames in a fraction of a second, read all along: closed 1008 "too
    many unanswered frames" after 2,606 replies, because the reader drained the socket before the writer had
    a turn. The cap is for clients that read nothing (``test_contexts.py``): this one gets every answer.
    The cap is made small here so that any machine's burst outruns the writer, as that one's did."""
    from websockets.asyncio.client import connect as aconnect

    from streamvoice.server.surfaces import outbox

    monkeypatch.setattr(outbox, "MAX_PENDING_REPLIES", 8)

    url = vendor_server.url.replace("http", "ws", 1) + "/v2/speak?model=flux-alexis-en&encoding=linear16"
    async with aconnect(url, additional_headers={"Authorization": f"Token {TOKEN}"}, max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "Connected"
        replies: list[str] = []

        async def read() -> None:
            while True:
                message = json.loads(await ws.recv())
                replies.append(message["type"])
                if message["type"] == "SessionMetadata":
                    return

        reader = asyncio.create_task(read())
        burst = [json.dumps({"type": "Interrupt"}), json.dumps({"type": "Configure", "speed": 1.1})] * 2_500
        for frame in burst:
            await ws.send(frame)
        await ws.send(json.dumps({"type": "Close"}))
        await asyncio.wait_for(reader, 120)
    assert replies.count("Warning") == 2_500 and replies.count("ConfigureSuccess") == 2_500
    assert replies[-1] == "SessionMetadata"


def test_a_bad_speed_in_the_query_is_refused_with_an_error_that_says_why(
    vendor_server: RunningServer,
) -> None:
    from websockets.exceptions import ConnectionClosed

    with _socket(vendor_server, "model=flux-alexis-en&speed=1.27") as ws:
        error = json.loads(ws.recv(timeout=30))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
    assert error["type"] == "Error" and "speed" in error["description"], error
    assert ws.close_code == 1008


@pytest.mark.slow
async def test_livekit_tts_v2_streams_word_by_word_and_survives_an_interruption(  # type: ignore[no-untyped-def]
    vendor_server: RunningServer, transcriber
) -> None:
    import aiohttp
    from livekit.plugins import deepgram

    async with aiohttp.ClientSession() as http:
        tts = deepgram.TTSv2(
            model="flux-alexis-en", base_url=f"{vendor_server.url}/v2/speak", api_key=TOKEN, http_session=http
        )
        interrupted = tts.stream()
        for word in ENGLISH.split(" "):
            interrupted.push_text(word + " ")
        interrupted.flush()
        got = 0
        async for event in interrupted:  # the user barges in after the first half second
            got += len(event.frame.data)
            if got > RATE:
                break
        await interrupted.aclose()
        stream = tts.stream()
        for word in TEXT.split(" "):
            stream.push_text(word + " ")
        stream.end_input()
        pcm, _ = await asyncio.wait_for(livekit_audio(stream), 120)
        await tts.aclose()
    assert word_error_rate(TEXT, transcriber.transcribe(pcm, 24_000)) < 0.2
