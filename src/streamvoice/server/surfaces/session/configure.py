"""A session's ``configure``: what later messages inherit, and the ``configured`` answer that says what is now
in force. Checked by resolving a request with the candidate defaults before they are taken."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from streamvoice.protocol import Configure, Pauses
from streamvoice.server.core.requests import SessionDefaults


def configured(defaults: SessionDefaults, msg: Configure, server_pauses: Pauses) -> SessionDefaults:
    """A session's defaults after a ``configure`` (not yet checked: resolve a request with them)."""
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("voice", msg.voice),
            ("speed", msg.speed),
            ("format", msg.format),
            ("lang", msg.lang),
            ("sample_rate", msg.sample_rate),
        )
        if v is not None
    }
    if msg.pauses is not None:
        changes["pauses"] = replace(defaults.pauses or server_pauses, **msg.pauses)
    if msg.lexicon is not None:
        changes["lexicon"] = msg.lexicon
    return replace(defaults, **changes)


def configured_body(defaults: SessionDefaults, server_pauses: Pauses) -> dict[str, Any]:
    """The ``configured`` answer: the values now in force."""
    return {
        "voice": defaults.voice,
        "speed": defaults.speed,
        "format": defaults.format,
        "lang": defaults.lang,
        "sample_rate": defaults.sample_rate,
        "pauses": asdict(defaults.pauses or server_pauses),
        "lexicon_entries": len(defaults.lexicon),
    }
