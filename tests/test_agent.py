"""The agent over real HTTP: SSE events, both modes, the WebSocket alternative, and failures on every leg."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.sync.client import connect as ws_connect

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.asgi import free_port
from streamvoice.client.sse import iter_sse
from tests.helpers import (
    RunningServer,
    agent_turns,
    start_agent,
    start_speech_server,
    wait_for,
)

ANSWER = (
    "Light from the sun is made of many colours. Air molecules scatter short blue waves far more than red ones, "
    "so blue light reaches us from every part of the sky. At sunset the light travels through more air, "
    "and the blue is scattered away before it arrives."
)


def turn(url: str, payload: dict[str, Any], timeout: float = 120) -> list[dict[str, Any]]:
    with httpx.stream("POST", url + "/invocations", json=payload, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [e.json() for e in iter_sse(r.iter_raw())]


def pcm_of(events: list[dict[str, Any]]) -> np.ndarray:
    data = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "audio_chunk")
    return np.frombuffer(data, "<i2")


def check_shape(events: list[dict[str, Any]]) -> None:
    types = [e["type"] for e in events]
    assert types[:2] == ["conversation", "agent_start"] and types[-1] == "agent_end"
    events = events[1:]  # the conversation's id, then the turn's events, stamped from agent_start
    assert types.index("audio_start") < types.index("audio_chunk") < types.index("audio_end")
    stamps = [e["t_ms"] for e in events]
    assert stamps == sorted(stamps)
    seqs = [e["seq"] for e in events if e["type"] == "audio_chunk"]
    assert seqs == list(range(len(seqs)))


@pytest.fixture(scope="module")
def unpaced_speech(scripted):  # type: ignore[no-untyped-def]
    """The scripted speech engine behind a server that sends audio as fast as it is made (pacing to the
    listener is ``test_lane.py``'s): the agent's turn shapes without waiting out the answer's audio."""
    speech = start_speech_server(scripted, max_send_ahead_s=600)
    yield speech
    speech.stop()


@pytest.fixture(scope="module")
def scripted_agent(unpaced_speech: RunningServer):  # type: ignore[no-untyped-def]
    """A scripted language model over the scripted speech engine: the turn's events, their order and framing
    (what the agent's speech sounds like, heard by Whisper, is ``test_local_model_end_to_end...``'s)."""
    agent = start_agent(ScriptedTextSource(ANSWER, ttft_s=0.1, tokens_per_s=200), unpaced_speech.url)
    yield agent
    agent.stop()


class HeldTextSource:
    """Writes the answer's first sentence, then holds the rest until the caller has heard audio (``heard``,
    set by the test as it reads): a serial agent would never speak before the text ends, so the order of
    the events, not a clock, shows the overlap (the hold gives up after a minute so a failure is an assert)."""

    name = "held"

    def __init__(self, text: str) -> None:
        self.text = text
        self.heard = threading.Event()

    async def stream(self, prompt: str, history: object = ()) -> Any:
        first, rest = self.text.split(". ", 1)
        yield first + ". "
        await asyncio.to_thread(self.heard.wait, 60)
        for word in rest.split(" "):
            yield word + " "


def test_bidi_speaks_while_the_model_is_still_writing(unpaced_speech: RunningServer) -> None:
    source = HeldTextSource(ANSWER)
    agent = start_agent(source, unpaced_speech.url)
    events: list[dict[str, Any]] = []
    try:
        payload = {"prompt": "Why is the sky blue?", "mode": "bidi"}
        with httpx.stream("POST", agent.url + "/invocations", json=payload, timeout=120) as r:
            for e in iter_sse(r.iter_raw()):
                events.append(e.json())
                if events[-1]["type"] == "audio_chunk":
                    source.heard.set()
    finally:
        agent.stop()
    check_shape(events)
    types = [e["type"] for e in events]
    last_text = len(types) - 1 - types[::-1].index("text_delta")
    assert types.index("audio_chunk") < last_text, "bidi must overlap synthesis with generation"
    end = events[-1]
    assert end["pieces"] >= 3 and end["text"].startswith("Light from the sun")
    assert pcm_of(events).size / 24_000 > 8
    # word times relayed from every piece, counted from the turn's first audio sample
    words = [w for e in events if e["type"] == "alignment" for w in e["words"]]
    assert [w["word"] for w in words] == end["text"].split()
    starts = [w["start_ms"] for w in words]
    assert starts == sorted(starts) and starts[-1] < pcm_of(events).size / 24


def test_an_answer_with_nothing_speakable_is_a_turn_without_audio(speech_server: RunningServer) -> None:
    """The streamed message ends empty (the server answers ``empty_text``): the turn ends as in batch."""
    agent = start_agent(ScriptedTextSource("🙂 ... 🎉", ttft_s=0.0), speech_server.url)
    try:
        events = turn(agent.url, {"prompt": "Smile", "mode": "bidi"})
    finally:
        agent.stop()
    assert events[-1]["type"] == "agent_end" and events[-1]["pieces"] == 0, events[-1]
    assert not [e for e in events if e["type"] in ("error", "audio_chunk")]


def test_batch_waits_for_the_whole_answer(scripted_agent: RunningServer) -> None:
    events = turn(scripted_agent.url, {"prompt": "Why is the sky blue?", "mode": "batch"})
    check_shape(events)
    first_audio = next(e["t_ms"] for e in events if e["type"] == "audio_chunk")
    last_text = max(e["t_ms"] for e in events if e["type"] == "text_delta")
    assert first_audio > last_text and events[-1]["pieces"] == 1


@pytest.mark.slow
def test_local_model_end_to_end_with_speech_to_text(
    speech_server: RunningServer, local_llm, transcriber
) -> None:  # type: ignore[no-untyped-def]
    from streamvoice.bench.wer import word_error_rate

    agent = start_agent(local_llm, speech_server.url)
    try:
        events = turn(agent.url, {"prompt": "Why do dogs wag their tails?", "mode": "bidi"})
    finally:
        agent.stop()
    check_shape(events)
    text = events[-1]["text"]
    assert len(text.split()) >= 8
    heard = transcriber.transcribe(pcm_of(events).astype(np.float32) / 32768)
    assert word_error_rate(text, heard) < 0.35, (text, heard)


def test_websocket_carries_binary_audio_and_json_control(scripted_agent: RunningServer) -> None:
    url = f"ws://127.0.0.1:{scripted_agent.port}/ws"
    with ws_connect(url, max_size=None) as ws:
        ws.send("not json")
        err = json.loads(ws.recv(timeout=10))
        assert err["type"] == "error" and err["code"] == "invalid_message"
        ws.send(json.dumps({"prompt": "Tell me about the sky.", "mode": "bidi"}))
        audio = bytearray()
        types = []
        while True:
            frame = ws.recv(timeout=60)
            if isinstance(frame, bytes):
                audio += frame
                continue
            event = json.loads(frame)
            types.append(event["type"])
            assert event["type"] != "audio_chunk"
            if event["type"] in ("agent_end", "error"):
                break
    assert types[:2] == ["conversation", "agent_start"] and types[-1] == "agent_end"
    assert len(audio) > 24_000 * 2 * 5


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_message"),
        (b"{}", "missing_prompt"),
        (b'{"prompt": "hi", "mode": "fast"}', "invalid_mode"),
        (b'{"prompt": "hi", "speed": 7}', "invalid_speed"),
        (json.dumps({"prompt": "x" * 5000}).encode(), "prompt_too_long"),
    ],
)
def test_bad_payload_is_a_4xx_with_a_stable_code(
    scripted_agent: RunningServer, payload: bytes, code: str
) -> None:
    r = httpx.post(
        scripted_agent.url + "/invocations",
        content=payload,
        headers={"content-type": "application/json"},  # declared JSON; the body itself is what is wrong
        timeout=10,
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == code


@pytest.mark.parametrize("session", ["s" * 201, "a\x01b"])
def test_a_bad_agentcore_session_header_is_a_400_saying_what_to_send(
    scripted_agent: RunningServer, session: str
) -> None:
    """Issue #64: a 201-character session header was a 500 and ``a\\x01b`` was taken as an id: the header
    names the conversation and is checked as a payload's ``"conversation"`` is."""
    r = httpx.post(
        scripted_agent.url + "/invocations",
        json={"prompt": "hi"},
        headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": session},
        timeout=10,
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_field"
    assert "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id" in r.json()["error"]["message"]


def test_unknown_voice_ends_the_stream_with_an_error_event(scripted_agent: RunningServer) -> None:
    events = turn(scripted_agent.url, {"prompt": "hi", "voice": "xx_nobody"})
    assert events[-1]["type"] == "error" and events[-1]["code"] == "speech_failed"
    assert "unknown voice" in events[-1]["message"]


def test_llm_failing_mid_answer_keeps_audio_and_ends_with_error(speech_server: RunningServer) -> None:
    source = ScriptedTextSource(ANSWER, ttft_s=0.05, tokens_per_s=10, fail_after_tokens=30)
    agent = start_agent(source, speech_server.url)
    try:
        events = turn(agent.url, {"prompt": "go", "mode": "bidi"})
    finally:
        agent.stop()
    assert events[-1]["type"] == "error" and events[-1]["code"] == "llm_failed"
    assert "Traceback" not in events[-1]["message"]
    assert pcm_of(events).size > 0  # audio already sent stays valid
    assert [e["type"] for e in events].count("audio_end") == 1


def test_speech_server_down_gives_a_quick_error() -> None:
    agent = start_agent(ScriptedTextSource("Hello there."), f"http://127.0.0.1:{free_port()}")
    try:  # one refused connection is the answer: the agent does not retry a server that is not there
        events = turn(agent.url, {"prompt": "hi"}, timeout=60)
    finally:
        agent.stop()
    assert events[-1]["type"] == "error" and events[-1]["code"] == "speech_unavailable"


def test_speech_server_dying_mid_turn_ends_with_error_then_recovers(engine) -> None:  # type: ignore[no-untyped-def]
    speech = start_speech_server(engine, warm_up=False)
    agent = start_agent(ScriptedTextSource(ANSWER, ttft_s=0.05, tokens_per_s=8), speech.url)
    try:
        threading.Timer(3.0, speech.stop).start()
        events = turn(agent.url, {"prompt": "go"}, timeout=120)
        assert events[-1]["type"] == "error"
        assert events[-1]["code"] in ("speech_disconnected", "speech_failed", "speech_unavailable")
    finally:
        agent.stop()


def test_caller_cannot_redirect_speech_traffic(speech_server: RunningServer) -> None:
    """Fields naming another endpoint are ignored: the agent talks only to its configured server."""
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(5)
    trap.settimeout(0.5)
    trap_url = f"http://127.0.0.1:{trap.getsockname()[1]}"
    agent = start_agent(ScriptedTextSource("Hello there."), speech_server.url)
    try:
        events = turn(
            agent.url,
            {"prompt": "hi", "endpoint_url": trap_url, "speech_url": trap_url, "endpoint_name": trap_url},
        )
        assert events[-1]["type"] == "agent_end"
        with pytest.raises(TimeoutError):
            trap.accept()
    finally:
        agent.stop()
        trap.close()


def test_ping_and_page(scripted_agent: RunningServer) -> None:
    assert httpx.get(scripted_agent.url + "/ping").status_code == 200
    page = httpx.get(scripted_agent.url + "/")
    assert page.status_code == 200 and "streamvoice" in page.text
    assert httpx.get(scripted_agent.url + "/static/app.js").status_code == 200


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
                    assert '"conversation"' in line
                    break
    finally:
        await asyncio.to_thread(agent.stop)


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


def test_an_unknown_agentcore_release_fails_loudly() -> None:
    """The agent replaces bedrock-agentcore's private turn bridge; a release that routes /invocations
    elsewhere must stop the start, not leave the replacement dead."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from streamvoice.agent.app import check_framework, create_agent_app
    from streamvoice.agent.config import AgentConfig
    from streamvoice.agent.llm import ScriptedTextSource

    check_framework(create_agent_app(ScriptedTextSource("Hi."), AgentConfig()))  # the locked release passes

    async def elsewhere(request: object) -> PlainTextResponse:
        return PlainTextResponse("")

    class Renamed(Starlette):
        async def _handle_invocation(self, request: object) -> PlainTextResponse:
            return PlainTextResponse("")

    moved = Renamed(routes=[Route("/invocations", elsewhere, methods=["POST"])])
    with pytest.raises(RuntimeError, match=r"requirements\.lock"):
        check_framework(moved)
