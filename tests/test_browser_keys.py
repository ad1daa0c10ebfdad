"""``server.surfaces.upgrade.BrowserKey``: a web page reaches each vendor wire with ``AUTH_TOKEN`` set, its key
where a browser can put one (no header can be set on a browser's WebSocket): Cartesia's ``api_key`` /
``access_token`` query, Deepgram's ``token, KEY`` subprotocols (echoed back), ElevenLabs' ``xi_api_key`` in
the first message. A wrong key is refused, and nothing is answered to it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, system_binary

CARTESIA = {
    "model_id": "sonic-2",
    "voice": {"mode": "id", "id": "af_heart"},
    "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    "context_id": "b",
    "transcript": "Hello from a web page.",
    "continue": False,
}


def _ws(server: RunningServer, path: str) -> str:
    return server.url.replace("http", "ws", 1) + path


async def _first_audio(ws: Any) -> str:
    """The first message that carries audio: a JSON type (or "binary")."""
    async with asyncio.timeout(60):
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                return "binary"
            event = json.loads(frame)
            if event.get("type") == "chunk" or event.get("audio"):
                return str(event.get("type") or "audio")


async def test_cartesias_query_key_opens_the_socket_and_a_wrong_one_is_403(
    vendor_server: RunningServer,
) -> None:
    for name in ("api_key", "access_token"):
        url = _ws(vendor_server, f"/tts/websocket?{name}={TOKEN}&cartesia_version=2025-04-16")
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps(CARTESIA))
            assert await _first_audio(ws) == "chunk"
    with pytest.raises(InvalidStatus) as refused:
        await websockets.connect(_ws(vendor_server, "/tts/websocket?api_key=wrong"))
    assert refused.value.response.status_code == 403


@pytest.mark.parametrize("path", ["/v1/speak", "/v2/speak"])
async def test_deepgrams_subprotocol_key_is_echoed_and_a_wrong_one_is_403(
    vendor_server: RunningServer, path: str
) -> None:
    url = _ws(vendor_server, f"{path}?encoding=linear16&sample_rate=24000")
    async with websockets.connect(url, subprotocols=["token", TOKEN]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "token"  # a browser closes a socket whose offered protocol is not echoed
        await ws.send(json.dumps({"type": "Speak", "text": "Hello from a web page."}))
        await ws.send(json.dumps({"type": "Flush"}))
        assert await _first_audio(ws) == "binary"
    with pytest.raises(InvalidStatus) as refused:
        await websockets.connect(url, subprotocols=["token", "wrong"])  # type: ignore[list-item]
    assert refused.value.response.status_code == 403


async def test_elevenlabs_first_message_key_and_a_wrong_one_closes_1008(vendor_server: RunningServer) -> None:
    url = _ws(vendor_server, "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000")
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"text": " ", "xi_api_key": TOKEN}))
        await ws.send(json.dumps({"text": "Hello from a web page. "}))
        await ws.send(json.dumps({"text": ""}))
        assert await _first_audio(ws) == "audio"
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"text": "Hello. ", "xi_api_key": "wrong"}))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)  # nothing is answered: the socket closes
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    async with websockets.connect(url) as ws:  # no key at all: the same
        await ws.send(json.dumps({"text": "Hello. "}))
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)


PAGE_SCRIPT = """
async ([base, token]) => {
  const first = (ws, open) => new Promise((resolve) => {
    ws.onopen = () => open(ws);
    ws.onmessage = async (m) => {
      if (typeof m.data !== "string") { resolve("binary"); ws.close(); return; }
      const e = JSON.parse(m.data);
      if (e.type === "chunk" || e.audio) { resolve(e.type || "audio"); ws.close(); }
      else if (e.type === "error" || e.error) { resolve("error: " + m.data); ws.close(); }
    };
    ws.onclose = (c) => resolve("closed " + c.code);
  });
  const cartesia = await first(
    new WebSocket(`${base}/tts/websocket?api_key=${token}&cartesia_version=2025-04-16`),
    (ws) => ws.send(JSON.stringify(__CARTESIA__)));
  const deepgram = await first(
    new WebSocket(`${base}/v1/speak?encoding=linear16&sample_rate=24000`, ["token", token]),
    (ws) => { ws.send(JSON.stringify({type: "Speak", text: "Hello from a web page."}));
              ws.send(JSON.stringify({type: "Flush"})); });
  const elevenlabs = await first(
    new WebSocket(`${base}/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000`),
    (ws) => { ws.send(JSON.stringify({text: " ", xi_api_key: token}));
              ws.send(JSON.stringify({text: "Hello from a web page. "}));
              ws.send(JSON.stringify({text: ""})); });
  const flux = await first(
    new WebSocket(`${base}/v2/speak?model=flux-alexis-en&encoding=linear16`, ["token", token]),
    (ws) => { ws.send(JSON.stringify({type: "Speak", text: "Hello from a web page."}));
              ws.send(JSON.stringify({type: "Flush"})); });
  return {cartesia, deepgram, flux, elevenlabs};
}
""".replace("__CARTESIA__", json.dumps(CARTESIA))


@pytest.mark.slow
def test_a_web_page_reaches_each_vendor_wire_with_its_browser_key(vendor_server: RunningServer) -> None:
    from playwright.sync_api import sync_playwright

    chromium = system_binary("chromium", "chromium-browser", package="chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        page = browser.new_page()
        page.goto(vendor_server.url + "/live")  # any page of the server's origin
        heard = page.evaluate(PAGE_SCRIPT, [vendor_server.url.replace("http", "ws", 1), TOKEN])
        browser.close()
    assert heard == {"cartesia": "chunk", "deepgram": "binary", "flux": "binary", "elevenlabs": "audio"}, (
        heard
    )


async def test_keyless_sockets_take_no_room(engine: Any) -> None:
    """Issue #64's lockout: sockets opened with no key, sending nothing, held every session room, and every
    caller with the key was told ``server_busy``. They now wait in the doorway, apart from the rooms: a
    caller with the key is served while they wait, past the doorway's bound a keyless socket is refused at
    the upgrade, and each is closed 1008 once its first message is overdue."""
    from tests.helpers import start_speech_server

    server = start_speech_server(
        engine, auth_token=TOKEN, max_sessions=2, max_keyless_sockets=4, body_timeout_s=2.0
    )
    try:
        url = _ws(server, "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000")
        keyless = [await websockets.connect(url) for _ in range(4)]  # twice the rooms, sending nothing
        with pytest.raises(InvalidStatus):  # the doorway is full: refused before any accept
            await websockets.connect(url)
        async with websockets.connect(url, additional_headers={"xi-api-key": TOKEN}) as ws:
            await ws.send(json.dumps({"text": "Hello while strangers wait. "}))
            await ws.send(json.dumps({"text": ""}))
            assert await _first_audio(ws) == "audio"
        for ws in keyless:  # each closed once its key is overdue, having been told nothing
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        async with websockets.connect(url) as ws:  # the doorway is free again
            await ws.send(json.dumps({"text": " ", "xi_api_key": TOKEN}))
            await ws.send(json.dumps({"text": "Hello again. "}))
            await ws.send(json.dumps({"text": ""}))
            assert await _first_audio(ws) == "audio"
    finally:
        server.stop()
