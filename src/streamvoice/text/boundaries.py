"""Where speech may be cut: sentence ends and clause breaks, decided from a bounded lookahead.

Pure functions over strings. ``sentence_cuts`` only reports a cut once the characters that decide it have
arrived (the next non-space character), so a streaming caller gets the same cuts however its text was
fragmented.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    (
        "mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al approx dept est fig inc ltd co corp no vol "
        "jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun u.s u.k u.n a.m p.m "
        "ph.d gen col lt sgt capt rev hon gov sen rep ave blvd rd"
    ).split()
)
# Abbreviations that are never sentence-final in practice, whatever follows.
TITLES = frozenset(
    "mr mrs ms dr prof sr jr st mt gen col lt sgt capt rev hon gov sen rep vs e.g i.e cf u.s u.k u.n".split()
)

STOPS = ".!?"
# Sentence ends that need no space after them: CJK full stops and the Devanagari danda (Hindi).
CJK_STOPS = "。！？।॥"
CLOSERS = "\"')]}»”’*_"
CLAUSE_MARKS = ",;:—–"
CJK_CLAUSE_MARKS = "，、；："  # a clause break in CJK text, with no space after it


def _word_before(text: str, end: int) -> str:
    """The token that ends at ``end`` (exclusive), without surrounding punctuation."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("\"'([{«“‘*_")


def _is_list_marker(text: str, stop: int) -> bool:
    """``1.`` or ``a)`` opening a line is an enumeration, not a sentence end."""
    word = _word_before(text, stop)
    if not (word.isdigit() or (len(word) == 1 and word.isalpha())):
        return False
    before = text[: stop - len(word)]
    stripped = before.rstrip(" \t")
    return stripped == "" or stripped.endswith("\n")


def _is_abbreviation(text: str, stop: int) -> bool:
    word = _word_before(text, stop).lower()
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())


CJK_CLOSERS = "」』）"


def ends_sentence(text: str) -> bool:
    """Does ``text`` end with a finished sentence, by the rules a cut uses? For text that has stopped
    arriving (``IncrementalSentenceChunker.quiet``): "!" and "?" end one; "." does unless an abbreviation
    or a single letter (``_is_abbreviation``) or a number (a decimal may follow) stands before it."""
    end = text.rstrip().rstrip(CLOSERS + CJK_CLOSERS)
    if not end:
        return False
    if end[-1] in "!?" or end[-1] in CJK_STOPS:
        return True
    if end[-1] != ".":
        return False
    stop = len(end.rstrip("."))
    word = _word_before(end, stop)
    return bool(word) and not word[-1].isdigit() and not _is_abbreviation(end, stop)


def sentence_cuts(text: str, final: bool = False) -> tuple[list[int], int]:
    """Return (cut positions, scanned_until).

    A cut is an index where a new sentence starts. ``scanned_until`` is where the scan stopped for want of
    lookahead; everything before it has been decided. With ``final`` the end of text counts as lookahead.
    """
    cuts: list[int] = []
    n = len(text)
    i = 0
    while i < n:
        ch = text[i]
        if ch == "\n":
            cuts.append(i + 1)
            i += 1
            continue
        if ch in CJK_STOPS:
            j = i + 1
            while j < n and (text[j] in CJK_STOPS or text[j] in CLOSERS or text[j] in CJK_CLOSERS):
                j += 1
            if j >= n and not final:
                return cuts, i
            cuts.append(j)
            i = j
            continue
        if ch in STOPS:
            j = i + 1
            while j < n and text[j] in STOPS:
                j += 1
            while j < n and text[j] in CLOSERS:
                j += 1
            if j >= n:
                if final:
                    break
                return cuts, i
            if not text[j].isspace():
                i = j  # 3.14, v2.1, example.com, e.g.x: no cut
                continue
            k = j
            while k < n and text[k].isspace() and text[k] != "\n":
                k += 1
            if k >= n and not final:
                return cuts, i
            nxt = text[k] if k < n else ""
            run = text[i:j]
            if _decide_cut(text, i, run, nxt):
                cuts.append(j)
            i = j
            continue
        i += 1
    return cuts, n


def _decide_cut(text: str, stop: int, run: str, nxt: str) -> bool:
    if nxt in ("", "\n"):
        return not (run == "." and _is_list_marker(text, stop))
    if run.startswith("."):
        if run.startswith("..") and nxt.islower():
            return False  # an ellipsis inside a sentence
        if _is_list_marker(text, stop):
            return False
        word = _word_before(text, stop).lower()
        if word in TITLES or (len(word) == 1 and word.isalpha() and word not in ("a", "i")):
            return False
        if _is_abbreviation(text, stop) and (nxt.islower() or nxt.isdigit()):
            return False
    return not nxt.islower()


_CLAUSE_RE = re.compile(r"[,;:—–](?=\s)|\s[—–-]\s|[，、；：](?=.)")


def clause_cuts(text: str) -> list[int]:
    """Positions just after a clause mark followed by whitespace (commas in numbers never qualify)."""
    return [m.end() for m in _CLAUSE_RE.finditer(text)]


def word_cuts(text: str) -> list[int]:
    return [m.start() for m in re.finditer(r"(?<=\S)\s+(?=\S)", text)]


# Words that open a new phrase: cutting just before one keeps each half sounding natural.
PHRASE_STARTERS = frozenset(
    "because and but so which when while where although though since unless whereas or then".split()
)
_PHRASE_RE = re.compile(r"\s(?=(\w+)\s)")


def phrase_cuts(text: str) -> list[int]:
    """Positions of the space before a complete phrase-opening word (``... blue | because the ...``)."""
    return [m.start() for m in _PHRASE_RE.finditer(text) if m.group(1).lower() in PHRASE_STARTERS]
