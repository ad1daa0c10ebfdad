"""Clients: the speech session client (protocol only) and an SSE reader for the agent's stream."""

from streamvoice.client.speech import (
    AudioChunk,
    ControlEvent,
    SpeechClient,
    SpeechError,
    SynthesisResult,
    speak,
)
from streamvoice.client.transports import Transport, TransportClosed, WebSocketTransport

__all__ = [
    "AudioChunk",
    "ControlEvent",
    "SpeechClient",
    "SpeechError",
    "SynthesisResult",
    "Transport",
    "TransportClosed",
    "WebSocketTransport",
    "speak",
]
