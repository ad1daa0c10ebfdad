"""The Wyoming reader over bytes nobody vouches for: every length checked before anything is read."""

from __future__ import annotations

import asyncio
import json

import pytest

from streamvoice.protocol import ErrorCode
from streamvoice.server.surfaces.wyoming.wire import WireError, WireLimits, read_event


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _event(header: dict[str, object], data: bytes = b"", payload: bytes = b"") -> bytes:
    return json.dumps(header).encode() + b"\n" + data + payload


async def test_an_event_with_data_and_payload_is_read_whole_and_merged() -> None:
    data = json.dumps({"text": "hello"}).encode()
    wire = _event({"type": "synthesize", "data": {"voice": {"name": "af_heart"}}, "data_length": len(data),
                   "payload_length": 3}, data, b"abc")  # fmt: skip
    event = await read_event(_reader(wire), WireLimits())
    assert event is not None and event.type == "synthesize"
    assert event.data == {"voice": {"name": "af_heart"}, "text": "hello"} and event.payload == b"abc"
    assert await read_event(_reader(b""), WireLimits()) is None


@pytest.mark.parametrize("length", [4 << 30, 1.5, -1, "10", True, [1]])
async def test_a_declared_length_it_refuses_ends_the_framing(length: object) -> None:
    with pytest.raises(WireError) as err:
        await read_event(_reader(_event({"type": "synthesize", "data_length": length})), WireLimits())
    assert err.value.fatal
    expected = ErrorCode.MESSAGE_TOO_LARGE if length == 4 << 30 else ErrorCode.INVALID_MESSAGE
    assert err.value.code == expected


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (b"not json\n", ErrorCode.INVALID_JSON),
        (b"[1, 2]\n", ErrorCode.INVALID_MESSAGE),
        (_event({"data": {}}), ErrorCode.INVALID_MESSAGE),
        (_event({"type": "x" * 65}), ErrorCode.INVALID_MESSAGE),
        (_event({"type": "synthesize", "data": [1]}), ErrorCode.INVALID_MESSAGE),
        (_event({"type": "synthesize", "data_length": 4}, b"nope"), ErrorCode.INVALID_JSON),
    ],
)
async def test_a_bad_event_whose_length_is_known_is_answered_and_the_stream_goes_on(
    wire: bytes, code: ErrorCode
) -> None:
    reader = _reader(wire + _event({"type": "describe"}))
    with pytest.raises(WireError) as err:
        await read_event(reader, WireLimits())
    assert err.value.code == code and not err.value.fatal
    nxt = await read_event(reader, WireLimits())
    assert nxt is not None and nxt.type == "describe"  # framing held: the next event is read


async def test_declared_data_that_never_comes_times_out() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(_event({"type": "synthesize", "data_length": 100}))
    with pytest.raises(WireError) as err:
        await read_event(reader, WireLimits(read_timeout_s=0.05))
    assert err.value.code == ErrorCode.TIMEOUT and err.value.fatal


async def test_a_connection_closed_mid_event_is_the_end_of_the_stream() -> None:
    assert await read_event(_reader(b'{"type": "describe"'), WireLimits()) is None
    assert await read_event(_reader(_event({"type": "x", "data_length": 10}, b"abc")), WireLimits()) is None
