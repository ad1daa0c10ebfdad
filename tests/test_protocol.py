import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamvoice.protocol import (
    Cancel,
    Close,
    Configure,
    ErrorCode,
    Limits,
    ProtocolError,
    Synthesize,
    decode_client_frame,
    decode_control_frame,
)

DEFAULT_LIMITS = Limits()


def code_of(frame: str | bytes, limits: Limits = DEFAULT_LIMITS) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        decode_client_frame(frame, limits)
    return info.value.code


def test_text_and_binary_frames_decode_the_same() -> None:
    payload = {
        "type": "synthesize",
        "text": "Hello.",
        "voice": "af_heart",
        "speed": 1.2,
        "format": "MP3",
        "id": 7,
    }
    as_text = decode_client_frame(json.dumps(payload))
    as_bytes = decode_client_frame(json.dumps(payload).encode())
    assert as_text == as_bytes == Synthesize(text="Hello.", id="7", voice="af_heart", speed=1.2, format="mp3")


def test_text_without_type_is_a_synthesize_request() -> None:
    assert decode_client_frame(b'{"text": "Hi there."}') == Synthesize(text="Hi there.")


def test_control_messages() -> None:
    assert decode_client_frame('{"type": "cancel"}') == Cancel()
    assert decode_client_frame('{"type": "cancel", "id": "m2"}') == Cancel(id="m2")
    assert decode_client_frame('{"type": "close"}') == Close()
    assert decode_client_frame('{"type": "configure", "voice": "bm_george", "speed": 0.9}') == Configure(
        voice="bm_george", speed=0.9
    )


@pytest.mark.parametrize("bad_id", [{"m": 1}, ["m2"], True, 2.5, 10**80])
@pytest.mark.parametrize("kind", ["cancel", "append", "end", "synthesize"])
def test_an_id_of_another_type_is_refused_not_dropped(kind: str, bad_id: object) -> None:
    """Dropped, it would make ``cancel`` cut every message and ``append``/``end`` reach the latest stream."""
    frame = json.dumps({"type": kind, "id": bad_id, "text": "Hi."})
    with pytest.raises(ProtocolError) as info:
        decode_client_frame(frame)
    assert info.value.code == ErrorCode.INVALID_FIELD and '"id" must be a string' in info.value.message
    assert info.value.id is None


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", ErrorCode.INVALID_JSON),
        ("[1, 2]", ErrorCode.INVALID_MESSAGE),
        ('"text"', ErrorCode.INVALID_MESSAGE),
        (b"\xff\xfe{", ErrorCode.INVALID_UTF8),
        ("{}", ErrorCode.MISSING_TEXT),
        ('{"type": "synthesize"}', ErrorCode.MISSING_TEXT),
        ('{"type": "synthesize", "text": "   "}', ErrorCode.EMPTY_TEXT),
        ('{"type": "synthesize", "text": 5}', ErrorCode.INVALID_FIELD),
        ('{"type": "dance"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type": ["x"]}', ErrorCode.UNKNOWN_TYPE),
        ('{"text": "hi", "speed": 3}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": 0.1}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": "fast"}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": true}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "format": "vorbis"}', ErrorCode.UNSUPPORTED_FORMAT),
        ('{"text": "hi", "voice": 3}', ErrorCode.UNKNOWN_VOICE),
        ("[" * 100_000, ErrorCode.MESSAGE_TOO_LARGE),
    ],
)
def test_bad_frames_get_stable_codes(frame: str | bytes, code: ErrorCode) -> None:
    assert code_of(frame) == code


def test_deep_json_is_rejected_not_crashing() -> None:
    assert code_of("[" * 5000 + "]" * 5000, Limits(max_message_bytes=1 << 20)) in (
        ErrorCode.INVALID_JSON,
        ErrorCode.INVALID_MESSAGE,
    )
    assert code_of('{"a":' * 50_000 + "1" + "}" * 50_000, Limits(max_message_bytes=1 << 20)) in (
        ErrorCode.INVALID_JSON,
        ErrorCode.MISSING_TEXT,
    )


def test_text_length_limit_says_what_to_do() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_client_frame(json.dumps({"text": "a" * 101, "id": "x"}), Limits(max_text_chars=100))
    assert info.value.code == ErrorCode.TEXT_TOO_LONG
    assert "several messages" in info.value.message
    assert info.value.id == "x"


def test_error_messages_never_echo_raw_exceptions() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_client_frame('{"type": "synthesize"}')
    assert info.value.message != "text"
    assert "text" in info.value.message and "field" in info.value.message


def test_control_frame_rule_needs_the_whole_chunk() -> None:
    assert decode_control_frame(b'{"type": "synthesis_complete", "id": "a"}') == {
        "type": "synthesis_complete",
        "id": "a",
    }
    pcm_starting_with_brace = bytes([0x7B, 0x00, 0x22, 0x01]) + bytes(range(200))
    assert decode_control_frame(pcm_starting_with_brace) is None
    assert decode_control_frame(b'{"almost": "json"') is None
    assert decode_control_frame(b"[1, 2]") is None
    assert decode_control_frame(b"\xff\xff") is None


ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
MESSAGE_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(["synthesize", "configure", "cancel", "close"]), ANY_JSON),
        "text": ANY_JSON,
        "voice": ANY_JSON,
        "speed": ANY_JSON,
        "format": ANY_JSON,
        "lang": ANY_JSON,
        "id": ANY_JSON,
    },
)


@settings(max_examples=1000, deadline=None)  # new frames each run: runs add up to many thousands
@given(
    st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200),
        ANY_JSON.map(lambda v: json.dumps(v, allow_nan=True)),
        MESSAGE_LIKE.map(lambda v: json.dumps(v, allow_nan=True)),
        MESSAGE_LIKE.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    )
)
def test_fuzzed_frames_decode_or_fail_with_a_protocol_error(frame: str | bytes) -> None:
    """A thousand hostile frames a run: each either decodes to a message or raises ProtocolError, nothing else."""
    try:
        msg = decode_client_frame(frame)
    except ProtocolError as exc:
        assert isinstance(exc.code, ErrorCode) and len(exc.message) > 10
    else:
        assert isinstance(msg, Synthesize | Configure | Cancel | Close)


def test_a_query_number_is_ascii_digits_of_bounded_length() -> None:
    from streamvoice.protocol import whole_number

    assert whole_number("16000") == 16000
    assert [whole_number(raw) for raw in ("²", "١٢", "-1", "1.5", "", "9" * 10)] == [None] * 6


def test_the_documented_codes_are_every_code_the_server_answers() -> None:
    """docs/protocol.md lists the speech server's stable codes and docs/agent.md the agent's: every code is
    in one of them, and every code they list exists (issue #69: `store_unavailable` and `host_not_allowed`
    were missing)."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    listed = set()
    for page in ("protocol.md", "agent.md"):
        text = (docs / page).read_text()
        block = text[text.index("Error codes (stable)") :].split("\n\n")[0]
        listed |= set(re.findall(r"`([a-z0-9_]+)`", block))
    codes = {str(code) for code in ErrorCode}
    assert codes - listed == set(), "codes no page lists"
    assert listed - codes == set(), "codes the pages list that do not exist"
