"""What language models write, said as a person would read it: money, clock times, dates, phone numbers,
URLs and emails, units and temperatures, percentages, ordinals, years and decades, ranges, versions,
titles and abbreviations, symbols and emoji.

Pure functions over a chunk of text. The result keeps the caller's words: each ``Token`` is a span of the
original text with what is said for it, so word timings can name "$12.50" (the caller's word) with the
times of "twelve dollars fifty" (users of other Kokoro servers report exactly this broken: timings that name the
expansion, "nine thirtyPM").

The rules are each language's (``text/languages/``, English among them; which reads which language:
``text.language_rules``) around what is language-neutral (``text.neutral``), applied by the one engine
(``text.rules``). The language is the voice's or the message's ``lang``: "3/4/2026" is March 4 in American
English, 3 April in British. Checked by ``pytest tests/test_normalize.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from streamvoice.text.language_rules import language_rules, symbol_words
from streamvoice.text.marks import PHONEMES, SAY, SEP, SPACE
from streamvoice.text.neutral import MARKED, addresses, symbols
from streamvoice.text.rules import Rule, claims


@dataclass(frozen=True)
class Token:
    """A span of the caller's text and what is said for it ("" when nothing is: an emoji)."""

    original: str
    spoken: str
    space_before: bool = True


@functools.cache
def neutral_rules(lang: str) -> tuple[Rule, ...]:
    """What every language shares, in this language's words: marked spans, addresses, symbols."""
    words = symbol_words(lang)
    return (*MARKED, *addresses(words), *symbols(words))


@functools.cache  # built once per language, not for every chunk planned
def rules_for(lang: str) -> tuple[Rule, ...]:
    """The marked spans, addresses, the language's rules, the symbols, then what it reads after them."""
    own = language_rules(lang)
    if own is None:
        return neutral_rules(lang)
    words = symbol_words(lang)
    return (*MARKED, *addresses(words), *own.rules, *symbols(words), *own.after_symbols)


def normalize(text: str, lang: str = "en-us") -> list[Token]:
    """The text as tokens: spans the language's rules (``rules_for``) rewrote, and the words between them."""
    return tokens_by(text, rules_for(lang))


def tokens_by(text: str, rules: tuple[Rule, ...]) -> list[Token]:
    """The text as tokens under these rules (``bench.languages`` composes the neutral rules alone from it)."""
    tokens: list[Token] = []
    at = 0
    for a, b, spoken in claims(text, rules):
        tokens.extend(_plain(text[at:a], at == 0 or text[at - 1].isspace()))
        original = text[a:b].strip()
        if original[:1] in (SAY, PHONEMES):  # a marked span: the caller's own word is inside it
            original = original[1:].split(SEP, 1)[0].replace(SPACE, " ")
        tokens.append(Token(original, spoken, a == 0 or text[a - 1].isspace() or text[a].isspace()))
        at = b
    tokens.extend(_plain(text[at:], at == 0 or (at <= len(text) and text[at - 1 : at].isspace())))
    return tokens


def _plain(segment: str, space_before: bool) -> Iterable[Token]:
    for i, m in enumerate(re.finditer(r"\S+", segment)):
        before = space_before if i == 0 and m.start() == 0 else True
        yield Token(m.group(), m.group(), before)


def spoken_text(tokens: list[Token]) -> str:
    """What the G2P reads: the spoken forms joined as the text joined them; two spoken words never run
    together (a rule's output next to a letter gets a space)."""
    out = ""
    for token in tokens:
        if not token.spoken:
            continue
        joined = bool(out) and not token.space_before
        if joined and _apart(out[-1], token.spoken[0]):
            joined = False
        out += token.spoken if joined or not out else " " + token.spoken
    return " ".join(out.split())


def _apart(left: str, right: str) -> bool:
    """Two words that would run together; Japanese and Chinese write none of the spaces between words."""
    return left.isalnum() and right.isalnum() and not (_wide(left) or _wide(right))


def _wide(ch: str) -> bool:
    return ord(ch) >= 0x2E80


def say(text: str, lang: str = "en-us") -> str:
    """The text as it will be read (what the docs' table and the tests show)."""
    return spoken_text(normalize(text, lang))


# One line per language with a value in it, read once at start so the number engine's import and the
# rules' compile happen then (``engine.readiness.warm_up``), never on a caller's first request.
_WARM_TEXT = "1.234,50 € 14:30 12/03/2026 20% 3.5 km 第3 ¥1,280 ₹499"


def warm(lang: str) -> None:
    say(_WARM_TEXT, lang)
