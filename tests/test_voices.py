import numpy as np
import pytest

from streamvoice.engine.voices import VoiceError, blend_style, default_lang, describe, parse_voice_spec

KNOWN = frozenset({"af_heart", "am_michael", "bf_emma", "zf_xiaoxiao", "af_sarah"})


def test_single_voice() -> None:
    spec = parse_voice_spec("af_heart", KNOWN)
    assert spec.parts == (("af_heart", 1.0),)
    assert default_lang(spec) == "en-us"


def test_weighted_blend_normalises_weights() -> None:
    spec = parse_voice_spec("af_heart*0.7 + am_michael*0.3", KNOWN)
    assert spec.parts == (("af_heart", pytest.approx(0.7)), ("am_michael", pytest.approx(0.3)))
    assert spec.primary == "af_heart"
    spec2 = parse_voice_spec("af_heart*2+bf_emma*2", KNOWN)
    assert [w for _, w in spec2.parts] == [0.5, 0.5]


def test_unknown_voice_names_close_matches() -> None:
    with pytest.raises(VoiceError) as info:
        parse_voice_spec("af_hart", KNOWN)
    assert "af_heart" in str(info.value)


@pytest.mark.parametrize("bad", ["", "af_heart*", "af_heart*-1", "af_heart**2", "+", "af_heart*0"])
def test_malformed_blends(bad: str) -> None:
    with pytest.raises(VoiceError):
        parse_voice_spec(bad, KNOWN)


def test_blend_is_weighted_sum() -> None:
    packs = {
        "af_heart": np.ones((510, 1, 256), np.float32),
        "am_michael": np.zeros((510, 1, 256), np.float32),
    }
    spec = parse_voice_spec("af_heart*0.25+am_michael*0.75", frozenset(packs))
    assert np.allclose(blend_style(spec, packs), 0.25)


def test_describe() -> None:
    info = describe("zf_xiaoxiao")
    assert (info.lang, info.gender) == ("cmn", "female")
    assert describe("bm_george").language == "British English"


def test_parenthesised_weights_as_kokoro_fastapi_writes_them() -> None:
    spec = parse_voice_spec("af_heart(2)+am_michael", KNOWN)
    assert dict(spec.parts) == {"af_heart": 2 / 3, "am_michael": 1 / 3}
    assert parse_voice_spec("af_heart(3) + am_michael(1)", KNOWN).parts == (
        ("af_heart", 0.75),
        ("am_michael", 0.25),
    )


@pytest.mark.parametrize("bad", ["af_heart(", "af_heart()", "af_heart(x)", "af_heart(1", "(2)"])
def test_malformed_parenthesised_weights(bad: str) -> None:
    with pytest.raises(VoiceError, match="NAME"):
        parse_voice_spec(bad, KNOWN)
