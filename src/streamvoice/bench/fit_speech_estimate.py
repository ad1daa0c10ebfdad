"""Fit the estimate of a piece's decoder statistics from its frame summaries (``engine.streaming.
speech_estimate``) for the model file in use, and write it where the engine looks for it.

Each stock voice speaks a corpus written for this (English sentences and short replies, and a few in its
own language): every piece's speech is decoded whole to measure its statistics, against the voice's
reference (its calibration greeting, as ``KokoroEngine.calibrate`` measures it). No sentence of the
benchmarks or tests is in the corpus, so what they measure of the estimate is measured on sentences it never
saw; ``--hold-out`` leaves voices out too (what a voice it never heard, or a blend, gets). ~15 minutes on
2 cores; ``--kept`` keeps the measurements so that a fit with other settings takes a minute.

Then each voice's share of the estimate in every window (``SpeechEstimator.shares``) and its stream's gain
(``SpeechEstimator.gains``) are measured on six full sentences outside its own part of the corpus: streamed
at each of ``SHARES`` against whole, each share with the gain that brings its pieces to whole's loudness on
average, the share whose windows score best by PESQ while every piece, gained, stays within ``LOUDNESS`` of
whole (~20 minutes more).

    python -m streamvoice.bench.fit_speech_estimate [--out DIR] [--rank 64] [--ridge 100] [--hold-out V,..]
    python -m streamvoice.bench.fit_speech_estimate --shares-only [--voices V,..]  # the shares alone
"""

from __future__ import annotations

import argparse
import pickle
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from streamvoice.bench.common import write_result
from streamvoice.bench.quality import loudness_ratio, pesq_score
from streamvoice.engine import KokoroEngine
from streamvoice.engine.greeting import calibration_text
from streamvoice.engine.streaming import speech_estimate
from streamvoice.engine.streaming.speech_estimate import packed
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.engine.timing import decode_range
from streamvoice.engine.voices import default_lang
from streamvoice.model_files import naming_hash

ENGLISH = (
    "I can help you reset your password in just a minute.",
    "Your order shipped this morning and should arrive on Thursday.",
    "Would you like me to read the last three transactions?",
    "Sorry, I didn't catch that. Could you say it again?",
    "The weather tomorrow looks sunny with a high of seventy two degrees.",
    "Let me check whether the doctor has any openings next week.",
    "Thanks for waiting. I found your reservation under the name Garcia.",
    "There are two flights to Denver this evening, at six fifteen and at nine.",
    "Your balance is four hundred and twelve dollars and eighteen cents.",
    "Okay.",
    "Certainly!",
    "Absolutely, I'll send the receipt to your email right away.",
    "The package was left at the front desk of your building.",
    "I'm afraid that item is out of stock until the end of the month.",
    "Please confirm the last four digits of your card.",
    "We're open every day from eight in the morning until ten at night.",
    "Would you prefer a window seat or an aisle seat?",
    "Your subscription renews automatically on the first of each month.",
    "Great news: the refund has been approved.",
    "Hmm, let me think about that for a second.",
    "The train to Boston is running about fifteen minutes late.",
    "I've added milk, eggs and bread to your shopping list.",
    "Can you tell me a little more about the problem you're seeing?",
    "Restarting the router usually fixes this kind of connection issue.",
    "The meeting has been moved to Wednesday at two o'clock.",
    "Is there anything else I can help you with today?",
    "Your prescription will be ready for pickup after four.",
    "That's a great question, and the short answer is yes.",
    "Turn left at the next light, then continue straight for half a mile.",
    "The total comes to thirty seven fifty, including tax.",
    "I'm sorry to hear that. Let's see what we can do.",
    "Our technician can visit between noon and three on Friday.",
    "No problem at all.",
    "The account was created on March third, twenty nineteen.",
    "Please stay on the line while I look that up.",
    "Your flight lands in Chicago at eleven forty local time.",
    "Hello! How are you doing this afternoon?",
    "I have updated your address to twelve Oak Street, apartment four.",
    "It looks like the payment didn't go through. Would you like to try another card?",
    "Sunrise is at six fifty two tomorrow, and sunset at five oh eight.",
    "Yes.",
    "Bye for now, and have a wonderful weekend!",
    "You can cancel anytime from the settings page of the app.",
    "We received your message and will reply within one business day.",
    "The kitchen closes at nine, but the bar serves snacks until midnight.",
    "Your score improved by twelve points since last quarter.",
    "Would you like me to set a reminder for that?",
    "The library book is due back on the twenty first.",
    "I'm connecting you with our billing team now.",
    "That option costs an extra five dollars per month.",
    "Wow, that was quick!",
    "Let's start with your full name and date of birth.",
    "The storm knocked out power to about three thousand homes last night.",
    "Please speak clearly after the tone.",
    "Our records show two missed payments this year.",
    "The new firmware improves battery life by nearly twenty percent.",
    "I'll remind you again at quarter past seven.",
    "The hotel offers free breakfast and parking for guests.",
    "Right, so the first step is to unplug the device for thirty seconds.",
    "Excellent. You're all set.",
)
SHORT = ("Right.", "Of course.", "Hi there!", "Got you.", "Perfect, thank you.", "Just a second.", "Oh, I see.",
         "Not yet.", "All done!", "Sounds good to me.", "Really?", "Noted.")  # fmt: skip
OWN_LANGUAGE = {
    "es": ("Su pedido llegará el jueves por la mañana.", "¿Le gustaría que le envíe el recibo por correo?",
           "Lo siento, no entendí bien. ¿Puede repetirlo?", "La reunión empieza a las tres y media.",
           "Claro que sí.", "Muchas gracias por su paciencia."),
    "fr-fr": ("Votre commande arrivera jeudi matin.", "Voulez-vous que je vous envoie le reçu par courriel ?",
              "Désolé, je n'ai pas bien compris. Pouvez-vous répéter ?", "La réunion commence à quinze heures trente.",
              "Bien sûr.", "Merci beaucoup pour votre patience."),
    "it": ("Il suo ordine arriverà giovedì mattina.", "Vuole che le invii la ricevuta per email?",
           "Mi scusi, non ho capito bene. Può ripetere?", "La riunione inizia alle tre e mezza.", "Certo.",
           "Grazie mille per la pazienza."),
    "pt-br": ("Seu pedido vai chegar na quinta de manhã.", "Quer que eu envie o recibo por email?",
              "Desculpe, não entendi bem. Pode repetir?", "A reunião começa às três e meia.", "Claro.",
              "Muito obrigado pela paciência."),
    "hi": ("आपका ऑर्डर गुरुवार सुबह पहुँचेगा।", "क्या मैं रसीद ईमेल पर भेज दूँ?",
           "माफ़ कीजिए, मैं समझ नहीं पाया। क्या आप दोहरा सकते हैं?", "बैठक साढ़े तीन बजे शुरू होगी।", "ज़रूर।",
           "आपके धैर्य के लिए धन्यवाद।"),
    "ja": ("ごちゅうもんは もくようびの あさに とどきます。", "りょうしゅうしょを メールで おくりましょうか。",
           "すみません、もういちど おねがいします。", "かいぎは さんじはんに はじまります。", "もちろんです。",
           "おまちいただき ありがとうございます。"),
    "cmn": ("您的订单将在星期四上午送到。", "需要我把收据发到您的邮箱吗？", "对不起，我没听清楚，请再说一遍。",
            "会议三点半开始。", "当然可以。", "谢谢您的耐心等待。"),
}  # fmt: skip
CLASSES = 32  # frame classes of the aligned text features
# The estimate's shares of each window's statistics tried. Not 1.0: where the estimate is wrong, nothing in
# the window corrects it (ef_dora's "Tengo veinticinco manzanas": PESQ 1.1 against whole and heard as
# "...comenzanas" at 1.0, 2.04 and heard right at 0.875), which three or six sentences cannot rule out.
SHARES = (0.9375, 0.875, 0.8125, 0.75)
# A share is measured on sentences: a text whose longest piece has fewer speech frames is skipped (two share
# texts were two short sentences each). Short replies take the same share and gain, and are judged apart
# (``bench.stream_breakdown --short-replies``).
SENTENCE_FRAMES = 80  # 2 s
# Streamed / whole RMS every sentence must keep once gained: this if any share does, else the guard's own
# bounds (``tests/test_streaming_engine.py``), else the share whose worst sentence is nearest whole wins.
LOUDNESS = ((0.85, 1.18), (0.8, 1.25))


def corpus(voice_key: int, lang: str) -> list[tuple[str, str]]:
    """A third of the English sentences (which third by ``voice_key``), the short replies, its own
    language's."""
    english = [(text, "en-us") for text in ENGLISH[voice_key % 3 :: 3] + SHORT]
    return english + [(text, lang) for text in OWN_LANGUAGE.get(lang, ())]


Raw = tuple[np.ndarray, np.ndarray, np.ndarray]  # aligned text features [C, T], pitch, energy [2T]


def measured(
    engine: KokoroEngine, voice: str, text: str, lang: str, whole_greeting: bool = False
) -> list[tuple[Raw, NormStats]]:
    """Each piece of ``text`` in ``voice`` (the first alone for a greeting, as ``calibrate`` measures it):
    its front outputs and its statistics, decoded whole (silences and all, as the decoder normalises it)."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice(voice)
    pieces = engine.planner.plan(text, lang)
    out = []
    for piece in pieces[:1] if whole_greeting else pieces:
        feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
        feats = split.features(feeds)
        stats = split.whole(feats, style)[1]
        asr, f0, n = split.tracks(feats)
        out.append(((asr.astype(np.float32), f0, n), stats))
    return out


Measured = tuple[tuple[Raw, NormStats], list[tuple[Raw, NormStats]]]  # a voice's reference and its pieces


def voice_measured(engine: KokoroEngine, voice: str) -> Measured:
    """The voice's reference (its greeting, as ``KokoroEngine.calibrate`` measures it) and corpus pieces."""
    lang = voice_language(engine, voice)
    reference = measured(engine, voice, calibration_text(lang), lang, whole_greeting=True)[0]
    pieces = []
    for text, text_lang in corpus(zlib.crc32(voice.encode()), lang):
        if engine.g2p.installed(text_lang):
            pieces += measured(engine, voice, text, text_lang)
    return reference, pieces


def share_sentences(voice_key: int) -> list[str]:
    """Six full sentences, three from each third of the English sentences the voice's pieces do not use
    (three alone chose am_michael's and af_nicole's shares 0.2-0.5 PESQ below the best on eight others).

    English for every voice: measured on six sentences of each voice's own language instead, 12 of the 26
    voices not English took lower shares (their pieces louder than whole there), and Whisper heard every
    language alike either way, within 0.006 (docs/benchmarks.md 7b).

    Not short replies: their loudness turns on the share far more than a sentence's ("Got it, thanks!" in
    four voices: 1.07-1.34x whole with the estimate alone, 0.76-0.83x at three quarters), so they would set
    every voice's share, and the lower shares they chose cost more than they gave: with a short reply among
    these, ``bench.quality``'s warm mean fell from 3.03 to 2.78, am_puck's "Sure thing." from 3.15 to 1.58."""
    thirds = (ENGLISH[(voice_key + k) % 3 :: 3] for k in (1, 2))
    return [text for third in thirds for text in [t for t in third if len(t) > 50][:3]]


def streamed_against_whole(engine: KokoroEngine, voice: str, text: str) -> list[tuple[float, float]] | None:
    """(streamed / whole RMS, PESQ) of the text's longest piece streamed at each of ``SHARES``; None if that
    piece is shorter than a sentence (``SENTENCE_FRAMES``)."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice(voice)
    reference, silence = engine.memory.reference(spec), engine.memory.silence(spec)
    assert reference is not None, "the voice is calibrated with the estimator in place"
    piece = max(engine.planner.plan(text, "en-us"), key=lambda p: len(p.tokens))
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    frames = split.frames(feats)
    span = decode_range(split.durations(feats), piece.voiced, frames)
    if span[1] - span[0] < SENTENCE_FRAMES:
        return None
    whole = split.whole(feats, style)[0][span[0] * SAMPLES_PER_FRAME : span[1] * SAMPLES_PER_FRAME]
    out = []
    for share in SHARES:
        chunks = split.stream(
            feats, style, engine.window_plan, None, None, None, None, span, silence,
            replace(reference, share=share, gain=1.0),
        )  # fmt: skip
        audio = np.concatenate([chunk for chunk, _ in chunks])
        n = min(len(audio), len(whole))
        out.append((loudness_ratio(whole, audio), pesq_score(whole[:n], audio[:n])))
    return out


def chosen_share(scores: list[list[tuple[float, float]]]) -> tuple[float, float]:
    """Of ``SHARES``, each with its gain (whole over streamed RMS, the geometric mean over the sentences of
    ``scores[sentence][share]``), the best by mean PESQ among those that keep every sentence, gained, within
    the first ``LOUDNESS`` bounds any share keeps; if none keeps even the last, the one whose worst gained
    loudness is nearest whole. Returns (share, gain)."""
    gains = [float(np.exp(-np.mean([np.log(s[i][0]) for s in scores]))) for i in range(len(SHARES))]
    loud = [[s[i][0] * gains[i] for s in scores] for i in range(len(SHARES))]
    quality = [float(np.mean([s[i][1] for s in scores])) for i in range(len(SHARES))]
    for lo, hi in LOUDNESS:
        kept = [i for i in range(len(SHARES)) if all(lo <= r <= hi for r in loud[i])]
        if kept:
            best = max(kept, key=lambda i: quality[i])
            return SHARES[best], gains[best]
    best = min(range(len(SHARES)), key=lambda i: max(abs(np.log(r)) for r in loud[i]))
    return SHARES[best], gains[best]


def voice_language(engine: KokoroEngine, voice: str) -> str:
    """The language a voice reads by default, if its G2P is installed (as ``calibrate`` chooses)."""
    lang = default_lang(engine.parse_voice(voice))
    return lang if engine.g2p.installed(lang) else "en-us"


def measure_shares(engine: KokoroEngine, voices: list[str]) -> None:
    """Each voice's share of the estimate and its gain (``chosen_share``), kept in ``engine``'s estimator
    (the new fit)."""
    estimator = engine.split.estimator if engine.split is not None else None
    assert estimator is not None, "shares are measured for the fit in the engine"
    started = time.perf_counter()
    for voice in voices:
        engine.calibrate(voice)  # the reference, made with the new fit's frame classes and bias
        measured = [
            streamed_against_whole(engine, voice, t) for t in share_sentences(zlib.crc32(voice.encode()))
        ]
        scores = [s for s in measured if s is not None]
        share, gain = chosen_share(scores)
        estimator.shares[voice], estimator.gains[voice] = share, gain
        at = SHARES.index(share)
        loud = ", ".join(f"{s[at][0] * gain:.2f}" for s in scores)
        print(f"{voice}: share {share}, gain {gain:.3f} ({len(scores)} sentences, gained loudness {loud}), "
              f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip


def gathered(engine: KokoroEngine, kept: Path | None) -> dict[str, Measured]:
    """Every stock voice's measurements, those in ``kept`` read from it and the rest added to it."""
    started = time.perf_counter()
    voices: dict[str, Measured] = {}
    if kept is not None and kept.is_file():
        with open(kept, "rb") as fh:
            voices = pickle.load(fh)
    for voice in sorted(engine.voice_names - set(voices)):
        voices[voice] = voice_measured(engine, voice)
        print(f"{voice}: {len(voices[voice][1])} pieces, {time.perf_counter() - started:.0f} s", flush=True)
        if kept is not None:
            with open(kept, "wb") as fh:
                pickle.dump(voices, fh)
    return voices


def run(rank: int, ridge: float, out: Path, kept: Path | None, held_out: frozenset[str]) -> dict[str, Any]:
    """``kept``: where the measurements are kept (and read from), to fit again without decoding."""
    engine = KokoroEngine.load()
    split = engine.split
    assert split is not None and split.norms, "fitting needs the split decoder with its norms"
    split.estimator = None
    started = time.perf_counter()
    measurements = {v: m for v, m in gathered(engine, kept).items() if v not in held_out}
    pieces = [(v, raw, stats) for v, (_, voice_pieces) in measurements.items() for raw, stats in voice_pieces]
    frames = np.concatenate([raw[0].T for _, raw, _ in pieces[::3]]).astype(np.float64)
    centers = speech_estimate.kmeans(frames[::4], CLASSES)
    summary = {
        v: speech_estimate.frame_summaries(*reference[0], centers)
        for v, (reference, _) in measurements.items()
    }
    reference = {v: packed(ref[1]) for v, (ref, _) in measurements.items()}
    x = np.array([speech_estimate.frame_summaries(*raw, centers) - summary[v] for v, raw, _ in pieces])
    y = np.array([packed(stats) - reference[v] for v, _, stats in pieces])
    y = speech_estimate.without_text_channels(y, pieces[0][1][0].shape[0])
    sizes = tuple(int(m.shape[1]) for m in pieces[0][2].means)
    estimator = speech_estimate.fit(x, y, centers, sizes, ridge, rank, [v for v, _, _ in pieces])
    split.estimator = estimator
    measure_shares(engine, sorted(measurements))
    path = estimator.save(out / speech_estimate.estimate_name(naming_hash(engine.files.model)))
    took = time.perf_counter() - started
    print(f"fitted on {len(pieces)} pieces of {len(measurements)} voices in {took:.0f} s: {path}")
    return {"voices": len(measurements), "pieces": len(pieces), "held_out_voices": sorted(held_out),
            "rank": rank, "ridge": ridge, "file": str(path), "bytes": path.stat().st_size,
            "shares": estimator.shares, "gains": estimator.gains, "digest": estimator.digest()}  # fmt: skip


def reshare(out: Path, voices: list[str]) -> dict[str, Any]:
    """Measure ``voices``' shares again (all: every stock voice) for the fit kept in ``out``, and keep them
    there: the map is untouched, so the engine's cached references stay valid."""
    engine = KokoroEngine.load()
    split = engine.split
    assert split is not None and split.norms, "the shares are measured on the split decoder's windows"
    path = out / speech_estimate.estimate_name(naming_hash(engine.files.model))
    split.estimator = speech_estimate.SpeechEstimator.load(path)
    measure_shares(engine, voices or sorted(engine.voice_names))
    split.estimator.save(path)
    return {"file": str(path), "shares": split.estimator.shares, "gains": split.estimator.gains,
            "digest": split.estimator.digest()}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=speech_estimate.SHIPPED)
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--ridge", type=float, default=100.0)
    parser.add_argument("--kept", type=Path, help="keep the measurements here (or fit again from them)")
    parser.add_argument(
        "--hold-out", default="", help="voices left out of the fit (to measure voices it never heard)"
    )
    parser.add_argument(
        "--shares-only", action="store_true", help="measure the shares of the fit in --out again, no fitting"
    )
    parser.add_argument("--voices", default="", help="with --shares-only: these voices (default: all)")
    args = parser.parse_args(argv)
    if args.shares_only:
        result = reshare(args.out, [v for v in args.voices.split(",") if v])
        print(f"wrote {write_result('fit_speech_estimate_shares', result)}")
        return result
    held_out = frozenset(v for v in args.hold_out.split(",") if v)
    result = run(args.rank, args.ridge, args.out, args.kept, held_out)
    print(f"wrote {write_result('fit_speech_estimate', result)}")
    return result


if __name__ == "__main__":
    main()
