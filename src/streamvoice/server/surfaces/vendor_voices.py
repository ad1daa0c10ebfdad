"""Which of our voices a vendor's voice field names: ElevenLabs' ``voice_id``, Cartesia's ``voice.id``,
Deepgram's ``model``.

Our own names and blends pass through. A vendor's id (an agent that never set a voice sends its plugin's
default, such as ElevenLabs' ``hpp4J3VqNfWAUOO0d1Us`` or ``aura-2-andromeda-en``) is looked up in the map
file (``STREAMVOICE_VENDOR_VOICES_FILE``: JSON, vendor id -> our voice), and otherwise speaks with the
server's default voice, logged once per id, so the agent still speaks; ``STREAMVOICE_VENDOR_VOICES_STRICT``
refuses it instead (``unknown_voice``, in the vendor's error shape). Checked by
``pytest tests/test_vendor_voices.py``.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Mapping
from pathlib import Path

from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.voices import LANGUAGES, VoiceError
from streamvoice.protocol import DEFAULT_VOICE, MAX_VOICE_CHARS, ErrorCode, ProtocolError
from streamvoice.server.core.service import SpeechService

log = logging.getLogger("streamvoice.vendor")

MAX_MAPPED = 10_000  # entries in a map file: more is a mistake


def load_vendor_voices(path: str | None) -> dict[str, str]:
    """The map file, checked; a bad one stops the start with a message naming the file."""
    if not path:
        return {}
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"STREAMVOICE_VENDOR_VOICES_FILE {path}: {exc}") from None
    if not isinstance(raw, dict) or len(raw) > MAX_MAPPED:
        raise ValueError(
            f"STREAMVOICE_VENDOR_VOICES_FILE {path}: must be a JSON object of at most {MAX_MAPPED} entries, "
            'vendor voice id -> our voice, e.g. {"21m00Tcm4TlvDq8ikWAM": "af_bella"}'
        )
    bad = [k for k, v in raw.items() if not isinstance(v, str) or not v.strip() or len(v) > MAX_VOICE_CHARS]
    if bad:
        raise ValueError(f"STREAMVOICE_VENDOR_VOICES_FILE {path}: {bad[0]!r} must map to one of our voices")
    return {str(k): v.strip() for k, v in raw.items()}


class VendorVoices:
    def __init__(self, engine: KokoroEngine, mapping: Mapping[str, str], strict: bool = False) -> None:
        self.engine = engine
        self.mapping = dict(mapping)
        self.strict = strict
        self._told: set[str] = set()

    def check(self) -> None:
        """Every mapped voice exists (at start: a typo in the file is found before a caller finds it)."""
        for vendor_id, ours in self.mapping.items():
            try:
                self.engine.parse_voice(ours)
            except VoiceError as exc:
                raise ValueError(
                    f"STREAMVOICE_VENDOR_VOICES_FILE: {vendor_id!r} -> {ours!r}: {exc}"
                ) from None

    def resolve(self, raw: object, vendor: str, default: str = DEFAULT_VOICE) -> str:
        """Our voice for a vendor's voice field."""
        if not isinstance(raw, str) or not raw.strip():
            return default
        name = raw.strip()[:MAX_VOICE_CHARS]
        if name in self.mapping:
            return self.mapping[name]
        try:
            self.engine.parse_voice(name)
            return name
        except VoiceError:
            pass
        if self.strict:
            raise ProtocolError(
                ErrorCode.UNKNOWN_VOICE,
                f"{vendor} voice {name[:64]!r} is not one of this server's voices and not in its vendor voice "
                "map; send one of ours (GET the voices route), such as af_heart, or map it in "
                "STREAMVOICE_VENDOR_VOICES_FILE",
            )
        if name not in self._told and len(self._told) < MAX_MAPPED:
            self._told.add(name)
            log.info("%s voice %r is not ours and not mapped: speaking with %s", vendor, name[:64], default)
        return default


_BY_SERVICE: weakref.WeakKeyDictionary[SpeechService, VendorVoices] = weakref.WeakKeyDictionary()


def vendor_voices(service: SpeechService) -> VendorVoices:
    """The service's vendor voice map (``STREAMVOICE_VENDOR_VOICES_FILE``), read once. The app asks for it at
    start (``check``), so a bad file stops the server before a caller finds it; the core knows nothing of it."""
    voices = _BY_SERVICE.get(service)
    if voices is None:
        config = service.config
        voices = VendorVoices(
            service.engine, load_vendor_voices(config.vendor_voices_file), config.vendor_voices_strict
        )
        _BY_SERVICE[service] = voices
    return voices


def vendor_language(raw: object, keep_unknown: bool = True) -> str | None:
    """A vendor's language field ("es", "fr", "pt", "zh", "en", or a Kokoro letter) as our code
    ("es", "fr-fr", "pt-br", "cmn", "en-us"); an unknown code is passed on for the request's own check
    (``keep_unknown``) or dropped (Deepgram's model suffixes, where "-en" may just be a name). A language
    that is not text is ``invalid_field`` (a number or a list was ignored without a word)."""
    if raw is not None and not isinstance(raw, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, 'the language must be a code such as "es" or "fr"')
    if raw is None or not raw.strip():
        return None
    code = raw.strip().lower()
    for short, (ours, _) in LANGUAGES.items():
        if code in (short, ours) or ours.startswith(code + "-") or (code == "zh" and ours == "cmn"):
            return ours
    return code if keep_unknown else None
