"""The surfaces added after the first live-attack review (Wyoming, the HTTP routes, the agent's turns),
attacked as the second review did, against the servers as their commands build them.

One test per finding in docs/reliability.md's "hostile input" table (rows 20-30): each asserts the bound
(time, memory, count, status) and that another caller was unharmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeVoice

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.asgi import free_port
from streamvoice.engine import KokoroEngine
from streamvoice.server.admission import Admission
from streamvoice.server.config import ConfigError, ServerConfig
from streamvoice.text.chunker import FAST_FIRST, IncrementalSentenceChunker
from tests.helpers import RunningServer, cpu_seconds, metric, start_agent, start_speech_server, wait_for
from tests.helpers import answers as next_answers

WORDS = "alpha beta gamma, delta. Thing and word " * 5_000  # 200 KB of words with sentence ends


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def ping(server: RunningServer) -> int:
    async with httpx.AsyncClient(timeout=60) as client:
        return (await client.get(server.url + "/ping")).status_code


def ping_on_a_thread(server: RunningServer) -> int:
    return httpx.get(server.url + "/ping", timeout=60).status_code


async def read_error(client: AsyncTcpClient, timeout: float = 60.0) -> Error:
    async with asyncio.timeout(timeout):
        while True:
            event = await client.read_event()
            assert event is not None, "closed before an error was answered"
            if Error.is_type(event.type):
                return Error.from_event(event)


async def closed(reader: asyncio.StreamReader, timeout: float = 60.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(timeout):
        return await reader.read()


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


# --- 20. Wyoming text is capped and chunked in bounded time -------------------------------------------------


def _chunked(fragments: list[str]) -> list[str]:
    chunker = IncrementalSentenceChunker(FAST_FIRST)
    return [p for f in fragments for p in chunker.feed(f)] + chunker.flush()


@pytest.mark.parametrize(
    "fragments",
    [[WORDS[:100_000]], ["x"] * 20_000],
    ids=["100 KB at once", "20k characters without a space, one by one"],
)
def test_chunker_work_per_character_is_bounded(fragments: list[str]) -> None:
    """Ten times the text costs about ten times the work, not a hundred (it took 4 s and 21 s)."""
    pieces = _chunked(fragments)
    assert "".join(pieces).replace(" ", "") == "".join(fragments).replace(" ", "")
    tenth = fragments[: max(1, len(fragments) // 10)] if len(fragments) > 1 else [fragments[0][:10_000]]
    small = cpu_seconds(lambda: _chunked(tenth))
    large = cpu_seconds(lambda: _chunked(fragments))
    assert large < 30 * max(small, 1e-3), (small, large)


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
    # A flood of chunks: each is checked and fed in bounded time; past the stream's cap the rest is refused
    # once, what came before is spoken, and HTTP answers promptly all the while.
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        flood = asyncio.create_task(_send_chunks(client, [w + " " for w in WORDS.split()[:4_000]]))
        answered_during = 0  # pings answered while the flood was still being sent
        while not flood.done():
            # on a thread of its own: this loop is busy sending the flood
            status = await asyncio.to_thread(ping_on_a_thread, server)
            answered_during += status == 200 and not flood.done()
        await flood
        error = await read_error(client)
        assert error.code == "text_too_long"
        assert answered_during >= 1  # a 200 KB synthesize blocked /ping for 29 s, past the flood's end
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


# --- 22. an agent turn ends when its caller leaves ------------------------------------------------------


async def test_agent_turn_is_released_when_its_caller_leaves_unread(speech_server: RunningServer) -> None:
    long_answer = "This answer goes on and on so that nobody reads it to the end. " * 30
    agent = await asyncio.to_thread(
        start_agent, ScriptedTextSource(long_answer, ttft_s=0.0, tokens_per_s=400.0), speech_server.url,
        max_concurrent_turns=2, send_timeout_s=3.0,
    )  # fmt: skip
    try:
        body = json.dumps({"prompt": "talk"}).encode()
        socks = []
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", agent.port))
            sock.sendall(
                b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            socks.append(sock)
        await wait_for(lambda: agent_turns(agent) == 2)  # both turns running, nobody reading
        async with httpx.AsyncClient(timeout=60) as client:
            busy = await client.post(agent.url + "/invocations", json={"prompt": "me"})
            assert busy.status_code == 503  # the cap holds while they run
            for sock in socks:
                sock.close()
            # two such callers held both turns for over 4 minutes; released, they free both
            await wait_for(lambda: agent_turns(agent) == 0)
            # a new caller is taken (its turn begins; this one leaves after its first event)
            async with client.stream("POST", agent.url + "/invocations", json={"prompt": "my turn"}) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    assert "agent_start" in line
                    break
    finally:
        await asyncio.to_thread(agent.stop)


# --- 23. an unstreamed captioned answer is counted and stops with its caller ----------------------------------


async def test_unstreamed_captioned_speech_is_counted_and_cancelled(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False, max_sessions=2)
    try:
        body = json.dumps({"input": "A long answer that nobody will wait for. " * 200, "stream": False})
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(
            b"POST /dev/captioned_speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body.encode()
        )
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 1)  # read 0
        sock.close()
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
        await wait_for(lambda: metric(server, "streamvoice_queue_depth") == 0)
        r = httpx.post(
            server.url + "/dev/captioned_speech", json={"input": "Short.", "stream": False}, timeout=60
        )
        assert r.status_code == 200 and r.json()["audio"] and r.json()["timestamps"]
    finally:
        await asyncio.to_thread(server.stop)


# --- 24. the session cap holds for simultaneous requests, and the agent's turn cap too ------------------------


async def test_simultaneous_requests_respect_the_caps(
    engine: KokoroEngine, speech_server: RunningServer
) -> None:
    # The session cap alone (admission, on by default, would turn callers away before it: test_admission).
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, max_sessions=4, admission="off"
    )
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            for path, body in (
                ("/v1/audio/speech", {"input": "Twelve of us at once.", "response_format": "pcm"}),
                ("/invocations", {"text": "Twelve of us at once."}),
                ("/dev/captioned_speech", {"input": "Twelve of us at once.", "stream": False}),
            ):
                answers = await asyncio.gather(
                    *(client.post(server.url + path, json=body) for _ in range(12))
                )
                codes = sorted(r.status_code for r in answers)
                assert codes.count(200) == 4 and codes.count(503) == 8, (path, codes)
                assert {r.json()["error"]["code"] for r in answers if r.status_code == 503} == {"server_busy"}
                await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    finally:
        await asyncio.to_thread(server.stop)
    # Each admitted turn lasts seconds (its LLM's first token comes after 2 s), so all eight requests
    # arrive while the first two are held: a turn that ended at once could free its place for a ninth.
    slow = ScriptedTextSource("One two three four five.", ttft_s=2.0)
    agent = await asyncio.to_thread(start_agent, slow, speech_server.url, max_concurrent_turns=2)
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            answers = await asyncio.gather(
                *(client.post(agent.url + "/invocations", json={"prompt": "hi"}) for _ in range(8))
            )
        # what counts is that only two were admitted (8 of 8 ran with a limit of 2)
        assert sorted(r.status_code for r in answers).count(503) == 6
        # released when each response ends, on the agent's side: a moment after the client has read it
        await wait_for(lambda: agent_turns(agent) == 0)
    finally:
        await asyncio.to_thread(agent.stop)


def agent_turns(agent: RunningServer) -> int:
    app: Any = agent.server.config.app
    return int(app.turns)


# --- 25. Wyoming slots time out; an unknown voice gives its slot back; a non-reader is dropped -------------


async def test_wyoming_slots_are_bounded_and_always_released(
    wyoming: tuple[RunningServer, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, port = wyoming
    from streamvoice.server.wyoming import SpeechHandler

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


# --- 26. Wyoming connections are capped and idle out ------------------------------------------------------


async def test_wyoming_connections_are_capped(engine: KokoroEngine) -> None:
    port = free_port()
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, wyoming_uri=f"tcp://127.0.0.1:{port}",
        wyoming_max_connections=8, idle_timeout_s=2.0,
    )  # fmt: skip
    try:
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
        refused = 0
        for reader, _ in conns[8:]:
            answer = await closed(reader)
            refused += b"server_busy" in answer
        assert refused == 22
        assert await ping(server) == 200
        # the eight held ones idle out
        for reader, _ in conns[:8]:
            assert b"idle_timeout" in await closed(reader)
        for _, writer in conns:
            writer.close()
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            assert (await client.read_event()) is not None
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        from streamvoice.server.wyoming_server import connection_cap

        assert connection_cap(10**9) <= soft // 4
    finally:
        await asyncio.to_thread(server.stop)


# --- 27. bodies are read only from callers with the token, and only for a while ----------------------------


def test_bodies_are_read_only_with_the_token_and_in_time(engine: KokoroEngine) -> None:
    server = start_speech_server(engine, warm_up=False, auth_token="secret", body_timeout_s=1.0)
    try:
        body_size = 1_000_000
        head = (
            b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {body_size}\r\n\r\n".encode()
        )
        conns = []
        before = rss_mb()
        for _ in range(50):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(head + b"x" * 1000)  # and the rest never
            conns.append(sock)
        for sock in conns:
            answer = recv_response(sock)
            assert b" 401 " in answer.split(b"\r\n", 1)[0] and b"unauthorized" in answer
            sock.close()
        assert rss_mb() - before < 50
        # With the token, a body that stops arriving is answered 408 after body_timeout_s.
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\nAuthorization: Bearer secret\r\n\r\n") + b"{")
        answer = recv_response(sock)
        assert b" 408 " in answer.split(b"\r\n", 1)[0]
        sock.close()
        ok = httpx.post(
            server.url + "/invocations", json={"text": "Hi."}, headers={"Authorization": "Bearer secret"}
        )
        assert ok.status_code == 200
    finally:
        server.stop()


def recv_response(sock: socket.socket) -> bytes:
    received = b""
    while b"}}" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            break
        received += chunk
    return received


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


# --- 29. Wyoming beyond loopback with a token set needs an explicit opt-in ------------------------------------


def test_remote_wyoming_with_a_token_needs_an_opt_in() -> None:
    with pytest.raises(ConfigError, match="WYOMING_ALLOW_UNAUTHENTICATED"):
        ServerConfig(wyoming_uri="tcp://0.0.0.0:10200", auth_token="secret")
    ServerConfig(wyoming_uri="tcp://0.0.0.0:10200", auth_token="secret", wyoming_allow_unauthenticated=True)
    ServerConfig(wyoming_uri="tcp://127.0.0.1:10200", auth_token="secret")
    ServerConfig(wyoming_uri="tcp://0.0.0.0:10200")  # no token: nothing is promised, as documented


# --- 30. a slot held long goes at its next pause while others want one -----------------------------------


def test_a_long_held_slot_goes_at_its_pause_while_others_wait() -> None:
    async def scenario() -> None:
        now = [0.0]
        admission = Admission("refuse", lambda: 1, idle_release_s=2.0, max_hold_s=30.0, clock=lambda: now[0])
        chatty, other = object(), object()
        assert admission.enter(chatty) == "admitted"
        for _ in range(20):  # "Hi." every 1.9 s, nobody else waiting: it keeps its slot
            admission.idle(chatty)
            now[0] += 1.9
            assert admission.enter(chatty) == "admitted"
        assert admission.enter(other) == "refused"  # someone wants a slot now
        admission.idle(chatty)  # held 38 s > 30 s: the slot goes at this pause
        assert admission.enter(other) == "admitted"
        assert admission.enter(chatty) == "refused"

    asyncio.run(scenario())


async def test_a_chatty_session_does_not_keep_the_only_slot(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, admission="refuse", admission_listeners=1,
        admission_max_hold_s=3.0,
    )  # fmt: skip
    try:
        async with connect(server.ws_url) as chatty, connect(server.ws_url) as other:
            stop = asyncio.Event()

            async def chatter() -> None:
                i = 0
                while not stop.is_set():
                    await chatty.send(json.dumps({"text": "Hi.", "id": f"c{i}"}))
                    await next_answers(chatty, 1)
                    i += 1
                    await asyncio.sleep(1.0)  # under the idle release: it never lets go on its own

            task = asyncio.create_task(chatter())
            await wait_for(lambda: metric(server, "streamvoice_admitted_listeners") == 1)  # chatty holds it
            admitted_at = None  # which try got the slot (refused for good before)
            for i in range(20):
                await other.send(json.dumps({"text": "May I?", "id": f"o{i}"}))
                (answer,) = await next_answers(other, 1)
                if answer["type"] == "synthesis_complete":
                    admitted_at = i
                    break
                assert answer["code"] == "server_busy"
                await asyncio.sleep(1.0)
            stop.set()
            await task
        assert admitted_at is not None
    finally:
        await asyncio.to_thread(server.stop)
