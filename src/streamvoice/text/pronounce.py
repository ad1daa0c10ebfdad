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

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streamvoice.text.numbers import cardinal, digits, ordinal

SAY, PHONEMES, SEP, END = "\ue000", "\ue003", "\ue001", "\ue002"
SPACE = "\ue004"  # a space inside a span: the chunker never cuts there
MARKS = SAY + PHONEMES + SEP + END + SPACE
MAX_LEXICON_ENTRIES = 512
MAX_LEXICON_CHARS = 128
MAX_BREAK_MS = 5_000
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


def say_span(written: str, spoken: str) -> str:
    return f"{SAY}{_clean(written)}{SEP}{_clean(spoken)}{END}"


def phoneme_span(written: str, phonemes: str) -> str:
    return f"{PHONEMES}{_clean(written)}{SEP}{_clean(phonemes)}{END}"


def _clean(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch not in MARKS).split()).replace(" ", SPACE)


def to_segments(
    text: str, ssml: bool | None, lexicon: Mapping[str, str], british: bool = False
) -> list[Segment]:
    """A message as segments to plan: SSML parsed when asked for (or when it starts with ``<speak>``),
    inline phonemes and the lexicon applied to each segment's text."""
    if ssml and not is_ssml(text):
        text = f"<speak>{text}</speak>"  # "ssml": true on a fragment
    parts = parse_ssml(text, british) if ssml or (ssml is None and is_ssml(text)) else [Segment(text)]
    return [Segment(apply_lexicon(apply_inline(s.text), lexicon), s.pause_ms, s.rate) for s in parts]


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


def check_lexicon(raw: object) -> dict[str, str]:
    """A lexicon from a caller or a file, bounded, or ``ValueError`` saying what to send."""
    if not isinstance(raw, Mapping):
        raise ValueError('"lexicon" must be an object of word -> "/phonemes/" or word -> respelling')
    if len(raw) > MAX_LEXICON_ENTRIES:
        raise ValueError(f'"lexicon" has {len(raw)} entries; the limit is {MAX_LEXICON_ENTRIES}')
    out: dict[str, str] = {}
    for word, said in raw.items():
        if not isinstance(word, str) or not isinstance(said, str) or not word.strip() or not said.strip():
            raise ValueError('each "lexicon" entry maps a word (a string) to "/phonemes/" or a respelling')
        if len(word) > MAX_LEXICON_CHARS or len(said) > MAX_LEXICON_CHARS:
            raise ValueError(f'"lexicon" words and pronunciations are at most {MAX_LEXICON_CHARS} characters')
        out[word.strip()] = said.strip()
    return out


def apply_lexicon(text: str, lexicon: Mapping[str, str]) -> str:
    """Each lexicon word (whole words; exact case first, then any case) said as its entry says."""
    if not lexicon:
        return text
    by_lower = {w.lower(): s for w, s in lexicon.items()}
    pattern = _lexicon_pattern(tuple(sorted(lexicon, key=len, reverse=True)))

    def replace(m: re.Match[str]) -> str:
        said = lexicon.get(m[1]) or by_lower[m[1].lower()]
        if said.startswith("/") and said.endswith("/") and len(said) > 2:
            return phoneme_span(m[1], said[1:-1])
        return say_span(m[1], said)

    return _outside_spans(text, lambda part: pattern.sub(replace, part))


@functools.lru_cache(maxsize=64)
def _lexicon_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern per lexicon, longest words first, compiled once (a server's or a session's lexicon
    is the same for each of its messages, and 512 entries take a moment to compile)."""
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(r"(?<![\w" + MARKS + r"])(" + alternatives + r")(?![\w])", re.IGNORECASE)


def _outside_spans(text: str, change: Callable[[str], str]) -> str:
    parts = re.split(f"([{SAY}{PHONEMES}][^{END}]*{END})", text)
    return "".join(p if p[:1] in (SAY, PHONEMES) else change(p) for p in parts)


# --- SSML ------------------------------------------------------------------------------------------------


def is_ssml(text: str) -> bool:
    return text.lstrip().startswith("<speak")


def parse_ssml(text: str, british: bool = False) -> list[Segment]:
    """``<speak>...</speak>`` as segments; ``MarkupError`` with the position where parsing failed."""
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise MarkupError("SSML may not declare a DOCTYPE or entities", text.find("<!"))
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        line, column = exc.position
        offset = sum(len(x) + 1 for x in text.strip().split("\n")[: line - 1]) + column
        raise MarkupError(f"malformed SSML: {str(exc).split(':')[0]}", offset) from None
    if _local(root.tag) != "speak":
        raise MarkupError("SSML must be one <speak> element", 0)
    segments: list[Segment] = []
    _walk(root, 1.0, segments, british, [""])
    return [s for s in segments if s.text.strip() or s.pause_ms]


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1].lower()


def _walk(node: ET.Element, rate: float, out: list[Segment], british: bool, buffer: list[str]) -> None:
    """Depth first; ``buffer[0]`` collects the text of the current segment."""
    buffer[0] += node.text or ""
    for child in node:
        tag = _local(child.tag)
        if tag == "break":
            out.append(Segment(buffer[0], _break_ms(child), rate))
            buffer[0] = ""
        elif tag == "prosody" and child.get("rate") is not None:
            out.append(Segment(buffer[0], None, rate))
            buffer[0] = ""
            _walk(child, rate * _rate(child.get("rate", "")), out, british, buffer)
            out.append(Segment(buffer[0], None, rate * _rate(child.get("rate", ""))))
            buffer[0] = ""
        elif tag == "sub" and child.get("alias") is not None:
            buffer[0] += say_span("".join(child.itertext()), child.get("alias", ""))
        elif tag == "phoneme" and child.get("ph"):
            written = "".join(child.itertext())
            buffer[0] += phoneme_span(written, ipa_to_kokoro(child.get("ph", ""), british))
        elif tag == "say-as":
            written = "".join(child.itertext())
            kind = child.get("interpret-as", "").strip().lower()
            if kind in SAY_AS:
                buffer[0] += say_span(written, say_as(written, kind))
            else:  # date, time and the rest: the normaliser reads them as they are written
                buffer[0] += written
        else:  # an unknown tag (or p, s, emphasis): its text is spoken, never dropped
            _walk(child, rate, out, british, buffer)
            if tag in ("p", "s"):
                buffer[0] += " "
        buffer[0] += child.tail or ""
    if node is not None and _local(node.tag) == "speak":
        out.append(Segment(buffer[0], None, rate))
        buffer[0] = ""


def _break_ms(node: ET.Element) -> int:
    time = (node.get("time") or "").strip().lower()
    strength = {"none": 0, "x-weak": 100, "weak": 200, "medium": 400, "strong": 700, "x-strong": 1000}
    if not time:
        return strength.get((node.get("strength") or "medium").lower(), 400)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)", time)
    if m is None:
        raise MarkupError(f'<break time="{time[:20]}"> must be like "500ms" or "1.5s"', 0)
    ms = float(m[1]) * (1000 if m[2] == "s" else 1)
    return int(min(ms, MAX_BREAK_MS))


def _rate(raw: str) -> float:
    raw = raw.strip().lower()
    if raw in RATES:
        return RATES[raw]
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(%?)", raw)
    if m is None:
        raise MarkupError(f'<prosody rate="{raw[:20]}"> must be x-slow..x-fast, a percentage or a number', 0)
    value = float(m[1]) / (100 if m[2] else 1)
    return min(MAX_RATE, max(MIN_RATE, value))


SAY_AS = ("characters", "spell-out", "verbatim", "digits", "telephone", "cardinal", "ordinal")


def say_as(text: str, interpret: str) -> str:
    """``say-as``: what a written form is said as, by how it is to be interpreted."""
    kind = interpret.strip().lower()
    bare = text.strip()
    if kind in ("characters", "spell-out", "verbatim"):
        return " ".join(ch for ch in bare if not ch.isspace())
    if kind == "digits":
        return digits(bare)
    if kind == "telephone":
        groups = re.findall(r"\d+", bare)
        return ", ".join(digits(g) for g in groups)
    number = bare.replace(",", "")
    if kind == "cardinal" and number.lstrip("-").isdigit():
        return cardinal(int(number))
    if kind == "ordinal" and number.rstrip("stndrh").isdigit():
        return ordinal(int(number.rstrip("stndrh")))
    return bare
