"""What assistants write in Japanese, in the words a speaker says: amounts in kanji numerals (misaki
reads 九百八十円 right, and a run of kana numbers it cuts into words Whisper hears as digits), and the
counters whose sounds change in kana (四時 "よじ", 四十分 "よんじゅっぷん", 九月 "くがつ", 五日 "いつか",
四円 "よえん"), where misaki reads digits or kanji wrong ("3月5日" was "san-tsuki go-nichi", 分 "ふん"
after every number). Measured by ``python -m streamvoice.bench.languages``; checked by
``pytest tests/test_locales.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from streamvoice.text import number_words as nw

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

DIGIT = ("ぜろ", "いち", "に", "さん", "よん", "ご", "ろく", "なな", "はち", "きゅう")
HUNDREDS = {1: "ひゃく", 3: "さんびゃく", 6: "ろっぴゃく", 8: "はっぴゃく"}
THOUSANDS = {1: "せん", 3: "さんぜん", 8: "はっせん"}
BIG = ((10**12, "ちょう"), (10**8, "おく"), (10**4, "まん"))
MONTHS = {4: "しがつ", 7: "しちがつ", 9: "くがつ"}
DAYS = {
    1: "ついたち", 2: "ふつか", 3: "みっか", 4: "よっか", 5: "いつか", 6: "むいか", 7: "なのか",
    8: "ようか", 9: "ここのか", 10: "とおか", 14: "じゅうよっか", 20: "はつか", 24: "にじゅうよっか",
}  # fmt: skip
HOURS = {4: "よじ", 7: "しちじ", 9: "くじ"}
# 分: ふん after 2, 5, 7, 9; ぷん (with a small っ) after 1, 3, 4, 6, 8, 10
MINUTES = {1: "いっぷん", 3: "さんぷん", 4: "よんぷん", 6: "ろっぷん", 8: "はっぷん", 0: "じゅっぷん"}
YEN = {4: "よえん"}


def _under_10000(n: int) -> str:
    out = ""
    th, n = divmod(n, 1000)
    if th:
        out += THOUSANDS.get(th, DIGIT[th] + "せん")
    hu, n = divmod(n, 100)
    if hu:
        out += HUNDREDS.get(hu, DIGIT[hu] + "ひゃく")
    te, n = divmod(n, 10)
    if te:
        out += "じゅう" if te == 1 else DIGIT[te] + "じゅう"
    if n:
        out += DIGIT[n]
    return out


def kanji(n: int) -> str:
    return "マイナス" + kanji(-n) if n < 0 else "ゼロ" if n == 0 else nw.cardinal(n, "ja")


def cardinal(n: int) -> str:
    """In kana: only for counters, whose sound changes this module spells out."""
    if n == 0:
        return "ゼロ"
    if n < 0:
        return "マイナス" + cardinal(-n)
    out = ""
    for scale, name in BIG:
        if n >= scale:
            head, n = divmod(n, scale)
            out += _under_10000(head) + name
    return out + _under_10000(n)


def minutes(n: int) -> str:
    return counted(n, "分")


# Counters whose sound changes after some last digits (0: the form after 10, 20, ... 90), and the plain
# reading after the others: 一回 いっかい, 三階 さんがい, 六本 ろっぽん, 八歳 はっさい, 十個 じゅっこ.
COUNTERS: dict[str, tuple[str, dict[int, str]]] = {
    "分": ("ふん", MINUTES),
    "回": ("かい", {1: "いっかい", 6: "ろっかい", 8: "はっかい", 0: "じゅっかい"}),
    "個": ("こ", {1: "いっこ", 6: "ろっこ", 8: "はっこ", 0: "じゅっこ"}),
    "階": ("かい", {1: "いっかい", 3: "さんがい", 6: "ろっかい", 8: "はっかい", 0: "じゅっかい"}),
    "本": ("ほん", {1: "いっぽん", 3: "さんぼん", 6: "ろっぽん", 8: "はっぽん", 0: "じゅっぽん"}),
    "杯": ("はい", {1: "いっぱい", 3: "さんばい", 6: "ろっぱい", 8: "はっぱい", 0: "じゅっぱい"}),
    "匹": ("ひき", {1: "いっぴき", 3: "さんびき", 6: "ろっぴき", 8: "はっぴき", 0: "じゅっぴき"}),
    "歳": ("さい", {1: "いっさい", 8: "はっさい", 0: "じゅっさい"}),
    "ヶ月": ("かげつ", {1: "いっかげつ", 6: "ろっかげつ", 8: "はっかげつ", 0: "じゅっかげつ"}),
}
for _month in ("か月", "カ月", "ヵ月", "ケ月"):
    COUNTERS[_month] = COUNTERS["ヶ月"]
# Counted with the native numbers, up to ten: ひとつ ... とお, ひとり, ふたり.
NATIVE = {
    "つ": dict(enumerate("ひとつ ふたつ みっつ よっつ いつつ むっつ ななつ やっつ ここのつ とお".split(), 1)),
    "人": {1: "ひとり", 2: "ふたり", 4: "よにん"},
}


def counted(n: int, counter: str) -> str:
    """A number with its counter, as it sounds: 21分 にじゅういっぷん, 30分 さんじゅっぷん, 3人 さんにん."""
    if counter in NATIVE:
        if n in NATIVE[counter]:
            return NATIVE[counter][n]
        if counter == "つ":  # past ten the native count has no words: the number alone
            return cardinal(n)
        head, last = divmod(n, 10)
        if last == 0:
            return cardinal(n) + "にん"
        return (cardinal(head * 10) if head else "") + ("よにん" if last == 4 else cardinal(last) + "にん")
    if counter == "歳" and n == 20:
        return "はたち"
    plain, changed = COUNTERS[counter]
    head, last = divmod(n, 10)
    if last == 0 and 0 < n < 100:  # 10 ... 90: "じゅう" shortens to "じゅっ"
        return cardinal(n)[: -len("じゅう")] + changed[0]
    if last in changed and n < 100:
        return (cardinal(head * 10) if head else "") + changed[last]
    return cardinal(n) + plain


def digits(text: str) -> str:
    return nw.digits(text, LANG)


def number(text: str) -> str:
    return nw.number(text, LANG)


LANG = "ja"
NUM = nw.POINT_NUM
UNITS = {
    "km": "キロメートル", "m": "メートル", "cm": "センチメートル", "mm": "ミリメートル",
    "kg": "キログラム", "g": "グラム", "mg": "ミリグラム", "L": "リットル", "l": "リットル",
    "ml": "ミリリットル", "mL": "ミリリットル", "km/h": "キロメートルじそく", "GB": "ギガバイト",
    "MB": "メガバイト", "kWh": "キロワットアワー",
}  # fmt: skip
CURRENCY_AFTER = {"円": "えん", "ドル": "ドル", "ユーロ": "ユーロ"}
CURRENCY_BEFORE = {"¥": "えん", "￥": "えん", "$": "ドル", "US$": "ドル", "€": "ユーロ"}


def _money(m: re.Match[str]) -> str:
    written = m["cur"] or m["cur2"]
    name = CURRENCY_BEFORE.get(written) or CURRENCY_AFTER[written]
    whole, fraction = nw.point_value(m["n"])
    if name == "えん" and not fraction and whole % 10 == 4:  # 4円 "よえん"
        return (kanji(whole - 4) if whole > 4 else "") + "よえん"
    return number(m["n"]) + ("円" if name == "えん" else name)


def _date(m: re.Match[str]) -> str:
    said = ""
    if m["y"]:
        said += kanji(int(m["y"])) + "年"
    month, day = int(m["mo"]), int(m["d"]) if m["d"] else 0
    if month:
        said += MONTHS.get(month, cardinal(month) + "がつ")
    if day:
        said += DAYS.get(day, cardinal(day) + "にち")
    return said


def _hour(hour: int) -> str:
    if hour in HOURS:
        return HOURS[hour]
    if hour > 10 and hour % 10 in HOURS:  # 14時 "じゅうよじ"
        return cardinal(hour - hour % 10) + HOURS[hour % 10]
    return cardinal(hour) + "じ"


def _days(m: re.Match[str]) -> str:
    """A day without its month: 2日 to 10日 sound the same as a date and as a count of days; 1日 is a
    count ("1日3回": いちにち), the first of a month only beside its month (handled by the date rule)."""
    day = int(m["d"])
    return "いちにち" if day == 1 else DAYS.get(day, cardinal(day) + "にち")


def _clock(m: re.Match[str]) -> str:
    said = _hour(int(m["h"]))
    if m["han"]:
        return said + "はん"
    return said + minutes(int(m["min"])) if m["min"] and int(m["min"]) else said


def _phone(m: re.Match[str]) -> str:
    return "、".join(digits(g) for g in re.findall(r"\d+", m.group()))


def _percent(m: re.Match[str]) -> str:
    return number(m["n"]) + "パーセント"


def _temperature(m: re.Match[str]) -> str:
    value = m["t"]
    sign = "マイナス" if value[:1] in "-−" else ""
    said = sign + number(value.lstrip("+-−")) + "ど"
    return ("かし" if m["scale"] == "F" else "") + said


def _unit(m: re.Match[str]) -> str:
    return number(m["n"]) + UNITS[m["unit"]]


def _range(m: re.Match[str]) -> str:
    return f"{number(m['a'])}から{number(m['b'])}"


def _ordinal(m: re.Match[str]) -> str:
    return "第" + kanji(int(m["n"]))


_UNIT_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
RULES: tuple[Rule, ...] = (
    (re.compile(r"(?<!\d)0\d{1,4}-\d{1,4}-\d{3,4}(?!\d)|(?<!\d)\+\d{1,3}[\s-]\d{1,4}[\s-]\d{1,4}[\s-]\d{3,4}(?!\d)"), _phone),
    (re.compile(rf"(?P<cur>US\$|[¥￥$€])\s?(?P<n>{NUM})(?P<cur2>)"), _money),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<cur2>円|ドル|ユーロ)(?P<cur>)"), _money),
    (re.compile(r"(?P<y>\d{4})[/-](?P<mo>\d{1,2})[/-](?P<d>\d{1,2})(?!\d)"), _date),
    (re.compile(r"(?:(?P<y>\d{4})年)?(?P<mo>\d{1,2})月(?:(?P<d>\d{1,2})日)?"), _date),
    (re.compile(r"(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)(?P<han>)(?!\d)"), _clock),
    (re.compile(r"(?P<h>[01]?\d|2[0-3])時(?:(?P<min>[0-5]?\d)分|(?P<han>半))?"), _clock),
    (re.compile(rf"(?P<t>[-+−]?{NUM})\s?(?:°\s?(?P<scale>[CF])?|℃|度)"), _temperature),
    (re.compile(rf"(?P<a>{NUM})\s?[-–~〜～]\s?(?P<b>{NUM})\s?[%％]"), lambda m: f"{number(m['a'])}から{number(m['b'])}パーセント"),
    (re.compile(rf"(?P<n>{NUM})\s?[%％]"), _percent),
    (re.compile(rf"(?P<a>{NUM})\s?[-–~〜～]\s?(?P<b>{NUM})(?![\d.])"), _range),
    (re.compile(r"(?<!\d)(?P<d>[1-3]?\d)日"), _days),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<unit>{_UNIT_NAMES})(?![A-Za-z/])"), _unit),
    (re.compile(r"第(?P<n>\d+)"), _ordinal),
    (re.compile(rf"(?<!\d)(?P<n>\d{{1,3}})(?P<c>{'|'.join(sorted(COUNTERS | NATIVE, key=len, reverse=True))})"), lambda m: counted(int(m["n"]), m["c"])),
    (re.compile(NUM), lambda m: number(m.group())),
)  # fmt: skip
