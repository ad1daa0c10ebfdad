"""``server.access_log``: a key a caller put in the query string never reaches uvicorn's access log."""

from __future__ import annotations

import logging

from streamvoice.server.access_log import RedactKeys, redact_query


def test_key_like_parameters_are_redacted_and_the_rest_kept() -> None:
    path = "/tts/websocket?api_key=sk-secret&cartesia_version=2025-04-16&access_token=t0k"
    assert redact_query(path) == "/tts/websocket?api_key=***&cartesia_version=2025-04-16&access_token=***"
    assert redact_query("/v1/text-to-speech/v/stream-input?XI_API_KEY=abc") == (
        "/v1/text-to-speech/v/stream-input?XI_API_KEY=***"
    )
    assert redact_query("/v1/speak?model=aura-2-thalia-en") == "/v1/speak?model=aura-2-thalia-en"
    assert redact_query("/ping") == "/ping"


def test_the_access_log_line_carries_no_key(caplog: object) -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/tts/websocket?api_key=sk-secret", "1.1", 101), None,
    )  # fmt: skip
    assert RedactKeys().filter(record)
    assert "sk-secret" not in record.getMessage() and "api_key=***" in record.getMessage()
