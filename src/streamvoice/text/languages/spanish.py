"""Spanish values as a native speaker reads them: the words and conventions of one ``Latin`` table; the
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
    return f"{hour} y {minutes}" if minute else f"{hour} en punto"


TABLE = Latin(
    lang="es",
    currencies={
        "EUR": Currency("euro", "euros", "céntimo", "céntimos"),
        "USD": Currency("dólar", "dólares", "centavo", "centavos"),
        "GBP": Currency("libra", "libras", "penique", "peniques", feminine=True),
        "BRL": Currency("real", "reales", "centavo", "centavos"),
        "MXN": Currency("peso", "pesos", "centavo", "centavos"),
    },
    symbols={**EUR, **USD, **GBP, **BRL, "dólares": "USD", "MXN": "MXN", "pesos": "MXN"},
    default_dollar="USD",
    cents_joiner="con",
    of_millions="de",
    months=tuple(
        "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split()
    ),
    first_day="uno",
    date=day_de_month_de_year,
    clock=clock,
    hours_word=("hora", "horas"),
    percent="por ciento",
    degrees=("grado", "grados"),
    fahrenheit="Fahrenheit",
    to="{a} a {b}",
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
LANGUAGE = language(TABLE)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='y', plus='más', equals='igual a', at='arroba', times='por', divided_by='entre', dot='punto', slash='barra', www='uve doble uve doble uve doble')  # fmt: skip
