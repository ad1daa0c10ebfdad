"""Portuguese values as a native speaker reads them: the words and conventions of one ``Latin`` table; the
rules are ``languages.latin``'s. Checked by ``pytest tests/test_latin.py``."""

from __future__ import annotations

from streamvoice.text.languages.latin import (
    BRL,
    EUR,
    GBP,
    USD,
    Currency,
    Latin,
    day_de_month_de_year,
    language,
)
from streamvoice.text.rules import SymbolWords


def clock(hour: str, minute: int, minutes: str) -> str:
    return f"{hour} e {minutes}" if minute else f"{hour} {'hora' if hour == 'uma' else 'horas'}"


TABLE = Latin(
    lang="pt-br",
    currencies={
        "BRL": Currency("real", "reais", "centavo", "centavos"),
        "EUR": Currency("euro", "euros", "cêntimo", "cêntimos"),
        "USD": Currency("dólar", "dólares", "centavo", "centavos"),
        "GBP": Currency("libra", "libras", "pêni", "pence", feminine=True),
    },
    symbols={**EUR, **USD, **GBP, **BRL, "reais": "BRL", "real": "BRL", "dólares": "USD"},
    default_dollar="USD",
    cents_joiner="e",
    of_millions="de",
    months=tuple(
        "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split()
    ),
    first_day="primeiro",
    date=day_de_month_de_year,
    clock=clock,
    hours_word=("hora", "horas"),
    percent="por cento",
    degrees=("grau", "graus"),
    fahrenheit="Fahrenheit",
    to="{a} a {b}",
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
    area_code_as_number=True,
)
LANGUAGE = language(TABLE)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='e', plus='mais', equals='igual a', at='arroba', times='vezes', divided_by='dividido por', dot='ponto', slash='barra', www='dáblio dáblio dáblio')  # fmt: skip
