"""What assistants write in Hindi, said in Hindi words: rupees and paise ("₹499", "Rs. 12.50"), clock
times with बजे / बजकर ... मिनट, numeric dates day first, प्रतिशत, phone digits in groups, lakh and crore
("1,00,000" -> एक लाख), डिग्री सेल्सियस, units, ranges with से, ordinals ("3रा", "5वीं").

espeak-ng's Hindi reads the Devanagari. Checked by ``pytest tests/test_hindi.py``.
"""

from __future__ import annotations

from streamvoice.text import number_words as nw
from streamvoice.text import rules as kind
from streamvoice.text.rules import Clock, Date, Language, Ordinal, Phone, Said, SymbolWords

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


def _money(written: str, amount: str) -> str:
    return money(written, amount)


def _clock(time: Clock) -> str:
    hour, minute = time.hour, time.minute
    part = f"{time.part} " if time.part else ""
    if minute == 0:
        return f"{part}{cardinal(hour)} बजे"
    if minute == 30 and hour in (1, 2):  # डेढ़ / ढाई बजे, as every speaker says them
        return f"{part}{'डेढ़' if hour == 1 else 'ढाई'} बजे"
    return f"{part}{cardinal(hour)} बजकर {cardinal(minute)} मिनट"


def _date(date: Date) -> str:
    day, month = int(date.day or 0), int(date.month)
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return " ".join(cardinal(int(p)) for p in (date.day, date.month, date.year) if p)
    said = f"{cardinal(day)} {MONTHS[month - 1]}"
    return f"{said} {cardinal(int(date.year))}" if date.year else said


def _phone(number: Phone) -> str:
    groups = list(number.groups)
    said = []
    if number.written.startswith("+"):
        said.append(f"प्लस {cardinal(int(groups[0]))}")
        groups = groups[1:]
    return ", ".join(said + [nw.digits(g, "hi") for g in groups])


def _temperature(value: str, scale: str | None) -> str:
    sign = "माइनस " if value[:1] in "-−" else ""
    return f"{sign}{number(value.lstrip('+-−'))} डिग्री{SCALES.get(scale or '', '')}"


def _ordinal(n: Ordinal) -> str:
    if n.mark.endswith(("ी", "ीं")):
        return FEMININE_ORDINALS.get(n.n, f"{cardinal(n.n)}वीं")
    return nw.ordinal(n.n, "hi")


SCALES = {"F": " फ़ारेनहाइट", "C": " सेल्सियस"}
_PART = r"(?:(?P<part>सुबह|दोपहर|शाम|रात)\s)?"
LANGUAGE = Language(
    "hi",
    rules=(
        kind.phone(
            r"(?<![\d,.])(?:\+\d{1,3}[\s-]?)?(?:[6-9]\d{4}[\s-]\d{5}|0\d{2,4}[\s-]\d{6,8})(?!\d)", _phone
        ),
        kind.money_before(r"₹|Rs\.?|INR|\$|€", NUM, _money),
        kind.money_after("रुपये|₹", NUM, _money),
        kind.date(r"\b(?P<d>\d{1,2})[/.-](?P<mo>\d{1,2})[/.-](?P<y>\d{4})\b", _date),
        kind.clock(rf"{_PART}\b(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)\b(?:\s?बजे)?", _clock),
        kind.temperature(kind.degrees(NUM), _temperature),
        kind.percent_range(NUM, Said("{} से {} प्रतिशत", number)),
        kind.percent(NUM, Said("{} प्रतिशत", number)),
        kind.value_range(NUM, Said("{} से {}", number)),
        kind.unit(NUM, UNITS, Said("{} {}", number, UNITS)),
        kind.ordinal(r"(?<!\d)(?P<n>\d+)(?P<mark>ला|ली|ले|रा|री|रे|था|थी|थे|वाँ|वां|वीं|वें|ठा|ठी)", _ordinal),
        kind.number(NUM, number),
    ),
)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='और', plus='प्लस', equals='बराबर', at='एट', times='गुणा', divided_by='भाग', dot='डॉट', slash='स्लैश', www='डब्ल्यू डब्ल्यू डब्ल्यू')  # fmt: skip
