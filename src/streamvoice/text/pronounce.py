"""Pronunciation control: an SSML subset, misaki's inline syntax and lexicons, turned into plain text with
spans the normaliser takes as they are, and segments that carry a pause or a speaking rate.

- misaki's inline ``[word](/phonemes/)`` on every surface and in every language (misaki only reads it in
  English).
- A lexicon, word -> phonemes (``/kəkˈɔɹO/``) or -> a respelling (``"koh-koh-roh"``): per server (a JSON
  file) and per session (``configure`` with ``lexicon``); the session's entries win.
- SSML when a message starts with ``<speak>`` (or says ``"ssml": true``): ``break``, ``sub``, ``say-as``
  (characters, cardinal, ordinal, digits, telephone, date, time), ``phoneme`` (IPA, converted to Kokoro's
  symbols), ``prosody rate``. Unknown tags are spoken as their text; malformed markup is ``MarkupError``
  with its position.

Spans travel inside the text between private-use marks, so the chunker and the normaliser keep them
whole: ``SAY`` (a written form and what to say), ``PHONEMES`` (a written form and its phonemes).
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streamvoice.text.lexicon import apply_lexicon
from streamvoice.text.marks import phoneme_span, say_span
from streamvoice.text.numbers import cardinal, digits, ordinal

MAX_BREAK_MS = 5_000
# Explicit silence (SSML breaks) one message may ask for in all; past it the message is refused, so a
# 10 KB message cannot hold a listener slot for most of an hour of silence.
MAX_SILENCE_MS = 60_000
# A span's written or spoken form is at most this long: a span is never cut (the chunker keeps it in one
# piece), so it must fit in one.
MAX_SPAN_CHARS = 200
MAX_SSML_DEPTH = 32  # elements inside elements; deeper is refused (it is never real markup)
RATES = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
MIN_RATE, MAX_RATE = 0.5, 2.0


class MarkupError(ValueError):
    """Malformed SSML or inline markup; ``position`` is the character where it went wrong."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at character {position})")
        self.position = position


@dataclass(frozen=True)
class Segment:
    """A stretch of text spoken at ``rate`` (times the request's speed), then ``pause_ms`` of silence
    (None: the pause its punctuation calls for)."""

    text: str
    pause_ms: int | None = None
    rate: float = 1.0


def to_segments(
    text: str, ssml: bool | None, lexicon: Mapping[str, str], british: bool = False, lang: str = "en-us"
) -> list[Segment]:
    """A message as segments to plan: SSML parsed when asked for (or when it starts with ``<speak>``),
    inline phonemes and the lexicon applied to each segment's text. ``lang``: whose words ``say-as``
    reads numbers and letters in."""
    if ssml and not is_ssml(text):
        text = f"<speak>{text}</speak>"  # "ssml": true on a fragment
    markup = ssml or (ssml is None and is_ssml(text))
    parts = parse_ssml(text, british, lang) if markup else [Segment(text)]
    return [Segment(apply_lexicon(apply_inline(s.text), lexicon), s.pause_ms, s.rate) for s in parts]


def written_text(text: str, ssml: bool | None) -> str:
    """A message as its caller reads it: SSML reduced to its text, ``[word](/phonemes/)`` to the word
    (what an answer cut off reports as heard and unheard, ``server.core.heard``)."""
    markup = ssml or (ssml is None and is_ssml(text))
    if markup and "<!DOCTYPE" not in text and "<!ENTITY" not in text:  # refused when planned, never parsed
        source = text if is_ssml(text) else f"<speak>{text}</speak>"
        with contextlib.suppress(ET.ParseError):  # the message fails to plan and says why
            text = "".join(ET.fromstring(source.strip()).itertext())
    return _INLINE.sub(lambda m: m[1], text)


# --- IPA to Kokoro's symbols ----------------------------------------------------------------------------

IPA_TO_KOKORO: tuple[tuple[str, str], ...] = (
    ("t͡ʃ", "ʧ"),
    ("d͡ʒ", "ʤ"),
    ("tʃ", "ʧ"),
    ("dʒ", "ʤ"),
    ("t͡s", "ʦ"),
    ("ts", "ʦ"),
    ("eɪ", "A"),
    ("aɪ", "I"),
    ("aʊ", "W"),
    ("oʊ", "O"),
    ("əʊ", "Q"),
    ("ɔɪ", "Y"),
    ("ɝ", "ɜɹ"),
    ("ɚ", "əɹ"),
    ("r", "ɹ"),
    ("g", "ɡ"),
    ("'", "ˈ"),
    (",", "ˌ"),
    (".", ""),
    ("\u0361", ""),
)


def ipa_to_kokoro(ipa: str, british: bool = False) -> str:
    """IPA as SSML writers know it (``təˈmeɪtoʊ``) in the symbols the voices were trained on (``təmˈAtO``
    keeps its stress mark before the vowel's syllable, as written)."""
    out = ipa.strip().strip("/[]")
    for old, new in IPA_TO_KOKORO:
        out = out.replace(old, new)
    if not british:
        out = out.replace("ː", "")
    return out


# --- inline syntax and lexicons -------------------------------------------------------------------------

_INLINE = re.compile(r"\[([^\[\]\n]{1,100})\]\(/([^/\n]{1,200})/\)")


def apply_inline(text: str) -> str:
    """misaki's ``[word](/phonemes/)``: the word keeps its place in the caption, the phonemes are said."""
    return _INLINE.sub(lambda m: phoneme_span(m[1], m[2]), text)


# --- SSML ------------------------------------------------------------------------------------------------


_SPEAK = re.compile(r"\s*<speak(?=[\s>/])")
_START_TAG = re.compile(r"<(?![!?/])")


def is_ssml(text: str) -> bool:
    """A ``<speak>`` element starts the text (``<speaker>`` or ``<speaking>`` is plain text)."""
    return _SPEAK.match(text) is not None


@dataclass
class _Walk:
    """What one SSML walk carries: the reading's language, where each element starts, the silence so far."""

    british: bool
    lang: str
    where: dict[int, int]  # id(element) -> its character offset in the text
    silence_ms: int = 0
    buffer: str = ""  # the text of the segment being built

    def at(self, node: ET.Element) -> int:
        return self.where.get(id(node), 0)


def parse_ssml(text: str, british: bool = False, lang: str = "en-us") -> list[Segment]:
    """``<speak>...</speak>`` as segments; ``MarkupError`` with the position where it went wrong."""
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise MarkupError("SSML may not declare a DOCTYPE or entities", text.find("<!"))
    source = text.strip()
    try:
        root = ET.fromstring(source)
    except ET.ParseError as exc:
        line, column = exc.position
        offset = sum(len(x) + 1 for x in source.split("\n")[: line - 1]) + column
        raise MarkupError(f"malformed SSML: {str(exc).split(':')[0]}", offset) from None
    if _local(root.tag) != "speak":
        raise MarkupError("SSML must be one <speak> element", 0)
    # Elements come in document order, as their start tags do: each element's offset, for errors.
    starts = [m.start() + len(text) - len(text.lstrip()) for m in _START_TAG.finditer(source)]
    walk = _Walk(british, lang, {id(e): at for e, at in zip(root.iter(), starts, strict=False)})
    segments: list[Segment] = []
    _walk(root, 1.0, segments, walk, 0)
    return [s for s in segments if s.text.strip() or s.pause_ms]


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1].lower()


def _walk(node: ET.Element, rate: float, out: list[Segment], walk: _Walk, depth: int) -> None:
    """Depth first; ``walk.buffer`` collects the text of the current segment."""
    if depth > MAX_SSML_DEPTH:
        raise MarkupError(f"SSML is nested more than {MAX_SSML_DEPTH} elements deep", walk.at(node))
    walk.buffer += node.text or ""
    for child in node:
        tag = _local(child.tag)
        if tag == "break":
            pause = _break_ms(child, walk.at(child))
            walk.silence_ms += pause
            if walk.silence_ms > MAX_SILENCE_MS:
                raise MarkupError(
                    f"the breaks add up to more than {MAX_SILENCE_MS // 1000} s of silence, the most one message "
                    "may ask for; send the rest as another message",
                    walk.at(child),
                )
            out.append(Segment(walk.buffer, pause, rate))
            walk.buffer = ""
        elif tag == "prosody" and child.get("rate") is not None:
            inner = rate * _rate(child.get("rate", ""), walk.at(child))
            out.append(Segment(walk.buffer, None, rate))
            walk.buffer = ""
            _walk(child, inner, out, walk, depth + 1)
            out.append(Segment(walk.buffer, None, inner))
            walk.buffer = ""
        elif tag == "sub" and child.get("alias") is not None:
            walk.buffer += _span(say_span, "".join(child.itertext()), child.get("alias", ""), walk.at(child))
        elif tag == "phoneme" and child.get("ph"):
            said = ipa_to_kokoro(child.get("ph", ""), walk.british)
            walk.buffer += _span(phoneme_span, "".join(child.itertext()), said, walk.at(child))
        elif tag == "say-as":
            written = "".join(child.itertext())
            kind = child.get("interpret-as", "").strip().lower()
            if kind in SAY_AS:
                walk.buffer += _span(say_span, written, say_as(written, kind, walk.lang), walk.at(child))
            else:  # date, time and the rest: the normaliser reads them as they are written
                walk.buffer += written
        else:  # an unknown tag (or p, s, emphasis): its text is spoken, never dropped
            _walk(child, rate, out, walk, depth + 1)
            if tag in ("p", "s"):
                walk.buffer += " "
        walk.buffer += child.tail or ""
    if depth == 0:
        out.append(Segment(walk.buffer, None, rate))
        walk.buffer = ""


def _span(make: Callable[[str, str], str], written: str, said: str, at: int) -> str:
    """A span, or ``MarkupError`` when either form is too long to be kept whole in one piece."""
    longest = max(len(written.strip()), len(said.strip()))
    if longest > MAX_SPAN_CHARS:
        raise MarkupError(
            f"a <sub>, <phoneme> or <say-as> holds {longest} characters; the limit is {MAX_SPAN_CHARS}. "
            "Split it into several elements",
            at,
        )
    return make(written, said)


def _break_ms(node: ET.Element, at: int) -> int:
    time = (node.get("time") or "").strip().lower()
    strength = {"none": 0, "x-weak": 100, "weak": 200, "medium": 400, "strong": 700, "x-strong": 1000}
    if not time:
        return strength.get((node.get("strength") or "medium").lower(), 400)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)", time)
    if m is None:
        raise MarkupError(f'<break time="{time[:20]}"> must be like "500ms" or "1.5s"', at)
    ms = float(m[1]) * (1000 if m[2] == "s" else 1)
    return int(min(ms, MAX_BREAK_MS))


def _rate(raw: str, at: int) -> float:
    raw = raw.strip().lower()
    if raw in RATES:
        return RATES[raw]
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(%?)", raw)
    if m is None:
        raise MarkupError(f'<prosody rate="{raw[:20]}"> must be x-slow..x-fast, a percentage or a number', at)
    value = float(m[1]) / (100 if m[2] else 1)
    return min(MAX_RATE, max(MIN_RATE, value))


SAY_AS = ("characters", "spell-out", "verbatim", "digits", "telephone", "cardinal", "ordinal")


MAX_SAID_DIGITS = 36  # a cardinal longer than this is an identifier: read digit by digit


def say_as(text: str, interpret: str, lang: str = "en-us") -> str:
    """``say-as``: what a written form is said as, by how it is to be interpreted, in ``lang``'s words.

    English is spelled out here; in other languages the span says digits and letters apart, and the
    language's own reading (its phonemiser) says each in its words: "12" with a Japanese voice is じゅうに,
    never "twelve"."""
    kind = interpret.strip().lower()
    bare = text.strip()
    english = lang.startswith("en")
    if kind in ("characters", "spell-out", "verbatim"):
        return " ".join(ch for ch in bare if not ch.isspace())
    if kind == "digits":
        return digits(bare) if english else " ".join(ch for ch in bare if ch.isdecimal())
    if kind == "telephone":
        groups = re.findall(r"\d+", bare)
        if not english:
            return ", ".join(" ".join(g) for g in groups)
        return ", ".join(digits(g) for g in groups)
    number = bare.replace(",", "")
    whole = number.lstrip("-")
    if kind == "cardinal" and whole.isascii() and whole.isdigit():
        if len(whole) > MAX_SAID_DIGITS:
            return digits(number) if english else " ".join(whole)
        return cardinal(int(number)) if english else number
    ordinal_digits = number.rstrip("stndrhºª°.eè")
    if kind == "ordinal" and ordinal_digits.isascii() and ordinal_digits.isdigit():
        if len(ordinal_digits) > MAX_SAID_DIGITS:
            return digits(ordinal_digits) if english else " ".join(ordinal_digits)
        return ordinal(int(ordinal_digits)) if english else bare
    return bare
