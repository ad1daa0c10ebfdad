"""Voice catalogue and voice specs (single voices and weighted blends).

A voice spec is what callers write: ``af_heart``, ``af_heart*0.7+am_michael*0.3``, or Kokoro-FastAPI's
``af_heart(2)+am_michael(1)`` (so its users' blends work unchanged). Parsing is pure so
the protocol layer can reject a bad spec before any model work is queued.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamvoice.protocol import MAX_VOICE_CHARS

# Kokoro's first letter is the language, the second the voice's gender.
LANGUAGES: dict[str, tuple[str, str]] = {
    "a": ("en-us", "American English"),
    "b": ("en-gb", "British English"),
    "e": ("es", "Spanish"),
    "f": ("fr-fr", "French"),
    "h": ("hi", "Hindi"),
    "i": ("it", "Italian"),
    "j": ("ja", "Japanese"),
    "p": ("pt-br", "Brazilian Portuguese"),
    "z": ("cmn", "Mandarin Chinese"),
}
GENDERS = {"f": "female", "m": "male"}
SUPPORTED_LANGS = sorted({code for code, _ in LANGUAGES.values()})
MAX_BLEND_PARTS = 8


class VoiceError(ValueError):
    """An unknown voice or a malformed blend; the message names close matches."""


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    lang: str
    language: str
    gender: str


@dataclass(frozen=True)
class VoiceSpec:
    """A parsed voice request: (name, weight) parts with weights summing to one."""

    parts: tuple[tuple[str, float], ...]

    @property
    def primary(self) -> str:
        return max(self.parts, key=lambda p: p[1])[0]

    @property
    def text(self) -> str:
        if len(self.parts) == 1:
            return self.parts[0][0]
        return "+".join(f"{n}*{w:g}" for n, w in self.parts)


def describe(name: str) -> VoiceInfo:
    lang, language = LANGUAGES.get(name[:1], ("en-us", "unknown"))
    gender = GENDERS.get(name[1:2], "unknown")
    return VoiceInfo(name=name, lang=lang, language=language, gender=gender)


def default_lang(spec: VoiceSpec) -> str:
    return describe(spec.primary).lang


MAX_WEIGHT = 1000.0
# Linear-time pieces only: a name is two letters, "_", then letters, digits or "_"; a weight is a plain
# decimal. Each is matched whole against one part, never searched, so no input can make them backtrack.
_NAME_RE = re.compile(r"[a-z]{2}_[a-z0-9_]+")
_WEIGHT_RE = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?|\.[0-9]{1,12}")


def parse_voice_spec(spec: str, known: frozenset[str] | set[str]) -> VoiceSpec:
    if not isinstance(spec, str) or not spec.strip():
        raise VoiceError(
            "voice must be a non-empty string such as 'af_heart' or 'af_heart*0.7+am_michael*0.3'"
        )
    if len(spec) > MAX_VOICE_CHARS:
        raise VoiceError(f"voice is {len(spec)} characters long; the limit is {MAX_VOICE_CHARS}")
    raw_parts = spec.split("+")
    if len(raw_parts) > MAX_BLEND_PARTS:
        raise VoiceError(f"a blend may mix at most {MAX_BLEND_PARTS} voices")
    parsed: list[tuple[str, float]] = []
    for raw in raw_parts:
        name, star, weight_text = _split_part(raw.lower().strip())
        if not _NAME_RE.fullmatch(name) or (star and not _WEIGHT_RE.fullmatch(weight_text)):
            raise VoiceError(
                f"cannot read voice part {raw.strip()[:40]!r}; write NAME, NAME*WEIGHT or NAME(WEIGHT), "
                "joined with '+', e.g. 'af_heart*0.7+am_michael*0.3' or 'af_heart(2)+am_michael(1)'"
            )
        if name not in known:
            raise VoiceError(unknown_voice_message(name, known))
        weight = float(weight_text) if star else 1.0
        if not 0 < weight <= MAX_WEIGHT:
            raise VoiceError(f"voice weight for {name} must be above 0 and at most {MAX_WEIGHT:g}")
        parsed.append((name, weight))
    total = sum(w for _, w in parsed)
    return VoiceSpec(parts=tuple((n, w / total) for n, w in parsed))


def _split_part(part: str) -> tuple[str, bool, str]:
    """(name, has weight, weight text) from ``name``, ``name*w`` or ``name(w)``."""
    if part.endswith(")") and "(" in part:
        name, _, rest = part.partition("(")
        return name.strip(), True, rest[:-1].strip()
    name, star, weight = part.partition("*")
    return name.strip(), bool(star), weight.strip()


def unknown_voice_message(name: str, known: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"unknown voice {name[:40]!r}.{hint} Run `streamvoice voices` for all {len(known)}."


def blend_style(spec: VoiceSpec, packs: dict[str, NDArray[np.float32]]) -> NDArray[np.float32]:
    """Weighted sum of style packs; the pack keeps its (rows, 1, 256) shape so row lookup is unchanged."""
    if len(spec.parts) == 1:
        return packs[spec.parts[0][0]]
    out = np.zeros_like(packs[spec.parts[0][0]])
    for name, weight in spec.parts:
        out += np.float32(weight) * packs[name]
    return out
