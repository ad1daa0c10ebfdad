"""``text.languages.latin`` and each Latin language: what the European languages' rules say for what assistants write (Japanese, Mandarin
and Hindi have their own files): the readings, the caller's words kept as the tokens' originals, the
date order per English, and a language without its number engine left as it was."""

from __future__ import annotations

import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.text import number_words
from streamvoice.text.normalize import normalize, say
from tests.helpers import cpu_seconds

READINGS: dict[str, list[tuple[str, str]]] = {
    "es": [
        ("Son 1.250,40 € al mes.", "Son mil doscientos cincuenta euros con cuarenta céntimos al mes."),
        ("Vale 21 $.", "Vale veintiún dólares."),
        ("Cuesta 1.000.000 €.", "Cuesta un millón de euros."),
        ("Quedamos a las 8:05.", "Quedamos a las ocho y cinco."),
        ("Abrimos de 10-14 h.", "Abrimos de diez a catorce horas."),
        ("Nació el 02/01/1998.", "Nació el dos de enero de mil novecientos noventa y ocho."),
        (
            "Llame al +34 611 222 333.",
            "Llame al más treinta y cuatro, seis uno uno, dos dos dos, tres tres tres.",
        ),
        ("Hace -3 °C fuera.", "Hace menos tres grados fuera."),
        ("Es el 1.er premio y la 2.ª vez.", "Es el primer premio y la segunda vez."),
        ("Tarda 20-30 min.", "Tarda veinte a treinta minutos."),
        ("Bajan un 2-4 %.", "Bajan un dos a cuatro por ciento."),
    ],
    "fr-fr": [
        ("Total : 7,05 €.", "Total : sept euros cinq."),
        ("Départ à 6h.", "Départ à six heures."),
        ("À 21h15 précises.", "À vingt et une heures quinze précises."),
        ("Le 1er juin et la 1re fois.", "Le premier juin et la première fois."),
        ("Le 05/02/2026.", "Le cinq février deux mille vingt-six."),
        ("Ville de 2 300 000 habitants.", "Ville de deux millions trois cent mille habitants."),
        ("Il fait 0,5 °C.", "Il fait zéro virgule cinq degrés."),
    ],
    "it": [
        ("Costa 1 €.", "Costa un euro."),
        ("Il 01/03/2026 alle 9:30.", "Il primo marzo duemilaventisei alle nove e trenta."),
        ("Sconto del 10 %.", "Sconto del dieci per cento."),
        ("La 3ª strada.", "La terza strada."),
        ("Pesa 2 kg.", "Pesa due chili."),
        ("Al 2° piano, con 30° fuori.", "Al secondo piano, con trenta gradi fuori."),
    ],
    "pt-br": [
        ("Custa R$ 1,00.", "Custa um real."),
        ("Custa R$ 2.500,75.", "Custa dois mil e quinhentos reais e setenta e cinco centavos."),
        ("Chego às 1h30.", "Chego às uma e trinta."),
        ("Às 22h.", "Às vinte e duas horas."),
        # the area code in parentheses is a number ("vinte e um"), the rest digit by digit
        ("Ligue (21) 3456-7890.", "Ligue vinte e um, três quatro cinco seis, sete oito nove zero."),
        ("Ligue para (11) 98765-4321.", "Ligue para onze, nove oito sete seis cinco, quatro três dois um."),
        ("A 1ª vez.", "A primeira vez."),
        ("Em 1° lugar, com 30° hoje.", "Em primeiro lugar, com trinta graus hoje."),
    ],
}


@pytest.mark.parametrize("lang", sorted(READINGS))
def test_each_language_reads_values_as_its_speakers_do(lang: str) -> None:
    assert [say(text, lang) for text, _ in READINGS[lang]] == [said for _, said in READINGS[lang]]


def test_the_callers_words_stay_the_originals_word_timings_name() -> None:
    tokens = normalize("Paga ₹499 a las 14h30.", "hi")
    assert "₹499" in [t.original for t in tokens]
    tokens = normalize("El tren sale a las 14h30 y cuesta 25,50 €.", "es")
    spans = {t.original: t.spoken for t in tokens}
    assert spans["14h30"] == "catorce y treinta" and spans["25,50 €"].startswith("veinticinco euros")


def test_numeric_dates_follow_the_language() -> None:
    assert say("on 3/4/2026", "en-us") == "on March fourth twenty twenty-six"
    assert say("on 3/4/2026", "en-gb") == "on the third of April twenty twenty-six"
    assert say("el 3/4/2026", "es") == "el tres de abril de dos mil veintiséis"


def test_a_language_whose_number_engine_is_missing_is_read_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamvoice.text import language_rules
    from streamvoice.text.normalize import rules_for

    def forget() -> None:  # both caches hold the rules built with the engine
        language_rules.language_rules.cache_clear()
        rules_for.cache_clear()

    monkeypatch.setattr(number_words, "_num2words", lambda: None)
    forget()
    try:
        assert say("Cuesta 25,50 €.", "es") == "Cuesta 25,50 €."
        assert say("价格¥12。", "cmn") == "价格十二元。"  # cn2an, not num2words, reads Mandarin
    finally:
        forget()


def test_english_is_unchanged_by_the_other_languages() -> None:
    assert say("It costs $12.50 at 3pm.", "en-us") == "It costs twelve dollars fifty cents at three p m."


def test_word_timings_name_the_callers_words_in_every_script(engine: KokoroEngine) -> None:
    def names(text: str, lang: str) -> list[str]:
        return [w.word for piece in engine.planner.plan(text, lang) for w in piece.words]

    assert names("価格は¥1,280です。会議は15:30です。", "ja") == ["価格は¥1,280です。", "会議は15:30です。"]
    assert names("价格是¥128.5。", "cmn") == ["价格是¥128.5。"]
    assert names("Cuesta 25,50 € a las 14h30.", "es") == ["Cuesta", "25,50 €", "a", "las", "14h30."]
    assert names("कीमत ₹499 है।", "hi") == ["कीमत", "₹499", "है।"]


HOSTILE = [
    "1",
    "1 ",
    "1.",
    "1,",
    "-1",
    "1%",
    "1°",
    "1-",
    "1:1",
    "12/03/",
    "(11) ",
    "¥1",
    "₹1,",
    "1月",
    "第1",
    "a-",
]


@pytest.mark.parametrize("lang", ["es", "fr-fr", "it", "pt-br", "ja", "cmn", "hi", "en-us"])
def test_value_rules_cost_grows_in_step_with_the_text_not_its_square(lang: str) -> None:
    """A run of digits and marks as long as a piece may hold (the chunker cuts a run at 1,000 characters)
    must not make a rule try every start against every end: ten times the text, not a hundred times."""

    def cost(text: str) -> float:
        return cpu_seconds(lambda: say(text, lang))

    say("1", lang)  # the rules compiled, the number engine imported
    for unit in HOSTILE:
        short, long = cost(unit * (100 // len(unit))), cost(unit * (1000 // len(unit)))
        assert long < 40 * short + 0.005, (unit, short, long)  # a square would be ~100x
