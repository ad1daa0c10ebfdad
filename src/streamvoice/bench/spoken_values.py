"""Sentences an assistant says with a value in them (money, a time, a date, a percentage, a phone number,
a unit or temperature, an ordinal), in each language, with what a native speaker says for the value; and
the judge of whether a listener (Whisper, language forced) heard that.

Used by ``bench.languages`` (share heard right, before and after) and ``tests/test_locales_heard.py``.

A value is right when it is both read as a native speaker reads it and heard:

- read: the phonemes the server plans for the sentence hold the phonemes of the expected words, within
  ``READ_TOLERANCE`` of their length in edits (stress marks and spaces aside; espeak softens a consonant
  or voices an s by its neighbours, "ð" for "d" after a vowel). Whisper alone cannot tell: it writes
  "3,5 %" for "tres coma cinco por ciento" and for a reading that merely got the number across.
- heard: what Whisper wrote, normalised by the same rules (it writes "32,75 €" or "treinta y dos euros";
  both count), holds the expected words in order: Latin languages by words (accents and case folded),
  Japanese by phonemes (kana and kanji spell one reading), Mandarin by toneless pinyin (Whisper base
  writes traditional characters); a phone number by its digits. Hindi, which Whisper base writes in Urdu
  script, is judged on the reading alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.text.normalize import say


@dataclass(frozen=True)
class Value:
    kind: str
    text: str
    said: tuple[str, ...]  # what a native speaker says for the value (any one of them)


# voice, Whisper's language code, the sentences
VALUES: dict[str, tuple[str, str, tuple[Value, ...]]] = {
    "es": ("ef_dora", "es", (
        Value("money", "La cena sale por 32,75 € en total.", ("treinta y dos euros con setenta y cinco", "treinta y dos euros setenta y cinco")),
        Value("time", "El tren sale a las 7h15 desde Atocha.", ("siete y quince",)),
        Value("date", "La reserva es para el 18/06/2030.", ("dieciocho de junio de dos mil treinta",)),
        Value("percent", "Los precios suben un 5-8 % este año.", ("cinco a ocho por ciento",)),
        Value("phone", "Puede llamarnos al 687 204 931.", ("seis ocho siete, dos cero cuatro, nueve tres uno",)),
        Value("unit", "El parque está a 4,2 km del hotel.", ("cuatro coma dos kilómetros",)),
        Value("ordinal", "Su despacho está en la 5.ª planta.", ("quinta planta",)),
    )),
    "fr-fr": ("ff_siwis", "fr", (
        Value("money", "Le menu coûte 18,90 € par personne.", ("dix-huit euros quatre-vingt-dix",)),
        Value("time", "Le musée ouvre à 9h45 le dimanche.", ("neuf heures quarante-cinq",)),
        Value("date", "Votre colis arrive le 21/09/2026.", ("vingt et un septembre deux mille vingt-six",)),
        Value("percent", "Une hausse de 2-3 % est prévue.", ("deux à trois pour cent",)),
        Value("phone", "Notre numéro : 06.45.67.33.60.", ("zéro six, quarante-cinq, soixante-sept, trente-trois, soixante",)),
        Value("unit", "Ajoutez 250 ml de lait tiède.", ("deux cent cinquante millilitres",)),
        Value("ordinal", "La salle est au 2e sous-sol.", ("deuxième",)),
    )),
    "it": ("if_sara", "it", (
        Value("money", "Il pranzo costa 14,50 € a testa.", ("quattordici euro e cinquanta", "quattordici euro cinquanta")),
        Value("time", "Il treno parte alle 18:40 dal binario tre.", ("diciotto e quaranta",)),
        Value("date", "La visita è fissata per il 07/11/2030.", ("sette novembre duemilatrenta",)),
        Value("percent", "Lo sconto è del 15 % su tutto.", ("quindici per cento", "quindici percento")),
        Value("phone", "Il numero è 347 812 5590.", ("tre quattro sette, otto uno due, cinque cinque nove zero",)),
        Value("unit", "Aggiungi 250 ml di latte caldo.", ("duecentocinquanta millilitri",)),
        Value("ordinal", "Abito al 4° piano.", ("al quarto",)),  # the ordinal, not Whisper's "pieno" for "piano"
    )),
    "pt-br": ("pf_dora", "pt", (
        Value("money", "O ingresso custa R$ 45,90 na bilheteria.", ("quarenta e cinco reais e noventa",)),
        Value("time", "A consulta é às 10h30 de amanhã.", ("dez e trinta", "dez e meia", "dez horas e trinta")),
        Value("date", "O voo sai em 23/08/2026.", ("vinte e três de agosto de dois mil e vinte e seis",)),
        Value("percent", "Os preços devem subir 5-10% no ano.", ("cinco a dez por cento",)),
        Value("phone", "Ligue para 98123-4567 se precisar.", ("nove oito um dois três, quatro cinco seis sete",)),
        Value("unit", "A trilha tem 6,5 km de extensão.", ("seis vírgula cinco quilômetros",)),
        Value("ordinal", "Ela ficou em 3° lugar na prova.", ("terceiro lugar",)),
    )),
    "ja": ("jf_alpha", "ja", (
        Value("money", "このランチは¥980です。", ("九百八十円",)),
        Value("time", "次のバスは17:40に出ます。", ("じゅうしちじよんじゅっぷん",)),
        Value("date", "試験は4月9日に行われます。", ("しがつここのか", "四月九日")),
        Value("percent", "成功率は85%でした。", ("八十五パーセント",)),
        Value("phone", "お店の番号は045-678-1234です。", ("ゼロよんご",)),
        Value("unit", "駅から3.5kmあります。", ("三点五キロメートル",)),
        Value("ordinal", "彼は第2走者です。", ("第二",)),
    )),
    "cmn": ("zf_xiaobei", "zh", (
        Value("money", "这张票¥45.5。", ("四十五元五角",)),
        Value("time", "电影晚上7:45开始。", ("七点四十五分",)),
        Value("date", "我们2027/5/20出发。", ("二零二七年五月二十日",)),
        Value("percent", "价格上涨了5-10%。", ("百分之五到十", "百分之五到百分之十")),  # both are said
        Value("phone", "请拨打139 2468 1357联系我。", ("幺三九二四六八幺三五七",)),
        Value("unit", "今天最高气温30°C。", ("三十摄氏度",)),
        Value("ordinal", "他排在第4位。", ("第四",)),
    )),
    "hi": ("hf_alpha", "hi", (
        Value("money", "इस किताब की कीमत ₹350 है।", ("तीन सौ पचास रुपये", "तीन सौ पचास रुपए")),
        Value("time", "ट्रेन सुबह 6:15 बजे चलेगी।", ("छह बजकर पंद्रह मिनट", "सवा छह बजे")),
        Value("date", "परीक्षा 12/05/2026 को है।", ("बारह मई दो हज़ार छब्बीस",)),
        Value("percent", "ब्याज दर 7% है।", ("सात प्रतिशत",)),
        Value("phone", "मुझे 98450 12367 पर फ़ोन करें।", ("नौ आठ चार पाँच शून्य",)),
        Value("unit", "आज तापमान 38°C है।", ("अड़तीस डिग्री सेल्सियस",)),
        Value("ordinal", "वह 2रा आया।", ("दूसरा",)),
    )),
}  # fmt: skip

Phonemize = Callable[[str, str], str]


def fold(text: str) -> str:
    """Lower case, no accents, no punctuation: how two spellings of one reading are compared."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(re.sub(r"[^\w]+|_", " ", text).split())


def _pinyin(text: str) -> str:
    from pypinyin import lazy_pinyin

    syllables = [s for s in lazy_pinyin(text) if s.strip() and s.isalpha()]
    return " ".join("yi" if s == "yao" else s for s in syllables)  # 幺 is 1 said in a phone number


def _compact(phonemes: str) -> str:
    return re.sub(r"[\s,.、。ˈˌ]+", "", phonemes)


READ_TOLERANCE = 0.12


def infix_distance(needle: str, hay: str) -> int:
    """The fewest edits that turn ``needle`` into some stretch of ``hay`` (Sellers' algorithm)."""
    row = [0] * (len(hay) + 1)  # a match may start anywhere: the first row costs nothing
    for i, ch in enumerate(needle, 1):
        prev, row = row, [i] + [0] * len(hay)
        for j, other in enumerate(hay, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ch != other))
    return min(row)


def read_right(lang: str, planned: str, value: Value, phonemize: Phonemize) -> bool:
    """Whether the planned phonemes say the value as a native speaker does."""
    got = _compact(planned)
    for said in value.said:
        want = _compact(phonemize(said, lang))
        if infix_distance(want, got) <= READ_TOLERANCE * len(want):
            return True
    return False


def _stems(read: str) -> list[str]:
    """The words of a text already read out (``say``: its values in words), folded, each without a plural
    ending: Whisper writes "18 € 90", "18, Euro 90" or "dix-huit euros quatre-vingt-dix" for one reading,
    and all three must count."""
    words = fold(read).split()
    return [w[:-1] if len(w) > 3 and w[-1] in "sx" else w for w in words]


def _holds(heard: list[str], said: list[str], slack: int = 2) -> bool:
    """Whether a stretch of ``heard`` at most ``slack`` words longer than ``said`` holds each of its words.

    Order inside the stretch is free (Whisper puts the currency after "18 € 90", the rules before "90"),
    the stretch is not: a value said in pieces across the sentence does not count.
    """
    need = Counter(said)
    width = len(said) + slack
    return any(not need - Counter(heard[start : start + width]) for start in range(max(1, len(heard))))


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def heard_right(lang: str, heard: str, value: Value, phonemize: Phonemize) -> bool:
    """Whether what Whisper heard holds the value, however it spelled it: digits, symbols and currency signs
    are read back into the language's words by the server's own rules (``text.normalize.say``) before
    comparing, so "18,90 €" and "dix-huit euros quatre-vingt-dix" are one value."""
    if value.kind == "phone" and _digits(value.text) in _digits(heard):
        return True  # Whisper writes a number it hears digit by digit either way
    read = say(heard, lang)
    if lang == "cmn":
        return any(_pinyin(said) in _pinyin(read) for said in value.said)
    if lang in ("ja", "hi"):
        got = _compact(phonemize(read, lang))
        return any(_compact(phonemize(said, lang)) in got for said in value.said)
    stems = _stems(read)
    return any(_holds(stems, _stems(say(said, lang))) for said in value.said)
