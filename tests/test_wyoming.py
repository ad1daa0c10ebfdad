"""Home Assistant's Wyoming protocol, from the speech server's own process, driven by the ``wyoming``
package's client over TCP on loopback (the event order Home Assistant sends)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from streamvoice.asgi import free_port
from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.server.core.config import ConfigError, ServerConfig
from tests.helpers import (
    WORDS,
    RunningServer,
    metric,
    ping,
    rss_mb,
    start_speech_server,
    wait_for,
)
from tests.helpers import answers as next_answers

ANSWER = (
    "The kitchen lights are on. The thermostat is set to twenty one degrees, and the front door is locked."
)


@pytest.fixture(scope="module")
def wyoming_server(engine: KokoroEngine) -> Iterator[tuple[RunningServer, int]]:
    port = free_port()
    server = start_speech_server(engine, wyoming_uri=f"tcp://127.0.0.1:{port}")
    yield server, port
    server.stop()


async def read_until(
    client: AsyncTcpClient, done: str, timeout: float = 60.0, into: list[tuple[float, Event]] | None = None
) -> list[tuple[float, Event]]:
    """Events with their arrival times, up to and including the first of type ``done`` (appended to
    ``into`` as they come, when given)."""
    events: list[tuple[float, Event]] = [] if into is None else into
    async with asyncio.timeout(timeout):
        while True:
            event = await client.read_event()
            assert event is not None, "the server closed the connection"
            events.append((time.monotonic(), event))
            if event.type == done:
                return events


def pcm_of(events: list[tuple[float, Event]]) -> np.ndarray:
    chunks = [AudioChunk.from_event(e) for _, e in events if AudioChunk.is_type(e.type)]
    assert {(c.rate, c.width, c.channels) for c in chunks} == {(24_000, 2, 1)}  # one WAV header fits all
    return np.frombuffer(b"".join(c.audio for c in chunks), "<i2").astype(np.float32) / 32768


async def test_describe_lists_one_streaming_program_with_every_voice(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Describe().event())
        events = await read_until(client, "info")
    info = Info.from_event(events[-1][1])
    (program,) = info.tts
    assert program.supports_synthesize_streaming and program.installed
    assert len(program.voices) == 54
    heart = next(v for v in program.voices if v.name == "af_heart")
    assert heart.languages == ["en-us"]
    assert next(v for v in program.voices if v.name == "ff_siwis").languages == ["fr-fr"]


@pytest.mark.slow
async def test_one_shot_synthesize_is_one_audio_block(
    wyoming_server: tuple[RunningServer, int], transcriber
) -> None:  # type: ignore[no-untyped-def]
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Synthesize(text=ANSWER, voice=SynthesizeVoice(name="am_michael")).event())
        events = await read_until(client, "audio-stop")
    types = [e.type for _, e in events]
    assert types[0] == "audio-start" and types.count("audio-start") == 1 and types.count("audio-chunk") >= 3
    assert AudioStart.from_event(events[0][1]).rate == 24_000
    heard = transcriber.transcribe(pcm_of(events))
    assert word_error_rate(ANSWER, heard) < 0.25, heard


@pytest.mark.slow
async def test_streaming_speaks_before_the_text_ends_as_home_assistant_sends_it(
    wyoming_server: tuple[RunningServer, int], transcriber
) -> None:  # type: ignore[no-untyped-def]
    """Home Assistant: synthesize-start, one chunk per LLM delta, the whole text again as synthesize, then
    synthesize-stop; it reads audio until synthesize-stopped."""
    deltas = [w + " " for w in ANSWER.split()]
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        events: list[tuple[float, Event]] = []
        reader = asyncio.create_task(read_until(client, "synthesize-stopped", timeout=120, into=events))
        for delta in deltas:  # an LLM writing ~7 words a second
            await client.write_event(SynthesizeChunk(text=delta).event())
            await asyncio.sleep(0.15)
        await client.write_event(Synthesize(text=ANSWER, voice=SynthesizeVoice(name="af_heart")).event())
        # audio starts while the text is still open: the test waits for it before it stops the stream
        await wait_for(lambda: any(AudioChunk.is_type(e.type) for _, e in events))
        await client.write_event(SynthesizeStop().event())
        await reader
    assert SynthesizeStopped.is_type(events[-1][1].type)
    types = [e.type for _, e in events]
    assert types.count("audio-start") == types.count("audio-stop") >= 2  # a block per piece, like piper
    assert types.index("audio-start") < types.index("audio-chunk")
    heard = transcriber.transcribe(pcm_of(events))
    assert word_error_rate(ANSWER, heard) < 0.25, heard  # said once: the repeated synthesize was ignored


async def test_bad_input_gets_wyoming_errors_and_the_stream_still_stops(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="af_hart")).event())
        ((_, event),) = await read_until(client, "error")
        error = Error.from_event(event)
        assert error.code == "unknown_voice" and "af_heart" in error.text
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event())
        await client.write_event(SynthesizeChunk(text="Hello there.").event())  # dropped: no stream
        await client.write_event(SynthesizeStop().event())
        events = await read_until(client, "synthesize-stopped")
        assert [e.type for _, e in events] == ["error", "synthesize-stopped"]  # the stop is still answered
        await client.write_event(Synthesize(text="?!").event())
        ((_, event),) = await read_until(client, "error")
        assert Error.from_event(event).code == "empty_text"
        await client.write_event(SynthesizeChunk(text="stray").event())
        ((_, event),) = await read_until(client, "error")
        assert Error.from_event(event).code == "invalid_message"
        await client.write_event(Describe().event())  # the connection is still usable
        await read_until(client, "info")


@pytest.mark.slow
async def test_a_closed_socket_cancels_the_work(wyoming_server: tuple[RunningServer, int]) -> None:
    server, port = wyoming_server
    long_text = " ".join([ANSWER] * 8)
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=long_text).event())
        await read_until(client, "audio-chunk")
    # Home Assistant cancels by closing: the stream ends and no more model work is queued for it.
    await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    await wait_for(lambda: metric(server, "streamvoice_queue_depth") == 0)
    async with AsyncTcpClient("127.0.0.1", port) as client:  # and the next caller is served at once
        await client.write_event(Synthesize(text="Still here.").event())
        events = await read_until(client, "audio-stop", timeout=30)
    assert AudioStop.is_type(events[-1][1].type)


def test_wyoming_uri_is_checked_at_start() -> None:
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        ServerConfig(wyoming_uri="http://localhost:10200")
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        ServerConfig(wyoming_uri="tcp://localhost")
    assert ServerConfig(wyoming_uri="tcp://127.0.0.1:10200").wyoming_uri


async def test_a_streamed_sentence_that_stops_is_spoken_without_the_stop(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    """Home Assistant's order, one chunk per word 120 ms apart, then no more text: the sentence is spoken
    once the text has been quiet for STREAM_QUIET_CUT_MS (before: no audio in 20 s, until the stop)."""
    reply = "I can book a table for four people at seven thirty this evening."
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        for word in reply.split(" "):
            await client.write_event(SynthesizeChunk(text=word + " ").event())
            await asyncio.sleep(0.12)
        # then no more text: its audio comes without the stop (how soon: python -m streamvoice.bench.integrations)
        async with asyncio.timeout(60):
            while (event := await client.read_event()) is not None and not AudioChunk.is_type(event.type):
                pass
        assert event is not None
        await client.write_event(SynthesizeStop().event())
        rest = await read_until(client, "synthesize-stopped", timeout=60)
    assert SynthesizeStopped.is_type(rest[-1][1].type)


async def read_error(client: AsyncTcpClient, timeout: float = 60.0) -> Error:
    async with asyncio.timeout(timeout):
        while True:
            event = await client.read_event()
            assert event is not None, "closed before an error was answered"
            if Error.is_type(event.type):
                return Error.from_event(event)


def raw_header(header: dict[str, Any] | list[Any]) -> bytes:
    return (json.dumps(header) + "\n").encode()


def send_then_read(port: int, head: bytes, junk_bytes: int) -> bytes:
    """Send a header and junk after it (until the server closes), then all the server said."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head)
        block = b"x" * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(junk_bytes // len(block)):
                sock.sendall(block)
        received = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                received += chunk
        return received


def write_raw(client: AsyncTcpClient, data: bytes) -> None:
    """Bytes the ``wyoming`` client would never write (it frames events correctly)."""
    assert client._writer is not None
    client._writer.write(data)


@pytest.fixture(scope="module")
def wyoming(engine: KokoroEngine) -> Iterator[tuple[RunningServer, int]]:
    port = free_port()
    server = start_speech_server(
        engine,
        wyoming_uri=f"tcp://127.0.0.1:{port}",
        warm_up=False,
        max_stream_chars=3_000,
        stream_text_timeout_s=1.5,
        send_timeout_s=2.0,
        wyoming_max_connections=12,
        max_sessions=6,
        admission="refuse",
        admission_listeners=2,
    )
    yield server, port
    server.stop()


async def test_wyoming_huge_text_never_freezes_the_server(wyoming: tuple[RunningServer, int]) -> None:
    server, port = wyoming
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=WORDS).event())  # 200 KB in one synthesize
        error = await read_error(client)  # past the data cap: refused unread, the connection closed
        assert error.code == "message_too_large" and "65536" in error.text
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(
            Synthesize(text=WORDS[:50_000]).event()
        )  # fits the data cap, not the text cap
        error = await read_error(client)
        assert error.code == "text_too_long" and "10000" in error.text
    # A flood of chunks: past the stream's cap the rest is refused once, what came before is spoken, and HTTP
    # is answered between the batches (a 200 KB synthesize once blocked /ping for 29 s; that each chunk
    # costs bounded work is test_chunker.py::test_chunker_work_per_character_is_bounded).
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        words = [w + " " for w in WORDS.split()[:4_000]]
        for batch in range(0, len(words), 1_000):
            await _send_chunks(client, words[batch : batch + 1_000])
            assert await ping(server) == 200
        error = await read_error(client)
        assert error.code == "text_too_long"
    await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    assert await ping(server) == 200


async def _send_chunks(client: AsyncTcpClient, chunks: list[str]) -> None:
    for i, chunk in enumerate(chunks):
        await client.write_event(SynthesizeChunk(text=chunk).event())
        if i % 50 == 0:
            await asyncio.sleep(0)  # a client's loop has other work too: the pings are measured meanwhile


# --- 21. Wyoming lengths are read as checked integers, never as declared ----------------------------------


async def test_wyoming_lengths_are_checked_before_anything_is_read(
    wyoming: tuple[RunningServer, int],
) -> None:
    server, port = wyoming
    before = rss_mb()
    # the attack sent 1 GB after its header; 64 MB show the same
    with_error = await asyncio.to_thread(
        send_then_read, port, raw_header({"type": "synthesize", "data_length": 4 * 1024**3}), 64 << 20
    )
    assert b"message_too_large" in with_error
    assert rss_mb() - before < 150  # 1 GB sent this way took RSS from 817 MB to 2.7 GB
    for bad in ({"type": "synthesize", "data_length": 1e20}, {"type": "x", "payload_length": "12"}):
        answer = await asyncio.to_thread(send_then_read, port, raw_header(bad), 0)
        assert b"invalid_message" in answer and b"whole number" in answer
    # Headers that parse but are wrong are answered and the connection goes on.
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for header in ([1, 2], {"data": {}}, {"type": "synthesize", "data": "text"}):
            write_raw(client, raw_header(header))
            assert (await read_error(client)).code == "invalid_message"
        await client.write_event(Event(type="synthesize", data={"text": 12}))
        assert (await read_error(client)).code == "invalid_field"
        await client.write_event(Describe().event())
        async with asyncio.timeout(10):
            while (event := await client.read_event()) is not None and event.type != "info":
                pass
        assert event is not None and event.type == "info"
    assert await ping(server) == 200


# --- 25. Wyoming slots time out; an unknown voice gives its slot back; a non-reader is dropped -------------


async def test_wyoming_slots_are_bounded_and_always_released(
    wyoming: tuple[RunningServer, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, port = wyoming
    from streamvoice.server.surfaces.wyoming.handler import SpeechHandler

    # The server's end of each connection gets a small send buffer (Linux grows it to 4 MB, over a minute
    # of audio, before a send to a client that reads nothing blocks).
    opened = SpeechHandler.__init__

    def small_buffers(self: SpeechHandler, reader: Any, writer: Any, *args: Any, **kwargs: Any) -> None:
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        opened(self, reader, writer, *args, **kwargs)

    monkeypatch.setattr(SpeechHandler, "__init__", small_buffers)
    clients = [AsyncTcpClient("127.0.0.1", port) for _ in range(4)]
    for client in clients:
        await client.connect()
        await client.write_event(SynthesizeStart().event())  # and nothing more
    errors = [await read_error(c) for c in clients]  # stream_text_timeout_s = 1.5
    # two listeners admitted (the fixture's admission), each ended when its text never came
    assert sorted(e.code for e in errors) == ["idle_timeout"] * 2 + ["server_busy"] * 2
    await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    for client in clients:
        await client.disconnect()
    # An unknown voice is answered and leaks no listener slot (admission is on: two listeners).
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for _ in range(3):
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="zz_nobody")).event())
            assert (await read_error(client)).code == "unknown_voice"
    assert metric(server, "streamvoice_admitted_listeners") == 0
    # A client that never reads is dropped after send_timeout_s (it kept its stream 65 s and more).
    sock = socket.socket()  # a small window from the start: the server's sends block within kilobytes
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    _reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    event = Synthesize(text="A long answer for a client that reads nothing at all. " * 30).event()
    data = json.dumps(event.data).encode()
    writer.write(raw_header({"type": event.type, "data_length": len(data)}) + data)
    await writer.drain()
    await wait_for(lambda: 'code="slow_consumer"' in httpx.get(server.url + "/metrics").text)
    await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    writer.close()
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text="Still serving.").event())
        async with asyncio.timeout(60):
            while (ev := await client.read_event()) is not None and ev.type != "audio-stop":
                pass
        assert ev is not None and ev.type == "audio-stop"


# --- 28. huge numbers and lone surrogates are 4xx on every surface ----------------------------------------


async def test_huge_speed_and_lone_surrogates_are_answered(wyoming: tuple[RunningServer, int]) -> None:
    server, port = wyoming
    huge = '{"input": "Hi.", "speed": 1' + "0" * 400 + "}"
    r = httpx.post(
        server.url + "/v1/audio/speech", content=huge, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_speed"
    for body in ('{"input": "Hi \\ud800 there."}', '{"input": "Hi \\ud800 there.", "stream_format": "sse"}'):
        r = httpx.post(server.url + "/v1/audio/speech", content=body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_utf8", r.text
    r = httpx.post(server.url + "/invocations", content='{"text": "Hi \\ud800."}')
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_utf8"
    async with connect(server.ws_url) as ws:
        await ws.send('{"text": "Hi \\ud800.", "id": "s"}')
        await ws.send('{"text": "Fine.", "id": "ok"}')
        answers = await next_answers(ws, 2)
    assert [a.get("code") for a in answers] == ["invalid_utf8", None]
    async with AsyncTcpClient("127.0.0.1", port) as client:
        event = Synthesize(text="Hi \ud800.").event()
        data = json.dumps(event.data).encode()  # ensure_ascii writes the surrogate as \ud800
        write_raw(client, raw_header({"type": "synthesize", "data_length": len(data)}) + data)
        assert (await read_error(client)).code == "invalid_utf8"
