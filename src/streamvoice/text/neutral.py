"""What every language reads the same way, in its own words: spans the caller marked (SSML, inline phonemes, the
lexicon), web and mail addresses, emoji (not said), symbols between words, and markup left by a language
model. The shapes are shared; the words ("dot", "punto", "ドット") are each language's ``SymbolWords``. Tried
around each language's value rules (``normalize.rules_for``). Checked by ``pytest tests/test_normalize.py``."""

from __future__ import annotations

import functools
import re

from streamvoice.text import rules as kind
from streamvoice.text.marks import END, PHONEMES, SAY, SEP, SPACE
from streamvoice.text.rules import Rule, SymbolWords

EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff\ufe0f\u200d\u2b00-\u2bff\u2300-\u23ff]+"
)
_TAIL = r"(?<![.,;:!?)\]'\"])"  # a URL never ends in the sentence's punctuation
_TLDS = "com|org|net|io|dev|ai|app|co|edu|gov|uk|de|fr|info"


def _said_span(m: re.Match[str]) -> str:
    return m[2].replace(SPACE, " ")


def _phoneme_span(m: re.Match[str]) -> str:
    return f"{PHONEMES}{m[2]}{END}"  # kept marked: planning hands these to the model as they are


def _domain(host: str, words: SymbolWords) -> str:
    return f" {words.dot} ".join(host.split("."))


def _url(written: str, words: SymbolWords) -> str:
    url = re.sub(r"^https?://", "", written)
    host, _, path = url.partition("/")
    said = (
        f"{words.www} {words.dot} " + _domain(host[4:], words)
        if host.startswith("www.")
        else _domain(host, words)
    )
    parts = [p for p in re.split(r"[/?#=&_-]+", path) if p]
    return f" {words.slash} ".join([said, *parts]) if parts else said


def _email(written: str, words: SymbolWords) -> str:
    user, _, host = written.partition("@")
    user_said = f" {words.dot} ".join(p for p in re.split(r"[._]", user) if p)
    return f"{user_said} {words.at} {_domain(host, words)}"


def _nothing(written: str) -> str:
    return ""


def _apart(written: str) -> str:
    return " "


def _symbols(words: SymbolWords) -> dict[str, str]:
    return {"&": words.and_, "+": words.plus, "=": words.equals, "@": words.at, "×": words.times,
            "÷": words.divided_by}  # fmt: skip


# Spans the caller marked: taken as they are, before any rule.
MARKED: tuple[Rule, ...] = (
    kind.groups("said", f"{SAY}([^{SEP}{END}]*){SEP}([^{END}]*){END}", _said_span),
    kind.groups("phonemes", f"{PHONEMES}([^{SEP}{END}]*){SEP}([^{END}]*){END}", _phoneme_span),
)


@functools.cache  # one set per language's words, compiled once
def addresses(words: SymbolWords) -> tuple[Rule, ...]:
    return (
        kind.words("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", lambda w: _email(w, words)),
        kind.words("url", rf"(?:https?://|www\.)[^\s<>\"]+{_TAIL}", lambda w: _url(w, words)),
        kind.words(
            "url",
            rf"(?<![\w.-])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:{_TLDS})\b(?:/[^\s<>\"]*{_TAIL})?",
            lambda w: _url(w, words),
        ),
    )


@functools.cache
def symbols(words: SymbolWords) -> tuple[Rule, ...]:
    said = _symbols(words)
    return (
        kind.words("emoji", EMOJI, _nothing),
        kind.words("symbol", r"(?<=\S)\s?[&+=×÷]\s?(?=\S)|(?<=\s)[&+=×÷@](?=\s)", lambda w: said[w.strip()]),
        kind.words("slash", r"(?<=[A-Za-z])/(?=[A-Za-z])", _apart),
        kind.words("markup", r"[*_~^|<>\\{}\[\]`]+", _apart),
    )
