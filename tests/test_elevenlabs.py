"""`server.elevenlabs`: the official `elevenlabs` SDK, unmodified, its base URL pointed at the real speech
server (the key it sends carries the server's token), and the socket's alignment against Whisper."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
from elevenlabs import ElevenLabs
from elevenlabs.core.api_error import ApiError as ElevenLabsError

from streamvoice.bench.wer import word_error_rate
from tests.helpers import TRAIN_SENTENCE as TEXT
from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, first_words, pcm16

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


def test_elevenlabs_sdk_voices_search_pages_filters_and_refuses(vendor_server: RunningServer) -> None:
    """``voices.search()`` (``GET /v2/voices``), what every current ElevenLabs SDK lists voices with: 404 before."""
    client = ElevenLabs(base_url=vendor_server.url, api_key=TOKEN)
    first = client.voices.search(page_size=20)
    assert len(first.voices) == 20 and first.has_more and first.total_count == 54
    seen = [v.voice_id for v in first.voices]
    token = first.next_page_token
    while token is not None:  # every voice once, in name order, by the SDK's own paging
        page = client.voices.search(page_size=20, next_page_token=token)
        seen += [v.voice_id for v in page.voices]
        token = page.next_page_token
    assert seen == sorted(seen) and len(set(seen)) == 54 and "af_heart" in seen
    british = client.voices.search(search="british", gender="female", page_size=100)
    assert british.voices and all(v.voice_id.startswith("bf_") for v in british.voices)
    assert client.voices.search(category="cloned").total_count == 0  # every voice of ours is premade
    assert [v.voice_id for v in client.voices.search(voice_ids=["af_heart", "bm_george"]).voices] == [
        "af_heart",
        "bm_george",
    ]
    with pytest.raises(ElevenLabsError) as bad:
        client.voices.search(page_size=101)
    assert bad.value.status_code == 400 and "page_size" in str(bad.value.body)
    with pytest.raises(ElevenLabsError) as refused:
        ElevenLabs(base_url=vendor_server.url, api_key="wrong").voices.search()
    assert refused.value.status_code == 401


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
    from streamvoice.server.core.config import ServerConfig
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


def test_a_word_longer_than_a_message_is_never_split_by_a_filler_space() -> None:
    """Short audio messages inside a long word (the first windows of a piece, a busy server) carry no letter
    of their own: the next letter goes with them, not a space (Pipecat split "morning." in two)."""
    from streamvoice.engine.alignment import WordTime
    from streamvoice.server.surfaces.elevenlabs import characters, message_chars, ws_alignment

    times = [WordTime("this", 200.0, 400.0), WordTime("morning.", 420.0, 1_200.0)]
    pending, inside, text = characters(times, leading_space=False), False, ""
    for start in range(0, 1_400, 20):  # 20 ms messages; a letter of "morning." lasts ~100 ms
        now, pending = message_chars(pending, start + 20, inside)
        inside = bool(now) and now[-1].char != " "
        text += "".join(ws_alignment(now, start, start + 20)["chars"])
    assert text.split() == ["this", "morning."]


def test_a_unicode_digit_in_the_format_is_a_clear_400(vendor_server: RunningServer) -> None:
    import httpx

    r = httpx.post(
        vendor_server.url + "/v1/text-to-speech/af_heart?output_format=pcm_²", json={"text": "Hi."},
        headers={"xi-api-key": TOKEN}, timeout=60,
    )  # fmt: skip
    assert r.status_code == 400 and "output_format" in r.text, (r.status_code, r.text)  # was a plain 500


async def test_a_whole_timestamped_answer_stops_when_its_caller_leaves(vendor_server: RunningServer) -> None:
    """``/with-timestamps`` makes its answer whole before sending anything: a caller that left is noticed
    by watching the connection, not by a failed send (it went on for the whole text)."""
    import asyncio
    import json
    import socket

    import httpx

    from tests.helpers import metric, wait_for

    body = json.dumps({"text": "A long answer that nobody will wait for. " * 150}).encode()
    sock = socket.create_connection(("127.0.0.1", vendor_server.port))
    sock.sendall(
        b"POST /v1/text-to-speech/af_heart/with-timestamps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"xi-api-key: {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await wait_for(lambda: metric(vendor_server, "streamvoice_active_streams", TOKEN) == 1)
    sock.close()
    await wait_for(lambda: metric(vendor_server, "streamvoice_active_streams", TOKEN) == 0)
    await wait_for(lambda: metric(vendor_server, "streamvoice_queue_depth", TOKEN) == 0)
    r = await asyncio.to_thread(
        httpx.post, vendor_server.url + "/v1/text-to-speech/af_heart/with-timestamps", json={"text": "Short."},
        headers={"xi-api-key": TOKEN}, timeout=60,
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["audio_base64"] and r.json()["alignment"]["characters"]


async def test_a_context_id_reused_right_after_close_context_is_spoken(vendor_server: RunningServer) -> None:
    """The newest context takes over from older ones that were closed; an id reused at once named both
    and cancelled the new answer with the old."""
    import base64
    import json

    import websockets

    url = (
        vendor_server.url.replace("http", "ws", 1)
        + "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_16000"
    )
    async with websockets.connect(url, additional_headers={"xi-api-key": TOKEN}) as ws:
        for frame in (
            {"text": "The first answer, which the second one replaces. ", "context_id": "a", "flush": True},
            {"context_id": "a", "close_context": True},
            {"text": "The second answer is heard to its end. ", "context_id": "a", "flush": True},
            {"context_id": "a", "close_context": True},
        ):
            await ws.send(json.dumps(frame))
        finals, audio_after_first_final = 0, 0
        async with asyncio.timeout(90):
            while finals < 2:
                event = json.loads(await ws.recv())
                if event.get("isFinal"):
                    finals += 1
                elif event.get("audio") and finals == 1:
                    audio_after_first_final += len(base64.b64decode(event["audio"]))
    assert audio_after_first_final > 32_000  # the second answer: more than a second of 16 kHz PCM
