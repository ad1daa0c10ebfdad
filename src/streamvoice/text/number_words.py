"""Numbers said in words, per language, for the rules of ``text/languages/``.

Which engine reads which language was chosen by ``python -m streamvoice.bench.normalizers`` (figures and
reasons in ``docs/languages.md``): ``num2words`` for Spanish, French, Italian, Portuguese and Japanese
cardinals and ordinals, ``cn2an`` for Mandarin, our own table for Hindi (neither has it). English keeps
``text.numbers``. When an optional engine is not installed the rules that need it are left out (the
language's G2P then reads the digits as it can) and the log names what is missing, once.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable

log = logging.getLogger("streamvoice.text")

MAX_WORDS = 10**15  # past this a number is an id, read digit by digit
MAX_DIGITS = 15

# Hindi 0-99 are not built from parts: each has its own word.
HINDI_0_99 = (
    "शून्य एक दो तीन चार पाँच छह सात आठ नौ दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अठारह उन्नीस बीस "
    "इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस तीस इकतीस बत्तीस तैंतीस चौंतीस पैंतीस "
    "छत्तीस सैंतीस अड़तीस उनतालीस चालीस इकतालीस बयालीस तैंतालीस चवालीस पैंतालीस छियालीस सैंतालीस "
    "अड़तालीस उनचास पचास इक्यावन बावन तिरेपन चौवन पचपन छप्पन सत्तावन अट्ठावन उनसठ साठ इकसठ बासठ "
    "तिरसठ चौंसठ पैंसठ छियासठ सड़सठ अड़सठ उनहत्तर सत्तर इकहत्तर बहत्तर तिहत्तर चौहत्तर पचहत्तर "
    "छिहत्तर सतहत्तर अठहत्तर उन्यासी अस्सी इक्यासी बयासी तिरासी चौरासी पचासी छियासी सत्तासी अट्ठासी "
    "नवासी नब्बे इक्यानबे बानबे तिरानबे चौरानबे पंचानबे छियानबे सत्तानबे अट्ठानबे निन्यानबे"
).split()
HINDI_SCALES = ((10**7, "करोड़"), (10**5, "लाख"), (1000, "हज़ार"), (100, "सौ"))
HINDI_ORDINALS = {1: "पहला", 2: "दूसरा", 3: "तीसरा", 4: "चौथा", 6: "छठा"}

# Digits one by one, as phone numbers are read (Mandarin says 1 "yāo" there: 幺).
DIGITS = {
    "es": "cero uno dos tres cuatro cinco seis siete ocho nueve",
    "fr": "zéro un deux trois quatre cinq six sept huit neuf",
    "it": "zero uno due tre quattro cinque sei sette otto nove",
    "pt": "zero um dois três quatro cinco seis sete oito nove",
    "ja": "ゼロ いち に さん よん ご ろく なな はち きゅう",
    "zh": "零 幺 二 三 四 五 六 七 八 九",
    "hi": "शून्य एक दो तीन चार पाँच छह सात आठ नौ",
}


def family(lang: str) -> str:
    """Our language codes ("es", "fr-fr", "pt-br", "cmn", "ja", "hi") to the families rules are kept by."""
    code = lang.lower().replace("_", "-").split("-")[0]
    return {"cmn": "zh", "yue": "zh"}.get(code, code)


@functools.cache
def _num2words() -> Callable[..., str] | None:
    try:
        from num2words import num2words
    except ImportError:
        log.warning("num2words is not installed: numbers outside English are read by the G2P as written")
        return None
    return num2words  # type: ignore[no-any-return]


@functools.cache
def _cn2an() -> Callable[..., str] | None:
    try:
        import cn2an
    except ImportError:
        log.warning("cn2an is not installed: Mandarin numbers are read by the G2P as written")
        return None
    return cn2an.an2cn  # type: ignore[no-any-return]


_N2W_LANG = {"es": "es", "fr": "fr", "it": "it", "pt": "pt_BR", "ja": "ja"}


def available(lang: str) -> bool:
    """Whether numbers can be said in this language here (its engine is installed)."""
    fam = family(lang)
    if fam == "hi":
        return True
    if fam == "zh":
        return _cn2an() is not None
    return fam in _N2W_LANG and _num2words() is not None


def _hindi(n: int) -> str:
    if n < 100:
        return HINDI_0_99[n]
    words = []
    for scale, name in HINDI_SCALES:
        if n >= scale:
            words.append(f"{_hindi(n // scale)} {name}")
            n %= scale
    if n:
        words.append(HINDI_0_99[n])
    return " ".join(words)


def _feminine(words: str, fam: str) -> str:
    """The form before a feminine noun: "una hora", "duas horas", "veintiuna libras", "duzentas"."""
    if fam == "es":
        words = re.sub(r"uno\b", "una", words)
        words = re.sub(r"ientos\b", "ientas", words)
    elif fam == "pt":
        words = re.sub(r"\bum\b", "uma", words)
        words = re.sub(r"\bdois\b", "duas", words)
        words = re.sub(r"entos\b", "entas", words)
    elif fam == "it":
        words = re.sub(r"uno\b", "una", words)
    elif fam == "fr":
        words = re.sub(r"\bun\b", "une", words)
    return words


def masculine_before_noun(words: str, fam: str) -> str:
    """Spanish drops "-o" of "uno" before a masculine noun ("veintiún euros", "un dólar")."""
    if fam == "es":
        words = re.sub(r"veintiuno$", "veintiún", words)
        words = re.sub(r"uno$", "un", words)
    if fam == "it":
        words = re.sub(r"^uno$", "un", words)
    return words


def cardinal(n: int, lang: str, feminine: bool = False) -> str:
    fam = family(lang)
    if n < 0:
        return f"{MINUS.get(fam, '-')} {cardinal(-n, lang, feminine)}"
    if n >= MAX_WORDS:
        return digits(str(n), lang)
    if fam == "hi":
        return _hindi(n)
    if fam == "zh":
        an2cn = _cn2an()
        assert an2cn is not None
        return an2cn(str(n), "low")
    n2w = _num2words()
    assert n2w is not None
    words = n2w(n, lang=_N2W_LANG[fam]).replace(",", "")
    return _feminine(words, fam) if feminine else words


MINUS = {"es": "menos", "fr": "moins", "it": "meno", "pt": "menos", "ja": "マイナス", "zh": "负", "hi": "ऋण"}


def ordinal(n: int, lang: str, feminine: bool = False) -> str:
    fam = family(lang)
    if fam == "hi":
        return HINDI_ORDINALS.get(n, f"{_hindi(n)}वाँ")
    if fam == "zh":
        return "第" + cardinal(n, lang)
    if fam == "ja":
        return "第" + cardinal(n, lang)
    n2w = _num2words()
    assert n2w is not None
    words = n2w(n, lang=_N2W_LANG[fam], to="ordinal").replace(",", "")
    if fam == "fr" and n == 1:
        return "première" if feminine else "premier"
    if feminine and fam in ("es", "pt", "it"):
        words = re.sub(r"o\b", "a", words)
    return words


def digits(text: str, lang: str) -> str:
    names = DIGITS[family(lang)].split()
    sep = "" if family(lang) in ("zh", "ja") else " "  # no spaces between words in these scripts
    return sep.join(names[int(d)] for d in text if d.isdigit())


def decimal(whole: int, fraction: str, lang: str) -> str:
    """ "2,5" -> "dos coma cinco"; "3.14" in Mandarin -> "三点一四"; the fraction digit by digit unless it
    is short and has no leading zero (the Latin languages read "coma cincuenta")."""
    fam = family(lang)
    point = {"es": "coma", "fr": "virgule", "it": "virgola", "pt": "vírgula", "ja": "点", "zh": "点"}
    if fam == "hi":
        return f"{cardinal(whole, lang)} दशमलव {digits(fraction, lang)}"
    if fam in ("ja", "zh"):
        said = cardinal(whole, lang) + point[fam]
        names = DIGITS["zh"].split() if fam == "zh" else "〇 一 二 三 四 五 六 七 八 九".split()
        if fam == "zh":
            names[1] = "一"
        return said + "".join(names[int(d)] for d in fraction)
    if len(fraction) <= 2 and not fraction.startswith("0"):
        tail = cardinal(int(fraction), lang)
    else:
        tail = digits(fraction, lang)
    return f"{cardinal(whole, lang)} {point[fam]} {tail}"


# A number written with a decimal point and thousands commas, as Japanese and Mandarin write them
# ((?<!\d): a match starts only where a digit run starts, so a long run costs linear time).
POINT_NUM = r"(?<!\d)(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"


def point_value(text: str) -> tuple[int, str]:
    """(whole, fraction digits) of a number written with a decimal point and comma groups ("1,280.5",
    Hindi's "1,00,000"), as Japanese, Mandarin and Hindi write them; an id past ``MAX_DIGITS`` is cut (it
    is read digit by digit)."""
    whole, _, fraction = text.replace(",", "").partition(".")
    return int(whole[-MAX_DIGITS - 1 :] or "0"), fraction[:MAX_DIGITS]


def number(text: str, lang: str) -> str:
    """A number written with a decimal point, said in ``lang`` (Japanese, Mandarin, Hindi)."""
    if sum(ch.isdigit() for ch in text) > MAX_DIGITS:
        return digits(text, lang)
    whole, fraction = point_value(text)
    return decimal(whole, fraction, lang) if fraction else cardinal(whole, lang)
