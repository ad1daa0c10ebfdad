"""Lexicons: word -> phonemes (``/kəkˈɔɹO/``) or -> a respelling, per server (a JSON file) and per session
(``configure``); checked like text and bounded, applied to whole words outside the spans already marked.
Checked by ``pytest tests/test_pronounce.py``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from streamvoice.text.marks import EXACT, MARKS, outside_spans, phoneme_span, say_span

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
    """Each lexicon word (whole words; exact case first, then any case, unless its entry is case-sensitive:
    ``EXACT`` before what it says; the longest that fits where several start at one place) said as its
    entry says.

    Found by lookup, not by one compiled pattern of every word: a request's lexicon is the server's, the
    session's and up to three dictionaries merged, and a pattern per combination cost 1.1-1.5 s to compile
    for 3 x 512 long words (issue #64). The words are indexed by their first word (or first character),
    once per call (about a millisecond for 1,536), and each place a word can start costs one lookup
    (``tests/test_pronounce.py::test_a_new_combination_of_lexicons_costs_what_a_known_one_does``)."""
    if not lexicon:
        return text
    index = _index(lexicon)
    by_lower = {w.lower(): s for w, s in lexicon.items() if not s.startswith(EXACT)}

    def said(written: str) -> str:
        spoken = (lexicon.get(written) or by_lower[written.lower()]).removeprefix(EXACT)
        if spoken.startswith("/") and spoken.endswith("/") and len(spoken) > 2:
            return phoneme_span(written, spoken[1:-1])
        return say_span(written, spoken)

    def replace(part: str) -> str:
        out: list[str] = []
        done = 0
        at = 0
        while (start := _CAN_START.search(part, at)) is not None:
            i = start.start()
            found = _longest_at(part, i, index.get((start[1] or start[2]).lower(), []))
            if found is None:
                at = i + 1
                continue
            out += [part[done:i], said(part[i:found])]
            done = at = found
        return "".join(out) + part[done:] if out else part

    return outside_spans(text, replace)


# Where a lexicon word may start: not right after a letter, digit or mark; its first word or, for a word
# that starts with punctuation (".NET"), that character.
_CAN_START = re.compile(r"(?<![\w" + MARKS + r"])(?:(\w+)|([^\w\s]))")


def _key(word: str) -> str:
    first = re.match(r"\w+", word)
    return (first[0] if first else word[0]).lower()


def _index(lexicon: Mapping[str, str]) -> dict[str, list[tuple[str, bool]]]:
    """Lexicon words by their first word, lowercased; each list longest first, as (the form a text must
    show: lowercased, or as written for a case-sensitive entry, and whether it is case-sensitive)."""
    index: dict[str, list[tuple[str, bool]]] = {}
    for word, spoken in lexicon.items():
        exact = spoken.startswith(EXACT)
        index.setdefault(_key(word), []).append((word if exact else word.lower(), exact))
    for words in index.values():
        words.sort(key=lambda entry: len(entry[0]), reverse=True)
    return index


def _longest_at(text: str, i: int, words: list[tuple[str, bool]]) -> int | None:
    """Where the longest of ``words`` that stands whole at ``i`` ends, if one does."""
    for word, exact in words:
        end = i + len(word)
        found = text[i:end] if exact else text[i:end].lower()
        if found == word and (end == len(text) or not _WORD_CHAR.match(text, end)):
            return end
    return None


_WORD_CHAR = re.compile(r"\w")
