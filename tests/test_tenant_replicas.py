"""Keys per tenant across two real replicas sharing one real Redis, through the vendors' own SDKs, unmodified
(the scripted engine: the properties are who may do what and what is counted). A key made on one replica
works on the other; tenant A's dictionary is not found for tenant B; A at its listener cap is refused with
each vendor's error while B is served; a key revoked on one replica is refused on the other and its open
socket closed; the characters counted equal the characters sent, on every wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
import websockets
from cartesia import Cartesia
from deepgram import DeepgramClient
from deepgram.environment import DeepgramClientEnvironment
from elevenlabs import ElevenLabs, PronunciationDictionaryVersionLocator
from elevenlabs.core.api_error import ApiError as ElevenLabsError
from websockets.exceptions import ConnectionClosed

from streamvoice.client import SpeechClient
from streamvoice.engine.kokoro import KokoroEngine
from tests.helpers import RunningServer, start_speech_server
from tests.redis_server import RedisServer

TOKEN = "replicas-bootstrap"
RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}
ALIAS = {"type": "alias", "string_to_replace": "UN", "alias": "United Nations"}


@pytest.fixture(scope="module")
def replicas(
    scripted: KokoroEngine, redis_server: RedisServer
) -> Iterator[tuple[RunningServer, RunningServer]]:
    both = tuple(
        start_speech_server(scripted, auth_token=TOKEN, store_url=redis_server.url, admission_listeners=16)
        for _ in range(2)
    )
    yield both  # type: ignore[misc]
    for replica in both:
        replica.stop()


def made(replica: RunningServer, name: str, **share: int) -> str:
    answer = httpx.post(
        replica.url + "/v1/keys", json={"name": name, **share}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["key"])


def eventually(check: Callable[[], bool], within_s: float = 10.0) -> None:
    """Until ``check`` holds (each replica reads the key records every 2 s)."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.1)

    asyncio.run(asyncio.wait_for(poll(), within_s))


def eleven(replica: RunningServer, key: str) -> ElevenLabs:
    return ElevenLabs(api_key=key, base_url=replica.url)


def cartesia(replica: RunningServer, key: str) -> Cartesia:
    return Cartesia(
        api_key=key, base_url=replica.url, websocket_base_url=replica.url.replace("http", "ws", 1)
    )


def deepgram(replica: RunningServer, key: str) -> DeepgramClient:
    ws = replica.url.replace("http", "ws", 1)
    env = DeepgramClientEnvironment(base=replica.url, production=ws, agent=ws, agent_rest=replica.url)
    return DeepgramClient(api_key=key, environment=env)


def oai(replica: RunningServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=replica.url + "/v1", api_key=key, max_retries=0)


def speaks(replica: RunningServer, key: str) -> bool:
    return httpx.get(replica.url + "/v1/keys/me", headers={"xi-api-key": key}).status_code == 200


def test_a_key_made_on_one_replica_works_on_the_other_and_its_records_are_its_own(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    one, two = replicas
    alice, bob = made(one, "alice"), made(one, "bob")
    eventually(lambda: speaks(two, alice) and speaks(two, bob))
    assert b"".join(
        eleven(two, alice).text_to_speech.convert("af_heart", text="Hello.", output_format="pcm_24000")
    )
    mine = eleven(one, alice).pronunciation_dictionaries.create_from_rules(rules=[ALIAS], name="mine")
    assert eleven(two, alice).pronunciation_dictionaries.get(mine.id).name == "mine"  # hers, on both
    theirs = eleven(two, bob)
    assert mine.id not in {
        d.id for d in theirs.pronunciation_dictionaries.list(page_size=100).pronunciation_dictionaries
    }
    locator = PronunciationDictionaryVersionLocator(pronunciation_dictionary_id=mine.id, version_id=None)
    for attempt in (
        lambda: theirs.pronunciation_dictionaries.get(mine.id),
        lambda: b"".join(
            theirs.text_to_speech.convert(
                "af_heart",
                text="The UN.",
                output_format="pcm_24000",
                pronunciation_dictionary_locators=[locator],
            )
        ),
    ):
        with pytest.raises(ElevenLabsError) as caught:
            attempt()
        assert caught.value.status_code == 404  # not found, never forbidden: an id leaks nothing
    cart = cartesia(one, alice).pronunciation_dicts.create(name="hers", items=[])
    assert cart.id not in {d.id for d in cartesia(two, bob).pronunciation_dicts.list()}


def test_a_tenant_at_its_cap_is_refused_by_each_vendors_sdk_while_another_is_served(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    one, two = replicas
    capped, free = made(one, "capped-one", listeners=1), made(one, "free-one")
    eventually(lambda: speaks(two, capped) and speaks(two, free))

    async def hold_and_try() -> None:
        url = two.url.replace("http", "ws", 1) + "/v1/text-to-speech/af_heart/multi-stream-input"
        async with websockets.connect(url, additional_headers={"xi-api-key": capped}):
            await asyncio.to_thread(refused_everywhere)

    def refused_everywhere() -> None:
        with pytest.raises(ElevenLabsError) as eleven_refused:
            b"".join(
                eleven(two, capped).text_to_speech.convert("af_heart", text="Hi.", output_format="pcm_24000")
            )
        assert eleven_refused.value.status_code == 429
        assert eleven_refused.value.body["detail"]["status"] == "concurrent_limit_exceeded"
        with pytest.raises(openai.RateLimitError) as openai_refused:
            oai(two, capped).audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
        assert openai_refused.value.code == "concurrent_limit_exceeded"
        with pytest.raises(Exception) as cartesia_refused:
            cartesia(two, capped).tts.generate(
                model_id="sonic-2",
                transcript="Hi.",
                voice={"mode": "id", "id": "af_heart"},
                output_format=RAW,
            ).read()
        assert getattr(cartesia_refused.value, "status_code", None) == 429, cartesia_refused.value
        with pytest.raises(Exception) as deepgram_refused:
            b"".join(deepgram(two, capped).speak.v1.audio.generate(text="Hi.", model="aura-2-thalia-en"))
        assert getattr(deepgram_refused.value, "status_code", None) == 429, deepgram_refused.value
        # Its cap holds across the cluster: the other replica refuses it too (its listener is a lease in Redis).
        with pytest.raises(ElevenLabsError) as elsewhere:
            b"".join(
                eleven(one, capped).text_to_speech.convert("af_heart", text="Hi.", output_format="pcm_24000")
            )
        assert elsewhere.value.status_code == 429 and "across the servers" in str(elsewhere.value.body)
        # Tenant B, on the same replica meanwhile: served by every SDK.
        assert b"".join(
            eleven(two, free).text_to_speech.convert("af_heart", text="Hi.", output_format="pcm_24000")
        )
        assert oai(two, free).audio.speech.create(model="tts-1", voice="alloy", input="Hi.").content

    asyncio.run(hold_and_try())
    # Its listener ended: its lease is given back, and either replica serves it again.
    eventually(
        lambda: (
            httpx.post(
                one.url + "/v1/audio/speech",
                json={"model": "tts-1", "voice": "alloy", "input": "Hi."},
                headers={"Authorization": f"Bearer {capped}"},
            ).status_code
            == 200
        )
    )


def test_a_key_revoked_on_one_replica_is_refused_and_its_socket_closed_on_the_other(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    one, two = replicas
    key = made(one, "leaving")
    eventually(lambda: speaks(two, key))

    async def revoke_while_open() -> tuple[int, list[Any]]:
        url = two.url.replace("http", "ws", 1) + "/tts/websocket"
        async with websockets.connect(url, additional_headers={"X-API-Key": key}) as ws:
            revoked = await asyncio.to_thread(
                httpx.delete, one.url + "/v1/keys/leaving", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert revoked.status_code == 204
            told = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    told.append(json.loads(await asyncio.wait_for(ws.recv(), 15)))
        assert closed.value.rcvd is not None
        return closed.value.rcvd.code, told

    code, told = asyncio.run(revoke_while_open())
    assert code == 1008 and [t.get("error_code") for t in told] == ["unauthorized"], told
    with pytest.raises(openai.AuthenticationError):
        oai(two, key).audio.speech.create(model="tts-1", voice="alloy", input="Hi.")


def test_the_characters_counted_are_the_characters_sent_on_every_wire(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    one, two = replicas
    key = made(one, "counted", chars_per_day=100_000)
    eventually(lambda: speaks(two, key))
    sent = 0

    def said(text: str) -> str:
        nonlocal sent
        sent += len(text)
        return text

    oai(one, key).audio.speech.create(model="tts-1", voice="alloy", input=said("OpenAI speaks this."))
    b"".join(
        eleven(two, key).text_to_speech.convert(
            "af_heart", text=said("ElevenLabs over HTTP."), output_format="pcm_24000"
        )
    )
    cartesia(one, key).tts.generate(
        model_id="sonic-2",
        transcript=said("Cartesia bytes."),
        voice={"mode": "id", "id": "af_heart"},
        output_format=RAW,
    ).read()
    b"".join(
        deepgram(two, key).speak.v1.audio.generate(text=said("Deepgram REST."), model="aura-2-thalia-en")
    )
    with cartesia(two, key).tts.websocket_connect() as connection:
        ctx = connection.context(
            model_id="sonic-2", voice={"mode": "id", "id": "af_heart"}, output_format=RAW
        )
        for word in ("Cartesia ", "streams ", "words."):
            ctx.push(said(word))
        ctx.no_more_inputs()
        assert [e.type for e in ctx.receive()][-1] == "done"
    b"".join(
        deepgram(one, key).speak.v2.audio.generate(
            text=said("Flux REST."),
            model="flux-alexis-en",
            encoding="linear16",
            container="none",
            sample_rate=24000,
        )
    )
    invoked = httpx.post(
        one.url + "/invocations",
        json={"text": said("Our invocations route.")},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert invoked.status_code == 200 and invoked.content
    from deepgram.speak.v1.types import SpeakV1Flush, SpeakV1Text

    with deepgram(one, key).speak.v1.connect(
        model="am_michael", encoding="linear16", sample_rate=24000
    ) as socket:
        for word in ("Deepgram ", "socket ", "words."):
            socket.send_text(SpeakV1Text(text=said(word)))
        socket.send_flush(SpeakV1Flush(type="Flush"))
        while not (not isinstance(m := socket.recv(), bytes) and m.type == "Flushed"):
            pass

    async def sockets() -> None:
        url = (
            one.url.replace("http", "ws", 1)
            + "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000"
        )
        async with websockets.connect(url, additional_headers={"xi-api-key": key}) as ws:
            for text in (" ", "ElevenLabs ", "socket text. "):
                await ws.send(json.dumps({"text": said(text)}))
            await ws.send(json.dumps({"text": ""}))
            async for frame in ws:
                if json.loads(frame).get("isFinal"):
                    break
        async with await SpeechClient.connect(two.url, key) as client:
            await client.speak(said("Our own session protocol."))

    asyncio.run(sockets())
    used = eleven(one, key).user.subscription.get()
    assert used.character_count == sent and used.character_limit == 100_000  # the store: both replicas'
    counted = 0.0
    for replica in replicas:
        for line in httpx.get(
            replica.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        ).text.splitlines():
            if line.startswith('streamvoice_key_characters_total{key="counted"}'):
                counted += float(line.split()[-1])
    assert counted == sent
