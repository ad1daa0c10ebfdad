"""What assistants write in Hindi, said in Hindi words: rupees and paise ("₹499", "Rs. 12.50"), clock
times with बजे / बजकर ... मिनट, numeric dates day first, प्रतिशत, phone digits in groups, lakh and crore
("1,00,000" -> एक लाख), डिग्री सेल्सियस, units, ranges with से, ordinals ("3रा", "5वीं").

espeak-ng's Hindi reads the Devanagari. Checked by ``pytest tests/test_locales.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from streamvoice.text import number_words as nw

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

LANG = "hi"
NUM = r"(?<!\d)(?:\d{1,3}(?:,\d{2,3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
MONTHS = "जनवरी फ़रवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर अक्टूबर नवंबर दिसंबर".split()
UNITS = {
    "km": "किलोमीटर", "m": "मीटर", "cm": "सेंटीमीटर", "mm": "मिलीमीटर", "kg": "किलो", "g": "ग्राम",
    "mg": "मिलीग्राम", "L": "लीटर", "l": "लीटर", "ml": "मिलीलीटर", "km/h": "किलोमीटर प्रति घंटा",
    "GB": "जीबी", "MB": "एमबी", "kWh": "किलोवाट घंटा", "min": "मिनट",
}  # fmt: skip
CURRENCIES = {"₹": ("रुपये", "रुपया", "पैसे"), "Rs": ("रुपये", "रुपया", "पैसे"),
              "INR": ("रुपये", "रुपया", "पैसे"), "रुपये": ("रुपये", "रुपया", "पैसे"),
              "$": ("डॉलर", "डॉलर", "सेंट"), "€": ("यूरो", "यूरो", "सेंट")}  # fmt: skip
FEMININE_ORDINALS = {1: "पहली", 2: "दूसरी", 3: "तीसरी", 4: "चौथी", 6: "छठी"}


def cardinal(n: int) -> str:
    return nw.cardinal(n, "hi")


def number(text: str) -> str:
    return nw.number(text, LANG)


def money(written: str, amount: str) -> str:
    many, one, sub = CURRENCIES[written.rstrip(".").strip()]
    whole, fraction = nw.point_value(amount)
    paise = int(fraction[:2].ljust(2, "0")) if fraction else 0
    said = f"{cardinal(whole)} {one if whole == 1 else many}" if whole or not paise else ""
    if paise:
        said = f"{said} {cardinal(paise)} {sub}".strip()
    return said


def _clock(m: re.Match[str]) -> str:
    hour, minute = int(m["h"]), int(m["min"] or 0)
    part = f"{m['part']} " if m["part"] else ""
    if minute == 0:
        return f"{part}{cardinal(hour)} बजे"
    if minute == 30 and hour in (1, 2):  # डेढ़ / ढाई बजे, as every speaker says them
        return f"{part}{'डेढ़' if hour == 1 else 'ढाई'} बजे"
    return f"{part}{cardinal(hour)} बजकर {cardinal(minute)} मिनट"


def _date(m: re.Match[str]) -> str:
    day, month = int(m["d"]), int(m["mo"])
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return " ".join(cardinal(int(p)) for p in (m["d"], m["mo"], m["y"]) if p)
    said = f"{cardinal(day)} {MONTHS[month - 1]}"
    return f"{said} {cardinal(int(m['y']))}" if m["y"] else said


def _phone(m: re.Match[str]) -> str:
    groups = re.findall(r"\d+", m.group())
    said = []
    if m.group().startswith("+"):
        said.append(f"प्लस {cardinal(int(groups[0]))}")
        groups = groups[1:]
    return ", ".join(said + [nw.digits(g, "hi") for g in groups])


def _temperature(m: re.Match[str]) -> str:
    value = m["t"]
    sign = "माइनस " if value[:1] in "-−" else ""
    scale = " फ़ारेनहाइट" if m["scale"] == "F" else " सेल्सियस" if m["scale"] == "C" else ""
    return f"{sign}{number(value.lstrip('+-−'))} डिग्री{scale}"


def _ordinal(m: re.Match[str]) -> str:
    n, mark = int(m["n"]), m["mark"]
    if mark.endswith(("ी", "ीं")):
        return FEMININE_ORDINALS.get(n, f"{cardinal(n)}वीं")
    return nw.ordinal(n, "hi")


_UNIT_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_PART = r"(?:(?P<part>सुबह|दोपहर|शाम|रात)\s)?"
RULES: tuple[Rule, ...] = (
    (re.compile(r"(?<![\d,.])(?:\+\d{1,3}[\s-]?)?(?:[6-9]\d{4}[\s-]\d{5}|0\d{2,4}[\s-]\d{6,8})(?!\d)"), _phone),
    (re.compile(rf"(?P<cur>₹|Rs\.?|INR|\$|€)\s?(?P<n>{NUM})"), lambda m: money(m["cur"], m["n"])),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<cur>रुपये|₹)"), lambda m: money(m["cur"], m["n"])),
    (re.compile(r"\b(?P<d>\d{1,2})[/.-](?P<mo>\d{1,2})[/.-](?P<y>\d{4})\b"), _date),
    (re.compile(rf"{_PART}\b(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)\b(?:\s?बजे)?"), _clock),
    (re.compile(rf"(?P<t>[-+−]?{NUM})\s?°\s?(?P<scale>[CF])?(?![A-Za-z])"), _temperature),
    (re.compile(rf"(?<![\d.,])(?P<a>{NUM})\s?[-–]\s?(?P<b>{NUM})\s?%"), lambda m: f"{number(m['a'])} से {number(m['b'])} प्रतिशत"),
    (re.compile(rf"(?P<n>{NUM})\s?%"), lambda m: f"{number(m['n'])} प्रतिशत"),
    (re.compile(rf"(?<![\d.,])(?P<a>{NUM})\s?[-–]\s?(?P<b>{NUM})(?![\d.,-])"), lambda m: f"{number(m['a'])} से {number(m['b'])}"),
    (re.compile(rf"(?P<n>{NUM})\s?(?P<unit>{_UNIT_NAMES})(?![A-Za-z/])"), lambda m: f"{number(m['n'])} {UNITS[m['unit']]}"),
    (re.compile(r"(?<!\d)(?P<n>\d+)(?P<mark>ला|ली|ले|रा|री|रे|था|थी|थे|वाँ|वां|वीं|वें|ठा|ठी)"), _ordinal),
    (re.compile(NUM), lambda m: number(m.group())),
)  # fmt: skip
