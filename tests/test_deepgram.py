"""`server.deepgram`: the official `deepgram-sdk`, unmodified, its base URL pointed at the real speech server;
the key it sends carries the server's token."""

from __future__ import annotations

import pytest
from deepgram import DeepgramClient
from deepgram.environment import DeepgramClientEnvironment

from streamvoice.bench.wer import word_error_rate
from tests.helpers import TRAIN_SENTENCE as TEXT
from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, pcm16

# --- Deepgram -------------------------------------------------------------------------------------------


def deepgram_client(server: RunningServer) -> DeepgramClient:
    ws = server.url.replace("http", "ws", 1)
    env = DeepgramClientEnvironment(base=server.url, production=ws, agent=ws, agent_rest=server.url)
    return DeepgramClient(api_key=TOKEN, environment=env)


@pytest.mark.slow
def test_deepgram_sdk_rest_and_websocket(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    from deepgram.speak.v1.types import SpeakV1Flush, SpeakV1Text

    client = deepgram_client(vendor_server)
    audio = b"".join(
        client.speak.v1.audio.generate(
            text=TEXT, model="aura-2-thalia-en", encoding="linear16", container="none"
        )
    )
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(audio))) < 0.2

    with client.speak.v1.connect(model="am_michael", encoding="linear16", sample_rate=16000) as socket:
        for word in TEXT.split(" "):
            socket.send_text(SpeakV1Text(text=word + " "))
        socket.send_flush(SpeakV1Flush(type="Flush"))
        pcm, kinds = bytearray(), []
        while True:
            message = socket.recv()
            if isinstance(message, bytes):
                pcm += message
                continue
            kinds.append(message.type)
            if message.type == "Flushed":
                break
    assert kinds[0] == "Metadata"
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(bytes(pcm)), 16_000)) < 0.2


def test_a_unicode_digit_in_the_rate_is_a_clear_400(vendor_server: RunningServer) -> None:
    import httpx

    r = httpx.post(
        vendor_server.url + "/v1/speak?sample_rate=²", json={"text": "Hi."},
        headers={"Authorization": f"Token {TOKEN}"}, timeout=60,
    )  # fmt: skip
    assert r.status_code == 400 and "sample_rate" in r.text, (r.status_code, r.text)  # was a plain 500


def test_a_container_that_cannot_carry_the_encoding_is_refused(vendor_server: RunningServer) -> None:
    import httpx

    headers = {"Authorization": f"Token {TOKEN}"}
    for query in ("encoding=mp3&container=ogg", "encoding=opus&container=wav"):
        r = httpx.post(
            f"{vendor_server.url}/v1/speak?{query}", json={"text": "Hi."}, headers=headers, timeout=60
        )
        assert r.status_code == 400 and "container" in r.text, (
            query,
            r.status_code,
            r.text,
        )  # was audio/mpeg
    r = httpx.post(f"{vendor_server.url}/v1/speak?encoding=opus&container=ogg", json={"text": "Hi."},
                   headers=headers, timeout=60)  # fmt: skip
    assert r.status_code == 200 and r.headers["content-type"].startswith("audio/ogg")
