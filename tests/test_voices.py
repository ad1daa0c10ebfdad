from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.engine.voices import VoiceError, blend_style, default_lang, describe, parse_voice_spec
from tests.helpers import (
    RunningServer,
    cpu_seconds,
)

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


# --- 2 and 15. voice specs ------------------------------------------------------------------------------


def test_voice_parsing_is_linear_and_bounded() -> None:
    known = {"af_heart", "am_michael"}

    def refuse(n: int) -> None:
        for hostile in ("af_heart*" + "1" * n + "x", "af_heart*" + "1." * (n // 2), "a" * n + "!"):
            with pytest.raises(VoiceError):
                parse_voice_spec(hostile, known)

    # ten times the spec, about ten times the work: the old pattern took seconds on a few KB
    assert cpu_seconds(lambda: refuse(250)) < 30 * max(cpu_seconds(lambda: refuse(25)), 1e-4)
    with pytest.raises(VoiceError, match="limit"):
        parse_voice_spec("af_heart*1+" * 40, known)
    with pytest.raises(VoiceError, match="at most"):  # overflowing weights: no NaN blend of silence
        parse_voice_spec("af_heart*999999999999+am_michael", known)
    blend = parse_voice_spec("af_heart*0.7+am_michael*0.3", known)
    assert [round(w, 3) for _, w in blend.parts] == [0.7, 0.3]


async def test_long_voice_is_refused_and_ping_stays_responsive(scripted_server: RunningServer) -> None:
    async with connect(scripted_server.ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"text": "Hi.", "voice": "af_heart*" + "1" * 12_000}))
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert error["code"] == "unknown_voice" and "limit" in error["message"]
    assert httpx.get(scripted_server.url + "/ping", timeout=60).status_code == 200


# --- 12. shared tables ------------------------------------------------------------------------------------


def test_blends_fill_no_shared_table(engine: KokoroEngine) -> None:
    names = sorted(engine.voice_names)[:12]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            spec = engine.parse_voice(f"{a}*0.6+{b}*0.4")
            engine.style_pack(spec)
            assert engine.memory.recorder(spec) is None  # blends are never learnt
    from streamvoice.engine.styles import BLEND_STYLE_CACHE

    assert engine.cached_styles <= BLEND_STYLE_CACHE
    assert set(engine.memory._stats) <= engine.voice_names
    # a blend of two known voices derives its statistics from theirs (no cold path)
    known = [v for v in engine.voice_names if engine.memory.get(engine.parse_voice(v)) is not None]
    if len(known) >= 2:
        blend = engine.parse_voice(f"{known[0]}*0.5+{known[1]}*0.5")
        stats = engine.memory.get(blend)
        assert stats is not None and all(np.isfinite(m).all() for m in stats.means)
