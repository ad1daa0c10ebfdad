"""What assistants write in Mandarin, said in Chinese numerals: money in 元/角/分, 点 and 分 for clock
times, years digit by digit (二零二六年), 百分之 for percentages, phone digits with 幺, 到 for ranges,
摄氏度 and the metric units' Chinese names. misaki reads the characters (jieba, pypinyin).

Cardinals come from ``cn2an`` (``text.number_words``); without it these rules are left out. Checked by
``pytest tests/test_locales.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from streamvoice.text import number_words as nw

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

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


def _money(m: re.Match[str]) -> str:
    return money(CURRENCIES[(m["cur"] or m["cur2"]).strip()], m["n"])


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


def _date(m: re.Match[str]) -> str:
    said = year(m["y"]) + "年" if m["y"] else ""
    said += cardinal(int(m["mo"])) + "月"
    if m["d"]:
        said += cardinal(int(m["d"])) + ("号" if m.group().endswith("号") else "日")
    return said


def _clock(m: re.Match[str]) -> str:
    said = (m["part"] or "") + _two(int(m["h"])) + "点"
    minute = int(m["min"] or 0)
    if minute:
        said += ("零" if minute < 10 else "") + cardinal(minute) + "分"
    return said


def _phone(m: re.Match[str]) -> str:
    return "，".join(nw.digits(g, "zh") for g in re.findall(r"\d+", m.group()))


def _percent(m: re.Match[str]) -> str:
    return "百分之" + number(m["n"])


def _temperature(m: re.Match[str]) -> str:
    value = m["t"]
    below = "零下" if value[:1] in "-−" else ""
    scale = "华氏度" if m["scale"] == "F" else "摄氏度" if m["scale"] == "C" or "℃" in m.group() else "度"
    return below + number(value.lstrip("+-−")) + scale


def _unit(m: re.Match[str]) -> str:
    return number(m["n"]) + UNITS[m["unit"]]


def _range(m: re.Match[str]) -> str:
    return f"{number(m['a'])}到{number(m['b'])}"


_UNIT_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_CUR_BEFORE = r"US\$|[¥￥$€]|RMB\s?"
RULES: tuple[Rule, ...] = (
    (re.compile(r"(?<![\d.])(?:\+\d{1,3}[\s-]?)?(?:1\d{2}[\s-]\d{4}[\s-]\d{4}|1[3-9]\d{9}|0\d{2,3}-\d{7,8})(?!\d)"), _phone),
    (re.compile(rf"(?P<cur>{_CUR_BEFORE})\s?(?P<n>{NUM})(?P<cur2>)"), _money),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<cur2>元|块|美元|欧元)(?P<cur>)"), _money),
    (re.compile(r"(?P<y>\d{4})[/-](?P<mo>\d{1,2})[/-](?P<d>\d{1,2})(?!\d)"), _date),
    (re.compile(r"(?:(?P<y>\d{4})年)?(?P<mo>\d{1,2})月(?:(?P<d>\d{1,2})[日号])?"), _date),
    (re.compile(r"(?P<y>\d{4})年"), lambda m: year(m["y"]) + "年"),
    (re.compile(r"(?P<part>上午|下午|早上|晚上|中午|凌晨)?(?P<h>[01]?\d|2[0-3])[:：](?P<min>[0-5]\d)(?!\d)"), _clock),
    (re.compile(r"(?P<part>上午|下午|早上|晚上|中午|凌晨)?(?P<h>[01]?\d|2[0-3])点(?:(?P<min>[0-5]?\d)分?)?"), _clock),
    (re.compile(rf"(?P<t>[-+−]?{NUM})\s?(?:°\s?(?P<scale>[CF])?|℃)"), _temperature),
    (re.compile(rf"(?P<a>{NUM})\s?[-–~～到至]\s?(?P<b>{NUM})\s?[%％]"), lambda m: f"百分之{number(m['a'])}到{number(m['b'])}"),
    (re.compile(rf"(?P<n>{NUM})\s?[%％]"), _percent),
    (re.compile(rf"(?P<a>{NUM})\s?[-–~～到至]\s?(?P<b>{NUM})(?![\d.])"), _range),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<unit>{_UNIT_NAMES})(?![A-Za-z/])"), _unit),
    (re.compile(r"第(?P<n>\d+)"), lambda m: "第" + cardinal(int(m["n"]))),
    (re.compile(NUM), lambda m: number(m.group())),
)  # fmt: skip
