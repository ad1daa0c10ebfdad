"""``server.requests``: what a caller asked for made concrete (voice, language, format, rate, pauses,
lexicon) over the session's defaults and the server's settings, one rule for every surface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.protocol import Configure, ErrorCode, Pauses, ProtocolError
from streamvoice.server.core.requests import (
    CHARS_PER_SECOND,
    Resolver,
    SessionDefaults,
    estimated_speech_s,
    load_lexicon,
)
from streamvoice.server.surfaces.session.configure import configured, configured_body


@pytest.fixture
def resolver(engine: KokoroEngine) -> Resolver:
    return Resolver(engine, Pauses(), {"Kokoro": "/kˈOkəɹO/"})


def test_fields_win_over_defaults_and_the_voice_gives_the_language(resolver: Resolver) -> None:
    defaults = SessionDefaults(voice="bf_emma", speed=1.2)
    request = resolver.resolve(defaults, text="Hello.")
    assert (request.voice.parts[0][0], request.lang, request.speed, request.sample_rate) == (
        "bf_emma", "en-gb", 1.2, 24_000,
    )  # fmt: skip
    request = resolver.resolve(defaults, text="Hola.", voice="ef_dora", speed=1.0, fmt="ulaw")
    assert (request.lang, request.speed, request.sample_rate) == ("es", 1.0, 8_000)  # G.711 is 8 kHz


def test_each_mistake_has_its_code_and_the_messages_id(resolver: Resolver) -> None:
    cases = [
        ({"voice": "zz_nobody"}, ErrorCode.UNKNOWN_VOICE),
        ({"lang": "klingon"}, ErrorCode.INVALID_FIELD),
        ({"fmt": "opus", "sample_rate": 44_100}, ErrorCode.INVALID_FIELD),
    ]
    for fields, code in cases:
        with pytest.raises(ProtocolError) as caught:
            resolver.resolve(SessionDefaults(), text="Hi.", msg_id="m1", **fields)  # type: ignore[arg-type]
        assert caught.value.id == "m1" and caught.value.code is code


def test_the_sessions_lexicon_is_over_the_servers(resolver: Resolver) -> None:
    request = resolver.resolve(SessionDefaults(lexicon={"Kokoro": "/kokoɹo/", "Ada": "/ˈAdə/"}), text="Hi.")
    assert request.lexicon == {"Kokoro": "/kokoɹo/", "Ada": "/ˈAdə/"}
    assert resolver.resolve(SessionDefaults(), text="Hi.").lexicon == {"Kokoro": "/kˈOkəɹO/"}


def test_configure_changes_only_what_it_names() -> None:
    server = Pauses()
    defaults = configured(
        SessionDefaults(voice="af_heart"), Configure(speed=1.5, pauses={"sentence_ms": 100}), server
    )
    assert defaults.voice == "af_heart" and defaults.speed == 1.5
    body = configured_body(defaults, server)
    assert body["pauses"]["sentence_ms"] == 100 and body["pauses"]["clause_ms"] == server.clause_ms


def test_speech_is_estimated_from_the_text_and_the_speed() -> None:
    chars = int(CHARS_PER_SECOND * 10)
    assert estimated_speech_s(chars, 1.0) == pytest.approx(10)
    assert estimated_speech_s(chars, 2.0) == pytest.approx(5)


def test_a_bad_lexicon_file_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"Kokoro": "/kˈOkəɹO/"}))
    assert load_lexicon(str(good)) == {"Kokoro": "/kˈOkəɹO/"}
    assert load_lexicon(None) == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json"):
        load_lexicon(str(bad))
