"""Text a phonemiser would choke on, made safe before it gets there: the work per piece stays bounded.

misaki's English G2P is superlinear in the parts of one whitespace-free run ("1-2-3-...", "a/b/c/...",
"a1a1a1...": 48 parts ~47 ms, 80 parts ~2 s, a 228-character run 6-13 s), and the planning thread is shared
by every caller. Its Japanese path asserts on a number of 10 or more digits, and Mandarin's number reading
gives up on long ones. So, before any backend:

- a run of more than ``MAX_RUN_PARTS`` letter or digit parts is split into its parts (the joiners become
  spaces), which reads the same and costs a millisecond or two per part;
- a digit run longer than the language's ``max_digits`` is read digit by digit, which is how people say
  long numbers they do not read as quantities (phone numbers, codes); leading zeros are kept.

Checked by ``pytest tests/test_g2p_bounds.py`` and, on the real server, ``tests/test_pronounce.py``.
"""

from __future__ import annotations

import re

MAX_RUN_PARTS = 8
MAX_DIGITS = 15  # a longer digit run is an identifier, not a quantity
MAX_DIGITS_BY_LANG = {"ja": 9}  # misaki's Japanese number reading asserts from 10 digits

# Runs of anything but spaces and CJK: Chinese and Japanese are written without spaces, and their own
# phonemisers read them; what goes to an English-style reader is the Latin, digit and symbol runs.
_RUN = re.compile(r"[^\s\u2e80-\U0010ffff]+")
_PART = re.compile(r"[^\W\d_]+|\d+")
_DIGITS = re.compile(r"\d+")
_TRAILING = re.compile(r"[^\w]+$")


def max_digits(lang: str) -> int:
    return MAX_DIGITS_BY_LANG.get(lang, MAX_DIGITS)


def split_run(run: str, max_parts: int = MAX_RUN_PARTS) -> str:
    """One whitespace-free run, its letter and digit parts apart when it has too many of them."""
    parts = _PART.findall(run)
    if len(parts) <= max_parts:
        return run
    tail = _TRAILING.search(run)  # a sentence's own punctuation stays on its last word
    return " ".join(parts) + (tail.group() if tail else "")


def spell_long_numbers(text: str, longest: int) -> str:
    """Digit runs longer than ``longest`` read digit by digit."""
    return _DIGITS.sub(lambda m: " ".join(m.group()) if len(m.group()) > longest else m.group(), text)


def bounded(text: str, lang: str) -> str:
    """``text`` as a phonemiser can read it in bounded time, saying the same words."""
    text = _RUN.sub(lambda m: split_run(m.group()), text)
    return spell_long_numbers(text, max_digits(lang))
