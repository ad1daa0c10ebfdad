"""Pronunciation rules as lexicon entries (word -> ``/phonemes/`` or -> a respelling), so every wire's
dictionaries go through the one pronunciation machinery (``text.lexicon``) in every language the voice
speaks. A wire reads its own rule shape into ``(word, what is said)`` pairs (its folder under
``server/surfaces``) and this module checks them: phonemes in IPA or CMU ARPAbet, a PLS lexicon (W3C) read to
lexemes and written back from them.

Bounded as lexicons are (entries, lengths, characters: ``check_lexicon``); replacement is one pass over the
caller's text, so an alias that contains its own word is said once, never expanded again. A PLS file with
a DOCTYPE (entities) is refused before it is parsed. Checked by ``pytest tests/test_dictionary_rules.py``.
"""

from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from streamvoice.text.lexicon import MAX_LEXICON_ENTRIES, check_lexicon
from streamvoice.text.marks import EXACT
from streamvoice.text.pronounce import ipa_to_kokoro

MAX_RULES = MAX_LEXICON_ENTRIES
MAX_PLS_BYTES = 256 * 1024
PLS_NS = "http://www.w3.org/2005/01/pronunciation-lexicon"
ALPHABETS = ("ipa", "cmu-arpabet", "cmu")  # a phoneme rule's; "cmu" is CMU ARPAbet too

# CMU ARPAbet (stress digits on vowels) in the symbols the voices were trained on (misaki's).
ARPABET: Mapping[str, str] = {
    "AA": "ɑ", "AE": "æ", "AH": "ʌ", "AO": "ɔ", "AW": "W", "AY": "I", "EH": "ɛ", "ER": "ɜɹ", "EY": "A",
    "IH": "ɪ", "IY": "i", "OW": "O", "OY": "Y", "UH": "ʊ", "UW": "u", "B": "b", "CH": "ʧ", "D": "d",
    "DH": "ð", "F": "f", "G": "ɡ", "HH": "h", "JH": "ʤ", "K": "k", "L": "l", "M": "m", "N": "n", "NG": "ŋ",
    "P": "p", "R": "ɹ", "S": "s", "SH": "ʃ", "T": "t", "TH": "θ", "V": "v", "W": "w", "Y": "j", "Z": "z",
    "ZH": "ʒ", "AX": "ə", "AXR": "əɹ", "DX": "ɾ", "Q": "ʔ",
}  # fmt: skip
UNSTRESSED = {"AH": "ə", "ER": "əɹ"}  # reduced when unstressed (AH0 is a schwa)


class RuleError(ValueError):
    """A rule that cannot be used; the message names it and says what to send."""


def arpabet_to_kokoro(cmu: str) -> str:
    """``T AH0 M EY1 T OW2`` -> ``təmˈAtˌO``: each symbol, its stress mark (1 primary, 2 secondary) before it."""
    out = []
    for token in cmu.replace(",", " ").split():
        symbol, stress = token.upper().rstrip("012"), token[len(token.rstrip("012")) :]
        if symbol not in ARPABET or len(stress) > 1:
            raise RuleError(f"{token[:16]!r} is not a CMU ARPAbet symbol (e.g. T AH0 M EY1 T OW2)")
        said = UNSTRESSED[symbol] if stress == "0" and symbol in UNSTRESSED else ARPABET[symbol]
        out.append({"1": "ˈ", "2": "ˌ"}.get(stress, "") + said)
    if not out:
        raise RuleError("a CMU ARPAbet phoneme rule needs symbols (e.g. T AH0 M EY1 T OW2)")
    return "".join(out)


def phonemes_entry(value: str) -> str:
    """Phonemes in the voices' symbols as what a lexicon entry says (``/.../``), or ``RuleError``."""
    phonemes = value.strip()
    if not phonemes or "/" in phonemes.strip("/"):
        raise RuleError(f"phoneme {value[:40]!r} is empty or holds '/'")
    return f"/{phonemes}/"


def said_phonemes(phoneme: str, alphabet: str) -> str:
    """A rule's phonemes in ``ipa`` or ``cmu-arpabet`` as what a lexicon entry says, or ``RuleError``."""
    if alphabet not in ALPHABETS:
        raise RuleError(f'a phoneme rule\'s alphabet must be "ipa" or "cmu-arpabet" (got {alphabet[:20]!r})')
    return phonemes_entry(ipa_to_kokoro(phoneme) if alphabet == "ipa" else arpabet_to_kokoro(phoneme))


def lexicon_of(rules: Sequence[object], entry: Callable[[object], tuple[str, str]]) -> dict[str, str]:
    """Rules as one checked lexicon (a later rule for the same word wins), or ``RuleError``."""
    if len(rules) > MAX_RULES:
        raise RuleError(f"a dictionary holds at most {MAX_RULES} rules (this one: {len(rules)})")
    pairs = dict(entry(rule) for rule in rules)
    exact = {word.strip() for word, said in pairs.items() if said.startswith(EXACT)}
    try:
        checked = check_lexicon({word: said.removeprefix(EXACT) for word, said in pairs.items()})
    except ValueError as exc:
        raise RuleError(str(exc).replace('"lexicon"', "a rule")) from None
    return {word: (EXACT + said if word in exact else said) for word, said in checked.items()}


PLS_ENCODINGS = ("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii",
                 "iso8859-1")  # fmt: skip
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)  # fmt: skip
_DECLARED = re.compile(rb"""<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]{1,40})["']""")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def pls_text(document: bytes) -> str:
    """A PLS file decoded as XML says it is encoded (its byte-order mark, else its declaration, else UTF-8),
    so what is refused is judged on the characters, whatever the encoding; an encoding other than UTF-8,
    UTF-16, UTF-32, ASCII or Latin-1 (UTF-7 hides markup from a byte search) is refused."""
    encoding = next((name for bom, name in _BOMS if document.startswith(bom)), None)
    if encoding is None:
        if document.startswith(b"<\x00"):
            encoding = "utf-16-le"
        elif document.startswith(b"\x00<"):
            encoding = "utf-16-be"
        else:
            declared = _DECLARED.match(document.lstrip())
            encoding = declared[1].decode() if declared else "utf-8"
    try:
        known = codecs.lookup(encoding).name
    except LookupError:
        known = encoding
    if known.replace("-sig", "") not in PLS_ENCODINGS:
        raise RuleError(f"a PLS file encoded as {encoding[:40]!r} is not read: send it as UTF-8")
    try:
        return document.decode(encoding)
    except UnicodeDecodeError as exc:
        raise RuleError(f"the PLS file is not valid {encoding}: {exc.reason}; send it as UTF-8") from None


@dataclass(frozen=True)
class Lexeme:
    """One grapheme of a PLS lexeme and what it says: phonemes in ``alphabet``, or an alias."""

    grapheme: str
    phoneme: str | None = None
    alphabet: str = "ipa"  # "ipa" or "cmu-arpabet"
    alias: str | None = None


def pls_lexemes(document: bytes) -> list[Lexeme]:
    """A PLS lexicon's lexemes (a ``<phoneme>`` in the lexicon's alphabet, or an ``<alias>``); each grapheme
    of a lexeme is one."""
    if len(document) > MAX_PLS_BYTES:
        raise RuleError(f"a PLS file is at most {MAX_PLS_BYTES // 1024} KB")
    text = pls_text(document)  # decoded first: a UTF-16 file's "<!DOCTYPE" is not those bytes
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise RuleError("a PLS file with a DOCTYPE or entities is not read: send the lexicon alone")
    try:
        root = ET.fromstring(_XML_DECLARATION.sub("", text, count=1))
    except ET.ParseError as exc:
        raise RuleError(f"the file is not a PLS lexicon: {exc}") from None
    if _local(root.tag) != "lexicon":
        raise RuleError("the file is not a PLS lexicon: its root must be <lexicon>")
    default = root.get("alphabet") or "ipa"
    found: list[Lexeme] = []
    for lexeme in root:
        if _local(lexeme.tag) != "lexeme":
            continue
        graphemes = [(g.text or "").strip() for g in lexeme if _local(g.tag) == "grapheme"]
        phoneme_element = next((p for p in lexeme if _local(p.tag) == "phoneme"), None)
        phoneme = (phoneme_element.text or "").strip() if phoneme_element is not None else None
        alphabet = _alphabet(
            phoneme_element.get("alphabet", default) if phoneme_element is not None else default
        )
        alias = next(((a.text or "").strip() for a in lexeme if _local(a.tag) == "alias"), None)
        for grapheme in filter(None, graphemes):
            if phoneme:
                found.append(Lexeme(grapheme, phoneme=phoneme, alphabet=alphabet))
            elif alias:
                found.append(Lexeme(grapheme, alias=alias))
        if len(found) > MAX_RULES:
            raise RuleError(f"a dictionary holds at most {MAX_RULES} rules")
    if not found:
        raise RuleError("the PLS lexicon has no <lexeme> with a <grapheme> and a <phoneme> or an <alias>")
    return found


def pls_document(lexemes: Sequence[Lexeme], lang: str = "en-US") -> str:
    """Lexemes as a PLS lexicon: an ``ipa`` lexicon whose ARPAbet phonemes say so on the element (PLS 1.0's
    ``alphabet`` attribute of ``<phoneme>``)."""
    bodies = []
    for lexeme in lexemes:
        if lexeme.phoneme is None:
            body = f"<alias>{escape(lexeme.alias or '')}</alias>"
        elif lexeme.alphabet == "ipa":
            body = f"<phoneme>{escape(lexeme.phoneme)}</phoneme>"
        else:
            body = f'<phoneme alphabet="x-cmu">{escape(lexeme.phoneme)}</phoneme>'
        bodies.append(
            f"  <lexeme>\n    <grapheme>{escape(lexeme.grapheme)}</grapheme>\n    {body}\n  </lexeme>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<lexicon version="1.0" xmlns="{PLS_NS}" alphabet="ipa" xml:lang="{escape(lang)}">\n'
        + "\n".join(bodies)
        + "\n</lexicon>\n"
    )


def _alphabet(name: str) -> str:
    return "cmu-arpabet" if name.lower() in ("x-cmu", "cmu", "cmu-arpabet", "x-arpabet") else name.lower()


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1]
