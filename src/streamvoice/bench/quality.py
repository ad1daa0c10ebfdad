"""Does streaming change what the voice sounds like? Streamed audio against whole-piece audio, per voice.

For each voice, on a fresh engine: the voice's very first piece (first use), then the same sentences again
once it has spoken (warm), and, for reference, a first piece with no statistics at all (the cold path the
statistics cache removes). Each streamed piece is compared with the bare engine's whole-piece audio of the
same piece (trimmed alike): PESQ (wide band, 16 kHz, the ``pesq`` package) with the whole piece as the
reference, and DNSMOS overall quality (``speechmos``, ONNX) of each on its own.

``--first-window`` compares the first window's margins instead (the silence kept before the first audible
block, the first window's size and its context on each side): each warm piece streamed with each variant
against the whole piece trimmed alike, PESQ over the piece, the log-spectral distance of its first 300 ms, and
Whisper's word error rate on the streamed audio; what heard onset buys with them is ``bench.engine``'s.

``--later-windows`` compares the context of the windows after the first (``LATER_WINDOW_VARIANTS``): each
voice's sentences and two longer ones, and two sentences in French and two in Spanish (``bench.languages``'),
streamed warm and uncapped, PESQ against the whole piece and the DNSMOS drop over ``ALIGNMENTS``.
``--second-window`` compares the second window's size (``SECOND_WINDOW_VARIANTS``) alike, on the sentences,
the longer ones and ``bench.stream_breakdown``'s short replies, short pieces and longer ones apart: a larger
second window takes a short reply's whole rest in one window, so the reply has one seam instead of two.

``--sentence-leads N`` asks whether each warm sentence's DNSMOS drop is the stream's or the judge's: each clip
scored at N leads 1 ms apart, the drop per sentence with its standard error over the leads, and the judge's own
drop between the whole piece and the same piece 5 ms later, scored alike (``every_sentence``).

Run: ``python -m streamvoice.bench.quality [--voices af_heart,am_michael,...] [--first-window | --later-windows |
--second-window | --sentence-leads 12]``
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np
import soxr
from numpy.typing import NDArray

from streamvoice.bench.common import table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME
from streamvoice.protocol import SAMPLE_RATE

VOICES = ("af_heart", "af_bella", "am_michael", "bf_emma", "bm_george", "am_puck")
# Not the texts anything was tuned on: an agent's short acknowledgements and a few full sentences.
SENTENCES = (
    "Your appointment is confirmed for nine thirty on Tuesday morning.",
    "Got it, thanks!",
    "The quarterly report shows revenue up eleven percent over last year.",
    "Sure thing.",
    "Please hold while I transfer you to a specialist who can look into the billing question.",
    "No problem at all, happy to help.",
)


def to16k(audio: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.asarray(soxr.resample(audio, 24_000, 16_000), dtype=np.float32)


def pesq_score(reference: NDArray[np.float32], degraded: NDArray[np.float32]) -> float:
    from pesq import pesq

    ref, deg = to16k(reference), to16k(degraded)
    n = min(len(ref), len(deg))
    return float(pesq(16_000, ref[:n], deg[:n], "wb"))


def loudness_ratio(reference: NDArray[np.float32], degraded: NDArray[np.float32]) -> float:
    """RMS of ``degraded`` over ``reference``'s, over the samples both have."""
    n = min(len(reference), len(degraded))
    whole = float(np.sqrt(np.mean(reference[:n].astype(np.float64) ** 2)))
    return float(np.sqrt(np.mean(degraded[:n].astype(np.float64) ** 2))) / max(1e-9, whole)


# DNSMOS scores 9.01 s at a time, and repeats a shorter clip end to end until it is that long: a 0.7 s reply
# is judged as sixteen copies back to back, so how much silence ends it weighs as much as how it sounds.
DNSMOS_SECONDS = 9.01


def dnsmos(audio: NDArray[np.float32], in_silence: bool = False) -> float:
    """DNSMOS overall quality; ``in_silence``: a clip shorter than DNSMOS's 9.01 s is judged once, followed by
    silence, as a listener hears it, instead of repeated end to end."""
    from speechmos import dnsmos as model

    clip = np.clip(to16k(audio), -1.0, 1.0)
    short = round(DNSMOS_SECONDS * 16_000) - len(clip)
    if in_silence and short > 0:
        clip = np.concatenate([clip, np.zeros(short, np.float32)])
    return float(model.run(clip, 16_000)["ovrl_mos"])


# DNSMOS of one clip moves with where its frames fall: the same whole piece with 1-10 ms of silence before it
# scores 0.10 (sd) apart, up to 0.4 on a short reply (6 voices x 6 sentences, 2026-12-07, docs/benchmarks.md
# 7). A sentence's score is also taken as the mean over these leads (samples), for streamed and whole alike.
ALIGNMENTS = (0, 24, 60, 120, 240)


def dnsmos_at_leads(
    audio: NDArray[np.float32], leads: Sequence[int], in_silence: bool = False
) -> NDArray[np.float64]:
    """DNSMOS of the clip with each of ``leads`` samples of silence before it."""
    return np.array([dnsmos(np.concatenate([np.zeros(n, np.float32), audio]), in_silence) for n in leads])


def dnsmos_over_alignments(audio: NDArray[np.float32]) -> float:
    return statistics.fmean(dnsmos_at_leads(audio, ALIGNMENTS))


def compare(engine: KokoroEngine, voice: str, text: str) -> dict[str, float]:
    spec = engine.parse_voice(voice)
    piece = engine.planner.plan(text, "en-us")[0]
    streamed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0)))
    whole = engine.synthesize_piece(piece, spec, 1.0)
    return {
        "pesq": pesq_score(whole, streamed),
        "loudness": loudness_ratio(whole, streamed),
        "dnsmos_streamed": dnsmos(streamed),
        "dnsmos_whole": dnsmos(whole),
        "dnsmos_streamed_aligned": dnsmos_over_alignments(streamed),
        "dnsmos_whole_aligned": dnsmos_over_alignments(whole),
    }


def run_voice(voice: str) -> dict[str, Any]:
    engine = KokoroEngine.load()
    prepare(engine)  # what a server does at start: every stock voice's statistics, from the cache
    first = compare(engine, voice, SENTENCES[0])
    warm = [compare(engine, voice, text) for text in SENTENCES]
    engine.set_voice_stats(voice, None, None)  # the cold path, for reference: no statistics for this voice
    cold = compare(engine, voice, SENTENCES[0])
    return {"voice": voice, "first_use": first, "warm": warm, "cold": cold}


FIRST_WINDOW_VARIANTS: dict[str, dict[str, Any]] = {
    "lead margin 20 ms, lookahead 4 (before)": {"margin_ms": 20.0, "lookahead": 4},
    "lead margin 5 ms, lookahead 4": {"margin_ms": 5.0, "lookahead": 4},
    "lead margin 5 ms, lookahead 2 (shipped)": {"margin_ms": 5.0, "lookahead": 2},
    "lead margin 5 ms, lookahead 1": {"margin_ms": 5.0, "lookahead": 1},
    "lead margin 5 ms, lookahead 0": {"margin_ms": 5.0, "lookahead": 0},
    "lead margin 5 ms, lookahead 2, left context 2": {"margin_ms": 5.0, "lookahead": 2, "lead_context": 2},
    "lead margin 5 ms, lookahead 2, first 8 frames": {"margin_ms": 5.0, "lookahead": 2, "first": 8},
    "lead margin 5 ms, lookahead 2, left context 3": {"margin_ms": 5.0, "lookahead": 2, "lead_context": 3},
    "lead margin 5 ms, lookahead 1, left context 2, first 8 frames": {
        "margin_ms": 5.0,
        "lookahead": 1,
        "lead_context": 2,
        "first": 8,
    },
}


def first_window(voices: list[str]) -> list[dict[str, Any]]:
    """Each ``FIRST_WINDOW_VARIANTS`` entry on every voice's ``SENTENCES``, warm (the voice's cached statistics
    restored before each rendition, so every variant starts from the same memory). The whole piece depends
    on the kept margin alone (it takes no statistics from memory), so it is made once per margin."""
    from dataclasses import replace

    from streamvoice.bench.asr import Transcriber
    from streamvoice.bench.spectral import log_spectral_distance
    from streamvoice.bench.wer import word_error_rate
    from streamvoice.engine import timing

    engine = KokoroEngine.load()
    prepare(engine)
    asr = Transcriber.load()
    scores: dict[str, dict[str, list[float]]] = {
        k: {"pesq": [], "lsd": [], "wer": []} for k in FIRST_WINDOW_VARIANTS
    }
    shipped_margin = timing.LEAD_MARGIN
    try:
        for voice in voices:
            spec = engine.parse_voice(voice)
            stats, silence = engine.voice_stats(voice), engine.memory.silence(spec)
            for text in SENTENCES:
                piece = engine.planner.plan(text, "en-us")[0]
                wholes: dict[float, NDArray[np.float32]] = {}
                for name, v in FIRST_WINDOW_VARIANTS.items():
                    timing.LEAD_MARGIN = round(SAMPLE_RATE * v["margin_ms"] / 1000)
                    if v["margin_ms"] not in wholes:
                        wholes[v["margin_ms"]] = engine.synthesize_piece(piece, spec, 1.0)
                    whole = wholes[v["margin_ms"]]
                    changed = {k: v[k] for k in ("lookahead", "lead_context", "first") if k in v}
                    engine.set_voice_stats(voice, stats, silence)
                    plan = replace(engine.window_plan, **changed)
                    streamed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0, plan=plan)))
                    scores[name]["pesq"].append(pesq_score(whole, streamed))
                    onset = (
                        SAMPLE_RATE * 300 // 1000
                    )  # the first 300 ms: the first window's audio and its seam
                    scores[name]["lsd"].append(log_spectral_distance(whole[:onset], streamed[:onset]))
                    scores[name]["wer"].append(word_error_rate(text, asr.transcribe(streamed, language="en")))
            print(voice, {k: round(statistics.fmean(v["pesq"]), 3) for k, v in scores.items()}, flush=True)
    finally:
        timing.LEAD_MARGIN = shipped_margin
    return [
        {"variant": k, "pesq": statistics.fmean(v["pesq"]), "pesq_min": min(v["pesq"]),
         "lsd_first_300ms": statistics.fmean(v["lsd"]), "wer": statistics.fmean(v["wer"])}
        for k, v in scores.items()
    ]  # fmt: skip


LATER_WINDOW_VARIANTS: dict[str, dict[str, int]] = {
    "context 4 everywhere (before)": {"wide_context": 4},
    "context 6 in windows of 30+ frames (before)": {"wide_context": 6, "wide_from": 30},
    "context 6 in windows of 16+ frames (shipped)": {"wide_context": 6, "wide_from": 16},
    "context 8 in windows of 30+ frames": {"wide_context": 8, "wide_from": 30},
}
# Longer than ``SENTENCES``' short replies, so that a piece has windows past the second.
LONGER = (
    "Please hold while I check the order status and the shipping date for you.",
    "I found three flights that leave before noon, and the cheapest one is two hundred dollars.",
)
OTHER_LANGUAGES = (("fr-fr", "ff_siwis"), ("es", "ef_dora"))
# Short replies in none of the estimate's fit or its shares' sentences, and none of ``SENTENCES`` but the first
# two (``bench.stream_breakdown --short-replies`` measures their blend).
SHORT_REPLIES = ("Got it, thanks!", "Sure thing.", "One moment, please.", "You're welcome.", "That works for me.",
                 "Great, see you then!", "No worries.", "Will do.")  # fmt: skip


SECOND_WINDOW_VARIANTS: dict[str, dict[str, int]] = {
    "second window 16 frames (shipped)": {},
    "second window 24 frames": {"second": 24},
    "second window 32 frames": {"second": 32},
}
# Pieces whose whole audio is at most this many frames (1.45 s) are reported apart as short: about the longest
# piece whose rest after the first window a second window of 32 frames takes whole (``WindowPlan.iter_windows``).
SHORT_PIECE_FRAMES = 58


def later_windows(voices: list[str]) -> list[dict[str, Any]]:
    """Each ``LATER_WINDOW_VARIANTS`` plan on every voice's ``SENTENCES`` and ``LONGER``, and on
    ``OTHER_LANGUAGES``' sentences of ``bench.languages``: streamed (warm, uncapped) against the whole piece."""
    from streamvoice.bench.languages import SENTENCES as SAID

    items = [(v, text, "en-us") for v in voices for text in (*SENTENCES, *LONGER)]
    items += [(voice, text, lang) for lang, voice in OTHER_LANGUAGES for text in SAID[lang][2]]
    return compare_plans(items, LATER_WINDOW_VARIANTS)


def second_window(voices: list[str]) -> list[dict[str, Any]]:
    """Each ``SECOND_WINDOW_VARIANTS`` plan on every voice's ``SENTENCES``, ``LONGER`` and
    ``SHORT_REPLIES``: whether a larger second window (a short reply's whole rest) sounds
    closer to whole, for short pieces and longer ones apart."""
    texts = dict.fromkeys((*SENTENCES, *LONGER, *SHORT_REPLIES))  # the replies in both, once
    return compare_plans([(v, text, "en-us") for v in voices for text in texts], SECOND_WINDOW_VARIANTS)


def compare_plans(
    items: list[tuple[str, str, str]], variants: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """Each of ``variants`` (changes to the engine's window plan) on every (voice, text, language) of
    ``items``: streamed (warm, uncapped) against the whole piece, PESQ and DNSMOS drop over ``ALIGNMENTS``,
    on every piece and on pieces of at most ``SHORT_PIECE_FRAMES`` frames and longer ones apart."""
    from dataclasses import replace

    engine = KokoroEngine.load()
    prepare(engine)
    wholes = []
    for voice, text, lang in items:
        spec, piece = engine.parse_voice(voice), engine.planner.plan(text, lang)[0]
        whole = engine.synthesize_piece(piece, spec, 1.0)
        wholes.append((spec, piece, whole, dnsmos_over_alignments(whole)))
    short = [len(whole) <= SHORT_PIECE_FRAMES * SAMPLES_PER_FRAME for _, _, whole, _ in wholes]
    rows: list[dict[str, Any]] = []
    for name, changed in variants.items():
        plan = replace(engine.window_plan, **changed)
        pesqs: list[float] = []
        drops: list[float] = []
        for spec, piece, whole, whole_dnsmos in wholes:
            streamed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0, plan=plan)))
            pesqs.append(pesq_score(whole, streamed))
            drops.append(whole_dnsmos - dnsmos_over_alignments(streamed))
        row = {"variant": name, "pesq": statistics.fmean(pesqs), "pesq_min": min(pesqs),
               "dnsmos_drop": statistics.fmean(drops), "over_0_10": sum(d > 0.10 for d in drops),
               "pesq_each": pesqs, "dnsmos_drop_each": drops, "short_each": short}  # fmt: skip
        for part, keep in (("short", True), ("longer", False)):
            chosen = [i for i, s in enumerate(short) if s == keep]
            row[f"{part}_pieces"] = len(chosen)
            row[f"{part}_pesq"] = statistics.fmean(pesqs[i] for i in chosen) if chosen else float("nan")
            row[f"{part}_dnsmos_drop"] = (
                statistics.fmean(drops[i] for i in chosen) if chosen else float("nan")
            )
        rows.append(row)
        print(
            f"{name}: PESQ {statistics.fmean(pesqs):.3f}, DNSMOS drop {statistics.fmean(drops):.3f}",
            flush=True,
        )
    return rows


def every_sentence(voices: list[str], leads: int, in_silence: bool = False) -> dict[str, Any]:
    """Each voice's ``SENTENCES``, warm: DNSMOS of the streamed piece, the whole piece and the whole piece 5 ms
    later, each at ``leads`` leads 1 ms apart. Per sentence the drop (whole less streamed, paired lead by lead)
    and its standard error, and the judge's null (whole less whole 5 ms later), so a sentence's drop over 0.10
    can be told from the judge's spread (0.10 sd per sentence at one lead: docs/benchmarks.md 7). ``in_silence``:
    each clip judged once in silence (``dnsmos``), not repeated end to end."""
    engine = KokoroEngine.load()
    prepare(engine)
    shifts = [24 * i for i in range(leads)]
    rows: list[dict[str, Any]] = []
    for voice in voices:
        spec = engine.parse_voice(voice)
        for text in SENTENCES:
            piece = engine.planner.plan(text, "en-us")[0]
            streamed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0)))
            whole = engine.synthesize_piece(piece, spec, 1.0)
            at_whole = dnsmos_at_leads(whole, shifts, in_silence)
            drop = at_whole - dnsmos_at_leads(streamed, shifts, in_silence)
            later = np.concatenate([np.zeros(120, np.float32), whole])
            null = at_whole - dnsmos_at_leads(later, shifts, in_silence)
            rows.append({"voice": voice, "text": text, "drop": float(drop.mean()),
                         "se": float(drop.std(ddof=1) / np.sqrt(leads)), "null": float(null.mean()),
                         "loudness": loudness_ratio(whole, streamed), "pesq": pesq_score(whole, streamed),
                         "seconds_streamed": len(streamed) / SAMPLE_RATE, "seconds_whole": len(whole) / SAMPLE_RATE})  # fmt: skip
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
    summary = {
        "leads": leads,
        "in_silence": in_silence,
        "drop_mean": statistics.fmean(r["drop"] for r in rows),
        "drop_worst": max(r["drop"] for r in rows),
        "over_0_10": sum(r["drop"] > 0.10 for r in rows),
        "over_0_10_by_2_se": sum(r["drop"] - 2 * r["se"] > 0.10 for r in rows),
        "null_mean": statistics.fmean(r["null"] for r in rows),
        "null_worst": max(abs(r["null"]) for r in rows),
        "se_mean": statistics.fmean(r["se"] for r in rows),
    }
    return {"rows": rows, "summary": summary, "sentences": SENTENCES}


def mean(rows: list[dict[str, float]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--voices", default=",".join(VOICES))
    parser.add_argument("--first-window", action="store_true", help="compare the first window's margins")
    parser.add_argument("--later-windows", action="store_true", help="compare later windows' context")
    parser.add_argument("--second-window", action="store_true", help="compare the second window's size")
    parser.add_argument(
        "--sentence-leads",
        type=int,
        default=0,
        metavar="N",
        help="each sentence's DNSMOS drop over N leads 1 ms apart, with the judge's own",
    )
    parser.add_argument("--in-silence", action="store_true",
                        help="with --sentence-leads: judge a short clip once in silence, not repeated")  # fmt: skip
    args = parser.parse_args(argv)
    voices = [v.strip() for v in args.voices.split(",") if v.strip()]
    if args.sentence_leads:
        if args.sentence_leads < 2:
            parser.error("--sentence-leads takes 2 or more leads (a standard error needs two)")
        result = every_sentence(voices, args.sentence_leads, args.in_silence)
        worst = sorted(result["rows"], key=lambda r: -r["drop"])[:10]
        print(table(worst, [("voice", "voice"), ("text", "sentence"), ("drop", "DNSMOS drop"), ("se", "se"),
                            ("null", "whole vs 5 ms later"), ("loudness", "loudness"), ("pesq", "PESQ"),
                            ("seconds_streamed", "s streamed"), ("seconds_whole", "s whole")]))  # fmt: skip
        m = result["summary"]
        print(
            f"\n{len(result['rows'])} sentences, {m['leads']} leads each: drop {m['drop_mean']:.3f} on average, "
            f"worst {m['drop_worst']:.3f}; {m['over_0_10']} over 0.10, {m['over_0_10_by_2_se']} by more than "
            f"two standard errors (mean se {m['se_mean']:.3f}); the judge against itself {m['null_mean']:.3f} "
            f"on average, worst {m['null_worst']:.3f}"
        )
        name = "quality_every_sentence_in_silence" if args.in_silence else "quality_every_sentence"
        print(f"\nwrote {write_result(name, result)}")
        return result
    if args.later_windows or args.second_window:
        name = "later_windows" if args.later_windows else "second_window"
        rows = later_windows(voices) if args.later_windows else second_window(voices)
        print(table(rows, [("variant", name.replace("_", " ")), ("pesq", "PESQ streamed vs whole"),
                           ("pesq_min", "min"), ("dnsmos_drop", "DNSMOS drop"), ("over_0_10", "pieces over 0.10"),
                           ("short_pesq", "PESQ short"), ("short_dnsmos_drop", "drop short"),
                           ("longer_pesq", "PESQ longer"), ("longer_dnsmos_drop", "drop longer")]))  # fmt: skip
        print(
            f"\nshort: pieces of at most {SHORT_PIECE_FRAMES} frames ({rows[0]['short_pieces']}), longer: the rest "
            f"({rows[0]['longer_pieces']})"
        )
        print(
            f"\nwrote {write_result(f'quality_{name}', {'rows': rows, 'items': len(rows[0]['pesq_each'])})}"
        )
        return {"rows": rows}
    if args.first_window:
        rows = first_window(voices)
        print(table(rows, [("variant", "first window"), ("pesq", "PESQ streamed vs whole"), ("pesq_min", "min"),
                           ("lsd_first_300ms", "LSD first 300 ms dB"), ("wer", "WER streamed")]))  # fmt: skip
        print(f"\nwrote {write_result('quality_first_window', {'rows': rows, 'sentences': SENTENCES})}")
        return {"rows": rows}
    results = [run_voice(v) for v in voices]
    rows = []
    for r in results:
        rows.append(
            {
                "voice": r["voice"],
                "pesq_first": r["first_use"]["pesq"],
                "pesq_warm": mean(r["warm"], "pesq"),
                "pesq_cold": r["cold"]["pesq"],
                "dnsmos_streamed": mean(r["warm"], "dnsmos_streamed"),
                "dnsmos_whole": mean(r["warm"], "dnsmos_whole"),
            }
        )
    summary = {
        "pesq_first_use": statistics.fmean(r["pesq_first"] for r in rows),
        "pesq_first_use_min": min(r["pesq_first"] for r in rows),
        "pesq_warm": statistics.fmean(r["pesq_warm"] for r in rows),
        "pesq_cold": statistics.fmean(r["pesq_cold"] for r in rows),
        "dnsmos_streamed": statistics.fmean(r["dnsmos_streamed"] for r in rows),
        "dnsmos_whole": statistics.fmean(r["dnsmos_whole"] for r in rows),
    }
    summary["dnsmos_drop"] = summary["dnsmos_whole"] - summary["dnsmos_streamed"]
    warm = [w for r in results for w in r["warm"]]
    for suffix in ("", "_aligned"):
        drops = [w[f"dnsmos_whole{suffix}"] - w[f"dnsmos_streamed{suffix}"] for w in warm]
        summary[f"dnsmos_drop{suffix or '_single'}_mean"] = statistics.fmean(drops)
        summary[f"dnsmos_drop{suffix or '_single'}_worst"] = max(drops)
        summary[f"sentences_over_0_10{suffix}"] = sum(d > 0.10 for d in drops)
    summary["loudness_lowest"] = min(w["loudness"] for w in warm)
    summary["loudness_highest"] = max(w["loudness"] for w in warm)
    print(
        f"Streamed vs whole-piece audio ({len(SENTENCES)} sentences per voice; PESQ wide band, DNSMOS overall)\n"
    )
    print(
        table(
            [*rows, {"voice": "mean", **{k: summary[k2] for k, k2 in (
                ("pesq_first", "pesq_first_use"), ("pesq_warm", "pesq_warm"), ("pesq_cold", "pesq_cold"),
                ("dnsmos_streamed", "dnsmos_streamed"), ("dnsmos_whole", "dnsmos_whole"))}}],
            [
                ("voice", "voice"),
                ("pesq_first", "PESQ first use"),
                ("pesq_warm", "PESQ warm"),
                ("pesq_cold", "PESQ cold path (no cache)"),
                ("dnsmos_streamed", "DNSMOS streamed"),
                ("dnsmos_whole", "DNSMOS whole piece"),
            ],
        )
    )  # fmt: skip
    print(
        f"\ntargets: PESQ >= 2.5 on average (got {summary['pesq_warm']:.2f}) and >= 2.3 on a first piece "
        f"(lowest {summary['pesq_first_use_min']:.2f}); DNSMOS drop <= 0.05 (got {summary['dnsmos_drop']:.3f})"
    )
    print(
        f"DNSMOS drop per sentence ({len(warm)} warm): one alignment mean "
        f"{summary['dnsmos_drop_single_mean']:.3f}, worst {summary['dnsmos_drop_single_worst']:.3f}, "
        f"{summary['sentences_over_0_10']} over 0.10; over {len(ALIGNMENTS)} alignments mean "
        f"{summary['dnsmos_drop_aligned_mean']:.3f}, worst {summary['dnsmos_drop_aligned_worst']:.3f}, "
        f"{summary['sentences_over_0_10_aligned']} over 0.10; loudness streamed / whole "
        f"{summary['loudness_lowest']:.2f}-{summary['loudness_highest']:.2f}"
    )
    result = {"voices": results, "rows": rows, "summary": summary, "sentences": SENTENCES}
    path = write_result("quality", result)
    print(f"\nwrote {path}")
    return result


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["voice"],
            md_value(r["pesq_first"], 2),
            md_value(r["pesq_warm"], 2),
            md_value(r["pesq_cold"], 2),
            md_value(r["dnsmos_streamed"], 2),
            md_value(r["dnsmos_whole"], 2),
        ]
        for r in d["rows"]
    ]
    m = d["summary"]
    rows.append(
        [
            "**mean**",
            md_value(m["pesq_first_use"], 2),
            md_value(m["pesq_warm"], 2),
            md_value(m["pesq_cold"], 2),
            md_value(m["dnsmos_streamed"], 2),
            md_value(m["dnsmos_whole"], 2),
        ]
    )
    return (
        f"{len(d['sentences'])} sentences per voice, each streamed and compared with the same piece decoded whole. "
        "First use: the voice's very first piece on a fresh engine (statistics from the cache); cold path: "
        "the same piece with no statistics, what the cache avoids.\n\n"
        + md_table(
            [
                "voice",
                "PESQ first use",
                "PESQ warm",
                "PESQ cold path",
                "DNSMOS streamed",
                "DNSMOS whole piece",
            ],
            rows,
        )
        + f"\n\nDNSMOS drop from streaming: {m['dnsmos_drop']:.3f}."
        + (
            f" Per warm sentence, each clip's DNSMOS the mean over {len(ALIGNMENTS)} leads of 0-10 ms: drop "
            f"{m['dnsmos_drop_aligned_mean']:.3f} on average, worst {m['dnsmos_drop_aligned_worst']:.3f}, "
            f"{m['sentences_over_0_10_aligned']} sentences over 0.10 (one alignment: "
            f"{m['sentences_over_0_10']}); loudness streamed / whole "
            f"{m['loudness_lowest']:.2f}-{m['loudness_highest']:.2f}."
            if "dnsmos_drop_aligned_mean" in m
            else ""
        )
    )


if __name__ == "__main__":
    main()
