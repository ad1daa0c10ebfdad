"""The one error type every surface raises and every client reads: a stable code, a message that says what to
do, the message id; and the HTTP status each code is answered with."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    INVALID_JSON = "invalid_json"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_MESSAGE = "invalid_message"  # valid JSON, but not an object
    UNKNOWN_TYPE = "unknown_type"
    MISSING_TEXT = "missing_text"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    MESSAGE_TOO_LARGE = "message_too_large"
    INVALID_FIELD = "invalid_field"
    UNKNOWN_VOICE = "unknown_voice"
    INVALID_SSML = "invalid_ssml"
    LANGUAGE_UNAVAILABLE = "language_unavailable"  # the voice's language pack is not installed
    INVALID_SPEED = "invalid_speed"
    UNSUPPORTED_FORMAT = "unsupported_format"
    QUEUE_FULL = "queue_full"
    SERVER_BUSY = "server_busy"
    IDLE_TIMEOUT = "idle_timeout"
    SESSION_EXPIRED = "session_expired"
    GOING_AWAY = "going_away"
    CANCELLED = "cancelled"
    SYNTHESIS_FAILED = "synthesis_failed"
    NOT_READY = "not_ready"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"  # a good key asking what only the bootstrap key (AUTH_TOKEN) may: managing keys
    # a tenant past its own share of the machine (the names the vendors' own APIs use for it)
    CONCURRENT_LIMIT_EXCEEDED = "concurrent_limit_exceeded"
    QUOTA_EXCEEDED = "quota_exceeded"
    INTERNAL = "internal_error"
    NOT_FOUND = "not_found"  # no such route (HTTP 404), or no such method on it (405)
    STORE_UNAVAILABLE = "store_unavailable"  # what callers made is kept where the server cannot reach now
    # the agent's turn requests and what can go wrong in a turn
    MISSING_PROMPT = "missing_prompt"
    PROMPT_TOO_LONG = "prompt_too_long"
    INVALID_MODE = "invalid_mode"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    HOST_NOT_ALLOWED = "host_not_allowed"
    SPEECH_UNAVAILABLE = "speech_unavailable"
    SPEECH_FAILED = "speech_failed"
    SPEECH_DISCONNECTED = "speech_disconnected"
    LLM_FAILED = "llm_failed"
    TIMEOUT = "timeout"
    CLOSED = "closed"  # client side: the session ended before a message was answered


# HTTP status for an error code answered over HTTP; everything not listed is a client mistake (400).
HTTP_STATUS = {
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.CONCURRENT_LIMIT_EXCEEDED: 429,
    ErrorCode.QUOTA_EXCEEDED: 429,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.HOST_NOT_ALLOWED: 421,
    ErrorCode.NOT_READY: 503,
    ErrorCode.GOING_AWAY: 503,
    ErrorCode.SERVER_BUSY: 503,
    ErrorCode.TIMEOUT: 408,
    ErrorCode.SPEECH_UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.STORE_UNAVAILABLE: 503,
}


class ProtocolError(Exception):
    """The one error type of every surface: a stable code, a message that says what to do, the message id.

    Raised for a client's mistake on the server side, and by the client when the server answers ``error``
    (then ``code`` is whatever the server sent).
    """

    def __init__(
        self, code: ErrorCode | str, message: str, id: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.id = id
        self.param = param  # the request field at fault, where one is (a wire's error shape may name it)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 400) if isinstance(self.code, ErrorCode) else 400

    def naming(self, id: str | None = None, param: str | None = None) -> ProtocolError:
        """The same error for this message (``id``) or field (``param``): a new one, so an error caught
        and raised again is never changed where something else still holds it."""
        return ProtocolError(
            self.code, self.message, self.id if id is None else id, self.param if param is None else param
        )
