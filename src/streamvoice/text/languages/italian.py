"""Italian values as a native speaker reads them: the words and conventions of one ``Latin`` table; the
rules are ``languages.latin``'s. Checked by ``pytest tests/test_latin.py``."""

from __future__ import annotations

from streamvoice.text.languages.latin import EUR, GBP, USD, Currency, Latin, day_month_year, language
from streamvoice.text.rules import SymbolWords


def clock(hour: str, minute: int, minutes: str) -> str:
    return f"{hour} e {minutes}" if minute else hour


TABLE = Latin(
    lang="it",
    currencies={
        "EUR": Currency("euro", "euro", "centesimo", "centesimi"),
        "USD": Currency("dollaro", "dollari", "centesimo", "centesimi"),
        "GBP": Currency("sterlina", "sterline", "penny", "pence", feminine=True),
        "CHF": Currency("franco", "franchi", "centesimo", "centesimi"),
    },
    symbols={**EUR, **USD, **GBP, "dollari": "USD", "CHF": "CHF"},
    default_dollar="USD",
    cents_joiner="e",
    of_millions="di",
    months=tuple(
        "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split()
    ),
    first_day="primo",
    date=day_month_year,
    clock=clock,
    hours_word=("ora", "ore"),
    percent="per cento",
    degrees=("grado", "gradi"),
    fahrenheit="Fahrenheit",
    to="da {a} a {b}",
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
LANGUAGE = language(TABLE)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='e', plus='più', equals='uguale', at='chiocciola', times='per', divided_by='diviso', dot='punto', slash='barra', www='vu vu vu')  # fmt: skip
