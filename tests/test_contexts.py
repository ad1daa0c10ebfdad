"""`server.vendor_socket`: hostile input on the vendor sockets (ElevenLabs, Cartesia, Deepgram), bounded as on
the session protocol: oversized and malformed frames, unknown contexts, thousands of contexts, a context never
closed, a client that never reads, a wrong key. Each answer is in the vendor's own shape; the socket goes on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets

from tests.helpers import RunningServer, start_speech_server, wait_for

TOKEN = "vendor-key"


KEY = {"xi-api-key": TOKEN}


MAX_CONTEXTS = 8
RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


@pytest.fixture(scope="module")
def hostile_server(scripted) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    """Hostile clients against the vendors' context shapes: the scripted engine answers them."""
    server = start_speech_server(
        scripted,
        auth_token=TOKEN,
        admission_listeners=4,
        max_queued_messages=MAX_CONTEXTS,
        stream_text_timeout_s=1.0,
        max_message_bytes=8 * 1024,
        send_timeout_s=3.0,
        sndbuf=4096,
    )
    yield server
    server.stop()


def metrics(server: RunningServer) -> str:
    return httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text


def sessions(server: RunningServer) -> float:
    line = next(x for x in metrics(server).splitlines() if x.startswith("streamvoice_active_sessions "))
    return float(line.split()[1])


def ws_url(server: RunningServer, path: str) -> str:
    return server.url.replace("http", "ws", 1) + path


async def json_frames(ws: Any, until: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """Text frames as JSON until ``until(frame)`` (binary frames skipped)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            raw = await ws.recv()
            if isinstance(raw, bytes):
                continue
            frame = json.loads(raw)
            seen.append(frame)
            if until(frame):
                return seen


async def test_elevenlabs_bad_frames_are_answered_and_the_socket_goes_on(
    hostile_server: RunningServer,
) -> None:
    url = ws_url(hostile_server, "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_16000")
    async with websockets.connect(url, additional_headers=KEY) as ws:
        await ws.send("x" * 20_000)  # over max_message_bytes
        await ws.send("{not json")
        await ws.send(json.dumps({"context_id": "a", "text": 42}))
        await ws.send(json.dumps({"context_id": "nobody", "close_context": True}))  # unknown: nothing to do
        errors = await json_frames(ws, lambda f: f.get("error") == "invalid_field")
        assert [e["error"] for e in errors] == ["message_too_large", "invalid_json", "invalid_field"]
        assert all(e["message"] for e in errors) and errors[-1]["contextId"] == "a"
        await ws.send(json.dumps({"context_id": "b", "text": "Still here. "}))
        await ws.send(json.dumps({"context_id": "b", "close_context": True}))
        frames = await json_frames(ws, lambda f: f.get("isFinal") is True)
        assert any(f.get("audio") for f in frames) and frames[-1]["contextId"] == "b"


async def test_thousands_of_contexts_are_refused_one_by_one(hostile_server: RunningServer) -> None:
    url = ws_url(hostile_server, "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_16000")
    async with websockets.connect(url, additional_headers=KEY) as ws:
        for i in range(1000):
            await ws.send(json.dumps({"context_id": f"c{i}", "text": "Hello. "}))
        refused = await json_frames(ws, lambda f: f.get("contextId") == "c999" and "error" in f, timeout=120)
        errors = [f for f in refused if "error" in f]
        assert len(errors) >= 1000 - MAX_CONTEXTS - 10 and {e["error"] for e in errors} == {"queue_full"}
        for i in range(MAX_CONTEXTS):
            await ws.send(json.dumps({"context_id": f"c{i}", "close_context": True}))
        finals = await json_frames(
            ws, lambda f: f.get("isFinal") and f.get("contextId") == f"c{MAX_CONTEXTS - 1}"
        )
        assert sum(1 for f in finals if f.get("isFinal")) == MAX_CONTEXTS
    await wait_for(lambda: sessions(hostile_server) == 0)


async def test_a_context_never_closed_is_ended_as_it_stands(hostile_server: RunningServer) -> None:
    body = {
        "model_id": "sonic-2",
        "voice": {"mode": "id", "id": "af_heart"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000},
    }
    async with websockets.connect(
        ws_url(hostile_server, "/tts/websocket"), additional_headers={"X-API-Key": TOKEN}
    ) as ws:
        await ws.send(
            json.dumps(
                {**body, "context_id": "open", "transcript": "I never say I am done", "continue": True}
            )
        )
        frames = await json_frames(ws, lambda f: f["type"] in ("done", "error"), timeout=30)  # timeout 1 s
        assert frames[-1] == {"type": "done", "done": True, "status_code": 206, "context_id": "open"}
        assert any(f["type"] == "chunk" for f in frames)
        await ws.send(json.dumps({**body, "context_id": "open", "transcript": "more", "continue": False}))
        late = await json_frames(ws, lambda f: f["type"] == "error")
        assert "has ended" in late[-1]["message"]
        await ws.send(json.dumps({"context_id": "ghost", "cancel": True}))  # unknown: nothing to cancel
        await ws.send(json.dumps({**body, "context_id": "x", "transcript": "A" * 21_000}))
        too_long = await json_frames(ws, lambda f: f["type"] == "error")
        assert too_long[-1]["error_code"] in ("message_too_large", "text_too_long")


async def test_deepgram_unknown_messages_warn_and_a_bare_flush_is_answered(
    hostile_server: RunningServer,
) -> None:
    async with websockets.connect(
        ws_url(hostile_server, "/v1/speak?model=af_heart&encoding=linear16&sample_rate=16000"),
        additional_headers={"Authorization": f"Token {TOKEN}"},
    ) as ws:
        assert json.loads(await ws.recv())["type"] == "Metadata"
        await ws.send(json.dumps({"type": "Shout", "text": "x"}))
        await ws.send(json.dumps({"type": "Speak"}))
        await ws.send(json.dumps({"type": "Flush"}))
        frames = await json_frames(ws, lambda f: f["type"] == "Flushed")
        warnings = [f for f in frames if f["type"] == "Warning"]
        assert [w["code"] for w in warnings] == ["UNKNOWN_TYPE", "MISSING_TEXT"] and frames[-1][
            "sequence_id"
        ] == 0
        await ws.send(json.dumps({"type": "Speak", "text": "A long answer that is cleared. " * 20}))
        await ws.send(json.dumps({"type": "Clear"}))
        cleared = await json_frames(ws, lambda f: f["type"] == "Cleared", timeout=20)
        assert cleared[-1]["type"] == "Cleared"


async def test_a_client_that_never_reads_is_closed_and_its_slot_freed(hostile_server: RunningServer) -> None:
    url = ws_url(hostile_server, "/v1/speak?model=af_heart&encoding=linear16&sample_rate=48000")
    ws = await websockets.connect(url, additional_headers={"Authorization": f"Token {TOKEN}"}, max_queue=1)
    ws.transport.set_write_buffer_limits(0)  # type: ignore[attr-defined]
    sock = ws.transport.get_extra_info("socket")  # type: ignore[attr-defined]
    import socket as socket_module

    sock.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
    ws.transport.pause_reading()  # type: ignore[attr-defined]
    await ws.send(
        json.dumps({"type": "Speak", "text": "A long answer for a client that reads nothing at all. " * 20})
    )
    await ws.send(json.dumps({"type": "Flush"}))
    await wait_for(lambda: 'code="slow_consumer"' in metrics(hostile_server), timeout=90)
    await wait_for(lambda: sessions(hostile_server) == 0)
    ws.transport.abort()  # type: ignore[attr-defined]


async def test_wrong_keys_are_refused_before_anything_starts(hostile_server: RunningServer) -> None:
    for path, headers in (
        ("/v1/text-to-speech/af_heart/stream-input", {"xi-api-key": "wrong"}),
        ("/tts/websocket", {"X-API-Key": "wrong"}),
        ("/v1/speak", {"Authorization": "Token wrong"}),
    ):
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            async with websockets.connect(ws_url(hostile_server, path), additional_headers=headers):
                pass
        assert refused.value.response.status_code == 403
    answer = httpx.post(
        hostile_server.url + "/v1/text-to-speech/af_heart", json={"text": "Hi."}, headers={"xi-api-key": "no"}
    )
    assert answer.status_code == 401 and answer.json()["detail"]["status"] == "invalid_api_key"
    answer = httpx.post(
        hostile_server.url + "/v1/speak", json={"text": "Hi."}, headers={"Authorization": "Token no"}
    )
    assert answer.status_code == 401 and "err_msg" in answer.json()
    answer = httpx.post(
        hostile_server.url + "/tts/bytes", json={"transcript": "Hi."}, headers={"X-API-Key": "no"}
    )
    assert answer.status_code == 401 and answer.json()["error"]


async def test_a_drain_finishes_open_contexts_refuses_new_ones_and_closes_1001(engine) -> None:  # type: ignore[no-untyped-def]
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False)
    url = ws_url(server, "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_16000")
    try:
        async with websockets.connect(url) as ws:
            await ws.send(
                json.dumps({"context_id": "before", "text": "Finishing this one, whatever happens. "})
            )
            await ws.send(json.dumps({"context_id": "before", "close_context": True}))
            await json_frames(ws, lambda f: bool(f.get("audio")), timeout=30)
            server.drainer.request_shutdown()  # what SIGTERM does
            await ws.send(json.dumps({"context_id": "late", "text": "Arrived during the drain. "}))
            frames = await json_frames(
                ws, lambda f: f.get("isFinal") is True and f.get("contextId") == "before"
            )
            assert any(f.get("error") == "going_away" and f.get("contextId") == "late" for f in frames)
            with pytest.raises(websockets.exceptions.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_text_that_is_not_a_string_has_one_code_over_http_and_socket(
    hostile_server: RunningServer,
) -> None:
    """One mistake, one answer (``protocol.text_field``: ``invalid_field``, "as a string, not int"), on each
    vendor's HTTP route and socket alike (HTTP said ``missing_text``)."""
    cartesia_voice = {"mode": "id", "id": "af_heart"}
    http = [
        ("/v1/text-to-speech/af_heart", {"text": 5}, KEY),
        (
            "/tts/bytes",
            {"transcript": 5, "voice": cartesia_voice, "model_id": "sonic-2"},
            {"X-API-Key": TOKEN},
        ),
        ("/v1/speak", {"text": 5}, {"Authorization": f"Token {TOKEN}"}),
        ("/v1/audio/speech", {"input": 5}, {"Authorization": f"Bearer {TOKEN}"}),
    ]
    async with httpx.AsyncClient(timeout=60) as client:
        for path, body, headers in http:
            r = await client.post(hostile_server.url + path, json=body, headers=headers)
            assert r.status_code == 400 and "as a string, not int" in r.text, (path, r.status_code, r.text)
    sockets = [
        ("/v1/text-to-speech/af_heart/multi-stream-input", KEY, {"text": 5, "context_id": "c"}),
        ("/tts/websocket", {"X-API-Key": TOKEN}, {"transcript": 5, "context_id": "c", "voice": cartesia_voice,
                                                   "model_id": "sonic-2"}),
        ("/v1/speak", {"Authorization": f"Token {TOKEN}"}, {"type": "Speak", "text": 5}),
    ]  # fmt: skip
    for path, headers, frame in sockets:
        async with websockets.connect(ws_url(hostile_server, path), additional_headers=headers) as ws:
            await ws.send(json.dumps(frame))
            *_, answer = await json_frames(ws, lambda f: f.get("type") != "Metadata")  # Deepgram's first
            assert "as a string, not int" in json.dumps(answer), (path, answer)


async def test_a_client_past_the_reply_cap_is_closed_at_once_and_its_slot_freed(scripted) -> None:  # type: ignore[no-untyped-def]
    """Frames sent without reading any reply: past MAX_PENDING_REPLIES the connection closes, its context
    cancelled, its slot free, and the next caller is served. That the close no longer waits behind the open
    context's audio is ``test_connection.py::test_an_aborted_connection_closes_without_waiting_for_its_writer``."""
    import socket as socket_module

    server = await asyncio.to_thread(
        start_speech_server,
        scripted,
        auth_token=TOKEN,
        admission_listeners=1,
        send_timeout_s=300.0,
        ws_ping_interval_s=600.0,
        sndbuf=4096,
    )  # fmt: skip  (no keepalive either: its missing pong would end the connection after ~40 s)
    try:
        url = ws_url(server, "/tts/websocket")
        sock = socket_module.socket()  # a small window from the start: the replies cannot all fit in it
        sock.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        ws = await websockets.connect(url, sock=sock, additional_headers={"X-API-Key": TOKEN}, max_queue=1)
        ws.transport.pause_reading()  # type: ignore[attr-defined]
        long_text = "A long answer for a client that reads nothing at all. " * 90  # minutes of audio
        await ws.send(json.dumps({"context_id": "a", "transcript": long_text, "continue": False,
                                  "voice": {"mode": "id", "id": "af_heart"}, "model_id": "sonic-2", "output_format": RAW}))  # fmt: skip
        await wait_for(lambda: "streamvoice_admitted_listeners 1" in metrics(server))

        async def flood() -> None:  # each frame answered with an error the client never reads, until the
            while 'code="too_many_pending"' not in metrics(server):  # replies the buffers cannot take pass
                for _ in range(200):  # MAX_PENDING_REPLIES
                    await ws.send("not json")
                await asyncio.sleep(0.05)

        await asyncio.wait_for(flood(), 120)
        await wait_for(lambda: "streamvoice_admitted_listeners 0" in metrics(server))
        await wait_for(lambda: sessions(server) == 0)
        ws.transport.abort()  # type: ignore[attr-defined]
        # the next caller is served
        async with websockets.connect(url, additional_headers={"X-API-Key": TOKEN}) as other:
            await other.send(json.dumps({"context_id": "b", "transcript": "My turn.", "continue": False,
                                         "voice": {"mode": "id", "id": "af_heart"}, "model_id": "sonic-2", "output_format": RAW}))  # fmt: skip
            frames = await json_frames(other, lambda f: f.get("type") in ("done", "error"))
        assert frames[-1]["type"] == "done", frames[-1]
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_context_id_that_is_not_text_is_refused_by_name(hostile_server: RunningServer) -> None:
    url = ws_url(hostile_server, "/v1/text-to-speech/af_heart/multi-stream-input")
    async with websockets.connect(url, additional_headers=KEY) as ws:
        await ws.send(json.dumps({"text": "Hi. ", "context_id": {"x": 1}}))
        (answer,) = await json_frames(ws, lambda f: True)
        assert "context_id" in answer["message"] and "{'x'" not in json.dumps(answer), answer  # no repr
        await ws.send(
            json.dumps({"text": "Still here. ", "context_id": 7, "flush": True})
        )  # a number: its text
        frames = await json_frames(ws, lambda f: f.get("contextId") == "7" and "audio" in f)
        assert frames[-1]["contextId"] == "7"
