"""Keys per tenant on one real server (the scripted engine: the properties are who may do what, and what is
counted, not how it sounds): keys managed with the bootstrap key alone, each tenant's records its own, its
listener cap and daily quota answered in each wire's own shape while another tenant is served, its use
counted, a revoked key's socket closed, and a flood of wrong keys answered without the store."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from streamvoice.engine.kokoro import KokoroEngine
from tests.helpers import RunningServer, start_speech_server

TOKEN = "bootstrap-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
SPEECH = {"model": "tts-1", "voice": "af_heart", "response_format": "pcm"}


@pytest.fixture(scope="module")
def server(scripted: KokoroEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = tmp_path_factory.mktemp("tenants") / "store.sqlite3"
    running = start_speech_server(
        scripted, auth_token=TOKEN, store_url=f"sqlite://{store}", admission_listeners=32
    )  # room for every racing caller: what bounds them here is their own share
    yield running
    running.stop()


def make_key(server: RunningServer, name: str, **share: int) -> str:
    made = httpx.post(server.url + "/v1/keys", json={"name": name, **share}, headers=ADMIN)
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def closed_as_unauthorized(ws: Any) -> None:
    """Reads ``ws`` until the server closes it: closed 1008, after the wire's ``unauthorized`` frame."""
    told = []
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            told.append(await asyncio.wait_for(ws.recv(), 10))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert any('"unauthorized"' in str(frame) for frame in told), told


def metric(server: RunningServer, line_start: str) -> float:
    for line in httpx.get(server.url + "/metrics", headers=ADMIN).text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    return 0.0


def test_keys_are_made_listed_and_revoked_with_the_bootstrap_key_alone(server: RunningServer) -> None:
    key = make_key(server, "acme", listeners=3, chars_per_day=5000)
    assert key.startswith("sk_sv_") and len(key) > 40
    listed = httpx.get(server.url + "/v1/keys", headers=ADMIN).json()["keys"]
    acme = next(k for k in listed if k["name"] == "acme")
    assert (acme["listeners"], acme["chars_per_day"], acme["expires"]) == (3, 5000, None)
    assert key not in json.dumps(listed) and "digest" not in acme  # never the key nor what is kept of it
    # The new key speaks, but manages nothing: that is AUTH_TOKEN's alone.
    assert (
        httpx.post(
            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(key)
        ).status_code
        == 200
    )
    for call in (
        lambda: httpx.get(server.url + "/v1/keys", headers=bearer(key)),
        lambda: httpx.post(server.url + "/v1/keys", json={"name": "mine"}, headers=bearer(key)),
        lambda: httpx.delete(server.url + "/v1/keys/acme", headers=bearer(key)),
    ):
        answer = call()
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
    me = httpx.get(server.url + "/v1/keys/me", headers=bearer(key)).json()
    assert (me["name"], me["listeners"], me["chars_per_day"], me["chars_today"]) == ("acme", 3, 5000, 3)
    # Mistakes say what to send; a taken name is refused, never replaced.
    for body, field in (
        ({"name": "acme"}, "exists"),
        ({"name": "Not A Name"}, "a-z"),
        ({"name": "ok", "listeners": 0}, "listeners"),
        ({"name": "ok", "chars_per_day": "many"}, "chars_per_day"),
        ({"name": "ok", "colour": "red"}, "unknown field"),
        ({"name": "auth-token"}, "AUTH_TOKEN"),
    ):
        refused = httpx.post(server.url + "/v1/keys", json=body, headers=ADMIN)
        assert refused.status_code == 400 and field in refused.json()["error"]["message"], (
            body,
            refused.text,
        )
    assert (
        httpx.post(
            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(key)
        ).status_code
        == 200
    )
    assert httpx.delete(server.url + "/v1/keys/acme", headers=ADMIN).status_code == 204
    assert httpx.delete(server.url + "/v1/keys/acme", headers=ADMIN).status_code == 404
    gone = httpx.post(server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(key))
    assert gone.status_code == 401  # revoked: refused at once on the replica that revoked it


def test_a_tenants_records_are_not_found_for_another(server: RunningServer) -> None:
    """Dictionaries and named lexicons are their tenant's: another tenant's id answers "not found" (never
    "forbidden": an id leaks nothing), and the bootstrap key is a tenant like any other."""
    alice, bob = make_key(server, "alice-records"), make_key(server, "bob-records")
    base = server.url + "/v1/pronunciation-dictionaries"
    rule = {"type": "alias", "string_to_replace": "UN", "alias": "United Nations"}
    made = httpx.post(
        f"{base}/add-from-rules", json={"rules": [rule], "name": "d"}, headers={"xi-api-key": alice}
    )
    assert made.status_code == 200, made.text
    ident = made.json()["id"]
    for key in (bob, TOKEN):
        listed = httpx.get(base, headers={"xi-api-key": key}).json()["pronunciation_dictionaries"]
        assert ident not in {d["id"] for d in listed}
        got = httpx.get(f"{base}/{ident}", headers={"xi-api-key": key})
        assert got.status_code == 404 and got.json()["detail"]["status"] == "not_found"
        used = httpx.post(
            server.url + "/v1/text-to-speech/af_heart",
            json={
                "text": "The UN.",
                "pronunciation_dictionary_locators": [{"pronunciation_dictionary_id": ident}],
            },
            headers={"xi-api-key": key},
        )
        assert used.status_code == 404
    assert httpx.get(f"{base}/{ident}", headers={"xi-api-key": alice}).status_code == 200


async def test_a_tenant_at_its_cap_gets_each_wires_answer_while_another_is_served(
    server: RunningServer,
) -> None:
    capped, other = make_key(server, "capped", listeners=1), make_key(server, "other-tenant")
    ws_url = server.url.replace("http", "ws", 1) + "/invocations-bidirectional-stream"
    async with websockets.connect(ws_url, additional_headers=bearer(capped)):  # its one listener
        calls: list[tuple[str, dict[str, Any], dict[str, str]]] = [
            ("/v1/audio/speech", {**SPEECH, "input": "Hi."}, bearer(capped)),
            ("/v1/text-to-speech/af_heart", {"text": "Hi."}, {"xi-api-key": capped}),
            ("/tts/bytes", {"model_id": "sonic-2", "transcript": "Hi.", "voice": {"mode": "id", "id": "af_heart"},
                            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}},
             {"X-API-Key": capped}),
            ("/v1/speak", {"text": "Hi."}, {"Authorization": f"Token {capped}"}),
        ]  # fmt: skip
        shapes = []
        for path, body, headers in calls:
            answer = httpx.post(server.url + path, json=body, headers=headers, timeout=30)
            assert answer.status_code == 429, (path, answer.status_code, answer.text)
            shapes.append(answer.json())
        assert shapes[0]["error"]["code"] == "concurrent_limit_exceeded"  # OpenAI: a RateLimitError
        assert shapes[1]["detail"]["status"] == "concurrent_limit_exceeded"  # ElevenLabs' own status
        assert shapes[2]["error_code"] == "concurrent_limit_exceeded"  # Cartesia
        assert shapes[3]["err_code"] == "CONCURRENT_LIMIT_EXCEEDED"  # Deepgram
        with pytest.raises(ConnectionClosed) as closed:
            async with websockets.connect(ws_url, additional_headers=bearer(capped)) as second:
                refusal = json.loads(await asyncio.wait_for(second.recv(), 10))
                assert refusal["code"] == "concurrent_limit_exceeded" and "retry" in refusal["message"]
                await asyncio.wait_for(second.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013  # try again later
        # The other tenant is served meanwhile, and the capped one's refusals are counted as such.
        served = httpx.post(
            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(other)
        )
        assert served.status_code == 200 and served.content
    assert (
        metric(server, 'streamvoice_key_refusals_total{key="capped",reason="concurrent_limit_exceeded"}') == 5
    )
    # Its listener ended: served again.
    again = httpx.post(
        server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(capped)
    )
    assert again.status_code == 200


async def test_a_daily_quota_counts_what_was_sent_and_racing_callers_cannot_pass_it(
    server: RunningServer,
) -> None:
    key = make_key(server, "metered", chars_per_day=100)
    texts = [f"Line {i:02d} is here." for i in range(10)]  # 16 characters each: six fit in 100
    async with httpx.AsyncClient(timeout=60) as http:
        answers = await asyncio.gather(
            *(
                http.post(server.url + "/v1/audio/speech", json={**SPEECH, "input": t}, headers=bearer(key))
                for t in texts
            )
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 6 + [429] * 4, statuses
    refused = next(a for a in answers if a.status_code == 429).json()["error"]
    assert refused["code"] == refused["type"] == "insufficient_quota"  # OpenAI's answer to a spent quota
    used = httpx.get(server.url + "/v1/user/subscription", headers={"xi-api-key": key}).json()
    assert (used["character_count"], used["character_limit"]) == (96, 100)
    eleven = httpx.post(
        server.url + "/v1/text-to-speech/af_heart", json={"text": "Five."}, headers={"xi-api-key": key}
    )
    assert eleven.status_code == 429 and eleven.json()["detail"]["status"] == "quota_exceeded"
    assert (
        httpx.post(
            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Four"}, headers=bearer(key)
        ).status_code
        == 200
    )
    # Counted: every character sent (refused ones too, as sent), and only those spoken against the quota.
    assert metric(server, 'streamvoice_key_characters_total{key="metered"}') == 16 * 10 + 5 + 4
    assert metric(server, 'streamvoice_key_refusals_total{key="metered",reason="quota_exceeded"}') == 5
    assert (
        httpx.get(server.url + "/v1/user/subscription", headers={"xi-api-key": key}).json()["character_count"]
        == 100
    )
    assert metric(server, 'streamvoice_key_audio_seconds_total{key="metered"}') > 0


async def test_a_revoked_key_closes_its_open_socket_with_the_wires_auth_error(server: RunningServer) -> None:
    key = make_key(server, "short-lived")
    url = (
        server.url.replace("http", "ws", 1)
        + "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_24000"
    )
    async with websockets.connect(url, additional_headers={"xi-api-key": key}) as ws:
        await ws.send(json.dumps({"text": " ", "context_id": "a"}))
        assert httpx.delete(server.url + "/v1/keys/short-lived", headers=ADMIN).status_code == 204
        await closed_as_unauthorized(ws)


def test_a_flood_of_wrong_keys_never_reaches_the_store_nor_a_log_line(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    key = make_key(server, "steady")
    service = server.drainer.app.state.service
    reads = 0
    real_get = service.store.get

    async def counted(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real_get(*args)

    service.store.get = counted
    wrong = [f"sk_sv_guess{i:04d}" for i in range(40)] + [
        "x" * 5000,
        "sk_sv_guess\u00e9",
        key[:-1],
        key + "x",
    ]
    started = time.monotonic()
    try:
        with (
            caplog.at_level(logging.DEBUG, logger="streamvoice"),
            caplog.at_level(logging.DEBUG, logger="uvicorn"),
            httpx.Client() as http,
        ):
            for guess in wrong:
                for headers in ({"Authorization": f"Bearer {guess}"}, {"xi-api-key": guess}):
                    headers = {k: v.encode("latin-1") for k, v in headers.items()}  # type: ignore[misc]
                    try:
                        answer = http.post(
                            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=headers
                        )
                    except httpx.LocalProtocolError:
                        continue  # a header httpx itself will not send
                    assert answer.status_code == 401
        right = httpx.post(
            server.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."}, headers=bearer(key)
        )
        assert right.status_code == 200
    finally:
        service.store.get = real_get
    # The ring's own refreshes while the flood ran (one each 2 s), never one per key tried.
    assert reads <= 1 + (time.monotonic() - started) / service.keyring.refresh_s
    assert not [r for r in caplog.records if "sk_sv_guess" in r.getMessage()]


def test_a_server_without_keys_is_open_as_before(scripted: KokoroEngine, tmp_path: Path) -> None:
    running = start_speech_server(scripted, store_url=f"sqlite://{tmp_path / 's.sqlite3'}")
    try:
        answer = httpx.post(running.url + "/v1/audio/speech", json={**SPEECH, "input": "Hi."})
        assert answer.status_code == 200
        assert (
            httpx.get(running.url + "/v1/keys").status_code == 403
        )  # no bootstrap key: nothing manages keys
    finally:
        running.stop()


async def test_a_revoked_keys_streaming_http_answer_stops_with_the_error(
    busy_scripted: KokoroEngine, tmp_path: Path
) -> None:
    """An HTTP answer being streamed when its key is revoked stops there: an SSE body ends with the error
    event, and nothing after it (the scripted engine takes 5 ms a frame: the answer lasts seconds)."""
    running = start_speech_server(
        busy_scripted, auth_token=TOKEN, store_url=f"sqlite://{tmp_path / 's.sqlite3'}"
    )
    try:
        key = make_key(running, "streaming")
        long_text = "The courier left the depot at nine and will reach your street before noon. " * 12
        body = {**SPEECH, "input": long_text, "stream_format": "sse"}
        kinds: list[str] = []
        async with (
            httpx.AsyncClient(timeout=60) as http,
            http.stream("POST", running.url + "/v1/audio/speech", json=body, headers=bearer(key)) as answer,
        ):
            assert answer.status_code == 200
            async for line in answer.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                kinds.append(event["type"] if event["type"] != "error" else event["error"]["code"])
                if len(kinds) == 1:
                    revoked = await http.delete(running.url + "/v1/keys/streaming", headers=ADMIN)
                    assert revoked.status_code == 204
        assert kinds[-1] == "unauthorized" and "speech.audio.done" not in kinds, kinds
    finally:
        running.stop()


async def test_a_key_revoked_while_its_socket_is_being_opened_closes_it(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is checked, then the upgrade awaits (the tenant's lease, the accept) before the connection
    is one the service can close: a revocation in between reaches it when it starts, not never."""
    import threading

    from streamvoice.server.core.rooms import Room

    key = make_key(server, "opening")
    held, go_on = threading.Event(), threading.Event()
    claim = Room.claim

    async def held_claim(self: Room) -> None:
        await claim(self)
        held.set()
        await asyncio.to_thread(go_on.wait, 30)

    monkeypatch.setattr(Room, "claim", held_claim)
    url = server.url.replace("http", "ws", 1) + "/v1/text-to-speech/af_heart/multi-stream-input"
    opening = asyncio.ensure_future(websockets.connect(url, additional_headers={"xi-api-key": key}))
    assert await asyncio.to_thread(held.wait, 30)  # checked, not yet a connection
    revoked = await asyncio.to_thread(httpx.delete, server.url + "/v1/keys/opening", headers=ADMIN)
    assert revoked.status_code == 204
    go_on.set()
    async with await opening as ws:
        await closed_as_unauthorized(ws)
