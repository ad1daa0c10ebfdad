"""uvicorn's access log without callers' keys: browsers cannot set headers on a WebSocket, so vendor SDKs put
the key in the query string (Cartesia's ``api_key`` / ``access_token``, ElevenLabs' ``xi_api_key``), and the
access log wrote it in clear. Each key-like parameter's value is replaced before the line is written.
Checked by ``pytest tests/test_access_log.py``."""

from __future__ import annotations

import logging
import re

# Parameter names that carry a secret on some wire (and the generic ones a client may try).
KEY_PARAMETERS = ("api_key", "xi_api_key", "xi-api-key", "access_token", "token", "key", "authorization")
_KEY_VALUE = re.compile(r"(?i)([?&](?:" + "|".join(re.escape(k) for k in KEY_PARAMETERS) + r")=)[^&#\s]*")


def redact_query(path: str) -> str:
    """``path`` with every key-like query parameter's value replaced by ``***``."""
    return _KEY_VALUE.sub(r"\1***", path) if "?" in path else path


class RedactKeys(logging.Filter):
    """On ``uvicorn.access``: its record's third argument is the request's path with its query."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_query(args[2]), *args[3:])
        return True


def install() -> None:
    """Once uvicorn has configured its loggers (``uvicorn.Config`` does, when it is made)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactKeys) for f in access.filters):
        access.addFilter(RedactKeys())
