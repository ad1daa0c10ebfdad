"""What assistants write in Japanese, in the words a speaker says: amounts in kanji numerals (misaki
reads 九百八十円 right, and a run of kana numbers it cuts into words Whisper hears as digits), and the
counters whose sounds change in kana (四時 "よじ", 四十分 "よんじゅっぷん", 九月 "くがつ", 五日 "いつか",
四円 "よえん"), where misaki reads digits or kanji wrong ("3月5日" was "san-tsuki go-nichi", 分 "ふん"
after every number). Measured by ``python -m streamvoice.bench.languages``; checked by
``pytest tests/test_japanese.py``.
"""

from __future__ import annotations

from streamvoice.text import number_words as nw
from streamvoice.text import rules as kind
from streamvoice.text.rules import Clock, Date, Language, Ordinal, Phone, Said, SymbolWords

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


def _money(written: str, amount: str) -> str:
    name = CURRENCY_BEFORE.get(written) or CURRENCY_AFTER[written]
    whole, fraction = nw.point_value(amount)
    if name == "えん" and not fraction and whole % 10 == 4:  # 4円 "よえん"
        return (kanji(whole - 4) if whole > 4 else "") + "よえん"
    return number(amount) + ("円" if name == "えん" else name)


def _date(date: Date) -> str:
    said = ""
    if date.year:
        said += kanji(int(date.year)) + "年"
    month, day = int(date.month), int(date.day or 0)
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


def _clock(time: Clock) -> str:
    said = _hour(time.hour)
    if time.half:
        return said + "はん"
    return said + minutes(time.minute) if time.minute else said


def _counted(n: int, counter: str) -> str:
    """A day without its month (``日``): 2日 to 10日 sound the same as a date and as a count of days; 1日 is a
    count ("1日3回": いちにち), the first of a month only beside its month (the date rule). Else ``counted``."""
    if counter == "日":
        return "いちにち" if n == 1 else DAYS.get(n, cardinal(n) + "にち")
    return counted(n, counter)


def _phone(number: Phone) -> str:
    return "、".join(digits(g) for g in number.groups)


def _temperature(value: str, scale: str | None) -> str:
    sign = "マイナス" if value[:1] in "-−" else ""
    said = sign + number(value.lstrip("+-−")) + "ど"
    return ("かし" if scale == "F" else "") + said


def _ordinal(n: Ordinal) -> str:
    return "第" + kanji(n.n)


_RANGE = "-–~〜～"
_PERCENT = "%％"
_COUNTERS = "|".join(sorted(COUNTERS | NATIVE, key=len, reverse=True))
LANGUAGE = Language(
    "ja",
    rules=(
        kind.phone(
            r"(?<!\d)0\d{1,4}-\d{1,4}-\d{3,4}(?!\d)|(?<!\d)\+\d{1,3}[\s-]\d{1,4}[\s-]\d{1,4}[\s-]\d{3,4}(?!\d)",
            _phone,
        ),
        kind.money(rf"(?P<cur>US\$|[¥￥$€])\s?(?P<n>{NUM})", _money),
        kind.money_after("円|ドル|ユーロ", NUM, _money),
        kind.date(r"(?P<y>\d{4})[/-](?P<mo>\d{1,2})[/-](?P<d>\d{1,2})(?!\d)", _date),
        kind.date(r"(?:(?P<y>\d{4})年)?(?P<mo>\d{1,2})月(?:(?P<d>\d{1,2})日)?", _date),
        kind.clock(r"(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)(?!\d)", _clock),
        kind.clock(r"(?P<h>[01]?\d|2[0-3])時(?:(?P<min>[0-5]?\d)分|(?P<han>半))?", _clock),
        kind.temperature(kind.degrees(NUM, r"(?:°\s?(?P<scale>[CF])?|℃|度)"), _temperature),
        kind.percent_range(NUM, Said("{}から{}パーセント", number), _RANGE, _PERCENT, start=""),
        kind.percent(NUM, Said("{}パーセント", number), _PERCENT),
        kind.value_range(NUM, Said("{}から{}", number), _RANGE, start="", end=r"(?![\d.])"),
        kind.counted(r"(?<!\d)(?P<n>[1-3]?\d)(?P<c>日)", _counted),
        kind.unit(NUM, UNITS, Said("{}{}", number, UNITS)),
        kind.ordinal(r"第(?P<n>\d+)", _ordinal),
        kind.counted(rf"(?<!\d)(?P<n>\d{{1,3}})(?P<c>{_COUNTERS})", _counted),
        kind.number(NUM, number),
    ),
)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='アンド', plus='プラス', equals='イコール', at='アット', times='かける', divided_by='わる', dot='ドット', slash='スラッシュ', www='ダブリューダブリューダブリュー')  # fmt: skip
