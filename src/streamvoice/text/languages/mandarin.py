"""What assistants write in Mandarin, said in Chinese numerals: money in 元/角/分, 点 and 分 for clock
times, years digit by digit (二零二六年), 百分之 for percentages, phone digits with 幺, 到 for ranges,
摄氏度 and the metric units' Chinese names. misaki reads the characters (jieba, pypinyin).

Cardinals come from ``cn2an`` (``text.number_words``); without it these rules are left out. Checked by
``pytest tests/test_mandarin.py``.
"""

from __future__ import annotations

from streamvoice.text import number_words as nw
from streamvoice.text import rules as kind
from streamvoice.text.rules import Clock, Date, Language, Ordinal, Phone, Said, SymbolWords

LANG = "zh"
NUM = nw.POINT_NUM
YEAR_DIGITS = "零一二三四五六七八九"
UNITS = {
    "km": "公里", "m": "米", "cm": "厘米", "mm": "毫米", "kg": "公斤", "g": "克", "mg": "毫克",
    "L": "升", "l": "升", "ml": "毫升", "mL": "毫升", "km/h": "公里每小时", "GB": "GB", "MB": "MB",
    "kWh": "千瓦时",
}  # fmt: skip
CURRENCIES = {"¥": "元", "￥": "元", "RMB": "元", "元": "元", "块": "块", "$": "美元", "US$": "美元",
              "美元": "美元", "€": "欧元", "欧元": "欧元"}  # fmt: skip


def cardinal(n: int) -> str:
    return nw.cardinal(n, "zh")


def number(text: str) -> str:
    return nw.number(text, LANG)


def _two(n: int) -> str:
    """2 before a measure word is 两: 两点, 两元."""
    return "两" if n == 2 else cardinal(n)


def _money(written: str, amount: str) -> str:
    return money(CURRENCIES[written.strip()], amount)


def money(name: str, amount: str) -> str:
    """ "128.5" 元 -> 一百二十八元五角; 块 (the spoken word) takes 毛 for its tenths."""
    whole, fraction = nw.point_value(amount)
    if name not in ("元", "块"):
        return number(amount) + name
    said = _two(whole) + name if whole or not fraction else ""
    jiao, fen = (int(d) for d in fraction[:2].ljust(2, "0")) if fraction else (0, 0)
    if jiao:
        said += cardinal(jiao) + ("毛" if name == "块" else "角")
    elif fen and whole:
        said += "零"
    if fen:
        said += cardinal(fen) + "分"
    return said


def year(text: str) -> str:
    return "".join(YEAR_DIGITS[int(d)] for d in text)


def _date(date: Date) -> str:
    said = year(date.year) + "年" if date.year else ""
    said += cardinal(int(date.month)) + "月"
    if date.day:
        said += cardinal(int(date.day)) + ("号" if date.written.endswith("号") else "日")
    return said


def _year(written: str) -> str:
    return year(written[:-1]) + "年"


def _clock(time: Clock) -> str:
    said = (time.part or "") + _two(time.hour) + "点"
    if time.minute:
        said += ("零" if time.minute < 10 else "") + cardinal(time.minute) + "分"
    return said


def _phone(number: Phone) -> str:
    return "，".join(nw.digits(g, "zh") for g in number.groups)


def _temperature(value: str, scale: str | None) -> str:
    below = "零下" if value[:1] in "-−" else ""
    return below + number(value.lstrip("+-−")) + SCALES.get(scale or "", "度")


def _ordinal(n: Ordinal) -> str:
    return "第" + cardinal(n.n)


SCALES = {"F": "华氏度", "C": "摄氏度", "℃": "摄氏度"}
_RANGE = "-–~～到至"
_PERCENT = "%％"
_PART = r"(?P<part>上午|下午|早上|晚上|中午|凌晨)?"
# Mobile numbers, city numbers with their area code, and the 400 / 800 service numbers (read digit by
# digit: "400-820-8820" is no range).
PHONE = (
    r"(?<![\d.])(?:\+\d{1,3}[\s-]?)?(?:1\d{2}[\s-]\d{4}[\s-]\d{4}|1[3-9]\d{9}|0\d{2,3}-\d{7,8}"
    r"|[48]00[\s-]?\d{3}[\s-]?\d{4})(?!\d)"
)
LANGUAGE = Language(
    "zh",
    rules=(
        kind.phone(PHONE, _phone),
        kind.money(rf"(?P<cur>US\$|[¥￥$€]|RMB\s?)\s?(?P<n>{NUM})", _money),
        kind.money_after("元|块|美元|欧元", NUM, _money),
        kind.date(r"(?P<y>\d{4})[/-](?P<mo>\d{1,2})[/-](?P<d>\d{1,2})(?!\d)", _date),
        kind.date(r"(?:(?P<y>\d{4})年)?(?P<mo>\d{1,2})月(?:(?P<d>\d{1,2})[日号])?", _date),
        kind.words("year", r"\d{4}年", _year),
        kind.clock(rf"{_PART}(?P<h>[01]?\d|2[0-3])[:：](?P<min>[0-5]\d)(?!\d)", _clock),
        kind.clock(rf"{_PART}(?P<h>[01]?\d|2[0-3])点(?:(?P<min>[0-5]?\d)分?)?", _clock),
        kind.temperature(kind.degrees(NUM, r"(?:°\s?|(?=℃))(?P<scale>[CF]|℃)?"), _temperature),
        kind.percent_range(NUM, Said("百分之{}到{}", number), _RANGE, _PERCENT, start=""),
        kind.percent(NUM, Said("百分之{}", number), _PERCENT),
        kind.value_range(NUM, Said("{}到{}", number), _RANGE, start="", end=r"(?![\d.])"),
        kind.unit(NUM, UNITS, Said("{}{}", number, UNITS)),
        kind.ordinal(r"第(?P<n>\d+)", _ordinal),
        kind.number(NUM, number),
    ),
)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='和', plus='加', equals='等于', at='艾特', times='乘', divided_by='除以', dot='点', slash='斜杠', www='三W')  # fmt: skip
