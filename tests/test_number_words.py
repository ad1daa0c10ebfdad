"""``text.number_words``: numbers in words per language (num2words, cn2an, our Hindi), for every language's rules."""

from __future__ import annotations

import pytest

from streamvoice.text import number_words as nw

WORDS = {  # 21, 3rd, the digits 407, 3.14, 1,234.5
    "es": ("veintiuno", "tercero", "cuatro cero siete", "tres coma catorce",
           "mil doscientos treinta y cuatro coma cinco"),
    "fr": ("vingt et un", "troisième", "quatre zéro sept", "trois virgule quatorze",
           "mille deux cent trente-quatre virgule cinq"),
    "it": ("ventuno", "terzo", "quattro zero sette", "tre virgola quattordici",
           "milleduecentotrentaquattro virgola cinque"),
    "pt": ("vinte e um", "terceiro", "quatro zero sete", "três vírgula catorze",
           "mil duzentos e trinta e quatro vírgula cinco"),
    "ja": ("二十一", "第三", "よんゼロなな", "三点一四", "千二百三十四点五"),
    "zh": ("二十一", "第三", "四零七", "三点一四", "一千二百三十四点五"),
    "hi": ("इक्कीस", "तीसरा", "चार शून्य सात", "तीन दशमलव एक चार", "एक हज़ार दो सौ चौंतीस दशमलव पाँच"),
}  # fmt: skip


@pytest.mark.parametrize("lang", sorted(WORDS))
def test_each_language_says_its_numbers_in_its_words(lang: str) -> None:
    assert nw.available(lang)
    said = (nw.cardinal(21, lang), nw.ordinal(3, lang), nw.digits("407", lang), nw.decimal(3, "14", lang),
            nw.number("1,234.5", lang))  # fmt: skip
    assert said == WORDS[lang]


def test_gender_and_the_point_value() -> None:
    assert nw.cardinal(21, "es", feminine=True) == "veintiuna"
    assert nw.point_value("1,234.50") == (1234, "50")  # grouping dropped, the fraction kept as written
    assert [nw.family(lang) for lang in ("pt-br", "fr-fr", "es")] == ["pt", "fr", "es"]
