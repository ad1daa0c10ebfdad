"""Pronunciation dictionaries through the vendors' own SDKs (``elevenlabs``, ``cartesia``, unmodified), kept in
the store: made, read, versioned and refused on one server; then, with the real model and Whisper, made on one
replica and heard on another through a real Redis, and after a restart (Redis and the embedded SQLite)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from cartesia import Cartesia
from cartesia import NotFoundError as CartesiaNotFound
from elevenlabs import ElevenLabs, PronunciationDictionaryVersionLocator
from elevenlabs.core.api_error import ApiError as ElevenLabsError

from streamvoice.protocol import ProtocolError
from streamvoice.store import owner
from tests.helpers import RunningServer, pcm16, start_speech_server
from tests.redis_server import RedisServer

ALIAS = {"type": "alias", "string_to_replace": "UN", "alias": "United Nations"}
IPA = {
    "type": "phoneme",
    "string_to_replace": "zorblax",
    "phoneme": "ˈwɔtɚmɛlən",
    "alphabet": "ipa",
}  # "watermelon": "toaster" was heard "coaster" in CI from the static-int8 engine, a /t/ on Whisper's edge
CMU = {"type": "phoneme", "string_to_replace": "glorp", "phoneme": "B AH1 T ER0", "alphabet": "cmu-arpabet"}
SPOKEN = "The UN bought a zorblax."  # said: "The United Nations bought a watermelon."
RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


def eleven(server: RunningServer, key: str = "alice") -> ElevenLabs:
    return ElevenLabs(api_key=key, base_url=server.url)


def cartesia(server: RunningServer, key: str = "alice") -> Cartesia:
    return Cartesia(api_key=key, base_url=server.url, websocket_base_url=server.url.replace("http", "ws", 1))


@pytest.fixture(scope="module")
def server(engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    """No token: each key the SDKs send is its own caller."""
    store = tmp_path_factory.mktemp("store") / "store.sqlite3"
    running = start_speech_server(engine, store_url=f"sqlite://{store}")
    yield running
    running.stop()


# --- one server: the API as the SDKs call it --------------------------------------------------------------


def test_elevenlabs_sdk_makes_reads_versions_and_downloads(server: RunningServer) -> None:
    api = eleven(server).pronunciation_dictionaries
    made = api.create_from_rules(rules=[ALIAS, IPA], name="brands", description="what we sell")
    assert (made.name, made.version_rules_num, made.description) == ("brands", 2, "what we sell")
    got = api.get(made.id)
    assert got.latest_version_id == made.version_id and [r.string_to_replace for r in got.rules] == [
        "UN",
        "zorblax",
    ]

    added = api.rules.add(made.id, rules=[CMU])
    assert added.version_rules_num == 3 and added.version_id != made.version_id
    removed = api.rules.remove(made.id, rule_strings=["UN"])
    assert removed.version_rules_num == 2
    replaced = api.rules.set(made.id, rules=[ALIAS])
    assert replaced.version_rules_num == 1
    assert api.get(made.id).latest_version_id == replaced.version_id

    # The first version, as a PLS file, makes an equal dictionary through add-from-file.
    pls = b"".join(api.download(made.id, made.version_id))
    assert b"<grapheme>zorblax</grapheme>" in pls
    again = api.create_from_file(
        name="from file", file=("brands.pls", io.BytesIO(pls), "application/pls+xml")
    )
    assert again.version_rules_num == 2
    assert [r.string_to_replace for r in api.get(again.id).rules] == ["UN", "zorblax"]

    renamed = api.update(made.id, name="renamed", archived=True)
    assert renamed.name == "renamed" and renamed.archived_time_unix is not None
    listed = api.list(page_size=100).pronunciation_dictionaries
    assert made.id not in {d.id for d in listed} and again.id in {d.id for d in listed}
    assert made.id in {
        d.id for d in api.list(include_archived=True, page_size=100).pronunciation_dictionaries
    }


def test_word_timings_name_the_callers_words_not_the_dictionarys(server: RunningServer) -> None:
    client = eleven(server)
    made = client.pronunciation_dictionaries.create_from_rules(rules=[ALIAS], name="timed")
    locator = PronunciationDictionaryVersionLocator(pronunciation_dictionary_id=made.id, version_id=None)
    plain = client.text_to_speech.convert_with_timestamps(
        "af_heart", text="The UN met.", output_format="pcm_24000"
    )
    timed = client.text_to_speech.convert_with_timestamps(
        "af_heart", text="The UN met.", output_format="pcm_24000", pronunciation_dictionary_locators=[locator]
    )
    assert timed.alignment is not None and plain.alignment is not None
    assert "".join(timed.alignment.characters) == "The UN met."  # the caller's text, not "United Nations"
    assert (
        timed.alignment.character_end_times_seconds[-1]
        > plain.alignment.character_end_times_seconds[-1] + 0.3
    )


def test_elevenlabs_refusals_say_what_to_send(server: RunningServer) -> None:
    api = eleven(server).pronunciation_dictionaries
    for rules, says in (
        ([{"type": "phoneme", "string_to_replace": "x", "phoneme": "a", "alphabet": "x-sampa"}], "ipa"),
        ([{"type": "alias", "string_to_replace": "x"}], "alias"),
        ([], "rules"),
    ):
        with pytest.raises(ElevenLabsError) as caught:
            api.create_from_rules(rules=rules, name="bad")  # type: ignore[arg-type]
        assert caught.value.status_code == 400 and says in json.dumps(caught.value.body)
    with pytest.raises(ElevenLabsError) as caught:
        api.create_from_file(name="laughs", file=("l.pls", io.BytesIO(b"<!DOCTYPE x><lexicon/>"), "text/xml"))
    assert caught.value.status_code == 400 and "DOCTYPE" in json.dumps(caught.value.body)
    with pytest.raises(ElevenLabsError) as caught:
        api.get("no-such-dictionary")
    assert caught.value.status_code == 404 and "GET /v1/pronunciation-dictionaries" in json.dumps(
        caught.value.body
    )
    bogus = httpx.post(
        server.url + "/v1/pronunciation-dictionaries/x/rename-rules", json={}, headers={"xi-api-key": "a"}
    )
    assert (
        bogus.status_code == 404 and "no such route" in bogus.json()["detail"]["message"]
    )  # ElevenLabs' shape


async def test_a_contexts_dictionaries_are_fetched_while_its_socket_goes_on_reading(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A context's first message names dictionaries kept in the store: they are fetched before its planning,
    never by the socket's reader, which answers the next message while the store is slow; an unknown one is
    that context's own error, named with its id."""
    import threading

    from streamvoice.server.core.dictionaries import Dictionaries

    released = threading.Event()
    read = Dictionaries.get

    async def slow_store(self: Dictionaries, *args: Any) -> Any:
        await asyncio.to_thread(released.wait, 30)
        return await read(self, *args)

    monkeypatch.setattr(Dictionaries, "get", slow_store)
    url = server.url.replace("http", "ws", 1) + "/v1/text-to-speech/af_heart/multi-stream-input"
    async with websockets.connect(url, additional_headers={"xi-api-key": "alice"}) as ws:
        locator = {"pronunciation_dictionary_id": "nope", "version_id": None}
        await ws.send(
            json.dumps({"text": "Hello. ", "context_id": "a", "pronunciation_dictionary_locators": [locator]})
        )
        await ws.send(json.dumps({"text": 5, "context_id": "b"}))
        first = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert first.get("contextId") == "b" and not released.is_set(), first  # read while the store is held
        released.set()
        second = json.loads(await asyncio.wait_for(ws.recv(), 30))
    assert second["contextId"] == "a" and second["error"] == "not_found", second


def test_a_multipart_body_that_cannot_be_read_is_answered_in_elevenlabs_shape(server: RunningServer) -> None:
    """Issue #64: a malformed multipart body got Starlette's plain-text 400, which the SDK cannot read."""
    for body, content_type in (
        (b"--b\r\nContent-Disposition: form-data\r\n\r\nx", "multipart/form-data; boundary=b"),
        (b"garbage", "multipart/form-data"),  # no boundary
        (b"--b\r\n" + b"Content-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b\r\n" * 12 + b"--b--\r\n",
         "multipart/form-data; boundary=b"),  # more fields than allowed
    ):  # fmt: skip
        r = httpx.post(
            server.url + "/v1/pronunciation-dictionaries/add-from-file",
            content=body,
            headers={"content-type": content_type, "xi-api-key": "alice"},
        )
        assert r.status_code == 400, r.text
        assert "multipart body could not be read" in r.json()["detail"]["message"], r.text


def test_cartesia_sdk_creates_lists_updates_and_deletes(server: RunningServer) -> None:
    api = cartesia(server).pronunciation_dicts
    made = api.create(name="menu", items=[{"text": "bayou", "alias": "<<ˈ|b|ɑ|ˈ|j|u>>"}])
    assert made.name == "menu" and made.items[0].text == "bayou" and not made.pinned
    assert api.retrieve(made.id).items[0].alias == "<<ˈ|b|ɑ|ˈ|j|u>>"
    updated = api.update(made.id, name="menu 2", items=[{"text": "gumbo", "alias": "gum-bow"}])
    assert updated.name == "menu 2" and [i.text for i in updated.items] == ["gumbo"]
    assert made.id in {d.id for d in api.list()}
    api.delete(made.id)
    with pytest.raises(CartesiaNotFound):
        api.retrieve(made.id)


def test_a_dictionary_is_its_makers_alone(server: RunningServer) -> None:
    """Another key neither lists, reads, changes nor speaks with it (each answers as if it did not exist)."""
    mine = eleven(server, "alice").pronunciation_dictionaries.create_from_rules(rules=[ALIAS], name="mine")
    theirs = eleven(server, "mallory").pronunciation_dictionaries
    assert mine.id not in {d.id for d in theirs.list(page_size=100).pronunciation_dictionaries}
    for attempt in (
        lambda: theirs.get(mine.id),
        lambda: theirs.rules.add(mine.id, rules=[CMU]),
        lambda: b"".join(
            eleven(server, "mallory").text_to_speech.convert(
                "af_heart",
                text=SPOKEN,
                output_format="pcm_24000",
                pronunciation_dictionary_locators=[
                    PronunciationDictionaryVersionLocator(
                        pronunciation_dictionary_id=mine.id, version_id=None
                    )
                ],
            )
        ),
    ):
        with pytest.raises(ElevenLabsError) as caught:
            attempt()
        assert caught.value.status_code == 404
    made = cartesia(server, "alice").pronunciation_dicts.create(name="mine", items=[])
    with pytest.raises(CartesiaNotFound):
        cartesia(server, "mallory").pronunciation_dicts.delete(made.id)


async def test_creations_and_revisions_at_once_keep_their_bounds_and_every_rule(
    server: RunningServer,
) -> None:
    """Issue #64: 120 ``add-from-rules`` at once held 166 dictionaries against 100 (the count read before
    the write it bounded), and 20 ``add-rules`` at once kept 2 of 21 rules (read, change, write)."""
    headers = {"xi-api-key": "racer"}
    base = server.url + "/v1/pronunciation-dictionaries"
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=40)) as http:
        made = await asyncio.gather(
            *(http.post(f"{base}/add-from-rules", json={"rules": [ALIAS], "name": f"d{i}"}, headers=headers)
              for i in range(120))
        )  # fmt: skip
        assert sorted({r.status_code for r in made}) == [200, 400]
        assert sum(r.status_code == 200 for r in made) == 100
        assert "the most one key may" in next(r.text for r in made if r.status_code == 400)
        listed = (await http.get(f"{base}?page_size=100", headers=headers)).json()
        assert len(listed["pronunciation_dictionaries"]) == 100 and not listed["has_more"]
        first = next(r.json()["id"] for r in made if r.status_code == 200)
        shown = {r.json()["created_by"] for r in made if r.status_code == 200}
        assert len(shown) == 1 and owner("racer") not in shown  # never the digest that names the records
        words = [f"word{i}" for i in range(20)]
        added = await asyncio.gather(
            *(http.post(f"{base}/{first}/add-rules", headers=headers, json={"rules": [
                {"type": "alias", "string_to_replace": w, "alias": "said"}]}) for w in words)
        )  # fmt: skip
        assert {r.status_code for r in added} == {200}
        kept = (await http.get(f"{base}/{first}", headers=headers)).json()["rules"]
    assert sorted(r["string_to_replace"] for r in kept) == sorted(["UN", *words])


def test_the_owner_is_the_key_the_server_verified_not_another_header(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue #64: with the token set, ``xi-api-key: TOKEN`` beside ``Authorization: Bearer anything`` gave
    each Authorization value an empty allowance of its own (and no bound on all): the owner came from a
    header nobody checked. Now it is the verified key, whatever else is sent."""
    locked = start_speech_server(
        engine, auth_token="the-token", store_url=f"sqlite://{tmp_path / 's.sqlite3'}"
    )
    try:
        base = locked.url + "/v1/pronunciation-dictionaries"
        one = {"xi-api-key": "the-token", "Authorization": "Bearer one"}
        made = httpx.post(f"{base}/add-from-rules", json={"rules": [ALIAS], "name": "x"}, headers=one)
        assert made.status_code == 200
        two = {"xi-api-key": "the-token", "Authorization": "Bearer two"}
        listed = httpx.get(base, headers=two).json()["pronunciation_dictionaries"]
        assert [d["id"] for d in listed] == [made.json()["id"]]
    finally:
        locked.stop()


def test_a_store_that_cannot_be_reached_is_a_503_to_retry(engine) -> None:  # type: ignore[no-untyped-def]
    from streamvoice.asgi import free_port

    down = start_speech_server(engine, store_url=f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(ElevenLabsError) as caught:
            eleven(down).pronunciation_dictionaries.create_from_rules(rules=[ALIAS], name="x")
        assert caught.value.status_code == 503 and "store_unavailable" in json.dumps(caught.value.body)
        assert httpx.get(down.url + "/ping").status_code == 200  # the speech itself is not held by the store
    finally:
        down.stop()


# --- replicas: made on one, heard on the other, kept across a restart ---------------------------------------


def heard(transcriber: Any, pcm: bytes | np.ndarray) -> str:
    audio = pcm16(pcm) if isinstance(pcm, bytes) else pcm
    return transcriber.transcribe(audio).lower()


def says_both(text: str) -> bool:
    return "united nations" in text and "watermelon" in text


async def stream_input(server: RunningServer, dictionary: Any, key: str = "alice") -> bytes:
    """ElevenLabs' ``stream-input`` as its docs give the first message (``InitializeConnection``): the locators
    ride on it; the text follows as an LLM writes it."""
    url = (
        server.url.replace("http", "ws", 1)
        + "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000"
    )
    audio = bytearray()
    async with websockets.connect(url, additional_headers={"xi-api-key": key}) as ws:
        locator = {"pronunciation_dictionary_id": dictionary.id, "version_id": dictionary.version_id}
        await ws.send(json.dumps({"text": " ", "pronunciation_dictionary_locators": [locator]}))
        for word in SPOKEN.split(" "):
            await ws.send(json.dumps({"text": word + " "}))
        await ws.send(json.dumps({"text": ""}))
        async for raw in ws:
            message = json.loads(raw)
            if message.get("audio"):
                import base64

                audio += base64.b64decode(message["audio"])
            if message.get("isFinal"):
                break
    return bytes(audio)


async def livekit_said(make: Any) -> tuple[np.ndarray, int]:
    """The sentence through a LiveKit plugin (unmodified) that ``make(http)`` builds: its audio and rate."""
    import aiohttp

    from tests.helpers import livekit_audio

    async with aiohttp.ClientSession() as http:
        plugin = make(http)
        stream = plugin.stream()
        stream.push_text(SPOKEN)
        stream.end_input()
        audio, _ = await livekit_audio(stream)
        await stream.aclose()
        await plugin.aclose()
    return audio, plugin.sample_rate


async def livekit_multi_stream(server: RunningServer, dictionary: Any) -> tuple[np.ndarray, int]:
    """LiveKit's ElevenLabs plugin puts the locators in each context's first message."""
    from livekit.plugins import elevenlabs

    locator = elevenlabs.PronunciationDictionaryLocator(dictionary.id, dictionary.version_id)
    return await livekit_said(
        lambda http: elevenlabs.TTS(
            base_url=f"{server.url}/v1", api_key="alice", http_session=http,
            pronunciation_dictionary_locators=[locator],
        )
    )  # fmt: skip


async def livekit_cartesia(server: RunningServer, dictionary_id: str) -> tuple[np.ndarray, int]:
    """LiveKit's Cartesia plugin sends ``pronunciation_dict_id`` with sonic-3 models."""
    from livekit.plugins import cartesia as lk_cartesia

    return await livekit_said(
        lambda http: lk_cartesia.TTS(
            model="sonic-3", voice="af_heart", base_url=server.url, api_key="alice", http_session=http,
            pronunciation_dict_id=dictionary_id,
        )
    )  # fmt: skip


def converted(server: RunningServer, *locators: Any) -> bytes:
    """The sentence through the ElevenLabs SDK's ``convert`` (24 kHz PCM), with these locators."""
    return b"".join(
        eleven(server).text_to_speech.convert(
            "af_heart",
            text=SPOKEN,
            output_format="pcm_24000",
            pronunciation_dictionary_locators=list(locators),
        )
    )


@pytest.mark.slow
async def test_replicas_share_dictionaries_through_redis_and_keep_them_across_a_restart(
    engine, redis_server: RedisServer, transcriber
) -> None:  # type: ignore[no-untyped-def]
    """Made on one replica, heard on the other through each client, and kept across the maker's restart.
    What each client received is heard at the end."""
    said: dict[str, tuple[np.ndarray, int]] = {}  # what each path returned, and its rate

    def keep(name: str, audio: bytes | np.ndarray, rate: int = 24_000) -> None:
        said[name] = (pcm16(audio) if isinstance(audio, bytes) else audio, rate)

    one = start_speech_server(engine, store_url=redis_server.url)
    two = start_speech_server(engine, store_url=redis_server.url)
    try:
        keep("without the dictionary", converted(two))
        made = eleven(one).pronunciation_dictionaries.create_from_rules(rules=[ALIAS, IPA], name="brands")
        locator = PronunciationDictionaryVersionLocator(
            pronunciation_dictionary_id=made.id, version_id=made.version_id
        )
        keep("elevenlabs convert", converted(two, locator))
        keep("elevenlabs stream-input", await stream_input(two, made))
        keep("livekit elevenlabs", *await livekit_multi_stream(two, made))

        items = [
            {"text": "UN", "alias": "United Nations"},
            {"text": "zorblax", "alias": "<<ˈ|w|ɔ|t|ɚ|m|ɛ|l|ə|n>>"},
        ]
        pdict = cartesia(one).pronunciation_dicts.create(name="brands", items=items)
        keep("cartesia bytes", cartesia(two).tts.generate(
            model_id="sonic-3", transcript=SPOKEN, voice={"mode": "id", "id": "af_heart"}, output_format=RAW,
            pronunciation_dict_id=pdict.id,
        ).read())  # fmt: skip
        with cartesia(two).tts.websocket_connect() as connection:
            ctx = connection.context(
                model_id="sonic-3", voice={"mode": "id", "id": "af_heart"}, output_format=RAW,
                pronunciation_dict_id=pdict.id,
            )  # fmt: skip
            ctx.push(SPOKEN)
            ctx.no_more_inputs()
            keep(
                "cartesia websocket",
                b"".join(e.audio for e in ctx.receive() if e.type == "chunk" and e.audio),
            )
        keep("livekit cartesia", *await livekit_cartesia(two, pdict.id))

        one.stop()  # the replica that made them restarts: nothing was its own
        one = start_speech_server(engine, store_url=redis_server.url)
        assert [r.string_to_replace for r in eleven(one).pronunciation_dictionaries.get(made.id).rules] == [
            "UN",
            "zorblax",
        ]
        keep("elevenlabs convert after the restart", converted(one, locator))
        assert cartesia(one).pronunciation_dicts.retrieve(pdict.id).name == "brands"
    finally:
        one.stop()
        two.stop()
    # One Whisper pass per clip: joined in one pass (``transcribe_parts``), a clip of the same sentence as its
    # neighbours was once heard as nothing.
    heard = {name: transcriber.transcribe(audio, rate) for name, (audio, rate) in said.items()}
    assert not says_both(heard.pop("without the dictionary").lower())  # what the words are without it
    assert all(says_both(text.lower()) for text in heard.values()), heard


@pytest.mark.slow
def test_the_embedded_store_keeps_dictionaries_across_a_restart(engine, tmp_path: Path, transcriber) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite://{tmp_path / 'store.sqlite3'}"
    first = start_speech_server(engine, store_url=url)
    try:
        made = eleven(first).pronunciation_dictionaries.create_from_rules(rules=[ALIAS, IPA], name="brands")
        pdict = cartesia(first).pronunciation_dicts.create(
            name="menu", items=[{"text": "UN", "alias": "United Nations"}]
        )
    finally:
        first.stop()
    second = start_speech_server(engine, store_url=url)  # a restart: a new process reads the same file
    try:
        assert cartesia(second).pronunciation_dicts.retrieve(pdict.id).items[0].alias == "United Nations"
        locator = PronunciationDictionaryVersionLocator(pronunciation_dictionary_id=made.id, version_id=None)
        audio = converted(second, locator)
        assert says_both(heard(transcriber, audio)), heard(transcriber, audio)
    finally:
        second.stop()


# --- our session protocol: a lexicon kept by name ------------------------------------------------------------


async def configure(server: RunningServer, key: str, message: dict[str, Any]) -> dict[str, Any]:
    url = server.url.replace("http", "ws", 1) + "/invocations-bidirectional-stream"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        await ws.send(json.dumps({"type": "configure", **message}))
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 30))
        return answer


async def test_a_session_lexicon_kept_by_name_is_used_by_name_in_a_later_session(
    server: RunningServer,
) -> None:
    kept = await configure(
        server, "alice", {"lexicon": {"Zyx": "zebra", "Qrk": "/kwɜɹk/"}, "lexicon_name": "animals"}
    )
    assert kept["type"] == "configured" and kept["lexicon_entries"] == 2 and kept["lexicon_name"] == "animals"
    used = await configure(server, "alice", {"lexicon_name": "animals"})  # a new connection: by name alone
    assert used["type"] == "configured" and used["lexicon_entries"] == 2
    for key, name, code in (("mallory", "animals", "not_found"), ("alice", "plants", "not_found"),
                            ("alice", "no spaces", "invalid_field")):  # fmt: skip
        refused = await configure(server, key, {"lexicon_name": name})
        assert refused["type"] == "error" and refused["code"] == code, refused
    assert "lexicon_name" in (await configure(server, "mallory", {"lexicon_name": "animals"}))["message"]


def test_a_full_size_dictionary_can_still_be_revised() -> None:
    """Issue #64: a dictionary whose versions filled the store's record bound could never be revised (a
    500). A revision now drops the oldest versions until the record fits; a latest version alone too large
    is refused with what to send."""
    from streamvoice.server.core.dictionaries import Dictionary, Version, checked_name
    from streamvoice.store import MAX_VALUE_BYTES

    rules = [{"type": "alias", "string_to_replace": f"w{i}", "alias": "x" * 120} for i in range(512)]
    lexicon = {r["string_to_replace"]: r["alias"] for r in rules}
    big = Dictionary("d", checked_name("big"), 0, [Version(f"v{i}", rules, lexicon, i) for i in range(7)])
    assert len(big.encode()) > MAX_VALUE_BYTES
    revised, record = big.revised(rules, lexicon).fitted()
    assert len(record) <= MAX_VALUE_BYTES and revised.latest.id not in {f"v{i}" for i in range(7)}
    assert revised.versions[-2].id == "v6"  # the newest kept, the oldest gone
    huge = [{"type": "alias", "string_to_replace": f"w{i}", "alias": "x" * 1200} for i in range(512)]
    with pytest.raises(ProtocolError, match="fewer or shorter rules"):
        Dictionary("d", "huge", 0, [Version("v", huge, {}, 0)]).fitted()
