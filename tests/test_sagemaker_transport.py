"""The SageMaker transports, as far as they can be tested without AWS: request/response translation against
the SDK's real types, and response-stream reassembly with payload parts cut at every byte offset."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from aws_sdk_sagemaker_runtime_http2 import models as m

from streamvoice.client.sagemaker import (
    EndpointTarget,
    ResponseStreamReader,
    from_response_event,
    parse_target,
    to_request_event,
)
from streamvoice.client.transports import TransportClosed
from streamvoice.protocol import decode_client_frame
from tests.helpers import RunningServer


def test_text_frames_go_as_utf8_parts_and_binary_as_binary() -> None:
    text_event = to_request_event('{"type": "synthesize", "text": "Hi."}')
    assert isinstance(text_event, m.RequestStreamEventPayloadPart)
    assert text_event.value.data_type == "UTF8"
    # what the server receives from SageMaker (binary frame bytes) decodes to the same message
    assert decode_client_frame(text_event.value.bytes_).text == "Hi."
    binary_event = to_request_event(b"\x00\x01")
    assert binary_event.value.data_type == "BINARY" and binary_event.value.bytes_ == b"\x00\x01"


def test_response_parts_become_frames_and_errors_close() -> None:
    audio = m.ResponseStreamEventPayloadPart(
        value=m.ResponsePayloadPart(bytes_=b"{\x00\x01", data_type="BINARY")
    )
    assert from_response_event(audio) == b"{\x00\x01"
    control = m.ResponseStreamEventPayloadPart(
        value=m.ResponsePayloadPart(bytes_=b'{"type": "error"}', data_type="UTF8")
    )
    assert from_response_event(control) == '{"type": "error"}'
    err = m.ResponseStreamEventModelStreamError(
        value=m.ModelStreamError(message="boom", error_code="ModelError")
    )
    with pytest.raises(TransportClosed, match="boom"):
        from_response_event(err)


def test_targets() -> None:
    assert parse_target("sagemaker://streamvoice-kokoro-82m?region=eu-west-1") == EndpointTarget(
        "streamvoice-kokoro-82m", "eu-west-1"
    )
    assert parse_target("http://127.0.0.1:8080") is None
    with pytest.raises(ValueError):
        parse_target("sagemaker://")


def test_response_stream_reassembled_at_every_cut(speech_server: RunningServer) -> None:
    body = httpx.post(
        speech_server.url + "/invocations", json={"text": "Hi.", "stream": "sse", "format": "mp3"}, timeout=60
    ).content
    expected_audio = b"".join(
        base64.b64decode(json.loads(block[6:])["data"])
        for block in body.decode().split("\n\n")
        if block and json.loads(block[6:])["type"] == "audio_chunk"
    )
    assert expected_audio
    for cut in range(len(body) + 1):
        parts = [{"PayloadPart": {"Bytes": body[:cut]}}, {"PayloadPart": {"Bytes": body[cut:]}}]
        events = [e.json() for e in ResponseStreamReader().events(parts)]
        assert events[0]["type"] == "audio_start" and events[-1]["type"] == "audio_end"
        audio = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "audio_chunk")
        assert audio == expected_audio, cut
    with pytest.raises(TransportClosed):
        list(ResponseStreamReader().events([{"ModelStreamError": {"Message": "x"}}]))
