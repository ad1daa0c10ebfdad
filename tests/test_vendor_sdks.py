"""The vendors' official Python SDKs (``elevenlabs``, ``cartesia``, ``deepgram-sdk``), unmodified, their
base URL pointed at the real speech server; the key each sends carries the server's token."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cartesia import Cartesia
from deepgram import DeepgramClient
from deepgram.environment import DeepgramClientEnvironment
from elevenlabs import ElevenLabs
from elevenlabs.core.api_error import ApiError as ElevenLabsError

from streamvoice.bench.wer import word_error_rate
from tests.helpers import RunningServer, start_speech_server

TOKEN = "vendor-key"
TEXT = "The train to Lisbon leaves from platform four at ten past nine."


@pytest.fixture(scope="module")
def vendor_server(engine) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    server = start_speech_server(engine, auth_token=TOKEN, admission_listeners=4)
    yield server
    server.stop()


def pcm16(data: bytes) -> np.ndarray:
    return np.frombuffer(data[: len(data) // 2 * 2], "<i2").astype(np.float32) / 32768


def first_words(chars: list[str], starts: list[float]) -> list[tuple[str, float]]:
    """Words and their first character's time from a per-character alignment."""
    words: list[tuple[str, float]] = []
    current, at = "", 0.0
    for ch, t in zip(chars, starts, strict=True):
        if ch.isspace():
            if current:
                words.append((current, at))
            current = ""
        else:
            if not current:
                at = t
            current += ch
    if current:
        words.append((current, at))
    return words


# --- ElevenLabs -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_elevenlabs_sdk_convert_stream_and_timestamps(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    client = ElevenLabs(base_url=vendor_server.url, api_key=TOKEN)
    audio = b"".join(client.text_to_speech.convert("af_heart", text=TEXT, output_format="pcm_16000"))
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(audio), 16_000)) < 0.2
    streamed = b"".join(
        client.text_to_speech.stream("JBFqnCBsd6RMkjVDRZzb", text=TEXT, output_format="pcm_24000")
    )
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(streamed), 24_000)) < 0.2
    mp3 = b"".join(client.text_to_speech.convert("af_heart", text="Hello.", output_format="mp3_44100_128"))
    assert mp3[:3] == b"ID3" or mp3[0] == 0xFF

    whole = client.text_to_speech.convert_with_timestamps("af_heart", text=TEXT, output_format="pcm_24000")
    pcm = pcm16(base64.b64decode(whole.audio_base_64))
    chars = whole.alignment.characters
    assert "".join(chars).split() == TEXT.split()
    ours = first_words(chars, whole.alignment.character_start_times_seconds)
    whisper = transcriber.words(pcm)
    for (_, ours_s), (_, whisper_ms, _) in zip(ours[:6], whisper[:6], strict=False):
        assert abs(ours_s * 1000 - whisper_ms) < 350, (ours[:6], whisper[:6])

    chunks = list(
        client.text_to_speech.stream_with_timestamps("af_heart", text=TEXT, output_format="pcm_24000")
    )
    assert len(chunks) > 1
    stream_chars = [c for chunk in chunks if chunk.alignment for c in chunk.alignment.characters]
    assert "".join(stream_chars).split() == TEXT.split()


def test_elevenlabs_sdk_voices_models_and_errors(vendor_server: RunningServer) -> None:
    client = ElevenLabs(base_url=vendor_server.url, api_key=TOKEN)
    voices = client.voices.get_all().voices
    assert "af_heart" in {v.voice_id for v in voices} and len(voices) >= 54
    assert "kokoro" in {m.model_id for m in client.models.list()}
    with pytest.raises(ElevenLabsError) as refused:
        b"".join(
            ElevenLabs(base_url=vendor_server.url, api_key="wrong").text_to_speech.convert(
                "af_heart", text="Hi."
            )
        )
    assert refused.value.status_code == 401
    with pytest.raises(ElevenLabsError) as bad:
        b"".join(client.text_to_speech.convert("af_heart", text="Hi.", output_format="pcm_11025"))
    assert bad.value.status_code == 400 and "output_format" in str(bad.value.body)


# --- Cartesia -------------------------------------------------------------------------------------------


def cartesia_client(server: RunningServer) -> Cartesia:
    return Cartesia(
        api_key=TOKEN, base_url=server.url, websocket_base_url=server.url.replace("http", "ws", 1)
    )


RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


@pytest.mark.slow
def test_cartesia_sdk_bytes_and_websocket_contexts(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    client = cartesia_client(vendor_server)
    response = client.tts.generate(
        model_id="sonic-2", transcript=TEXT, voice={"mode": "id", "id": "af_heart"}, output_format=RAW
    )
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(response.read()))) < 0.2

    with client.tts.websocket_connect() as connection:
        ctx = connection.context(
            model_id="sonic-2", voice={"mode": "id", "id": "af_bella"}, output_format=RAW, add_timestamps=True
        )
        words = TEXT.split(" ")
        for i, word in enumerate(words):  # an LLM's tokens, spaces the caller's
            ctx.push(word + (" " if i < len(words) - 1 else ""))
        ctx.no_more_inputs()
        audio, stamps, kinds = bytearray(), [], []
        for event in ctx.receive():
            kinds.append(event.type)
            if event.type == "chunk" and event.audio:
                audio += event.audio
            elif event.type == "timestamps" and event.word_timestamps:
                stamps += list(zip(event.word_timestamps.words, event.word_timestamps.start, strict=True))
    assert kinds[-1] == "done"
    pcm = pcm16(bytes(audio))
    assert word_error_rate(TEXT, transcriber.transcribe(pcm)) < 0.2
    assert [w for w, _ in stamps] == words
    whisper = transcriber.words(pcm)
    for (_, ours_s), (_, whisper_ms, _) in zip(stamps[:6], whisper[:6], strict=False):
        assert abs(ours_s * 1000 - whisper_ms) < 350, (stamps[:6], whisper[:6])


def test_cartesia_sdk_voices_and_errors(vendor_server: RunningServer) -> None:
    client = cartesia_client(vendor_server)
    ids = {v.id for v in client.voices.list()}
    assert "af_heart" in ids
    with client.tts.websocket_connect() as connection:
        ctx = connection.context(model_id="sonic-2", voice={"mode": "id", "id": "af_heart"})
        ctx.send(
            transcript="Hello.",
            voice={"mode": "id", "id": "af_heart"},
            output_format={**RAW, "sample_rate": 11025},
            continue_=False,
        )
        events = list(ctx.receive())
    assert events[-1].type == "error" and "sample_rate" in (events[-1].message or "")


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


# --- ElevenLabs' convert_realtime: stream-input over TLS ------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, made here: the SDK dials wss:// whatever its base URL says."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@pytest.mark.slow
def test_elevenlabs_sdk_convert_realtime_over_tls(engine, tmp_path: Path, monkeypatch, transcriber) -> None:  # type: ignore[no-untyped-def]
    from streamvoice.asgi import free_port
    from streamvoice.server.config import ServerConfig
    from streamvoice.server.runner import build_server

    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the SDK's default TLS context trusts it
    port = free_port()
    drainer = build_server(
        ServerConfig(port=port, auth_token=TOKEN, admission_listeners=4),
        engine,
        log_level="warning",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = RunningServer(drainer.app, port, server=drainer.server)
    server.url = f"https://127.0.0.1:{port}"
    server.start()
    try:
        client = ElevenLabs(base_url=server.url, api_key=TOKEN)
        words = TEXT.split(" ")
        tokens = iter([words[0]] + [" " + w for w in words[1:]])
        audio = b"".join(
            client.text_to_speech.convert_realtime(
                voice_id="af_heart", text=tokens, output_format="pcm_24000"
            )
        )
    finally:
        server.stop()
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(audio))) < 0.2


@pytest.mark.slow
async def test_elevenlabs_socket_alignment_follows_the_wire_and_whisper(
    vendor_server: RunningServer, transcriber
) -> None:  # type: ignore[no-untyped-def]
    """Each message's character times are relative to its own audio (the wire's rule): a client that adds
    each message's span to its clock, as Pipecat does, gets the times Whisper hears."""
    import json

    import websockets

    url = (
        vendor_server.url.replace("http", "ws", 1)
        + "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000"
    )
    pcm, chars, starts = bytearray(), [], []
    async with websockets.connect(url, additional_headers={"xi-api-key": TOKEN}, max_size=None) as ws:
        await ws.send(json.dumps({"text": " "}))
        for word in TEXT.split(" "):
            await ws.send(json.dumps({"text": word + " "}))
        await ws.send(json.dumps({"text": ""}))
        clock_ms = 0.0
        async for raw in ws:
            message = json.loads(raw)
            if message.get("audio"):
                pcm += base64.b64decode(message["audio"])
            if alignment := message.get("alignment"):
                chars += alignment["chars"]
                starts += [clock_ms + t for t in alignment["charStartTimesMs"]]
                clock_ms += alignment["charStartTimesMs"][-1] + alignment["charDurationsMs"][-1]
            if message.get("isFinal"):
                break
    assert "".join(chars).split() == TEXT.split()
    ours = first_words(chars, starts)
    whisper = transcriber.words(pcm16(bytes(pcm)))
    assert len(ours) == len(TEXT.split())
    for (_, ours_ms), (_, whisper_ms, _) in zip(ours, whisper, strict=False):
        assert abs(ours_ms - whisper_ms) < 350, (ours, whisper)
