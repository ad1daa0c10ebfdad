"""Which of our voices a vendor's voice field names (``server/surfaces/vendor_voices.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.surfaces.vendor_voices import VendorVoices, load_vendor_voices


def test_ours_pass_through_mapped_ids_map_and_others_take_the_default(engine) -> None:  # type: ignore[no-untyped-def]
    voices = VendorVoices(engine, {"21m00Tcm4TlvDq8ikWAM": "af_bella"})
    assert voices.resolve("am_michael", "ElevenLabs") == "am_michael"
    assert voices.resolve("af_heart(2)+am_michael(1)", "ElevenLabs") == "af_heart(2)+am_michael(1)"
    assert voices.resolve("21m00Tcm4TlvDq8ikWAM", "ElevenLabs") == "af_bella"
    assert voices.resolve("hpp4J3VqNfWAUOO0d1Us", "ElevenLabs") == "af_heart"
    assert voices.resolve(None, "Cartesia") == "af_heart" and voices.resolve("  ", "Cartesia") == "af_heart"


def test_strict_refuses_an_id_it_cannot_name(engine) -> None:  # type: ignore[no-untyped-def]
    voices = VendorVoices(engine, {"aura-2-thalia-en": "af_bella"}, strict=True)
    assert voices.resolve("aura-2-thalia-en", "Deepgram") == "af_bella"
    with pytest.raises(ProtocolError) as refused:
        voices.resolve("aura-2-andromeda-en", "Deepgram")
    assert (
        refused.value.code == ErrorCode.UNKNOWN_VOICE
        and "STREAMVOICE_VENDOR_VOICES_FILE" in refused.value.message
    )


def test_a_bad_map_file_stops_the_start_naming_it(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "voices.json"
    good.write_text(json.dumps({"x": "af_bella"}))
    assert load_vendor_voices(str(good)) == {"x": "af_bella"}
    for body in ("[1, 2]", "{not json", json.dumps({"x": 3})):
        bad = tmp_path / "bad.json"
        bad.write_text(body)
        with pytest.raises(ValueError, match="STREAMVOICE_VENDOR_VOICES_FILE"):
            load_vendor_voices(str(bad))
    with pytest.raises(ValueError, match="zz_nobody"):
        VendorVoices(engine, {"x": "zz_nobody"}).check()


def test_a_language_that_is_not_text_is_refused_not_ignored() -> None:
    from streamvoice.protocol import ProtocolError
    from streamvoice.server.surfaces.vendor_voices import vendor_language

    assert vendor_language("zh") == "cmn" and vendor_language(None) is None and vendor_language(" ") is None
    for raw in (5, ["es"], {"code": "es"}):
        with pytest.raises(ProtocolError) as caught:
            vendor_language(raw)
        assert caught.value.code == "invalid_field"
