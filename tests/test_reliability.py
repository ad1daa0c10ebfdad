"""Reliability and security on a real server: auth, slow and vanishing clients, engine faults, cancel,
graceful shutdown, concurrent load, and protocol fuzzing. Every message is answered exactly once."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig, create_app
from streamvoice.server.runner import DrainingServer
from tests.helpers import (
    RunningServer,
    collect,
    free_port,
    metric,
    start_agent,
    start_speech_server,
    wait_for,
)

LONG = "This sentence is here to make a long message that takes many seconds to speak aloud. " * 8


# --- security ------------------------------------------------------------------------------------------


async def test_speech_server_bearer_auth(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, auth_token="s3cret-token", warm_up=False)
    try:
        assert httpx.get(server.url + "/ping").status_code == 200  # health stays open
        r = httpx.post(server.url + "/invocations", json={"text": "Hi."})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = httpx.post(
            server.url + "/invocations", json={"text": "Hi."}, headers={"Authorization": "Bearer wrong"}
        )
        assert r.status_code == 401
        # Refused at the upgrade, before the server says anything about its state.
        with pytest.raises(InvalidStatus) as refused:
            async with connect(server.ws_url):
                pass
        assert refused.value.response.status_code == 403
        with pytest.raises(InvalidStatus):
            async with connect(server.ws_url, additional_headers={"Authorization": "Bearer wrong"}):
                pass
        assert httpx.get(server.url + "/metrics").status_code == 401  # load figures stay private too
        ok = httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200 and "streamvoice_active_sessions" in ok.text
        async with connect(server.ws_url, additional_headers={"Authorization": "Bearer s3cret-token"}) as ws:
            await ws.send(json.dumps({"text": "Authorised.", "id": "a"}))
            controls, audio = await collect(ws, 1)
            assert controls[-1]["type"] == "synthesis_complete" and audio["a"] > 0
    finally:
        await asyncio.to_thread(server.stop)


def test_agent_bearer_auth_and_no_wildcard_cors(speech_server: RunningServer) -> None:
    agent = start_agent(
        ScriptedTextSource("Hello."),
        speech_server.url,
        auth_token="agent-token",
        cors_origins=("https://app.example",),
    )
    try:
        assert httpx.get(agent.url + "/ping").status_code == 200
        assert httpx.post(agent.url + "/invocations", json={"prompt": "hi"}).status_code == 401
        ok = httpx.post(
            agent.url + "/invocations",
            json={"prompt": "hi"},
            headers={"Authorization": "Bearer agent-token"},
            timeout=60,
        )
        assert ok.status_code == 200 and '"agent_end"' in ok.text
        pre = httpx.options(
            agent.url + "/invocations",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert pre.headers.get("access-control-allow-origin") != "*"
        assert "evil" not in pre.headers.get("access-control-allow-origin", "")
        good = httpx.options(
            agent.url + "/invocations",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
        assert good.headers.get("access-control-allow-origin") == "https://app.example"
    finally:
        agent.stop()


# --- faults --------------------------------------------------------------------------------------------


async def test_client_vanishing_mid_synthesis_leaks_nothing(speech_server: RunningServer) -> None:
    threads_before = threading.active_count()
    for _ in range(3):
        ws = await connect(speech_server.ws_url)
        await ws.send(json.dumps({"text": LONG, "id": "gone"}))
        while not isinstance(await ws.recv(), bytes):
            pass  # wait for the first audio, then vanish
        ws.transport.abort()  # drop the TCP connection without a closing handshake
    await wait_for(lambda: metric(speech_server, "streamvoice_active_sessions") == 0)
    await wait_for(lambda: metric(speech_server, "streamvoice_queue_depth") == 0)
    assert threading.active_count() <= threads_before + 1
    async with connect(speech_server.ws_url) as ws:  # and the next session is served
        await ws.send(json.dumps({"text": "Still here.", "id": "next"}))
        controls, _ = await collect(ws, 1)
        assert controls[-1]["type"] == "synthesis_complete"


async def test_engine_failure_on_one_message_then_recovery(
    speech_server: RunningServer, engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = engine.stream_piece

    def flaky(piece, *args, **kwargs):  # type: ignore[no-untyped-def]
        if "explode" in piece.text:
            raise RuntimeError("simulated ONNX Runtime failure")
        return original(piece, *args, **kwargs)

    monkeypatch.setattr(engine, "stream_piece", flaky)
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"text": "Please explode now.", "id": "bad"}))
        await ws.send(json.dumps({"text": "And recover.", "id": "good"}))
        controls, audio = await collect(ws, 2)
    answers = [c for c in controls if c["type"] in ("error", "synthesis_complete")]
    assert answers[0]["id"] == "bad" and answers[0]["code"] == "synthesis_failed"
    assert "simulated" not in answers[0]["message"]  # no raw exception text
    assert answers[1]["id"] == "good" and answers[1]["type"] == "synthesis_complete" and audio["good"] > 0


async def test_cancel_stops_audio_within_one_piece(speech_server: RunningServer) -> None:
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"text": LONG, "id": "long"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        await ws.send(json.dumps({"type": "cancel"}))
        after_cancel = 0
        async with asyncio.timeout(30):
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    after_cancel += len(frame)
                    continue
                event = json.loads(frame)
                if event["type"] == "cancelled":
                    break
        assert after_cancel <= 24_000 * 2 * 12  # at most the window that was already being decoded
        await ws.send(json.dumps({"text": "Usable again.", "id": "next"}))
        controls, audio = await collect(ws, 1)
        assert controls[-1]["id"] == "next" and audio["next"] > 0


async def test_slow_reader_is_disconnected_with_a_reason(engine: KokoroEngine) -> None:
    import socket

    # Small kernel buffers on both ends (accepted sockets inherit the listener's SO_SNDBUF), so a client
    # that stops reading backs the server's sends up within seconds instead of megabytes.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    drainer = DrainingServer(
        create_app(ServerConfig(send_timeout_s=1.0, warm_up=False), engine=engine),
        "127.0.0.1",
        port,
        log_level="warning",
    )
    thread = threading.Thread(target=lambda: drainer.server.run(sockets=[listener]), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    await wait_for(lambda: _ping(url) == 200)
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        ws = await connect(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream", sock=sock, max_queue=1)
        await ws.send(json.dumps({"text": LONG, "id": "flood"}))
        # never read: the server must give up on us after the send timeout, not buffer the audio forever
        server_view = RunningServer.__new__(RunningServer)
        server_view.url = url
        await wait_for(lambda: 'code="slow_consumer"' in httpx.get(url + "/metrics").text, timeout=60)
        await wait_for(lambda: metric(server_view, "streamvoice_active_sessions") == 0)
        ws.transport.abort()
    finally:
        drainer.server.should_exit = True
        await asyncio.to_thread(thread.join, 20)


async def test_graceful_shutdown_finishes_work_then_goes_away(engine: KokoroEngine) -> None:
    port = free_port()
    drainer = DrainingServer(
        create_app(ServerConfig(warm_up=False), engine=engine), "127.0.0.1", port, log_level="warning"
    )
    thread = threading.Thread(target=drainer.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    await wait_for(lambda: _ping(url) == 200)
    async with connect(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream") as ws:
        await ws.send(json.dumps({"text": "Finish this sentence first, please.", "id": "inflight"}))
        await asyncio.sleep(0.2)
        drainer.request_shutdown()
        await wait_for(lambda: _ping(url) in (503, None))
        events = []
        async with asyncio.timeout(30):
            try:
                while True:
                    frame = await ws.recv()
                    if isinstance(frame, str):
                        events.append(json.loads(frame))
            except Exception:
                pass
        assert ws.close_code == 1001
    types = [(e["type"], e.get("code")) for e in events]
    assert ("synthesis_complete", None) in types and types[-1] == ("error", "going_away")
    await asyncio.to_thread(thread.join, 20)
    assert not thread.is_alive()


def _ping(url: str) -> int | None:
    try:
        return httpx.get(url + "/ping", timeout=2).status_code
    except httpx.HTTPError:
        return None


# --- load and fuzzing ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_concurrent_sessions_every_message_once_in_order(scripted: KokoroEngine) -> None:
    sessions, messages = 10, 5
    # Four listeners; the others wait 2 s for a slot (not the 10 s default) and are then told server_busy.
    speech_server = await asyncio.to_thread(start_speech_server, scripted, admission_wait_s=2.0)

    async def one(s: int) -> int:
        async with connect(speech_server.ws_url) as ws:
            for m in range(messages):
                await ws.send(json.dumps({"text": f"Number {m}.", "id": f"{s}-{m}"}))
            controls, audio = await collect(ws, messages, timeout=300)
        # One answer per message, in order: its audio, or (admission is on by default, and ten listeners
        # at once are past what 2 cores keep fed) server_busy once its wait in the queue ran out.
        answered = [c for c in controls if c["type"] in ("synthesis_complete", "error")]
        assert [c["id"] for c in answered] == [f"{s}-{m}" for m in range(messages)]
        assert all(c["code"] == "server_busy" for c in answered if c["type"] == "error")
        done = [c for c in answered if c["type"] == "synthesis_complete"]
        assert all(c["bytes"] == audio[c["id"]] for c in done)
        return len(done)

    try:
        served = await asyncio.gather(*(one(s) for s in range(sessions)))
    finally:
        await asyncio.to_thread(speech_server.stop)
    assert sum(served) >= 2 * messages  # at least the listeners admitted first were served whole


FRAMES = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    ).map(json.dumps),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["synthesize", "configure", "cancel", "dance", 7, None])},
        optional={
            "text": st.one_of(st.text(max_size=12), st.integers()),
            "voice": st.sampled_from(["af_heart", "zz", 3]),
            "speed": st.one_of(st.floats(allow_nan=False), st.text(max_size=3)),
            "format": st.sampled_from(["pcm", "vorbis", 1]),
        },
    ).map(json.dumps),
)


@settings(
    max_examples=15,
    derandomize=True,  # the same frames on every run and machine: a failure is reproduced by rerunning
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(FRAMES, min_size=1, max_size=6))
def test_fuzzed_frames_never_break_the_session(scripted_server: RunningServer, frames: list[Any]) -> None:
    async def run() -> None:
        async with connect(scripted_server.ws_url) as ws:
            for frame in frames:
                await ws.send(frame)
            await ws.send(
                json.dumps({"type": "configure", "format": "pcm", "speed": 1.0, "voice": "af_heart"})
            )
            await ws.send(json.dumps({"type": "synthesize", "text": "Final check.", "id": "final-check"}))
            async with asyncio.timeout(120):
                while True:
                    frame = await ws.recv()
                    if isinstance(frame, str):
                        event = json.loads(frame)
                        if event.get("id") == "final-check" and event["type"] in (
                            "synthesis_complete",
                            "error",
                        ):
                            assert event["type"] == "synthesis_complete", event
                            return

    asyncio.run(run())
    assert _ping(scripted_server.url) == 200
