"""French values as a native speaker reads them: the words and conventions of one ``Latin`` table; the
rules are ``languages.latin``'s. Checked by ``pytest tests/test_latin.py``."""

from __future__ import annotations

from streamvoice.text.languages.latin import EUR, GBP, USD, Currency, Latin, day_month_year, language
from streamvoice.text.rules import SymbolWords


def clock(hour: str, minute: int, minutes: str) -> str:
    said = f"{hour} {'heure' if hour == 'une' else 'heures'}"
    return f"{said} {minutes}" if minute else said


TABLE = Latin(
    lang="fr",
    currencies={
        "EUR": Currency("euro", "euros", "centime", "centimes"),
        "USD": Currency("dollar", "dollars", "cent", "cents"),
        "GBP": Currency("livre", "livres", "penny", "pence", feminine=True),
        "CHF": Currency("franc", "francs", "centime", "centimes"),
    },
    symbols={**EUR, **USD, **GBP, "dollars": "USD", "CHF": "CHF"},
    default_dollar="USD",
    cents_joiner="",
    of_millions="de",
    months=tuple(
        "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split()
    ),
    first_day="premier",
    date=day_month_year,
    clock=clock,
    hours_word=("heure", "heures"),
    percent="pour cent",
    degrees=("degré", "degrés"),
    fahrenheit="Fahrenheit",
    to="{a} à {b}",
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
LANGUAGE = language(TABLE)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='et', plus='plus', equals='égale', at='arobase', times='fois', divided_by='divisé par', dot='point', slash='barre oblique', www='double v double v double v')  # fmt: skip
