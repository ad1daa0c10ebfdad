"""Markdown an LLM emits, cleaned to speakable text, one whitespace-delimited token at a time.

Every rule looks only inside one token plus whether it starts a line or follows whitespace. That locality
is what lets the streaming chunker clean text as it arrives and still produce exactly what cleaning the
whole answer at once would: no construct can straddle the cut points the chunker uses (whitespace).
"""

from __future__ import annotations

import re

_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_BRACKETS = re.compile(r"!?\[|\]")
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])[*_~]+|[*_~]+(?![A-Za-z0-9])")
_HEADING = re.compile(r"^#{1,6}$")
_BULLETS = frozenset({"-", "*", "+", "•", "–"})
_TOKEN = re.compile(r"\S+")


def clean_token(token: str, line_start: bool) -> str:
    if line_start and (token in _BULLETS or _HEADING.match(token)):
        return ""
    if token in {"**", "__", "***", "```", "---", "___"}:
        return ""
    token = _LINK_TARGET.sub("", token)
    token = _BRACKETS.sub("", token)
    token = token.replace("`", "")
    return _EMPHASIS.sub("", token)


def clean_markdown(text: str, at_line_start: bool = True) -> str:
    """Clean a span of text whose first token starts a line iff ``at_line_start``.

    Whitespace is kept as is (the chunker normalises it later) so cut positions stay meaningful.
    """
    out: list[str] = []
    pos = 0
    line_start = at_line_start
    for m in _TOKEN.finditer(text):
        gap = text[pos : m.start()]
        if "\n" in gap:
            line_start = True
        out.append(gap)
        out.append(clean_token(m.group(), line_start))
        line_start = False
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)
