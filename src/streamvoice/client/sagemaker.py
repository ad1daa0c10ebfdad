"""SageMaker transports for the speech client.

- ``SageMakerBidiTransport``: ``InvokeEndpointWithBidirectionalStream`` (HTTP/2, the
  ``aws-sdk-sagemaker-runtime-http2`` SDK, Python >= 3.12). Each frame we send becomes a request payload
  part (UTF8 for JSON text, BINARY for bytes); each response payload part becomes a frame again, so the
  session protocol is exactly the one spoken over a local WebSocket.
- ``ResponseStreamReader``: ``InvokeEndpointWithResponseStream`` for one-shot requests; payload parts are
  cut wherever the service likes, so bytes are buffered and SSE events reassembled before anyone sees them.

A target such as ``sagemaker://streamvoice-kokoro-82m?region=us-east-1`` selects these; callers switch
between a local URL and an endpoint name without other changes (see ``connect_transport``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from streamvoice.client.sse import SSEDecoder, SSEEvent
from streamvoice.client.transports import Transport, TransportClosed, WebSocketTransport
from streamvoice.protocol import DEFAULT_VOICE


@dataclass(frozen=True)
class EndpointTarget:
    endpoint_name: str
    region: str | None = None


def parse_target(target: str) -> EndpointTarget | None:
    """``sagemaker://NAME?region=R`` -> EndpointTarget; URLs for a local server -> None."""
    if not target.startswith("sagemaker://"):
        return None
    parsed = urlparse(target)
    region = parse_qs(parsed.query).get("region", [None])[0]
    if not parsed.netloc:
        raise ValueError("a SageMaker target needs an endpoint name: sagemaker://ENDPOINT?region=REGION")
    return EndpointTarget(parsed.netloc, region)


async def connect_transport(target: str, token: str | None = None) -> Transport:
    endpoint = parse_target(target)
    if endpoint is None:
        return await WebSocketTransport.connect(target, token=token)
    return await SageMakerBidiTransport.connect(endpoint)


# --- request/response translation (pure, tested against the SDK's real types) -------------------------


def to_request_event(frame: str | bytes) -> Any:
    from aws_sdk_sagemaker_runtime_http2.models import RequestPayloadPart, RequestStreamEventPayloadPart

    if isinstance(frame, str):
        return RequestStreamEventPayloadPart(
            value=RequestPayloadPart(bytes_=frame.encode("utf-8"), data_type="UTF8")
        )
    return RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=frame, data_type="BINARY"))


def from_response_event(event: Any) -> str | bytes:
    """A response event -> the frame it carries; stream errors become TransportClosed with the reason."""
    from aws_sdk_sagemaker_runtime_http2 import models as m

    if isinstance(event, m.ResponseStreamEventPayloadPart):
        part = event.value
        data = part.bytes_ or b""
        if part.data_type == "UTF8":
            return data.decode("utf-8", errors="replace")
        return data
    if isinstance(event, m.ResponseStreamEventModelStreamError):
        raise TransportClosed(
            f"model stream error: {event.value.error_code or ''} {event.value.message or ''}".strip()
        )
    if isinstance(event, m.ResponseStreamEventInternalStreamFailure):
        raise TransportClosed(f"internal stream failure: {event.value.message or ''}".strip())
    raise TransportClosed(f"unexpected event {type(event).__name__}")


class SageMakerBidiTransport:
    def __init__(self, stream: Any, client: Any) -> None:
        self._stream = stream
        self._client = client
        self._events: AsyncIterator[Any] | None = None

    @classmethod
    async def connect(cls, target: EndpointTarget) -> SageMakerBidiTransport:
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
        from aws_sdk_sagemaker_runtime_http2.models import InvokeEndpointWithBidirectionalStreamInput

        config = AsyncSageMakerRuntimeHTTP2Config(region=target.region or _default_region())
        client = AsyncSageMakerRuntimeHTTP2Client(config=config)
        stream = await client.invoke_endpoint_with_bidirectional_stream(
            InvokeEndpointWithBidirectionalStreamInput(endpoint_name=target.endpoint_name)
        )
        return cls(stream, client)

    async def send(self, frame: str | bytes) -> None:
        await self._stream.input_stream.send(to_request_event(frame))

    async def recv(self) -> str | bytes:
        if self._events is None:
            output = await self._stream.await_output()
            self._events = aiter(output[1])
        try:
            event = await anext(self._events)
        except StopAsyncIteration:
            raise TransportClosed("the endpoint closed the stream") from None
        return from_response_event(event)

    async def close(self) -> None:
        await self._stream.input_stream.close()


def _default_region() -> str:
    import os

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise ValueError("no AWS region: add ?region=... to the sagemaker:// target or set AWS_REGION")
    return region


# --- InvokeEndpointWithResponseStream ------------------------------------------------------------------


class ResponseStreamReader:
    """Reassemble SSE events from ``PayloadPart`` chunks cut at arbitrary byte offsets."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()

    def feed_event(self, event: dict[str, Any]) -> list[SSEEvent]:
        if "PayloadPart" in event:
            return self._decoder.feed(event["PayloadPart"].get("Bytes", b""))
        for key in ("ModelStreamError", "InternalStreamFailure"):
            if key in event:
                raise TransportClosed(f"{key}: {event[key].get('Message', '')}")
        return []

    def events(self, body: Iterable[dict[str, Any]]) -> Iterator[SSEEvent]:
        for event in body:
            yield from self.feed_event(event)
        yield from self._decoder.flush()


def synthesize_via_response_stream(
    endpoint_name: str, text: str, voice: str = DEFAULT_VOICE, fmt: str = "pcm", runtime_client: Any = None
) -> bytes:
    """One-shot synthesis through ``InvokeEndpointWithResponseStream``; returns the audio bytes."""
    import base64

    if runtime_client is None:
        import boto3

        runtime_client = boto3.client("sagemaker-runtime")
    response = runtime_client.invoke_endpoint_with_response_stream(
        EndpointName=endpoint_name,
        ContentType="application/json",
        Accept="text/event-stream",
        Body=json.dumps({"text": text, "voice": voice, "format": fmt, "stream": "sse"}),
    )
    audio = bytearray()
    for event in ResponseStreamReader().events(response["Body"]):
        payload = event.json()
        if payload.get("type") == "audio_chunk":
            audio += base64.b64decode(payload["data"])
    return bytes(audio)
