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


def clean_token(token: str, line_start: bool) -> str:
    if line_start and (token in _BULLETS or _HEADING.match(token)):
        return ""
    if token in {"**", "__", "***", "```", "---", "___"}:
        return ""
    token = _LINK_TARGET.sub("", token)
    token = _BRACKETS.sub("", token)
    token = token.replace("`", "")
    return _EMPHASIS.sub("", token)
