"""Lexicons: word -> phonemes (``/kəkˈɔɹO/``) or -> a respelling, per server (a JSON file) and per session
(``configure``); checked like text and bounded, applied to whole words outside the spans already marked.
Checked by ``pytest tests/test_pronounce.py``."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from streamvoice.text.marks import MARKS, outside_spans, phoneme_span, say_span

LEXICON_PATTERNS = 64  # compiled lexicons kept (a lexicon is the same for each message of a session)
MAX_LEXICON_ENTRIES = 512
MAX_LEXICON_CHARS = 128
MAX_LEXICON_JOINERS = 8  # non-alphanumeric characters in a lexicon word ("AT&T", "e.g.", "C++" fit)


def check_lexicon(raw: object) -> dict[str, str]:
    """A lexicon from a caller or a file, bounded and checked like text (no lone surrogates, control
    characters or the private marks spans travel in), or ``ValueError`` saying what to send."""
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
        for value in (word, said):
            if (bad := next((ch for ch in value if _not_text(ch)), None)) is not None:
                raise ValueError(
                    f'"lexicon" entry {word[:40]!r} holds U+{ord(bad):04X}, which is not text: send words and '
                    "pronunciations as plain characters"
                )
        if not any(ch.isalnum() for ch in word):
            raise ValueError(f'"lexicon" word {word[:40]!r} has no letter or digit: a lexicon names words')
        if sum(not ch.isalnum() and not ch.isspace() for ch in word) > MAX_LEXICON_JOINERS:
            raise ValueError(
                f'"lexicon" word {word[:40]!r} has more than {MAX_LEXICON_JOINERS} punctuation marks: '
                "a lexicon names words"
            )
        out[word.strip()] = said.strip()
    return out


def _not_text(ch: str) -> bool:
    """A lone surrogate, a control character, or one of the private marks spans travel in."""
    code = ord(ch)
    return 0xD800 <= code <= 0xDFFF or (code < 32 and ch not in "\t") or code == 0x7F or ch in MARKS


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

    return outside_spans(text, lambda part: pattern.sub(replace, part))


@functools.lru_cache(maxsize=LEXICON_PATTERNS)
def _lexicon_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern per lexicon, longest words first, compiled once (a server's or a session's lexicon
    is the same for each of its messages, and 512 entries take a moment to compile). Compiled outside
    ``re``'s own cache, which would keep up to 512 more of them: this cache is the only one
    (``test_lexicon_patterns_are_bounded_in_memory``)."""
    alternatives = "|".join(re.escape(w) for w in words)
    source = r"(?<![\w" + MARKS + r"])(" + alternatives + r")(?![\w])"
    return _compile_uncached(source, re.IGNORECASE)


def _compile_uncached(source: str, flags: int) -> re.Pattern[str]:
    compiler = getattr(re, "_compiler", None)  # CPython 3.11+: what re.compile calls after its cache
    if compiler is None:
        return re.compile(source, flags)
    pattern: re.Pattern[str] = compiler.compile(source, flags)
    return pattern
