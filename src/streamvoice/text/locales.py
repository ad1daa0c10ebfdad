"""What assistants write in Spanish, French, Italian, Portuguese, Japanese, Mandarin and Hindi, said as a
native speaker reads it: money in the local conventions, clock times in local styles, numeric dates in
the language's order, percentages, phone numbers in groups (pauses, leading zeros kept), ordinals, units
and temperatures, ranges, and numbers with the local separators.

Each language is a tuple of ``Rule`` (a pattern and what is said for a match), in priority order, as
``text.normalize`` applies them: the caller's span stays the word timings name ("₹499", "14h30").
The spoken forms are plain words of the language, which its G2P reads (espeak-ng for es/fr/it/pt/hi,
misaki for ja and zh). Checked by ``pytest tests/test_locales.py`` (the readings) and
``tests/test_locales_heard.py`` (the real server, heard by Whisper with the language forced).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.text import number_words as nw

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

# -- numbers as the Latin languages write them: "1.250,50", "1 250,50", "2,5"; "25.50" when an assistant
# writes the English way (a point before exactly one or two digits is a decimal point, before three a
# thousands separator).
_GROUP = "[.\u00a0\u202f ]"
LATIN_NUM = (
    rf"(?<!\d)(?:\d{{1,3}}(?:{_GROUP}\d{{3}})+(?:,\d+)?(?!\d|\.\d)|\d+,\d+|\d+\.\d{{1,2}}(?!\d|\.\d)|\d+)"
)


def latin_value(text: str) -> tuple[int, str]:
    """(whole, fraction digits) of a number written the Latin way; fraction "" when there is none."""
    if "," in text:
        whole, _, fraction = text.partition(",")
    elif re.fullmatch(r"\d+\.\d{1,2}", text):
        whole, _, fraction = text.partition(".")
    else:
        whole, fraction = text, ""
    return int(re.sub(r"\D", "", whole) or "0"), fraction


@dataclass(frozen=True)
class Currency:
    one: str
    many: str
    sub_one: str
    sub_many: str
    feminine: bool = False


@dataclass(frozen=True)
class Latin:
    """One Latin language's words and conventions; the rules below are the same for the four."""

    lang: str
    currencies: dict[str, Currency]
    symbols: dict[str, str]  # what is written -> currency key ("€" "EUR" "euros" -> "EUR")
    default_dollar: str  # "$" alone
    cents_joiner: str  # "veinticinco euros *con* cincuenta"
    of_millions: str  # "un millón *de* euros"
    months: tuple[str, ...]
    first_day: str  # day 1 of a month: "uno", "premier", "primo", "primeiro"
    date: Callable[[str, str, str], str]  # (day, month, year words) -> the date
    clock: Callable[[str, int, str], str]  # (hour words, minutes, minute words) -> the time
    hours_word: tuple[str, str]  # "14h": (one hour, hours)
    percent: str
    degrees: tuple[str, str]
    fahrenheit: str
    to: Callable[[str, str], str]  # a range "10-15"
    plus: str  # a country code: "+34"
    units: dict[str, tuple[str, str]]
    ordinal_marks: str  # a regex of what follows the digits of an ordinal
    feminine_hours: bool = True
    degree_ordinal_nouns: str = ""  # "1° lugar": the nouns a degree sign counts instead of degrees


def _said(n: int, lang: str, feminine: bool = False) -> str:
    return nw.cardinal(n, lang, feminine)


def _number(text: str, lang: str, feminine: bool = False) -> str:
    if sum(ch.isdigit() for ch in text) > nw.MAX_DIGITS:  # an id, not a quantity
        return nw.digits(text, lang)
    whole, fraction = latin_value(text)
    if fraction:
        return nw.decimal(whole, fraction, lang)
    return _said(whole, lang, feminine)


def _amount_of(loc: Latin, number: str, cur: Currency) -> str:
    fam = nw.family(loc.lang)
    whole, fraction = latin_value(number)
    cents = int(fraction[:2].ljust(2, "0")) if fraction else 0
    if whole >= 10**6 and whole % 10**6 == 0 and not cents:
        joiner = loc.of_millions
        if joiner == "de" and fam == "fr" and cur.many[:1] in "aeiouhé":
            return f"{_said(whole, loc.lang)} d'{cur.many}"
        return f"{_said(whole, loc.lang)} {joiner} {cur.many}"
    parts = []
    if whole or not cents:
        words = _said(whole, loc.lang, cur.feminine)
        words = words if cur.feminine else nw.masculine_before_noun(words, fam)
        parts.append(f"{words} {cur.one if whole == 1 else cur.many}")
    if cents:
        words = nw.masculine_before_noun(_said(cents, loc.lang), fam)
        if fam == "fr" and whole:  # "vingt-cinq euros cinquante"
            parts.append(words)
        else:
            parts.append(f"{words} {cur.sub_one if cents == 1 else cur.sub_many}")
    return f" {loc.cents_joiner} ".join(parts) if loc.cents_joiner else " ".join(parts)


def _currency_key(loc: Latin, written: str) -> str:
    return loc.symbols.get(written) or loc.symbols.get(written.lower()) or loc.default_dollar


def latin_rules(loc: Latin) -> tuple[Rule, ...]:
    lang = loc.lang
    num = LATIN_NUM
    words = sorted(loc.symbols, key=len, reverse=True)
    symbols_before = "|".join(re.escape(s) for s in words if not s.isalpha())
    written_after = "|".join(re.escape(s) for s in words)

    def money(m: re.Match[str]) -> str:
        cur = loc.currencies[_currency_key(loc, m["cur"])]
        return _amount_of(loc, m["n"], cur)

    def clock(m: re.Match[str]) -> str:
        hour = int(m["h"])
        minute = int(m["min"] or 0)
        said_hour = _said(hour, lang, loc.feminine_hours)
        return loc.clock(said_hour, minute, _said(minute, lang, nw.family(lang) == "pt"))

    def hours(m: re.Match[str]) -> str:
        hour = int(m["h"])
        one, many = loc.hours_word
        return f"{_said(hour, lang, loc.feminine_hours)} {one if hour == 1 else many}"

    def date(m: re.Match[str]) -> str:
        day, month = int(m["d"]), int(m["mo"])
        if not (1 <= day <= 31 and 1 <= month <= 12):
            return " ".join(_said(int(p), lang) for p in (m["d"], m["mo"], m["y"] or "") if p)
        day_said = loc.first_day if day == 1 else _said(day, lang)
        year = m["y"] or ""
        if len(year) == 2:
            year = "20" + year
        return loc.date(day_said, loc.months[month - 1], _said(int(year), lang) if year else "")

    def percent(m: re.Match[str]) -> str:
        return f"{_number(m['n'], lang)} {loc.percent}"

    def percent_span(m: re.Match[str]) -> str:  # "5-10 %"
        return f"{span(m)} {loc.percent}"

    def temperature(m: re.Match[str]) -> str:
        value = m["t"].lstrip("+-−")
        sign = f"{nw.MINUS[nw.family(lang)]} " if m["t"][:1] in "-−" else ""
        whole, fraction = latin_value(value)
        one, many = loc.degrees
        amount = nw.masculine_before_noun(_number(value, lang), nw.family(lang))
        said = f"{sign}{amount} {one if whole == 1 and not fraction else many}"
        return f"{said} {loc.fahrenheit}" if m["scale"] == "F" else said

    def unit(m: re.Match[str]) -> str:
        one, many = loc.units[m["unit"]]
        whole, fraction = latin_value(m["n"])
        amount = nw.masculine_before_noun(_number(m["n"], lang), nw.family(lang))
        return f"{amount} {one if whole == 1 and not fraction else many}"

    def span(m: re.Match[str]) -> str:
        return loc.to(_number(m["a"], lang), _number(m["b"], lang))

    def unit_span(m: re.Match[str]) -> str:  # "10-15 min"
        return f"{span(m)} {loc.units[m['unit']][1]}"

    def hours_span(m: re.Match[str]) -> str:  # "9-18 h": opening hours
        a, b = (_said(int(m[k]), lang, loc.feminine_hours) for k in ("a", "b"))
        return f"{loc.to(a, b)} {loc.hours_word[1]}"

    def ordinal(m: re.Match[str]) -> str:
        mark = m["mark"].lower()
        feminine = mark in ("ª", ".ª", "a", "re", "ère", "nde")
        n = int(m["n"])
        fam = nw.family(lang)
        if fam == "fr" and n == 2 and mark in ("nd", "nde"):
            return "seconde" if feminine else "second"
        said = nw.ordinal(n, lang, feminine)
        if fam == "es" and (mark in ("er", ".er") or (m["noun"] and not feminine)):
            said = re.sub(r"ero$", "er", said)  # before a noun: "1.er piso", "3.º piso": "primer", "tercer"
        return said

    def phone(m: re.Match[str]) -> str:
        text = m.group()
        groups = re.findall(r"\d+", text)
        digits = sum(len(g) for g in groups)
        thousands = re.fullmatch(r"\d{1,3}(?: \d{3})+", text)
        if thousands and digits < 9:  # "1 250 000": a number with spaces, not a phone
            return _said(int("".join(groups)), lang)
        said = []
        if m.groupdict().get("cc"):
            said.append(f"{loc.plus} {_said(int(m['cc']), lang)}")
            groups = groups[1:]
        for g in groups:
            if nw.family(lang) == "fr" and len(g) == 2:  # "06 12 34": "zéro six, douze, trente-quatre"
                said.append(nw.digits(g, lang) if g[0] == "0" else _said(int(g), lang))
            else:
                said.append(nw.digits(g, lang))
        return ", ".join(said)

    unit_names = "|".join(sorted((re.escape(u) for u in loc.units), key=len, reverse=True))
    return (
        (
            re.compile(
                r"(?<![\d.,])(?:\+(?P<cc>\d{1,3})[\s.-]?)?(?:\(\d{2,4}\)\s?|\d{2,4}[\s.-])\d{2,5}(?:[\s.-]\d{2,5}){1,3}(?!\d|,\d|\s?[€$£%°])"
            ),
            phone,
        ),
        (re.compile(r"(?<![\d.,-])(?:\(\d{2}\)\s?)?9?\d{4}-\d{4}(?![\d-])"), phone),
        (re.compile(rf"(?P<cur>{symbols_before})\s?(?P<n>{num})"), money),
        (re.compile(rf"(?P<n>{num})\s?(?P<cur>{written_after})(?![\w$€£])"), money),
        (re.compile(r"\b(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})\b"), date),
        (re.compile(r"\b(?P<d>\d{1,2})[/.-](?P<mo>\d{1,2})[/.-](?P<y>\d{4}|\d{2})\b"), date),
        (re.compile(r"\b(?P<d>[0-3]?\d)/(?P<mo>[01]\d)(?P<y>)\b(?!/)"), date),
        (re.compile(r"\b(?P<a>[01]?\d|2[0-3])\s?[-–]\s?(?P<b>[01]?\d|2[0-4])\s?h\b(?![\w/])"), hours_span),
        (re.compile(r"\b(?P<h>[01]?\d|2[0-3])(?::|h|H)(?P<min>[0-5]\d)\b(?:\s?h\b)?"), clock),
        (re.compile(r"\b(?P<h>[01]?\d|2[0-3])\s?h\b(?![\w/])"), hours),
        *(
            (
                (
                    re.compile(rf"\b(?P<n>\d+)(?P<mark>°)(?=\s+(?:{loc.degree_ordinal_nouns})\b)(?P<noun>)"),
                    ordinal,
                ),
            )
            if loc.degree_ordinal_nouns
            else ()
        ),
        (re.compile(rf"(?P<t>[-+−]?{num})\s?°\s?(?P<scale>[CF])?(?![A-Za-z])"), temperature),
        (re.compile(rf"(?<![\d.,])(?P<a>{num})\s?[-–]\s?(?P<b>{num})\s?%"), percent_span),
        (re.compile(rf"(?P<n>{num})\s?%"), percent),
        (
            re.compile(rf"(?<![\d.,])(?P<a>{num})\s?[-–]\s?(?P<b>{num})\s?(?P<unit>{unit_names})(?![\w/])"),
            unit_span,
        ),
        (re.compile(rf"(?<![\d.,])(?P<a>{num})\s?[-–]\s?(?P<b>{num})(?![\d.,-])"), span),
        (re.compile(rf"(?<![\w.,])(?P<n>{num})\s?(?P<unit>{unit_names})(?![\w/])"), unit),
        (re.compile(rf"\b(?P<n>\d+)(?P<mark>{loc.ordinal_marks})(?![\w])(?=(?P<noun>\s+[^\W\d])?)"), ordinal),
        (re.compile(num), lambda m: _number(m.group(), lang)),
    )


def _es_date(day: str, month: str, year: str) -> str:
    return f"{day} de {month} de {year}" if year else f"{day} de {month}"


def _fr_date(day: str, month: str, year: str) -> str:
    return f"{day} {month} {year}".strip()


def _es_clock(hour: str, minute: int, minutes: str) -> str:
    return f"{hour} y {minutes}" if minute else f"{hour} en punto"


def _fr_clock(hour: str, minute: int, minutes: str) -> str:
    said = f"{hour} {'heure' if hour == 'une' else 'heures'}"
    return f"{said} {minutes}" if minute else said


def _it_clock(hour: str, minute: int, minutes: str) -> str:
    return f"{hour} e {minutes}" if minute else hour


def _pt_clock(hour: str, minute: int, minutes: str) -> str:
    return f"{hour} e {minutes}" if minute else f"{hour} {'hora' if hour == 'uma' else 'horas'}"


_EUR = {"€": "EUR", "EUR": "EUR", "euro": "EUR", "euros": "EUR"}
_USD = {"US$": "USD", "USD": "USD", "$": "USD"}
_GBP = {"£": "GBP", "GBP": "GBP"}
_BRL = {"R$": "BRL", "BRL": "BRL"}

SPANISH = Latin(
    lang="es",
    currencies={
        "EUR": Currency("euro", "euros", "céntimo", "céntimos"),
        "USD": Currency("dólar", "dólares", "centavo", "centavos"),
        "GBP": Currency("libra", "libras", "penique", "peniques", feminine=True),
        "BRL": Currency("real", "reales", "centavo", "centavos"),
        "MXN": Currency("peso", "pesos", "centavo", "centavos"),
    },
    symbols={**_EUR, **_USD, **_GBP, **_BRL, "dólares": "USD", "MXN": "MXN", "pesos": "MXN"},
    default_dollar="USD",
    cents_joiner="con",
    of_millions="de",
    months=tuple(
        "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split()
    ),
    first_day="uno",
    date=_es_date,
    clock=_es_clock,
    hours_word=("hora", "horas"),
    percent="por ciento",
    degrees=("grado", "grados"),
    fahrenheit="Fahrenheit",
    to=lambda a, b: f"{a} a {b}",
    plus="más",
    units={
        "km": ("kilómetro", "kilómetros"),
        "m": ("metro", "metros"),
        "cm": ("centímetro", "centímetros"),
        "mm": ("milímetro", "milímetros"),
        "kg": ("kilo", "kilos"),
        "g": ("gramo", "gramos"),
        "mg": ("miligramo", "miligramos"),
        "l": ("litro", "litros"),
        "L": ("litro", "litros"),
        "ml": ("mililitro", "mililitros"),
        "km/h": ("kilómetro por hora", "kilómetros por hora"),
        "min": ("minuto", "minutos"),
        "MB": ("megabyte", "megabytes"),
        "GB": ("gigabyte", "gigabytes"),
        "kWh": ("kilovatio hora", "kilovatios hora"),
    },
    ordinal_marks=r"\.?º|\.?ª|\.?er",
)

FRENCH = Latin(
    lang="fr",
    currencies={
        "EUR": Currency("euro", "euros", "centime", "centimes"),
        "USD": Currency("dollar", "dollars", "cent", "cents"),
        "GBP": Currency("livre", "livres", "penny", "pence", feminine=True),
        "CHF": Currency("franc", "francs", "centime", "centimes"),
    },
    symbols={**_EUR, **_USD, **_GBP, "dollars": "USD", "CHF": "CHF"},
    default_dollar="USD",
    cents_joiner="",
    of_millions="de",
    months=tuple(
        "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split()
    ),
    first_day="premier",
    date=_fr_date,
    clock=_fr_clock,
    hours_word=("heure", "heures"),
    percent="pour cent",
    degrees=("degré", "degrés"),
    fahrenheit="Fahrenheit",
    to=lambda a, b: f"{a} à {b}",
    plus="plus",
    units={
        "km": ("kilomètre", "kilomètres"),
        "m": ("mètre", "mètres"),
        "cm": ("centimètre", "centimètres"),
        "mm": ("millimètre", "millimètres"),
        "kg": ("kilo", "kilos"),
        "g": ("gramme", "grammes"),
        "mg": ("milligramme", "milligrammes"),
        "l": ("litre", "litres"),
        "L": ("litre", "litres"),
        "ml": ("millilitre", "millilitres"),
        "km/h": ("kilomètre heure", "kilomètres heure"),
        "min": ("minute", "minutes"),
        "Mo": ("mégaoctet", "mégaoctets"),
        "Go": ("gigaoctet", "gigaoctets"),
        "kWh": ("kilowattheure", "kilowattheures"),
    },
    ordinal_marks=r"ère|re|er|ème|eme|e|nde|nd",
)

ITALIAN = Latin(
    lang="it",
    currencies={
        "EUR": Currency("euro", "euro", "centesimo", "centesimi"),
        "USD": Currency("dollaro", "dollari", "centesimo", "centesimi"),
        "GBP": Currency("sterlina", "sterline", "penny", "pence", feminine=True),
        "CHF": Currency("franco", "franchi", "centesimo", "centesimi"),
    },
    symbols={**_EUR, **_USD, **_GBP, "dollari": "USD", "CHF": "CHF"},
    default_dollar="USD",
    cents_joiner="e",
    of_millions="di",
    months=tuple(
        "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split()
    ),
    first_day="primo",
    date=_fr_date,
    clock=_it_clock,
    hours_word=("ora", "ore"),
    percent="per cento",
    degrees=("grado", "gradi"),
    fahrenheit="Fahrenheit",
    to=lambda a, b: f"da {a} a {b}",
    plus="più",
    units={
        "km": ("chilometro", "chilometri"),
        "m": ("metro", "metri"),
        "cm": ("centimetro", "centimetri"),
        "mm": ("millimetro", "millimetri"),
        "kg": ("chilo", "chili"),
        "g": ("grammo", "grammi"),
        "mg": ("milligrammo", "milligrammi"),
        "l": ("litro", "litri"),
        "L": ("litro", "litri"),
        "ml": ("millilitro", "millilitri"),
        "km/h": ("chilometro orario", "chilometri orari"),
        "min": ("minuto", "minuti"),
        "MB": ("megabyte", "megabyte"),
        "GB": ("gigabyte", "gigabyte"),
        "kWh": ("chilowattora", "chilowattora"),
    },
    ordinal_marks=r"º|ª",
    degree_ordinal_nouns="piano|posto|anno|giorno|classificato|classificata|secolo|livello",
)

PORTUGUESE = Latin(
    lang="pt-br",
    currencies={
        "BRL": Currency("real", "reais", "centavo", "centavos"),
        "EUR": Currency("euro", "euros", "cêntimo", "cêntimos"),
        "USD": Currency("dólar", "dólares", "centavo", "centavos"),
        "GBP": Currency("libra", "libras", "pêni", "pence", feminine=True),
    },
    symbols={**_EUR, **_USD, **_GBP, **_BRL, "reais": "BRL", "real": "BRL", "dólares": "USD"},
    default_dollar="USD",
    cents_joiner="e",
    of_millions="de",
    months=tuple(
        "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split()
    ),
    first_day="primeiro",
    date=_es_date,
    clock=_pt_clock,
    hours_word=("hora", "horas"),
    percent="por cento",
    degrees=("grau", "graus"),
    fahrenheit="Fahrenheit",
    to=lambda a, b: f"{a} a {b}",
    plus="mais",
    units={
        "km": ("quilômetro", "quilômetros"),
        "m": ("metro", "metros"),
        "cm": ("centímetro", "centímetros"),
        "mm": ("milímetro", "milímetros"),
        "kg": ("quilo", "quilos"),
        "g": ("grama", "gramas"),
        "mg": ("miligrama", "miligramas"),
        "l": ("litro", "litros"),
        "L": ("litro", "litros"),
        "ml": ("mililitro", "mililitros"),
        "km/h": ("quilômetro por hora", "quilômetros por hora"),
        "min": ("minuto", "minutos"),
        "MB": ("megabyte", "megabytes"),
        "GB": ("gigabyte", "gigabytes"),
        "kWh": ("quilowatt-hora", "quilowatts-hora"),
    },
    ordinal_marks=r"º|ª",
    degree_ordinal_nouns="lugar|andar|ano|dia|colocado|colocada|turno|semestre|tempo|série|vez",
)
LATIN = {"es": SPANISH, "fr": FRENCH, "it": ITALIAN, "pt": PORTUGUESE}
