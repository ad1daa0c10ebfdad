"""Hostile input and unusual clients against the speech server and agent as their commands build them.

One test per attack in docs/reliability.md's "hostile input" table: each checks the bound that stops it
and that every message still gets exactly one answer.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.client.sse import SSEDecoder
from streamvoice.engine import KokoroEngine
from streamvoice.engine.voices import VoiceError, parse_voice_spec
from streamvoice.text.chunker import chunk_text
from tests.helpers import (
    RunningServer,
    cpu_seconds,
    metric,
    on_each_chunk,
    start_agent,
    start_speech_server,
    wait_for,
)
from tests.helpers import answers as next_answers

HUGE = "9" * 400


# --- 1. huge JSON integers ----------------------------------------------------------------------------


async def test_huge_integers_are_answered_and_leak_no_session(speech_server: RunningServer) -> None:
    before = metric(speech_server, "streamvoice_active_sessions")
    frames = [
        f'{{"type": "synthesize", "text": "Hi.", "speed": {HUGE}, "id": "s"}}',
        f'{{"type": "synthesize", "text": "Hi.", "speed": -{HUGE}}}',
        '{"type": "synthesize", "text": "Hi.", "id": ' + "7" * 5000 + "}",
        f'{{"type": "configure", "speed": {HUGE}}}',
    ]
    async with connect(speech_server.ws_url) as ws:
        for frame in frames:
            await ws.send(frame)
        errors = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in frames]
        assert [e["code"] for e in errors] == [
            "invalid_speed",
            "invalid_speed",
            "invalid_json",
            "invalid_speed",
        ]
        await ws.send(json.dumps({"text": "Still here.", "id": "ok"}))
        answers = await next_answers(ws, 1)
        assert answers[-1]["type"] == "synthesis_complete" and answers[-1]["id"] == "ok"
    await wait_for(lambda: metric(speech_server, "streamvoice_active_sessions") == before)
    r = httpx.post(speech_server.url + "/invocations", content=f'{{"text": "Hi.", "speed": {HUGE}}}')
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_speed"


# --- 2 and 15. voice specs ------------------------------------------------------------------------------


def test_voice_parsing_is_linear_and_bounded() -> None:
    known = {"af_heart", "am_michael"}

    def refuse(n: int) -> None:
        for hostile in ("af_heart*" + "1" * n + "x", "af_heart*" + "1." * (n // 2), "a" * n + "!"):
            with pytest.raises(VoiceError):
                parse_voice_spec(hostile, known)

    # ten times the spec, about ten times the work: the old pattern took seconds on a few KB
    assert cpu_seconds(lambda: refuse(250)) < 30 * max(cpu_seconds(lambda: refuse(25)), 1e-4)
    with pytest.raises(VoiceError, match="limit"):
        parse_voice_spec("af_heart*1+" * 40, known)
    with pytest.raises(VoiceError, match="at most"):  # overflowing weights: no NaN blend of silence
        parse_voice_spec("af_heart*999999999999+am_michael", known)
    blend = parse_voice_spec("af_heart*0.7+am_michael*0.3", known)
    assert [round(w, 3) for _, w in blend.parts] == [0.7, 0.3]


async def test_long_voice_is_refused_and_ping_stays_responsive(speech_server: RunningServer) -> None:
    async with connect(speech_server.ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"text": "Hi.", "voice": "af_heart*" + "1" * 12_000}))
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert error["code"] == "unknown_voice" and "limit" in error["message"]
    assert httpx.get(speech_server.url + "/ping", timeout=60).status_code == 200


# --- 3. rotating languages ------------------------------------------------------------------------------


def test_one_phonemizer_backend_per_language(engine: KokoroEngine) -> None:
    from streamvoice.engine.voices import SUPPORTED_LANGS

    for _ in range(3):
        for lang in SUPPORTED_LANGS:
            engine.planner.phonemizer.phonemize("Hello, one two three.", lang)
    assert engine.planner.phonemizer.backends == len(SUPPORTED_LANGS)
    with pytest.raises(ValueError, match="unsupported lang"):
        engine.planner.phonemizer.phonemize("Hello.", "xx")


# --- 4. planning ----------------------------------------------------------------------------------------


def test_planning_without_sentence_ends_is_near_linear() -> None:
    from streamvoice.engine.planning import MESSAGE_POLICY

    small, large = "word " * 400, "word " * 2000
    assert " ".join(chunk_text(large, MESSAGE_POLICY)).split() == large.split()
    # 5x the text: well under 25x the work (the quadratic cut search took 7 s for 10k characters)
    t_small = cpu_seconds(lambda: chunk_text(small, MESSAGE_POLICY))
    t_large = cpu_seconds(lambda: chunk_text(large, MESSAGE_POLICY))
    assert t_large < 12 * max(t_small, 1e-4), (t_small, t_large)


async def test_first_audio_of_a_long_message_does_not_wait_for_its_planning(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planning thread is held after the text's second chunk: its first audio can only come if it
    does not wait for the rest of its planning (before, 10k characters were planned first: seconds)."""
    planned: list[str] = []
    go_on = threading.Event()

    def held(chunk: str) -> None:
        planned.append(chunk)
        if len(planned) > 2:
            go_on.wait(120)

    on_each_chunk(monkeypatch, engine.planner, held)
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False)
    try:
        text = "and then we walked a little further down the road, " * 190  # ~10k chars, no sentence end
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": text[:9_990], "id": "long"}))
            while isinstance(frame := await asyncio.wait_for(ws.recv(), 60), str):
                pass  # synthesis_started
            assert len(frame) > 0 and len(planned) <= 3, len(planned)
            go_on.set()
            await ws.send(json.dumps({"type": "cancel"}))
            answers = await next_answers(ws, 1)
            assert answers[-1]["code"] == "cancelled"
        # a second client is served promptly once the first has gone (planning stopped with it)
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": "Next caller.", "id": "next"}))
            answers = await next_answers(ws, 1)
            assert answers[-1]["type"] == "synthesis_complete"
    finally:
        await asyncio.to_thread(server.stop)


# --- 5. pipelining past the queue ------------------------------------------------------------------------


async def test_pipelining_past_the_queue_gets_queue_full_and_keeps_the_session(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, max_queued_messages=3, ws_ping_interval_s=1.0,
        ws_ping_timeout_s=2.0,
    )  # fmt: skip
    try:
        async with connect(server.ws_url, ping_interval=None) as ws:
            long = "This sentence keeps the model busy for a while so the others must queue. " * 4
            await ws.send(json.dumps({"text": long, "id": "m0"}))
            for i in range(1, 9):
                await ws.send(json.dumps({"text": f"Message number {i}.", "id": f"m{i}"}))
            answers = await next_answers(ws, 9, timeout=120)
            await asyncio.sleep(3)  # longer than the ping timeout: pongs were read all along
            await ws.send(json.dumps({"text": "Alive.", "id": "alive"}))
            answers += await next_answers(ws, 1)
        by_id = {a["id"]: a for a in answers}
        assert len(by_id) == 10  # every message answered exactly once
        assert [by_id[f"m{i}"]["type"] for i in range(3)] == ["synthesis_complete"] * 3
        assert {by_id[f"m{i}"].get("code") for i in range(3, 9)} == {"queue_full"}
        assert by_id["alive"]["type"] == "synthesis_complete"
    finally:
        await asyncio.to_thread(server.stop)


# --- 6 and 7. decode-ahead and real-time readers -----------------------------------------------------------


@pytest.fixture
def lanes() -> Iterator[list[Any]]:
    """Every listener lane the server creates while the test runs, in creation order."""
    from streamvoice.server.lane import Lane

    created: list[Lane] = []
    original = Lane.__init__

    def record(self: Lane, service: Any) -> None:
        original(self, service)
        created.append(self)

    Lane.__init__ = record  # type: ignore[method-assign]
    try:
        yield created
    finally:
        Lane.__init__ = original  # type: ignore[method-assign]


async def test_unread_audio_is_bounded_per_listener(engine: KokoroEngine, lanes: list[Any]) -> None:
    from streamvoice.server.lane import MAX_UNSENT_S

    server = await asyncio.to_thread(
        start_speech_server, engine, sndbuf=4096, warm_up=False, send_timeout_s=60
    )
    try:
        text = "The quick brown fox jumps over the lazy dog near the river bank today. " * 30
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        async with connect(server.ws_url, sock=sock, max_queue=1) as ws:
            await ws.send(json.dumps({"text": text, "id": "big"}))  # ~60 s of audio; we read none of it
            held: list[float] = []

            def parked() -> bool:
                if not lanes:
                    return False
                held.append(lanes[-1].unsent_s)
                return bool(lanes[-1]._parked)

            await wait_for(parked)  # decoding stopped until the sender catches up
            for _ in range(10):  # and stays stopped
                await asyncio.sleep(0.1)
                assert parked()
            assert max(held) <= MAX_UNSENT_S + 1.0  # one window past the bound at most
            await ws.send(json.dumps({"type": "cancel"}))
    finally:
        await asyncio.to_thread(server.stop)


async def test_unread_http_stream_is_counted_and_timed_out(engine: KokoroEngine) -> None:
    # small kernel buffers on both ends (set before connecting, so the window is small from the start):
    # a send blocks after a second or two of audio, not after the minute default buffers hold
    server = await asyncio.to_thread(
        start_speech_server, engine, sndbuf=4096, warm_up=False, send_timeout_s=1.0, max_sessions=1
    )
    try:
        text = "A long answer for a client that never reads the body it asked for. " * 40
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        body = json.dumps({"text": text}).encode()
        sock.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 1)
        busy = httpx.post(server.url + "/invocations", json={"text": "Me too."})
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "server_busy"
        assert busy.headers["retry-after"]
        await wait_for(lambda: 'code="slow_consumer"' in httpx.get(server.url + "/metrics").text)
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
        sock.close()
        ok = httpx.post(server.url + "/invocations", json={"text": "My turn."}, timeout=60)
        assert ok.status_code == 200 and len(ok.content) > 0
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_reader_at_playback_speed_is_never_disconnected(engine: KokoroEngine) -> None:
    # Keepalive and send timeout squeezed (1 s ping, 2 s pong timeout, 3 s send timeout, 1 s send-ahead),
    # so what took minutes to break at the defaults breaks within seconds if pacing is wrong.
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, ws_ping_interval_s=1.0, ws_ping_timeout_s=2.0,
        send_timeout_s=3.0, max_send_ahead_s=1.0,
    )  # fmt: skip
    try:
        # ~10 s of audio: many times the ping interval, the pong timeout and the send timeout
        text = "We read this answer exactly as fast as a phone line plays it back to the caller. " * 2
        async with connect(server.ws_url, max_queue=1) as ws:
            await ws.send(json.dumps({"text": text, "id": "rt"}))
            played = 0.0
            started = time.monotonic()
            while True:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(frame, bytes):
                    played += len(frame) / 48_000
                    await asyncio.sleep(max(0.0, started + played - time.monotonic()))  # playback speed
                    continue
                event = json.loads(frame)
                if event["type"] in ("synthesis_complete", "error"):
                    break
        assert event["type"] == "synthesis_complete" and played > 7
        assert 'code="slow_consumer"' not in httpx.get(server.url + "/metrics").text
    finally:
        await asyncio.to_thread(server.stop)


# --- 8 and 9. sizes -----------------------------------------------------------------------------------------


async def test_oversized_frame_is_answered_and_the_session_goes_on(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False, max_message_bytes=8192)
    try:
        async with connect(server.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"text": "Queued first.", "id": "a"}))
            await ws.send(json.dumps({"text": "x " * 10_000, "id": "big"}))
            await ws.send(json.dumps({"text": "Queued after.", "id": "b"}))
            answers = await next_answers(ws, 3)
        assert [a.get("code") for a in answers] == [None, "message_too_large", None]
    finally:
        await asyncio.to_thread(server.stop)


def _raw_post(port: int, head: bytes, chunks: Any = ()) -> str:
    """Send a request as raw bytes (clients refuse to lie about lengths); the response as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server answered and closed while we were still sending
        received = b""
        while b"}}" not in received:
            try:
                data = sock.recv(4096)
            except OSError:
                break
            if not data:
                break
            received += data
    return received.decode("latin-1")


def test_request_bodies_are_capped_before_they_are_read(speech_server: RunningServer) -> None:
    # A declared 400 MB body is refused before a byte of it is read.
    declared = _raw_post(
        speech_server.port,
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 419430400\r\n\r\n{}",
    )
    assert declared.startswith("HTTP/1.1 413") and "message_too_large" in declared
    # 4 MB without a declared length: refused once past the limit.
    chunk = b"10000\r\n" + b"x" * 65536 + b"\r\n"
    undeclared = _raw_post(
        speech_server.port,
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        [chunk] * 64,
    )
    assert undeclared.startswith("HTTP/1.1 413") and "message_too_large" in undeclared


# --- 10 and 19. the agent -------------------------------------------------------------------------------------


async def test_agent_refuses_cross_site_requests_and_foreign_hosts(speech_server: RunningServer) -> None:
    agent = await asyncio.to_thread(
        start_agent,
        ScriptedTextSource("Hello there."),
        speech_server.url,
        allowed_hosts=("127.0.0.1", "localhost"),
        auth_token="page-token",
    )
    try:
        auth = {"Authorization": "Bearer page-token"}
        r = httpx.post(
            agent.url + "/invocations",
            content='{"prompt": "hi"}',
            headers={"content-type": "text/plain", **auth},
        )
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
        r = httpx.post(
            agent.url + "/invocations", json={"prompt": "hi"}, headers={"host": "evil.example", **auth}
        )
        assert r.status_code == 421
        ws_url = agent.url.replace("http", "ws") + "/ws"
        with pytest.raises(Exception):  # noqa: B017 - refused at the upgrade
            async with connect(
                ws_url, origin="https://evil.example", subprotocols=["streamvoice.bearer", "page-token"]
            ):  # type: ignore[list-item]
                pass
        # the page's own origin with the token offered as a subprotocol (browsers cannot set headers)
        async with connect(
            ws_url,
            origin=agent.url,
            subprotocols=["streamvoice.bearer", "page-token"],  # type: ignore[list-item]
        ) as ws:
            await ws.send(json.dumps({"prompt": "hi"}))
            kinds = []
            async with asyncio.timeout(60):
                while "agent_end" not in kinds and "error" not in kinds:
                    frame = await ws.recv()
                    if isinstance(frame, str):
                        kinds.append(json.loads(frame)["type"])
            assert "agent_end" in kinds
        big = httpx.post(agent.url + "/invocations", content=b"{" + b" " * 200_000 + b"}",
                         headers={"content-type": "application/json", **auth})  # fmt: skip
        assert big.status_code == 413
    finally:
        await asyncio.to_thread(agent.stop)


async def test_agent_caps_concurrent_turns(speech_server: RunningServer) -> None:
    agent = await asyncio.to_thread(
        start_agent, ScriptedTextSource("One two three four five six seven eight."), speech_server.url,
        max_concurrent_turns=1,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            async with client.stream("POST", agent.url + "/invocations", json={"prompt": "a"}) as first:
                second = await client.post(agent.url + "/invocations", json={"prompt": "b"})
                assert second.status_code == 503 and second.json()["error"]["code"] == "server_busy"
                assert "agent_end" in (await first.aread()).decode()
            again = await client.post(agent.url + "/invocations", json={"prompt": "c"})
            assert again.status_code == 200
    finally:
        await asyncio.to_thread(agent.stop)


def test_sse_decoder_is_linear_in_the_stream() -> None:
    def decode(size: int) -> list[Any]:
        decoder = SSEDecoder()
        data = f"data: {'x' * size}\n\n".encode()
        events = []
        for i in range(0, len(data), 512):  # one event in many small chunks
            events += decoder.feed(data[i : i + 512])
        return events

    assert [len(e.data) for e in decode(2_000_000)] == [2_000_000]
    # ten times the stream, about ten times the work: the rescanning reader took minutes on 2 MB
    assert cpu_seconds(lambda: decode(2_000_000), 2) < 30 * max(cpu_seconds(lambda: decode(200_000), 2), 1e-4)


# --- 11. barge-in ---------------------------------------------------------------------------------------------


async def test_after_a_barge_in_the_next_answer_is_due_now(
    speech_server: RunningServer, lanes: list[Any]
) -> None:
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"text": "A long answer the caller interrupts. " * 6, "id": "a"}))
        while isinstance(await asyncio.wait_for(ws.recv(), 30), str):
            pass
        # seconds of audio decoded ahead (on a busy 2-core machine this can take a moment)
        await wait_for(lambda: lanes[-1].play_end > time.monotonic() + 1)
        await ws.send(json.dumps({"type": "cancel"}))
        while not (isinstance(frame := await ws.recv(), str) and json.loads(frame)["type"] == "error"):
            pass  # the rest of the audio already on the wire, then the cancelled answer
        assert lanes[-1].play_end <= time.monotonic()  # nothing is playing any more
        await ws.send(json.dumps({"text": "Sorry, go ahead.", "id": "b"}))
        answers = await next_answers(ws, 1)
        assert answers[-1]["type"] == "synthesis_complete"


# --- 12. shared tables ------------------------------------------------------------------------------------


def test_blends_fill_no_shared_table(engine: KokoroEngine) -> None:
    names = sorted(engine.voice_names)[:12]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            spec = engine.parse_voice(f"{a}*0.6+{b}*0.4")
            engine.style_pack(spec)
            assert engine.memory.recorder(spec) is None  # blends are never learnt
    from streamvoice.engine.kokoro import BLEND_STYLE_CACHE

    assert engine.cached_styles <= BLEND_STYLE_CACHE
    assert set(engine.memory._stats) <= engine.voice_names
    # a blend of two known voices derives its statistics from theirs (no cold path)
    known = [v for v in engine.voice_names if engine.memory.get(engine.parse_voice(v)) is not None]
    if len(known) >= 2:
        blend = engine.parse_voice(f"{known[0]}*0.5+{known[1]}*0.5")
        stats = engine.memory.get(blend)
        assert stats is not None and all(np.isfinite(m).all() for m in stats.means)


# --- 16. auth before state ------------------------------------------------------------------------------------
# (covered with the bearer token tests in test_reliability: 403 at the upgrade, /metrics behind the token)

# --- 17. drain and lifetime -----------------------------------------------------------------------------------


async def test_messages_sent_during_a_drain_are_answered(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False)
    try:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": "Finishing this one. " * 4, "id": "before"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "synthesis_started"
            server.drainer.request_shutdown()  # what SIGTERM does
            await wait_for(lambda: httpx.get(server.url + "/ping").status_code == 503)
            live = httpx.get(server.url + "/live")  # readiness is gone, liveness stays
            assert live.status_code == 200 and live.json()["state"] == "draining"
            assert "streamvoice_draining 1" in httpx.get(server.url + "/metrics").text
            await ws.send(json.dumps({"text": "Arrived during the drain.", "id": "late"}))
            answers = {c["id"]: c for c in await next_answers(ws, 2, timeout=60)}
            assert answers["before"]["type"] == "synthesis_complete"
            assert answers["late"]["code"] == "going_away"
            final = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert final["code"] == "going_away"
            with pytest.raises(Exception):  # noqa: B017 - closed 1001
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001
    finally:
        await asyncio.to_thread(server.stop)


async def test_session_lifetime_ends_an_idle_session_on_time(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False, session_lifetime_s=2.0)
    try:
        async with connect(server.ws_url) as ws:  # no frame sent: the lifetime ends it, not the idle timeout
            event = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert event["code"] == "session_expired"
    finally:
        await asyncio.to_thread(server.stop)


# --- 18. model files --------------------------------------------------------------------------------------------


def test_damaged_model_files_are_refused(tmp_path: Any, kokoro_dir: Any) -> None:
    from streamvoice.model_files import ModelFiles, ModelNotFoundError, verify_model_files

    good = ModelFiles(kokoro_dir / "kokoro-v1.0.int8.onnx", kokoro_dir / "voices-v1.0.bin")
    verify_model_files(good)
    bad_voices = tmp_path / "voices-v1.0.bin"
    bad_voices.write_bytes((kokoro_dir / "voices-v1.0.bin").read_bytes()[:1000])
    with pytest.raises(ModelNotFoundError, match="damaged or replaced"):
        verify_model_files(ModelFiles(good.model, bad_voices))
