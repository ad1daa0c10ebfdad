"""The engine alone: kokoro-onnx as shipped, the exported graph in our engine, and the static-int8 decoder.

Speed, on the same official int8 file, one process, the three interleaved so the machine's drift hits all
alike (medians of ``--repeat`` rounds):

- kokoro-onnx's own ``Kokoro.create()`` on the sentence (its phonemiser, its session: what a user of
  kokoro-onnx gets), audio seconds per second;
- our engine, the graph as exported (``MODEL_VARIANT=int8``) and with the static-int8 decoder
  (``int8-static``, ``engine.static_decoder``): a whole piece per call, and full 40-frame windows
  (what a listener's steady decoding costs; ``engine.readiness.time_windows``);
- the time to the first window of a fresh 60-token piece (front + first window: the engine's part of heard
  onset), and the heard onset of the ~60-token first sentence of ``FOUR_SENTENCES`` on a fresh session of a
  server on loopback (a player that starts at the first byte), each as a share of kokoro-onnx's time for
  the same text whole.

Quality, the static decoder judged against the exported one fed the same phonemes (the front is the same
graph, so durations match and the comparison is of the decoder alone):

- every stock voice says a sentence in its language: PESQ (wide band) of the static whole piece against the
  exported one, DNSMOS overall of each, and whether each is audible (finite, not silent, not clipped);
- every language, heard: Whisper base (language forced) transcribes both graphs' audio of
  ``bench.languages``' sentences; character error rate against the text (Mandarin as toneless pinyin;
  Hindi, which Whisper base writes in Urdu script, against what it heard from the exported graph).

Run: ``python -m streamvoice.bench.engine [--repeat 3] [--voices all]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.bench.asr import Transcriber
from streamvoice.bench.common import FOUR_SENTENCES, machine, table, write_result
from streamvoice.bench.languages import PIECE_60, SENTENCES, comparable
from streamvoice.bench.listener import heard_trials
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.quality import dnsmos, pesq_score
from streamvoice.bench.tables import md_table, md_value
from streamvoice.bench.wer import character_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.engine.greeting import calibration_text
from streamvoice.engine.readiness import time_windows, warm_up
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.engine.voices import describe
from streamvoice.protocol import SAMPLE_RATE
from streamvoice.server import ServerConfig, create_app
from streamvoice.text.boundaries import sentence_cuts

SPEED_TEXT = (
    "Thanks for calling, I can help you with that order today. "
    "Your package left our warehouse on Monday and is now with the courier."
)
GRAPHS = {"exported": "int8", "static int8": "int8-static"}


def audible(audio: NDArray[np.float32]) -> bool:
    """Finite and louder than silence (a broken graph gives NaN or zeros)."""
    if audio.size == 0 or not np.isfinite(audio).all():
        return False
    return float(np.sqrt(np.mean(audio**2))) > 1e-3


def clipped(audio: NDArray[np.float32]) -> float:
    """Share of samples at or past full scale (a few voices' exported graph already reaches it)."""
    return float(np.mean(np.abs(audio) >= 1.0)) if audio.size else 0.0


def _timed(run: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started


def speed(engines: dict[str, KokoroEngine], repeat: int) -> dict[str, Any]:
    from kokoro_onnx import Kokoro

    files = next(iter(engines.values())).files
    shipped = Kokoro(str(files.model), str(files.voices))
    rates: dict[str, list[float]] = {"kokoro-onnx create()": []}
    for name in engines:
        rates[f"{name}: whole piece"], rates[f"{name}: full windows"] = [], []
    onset: dict[str, list[float]] = {name: [] for name in engines}
    shipped_60: list[float] = []
    shipped.create(SPEED_TEXT, voice="af_heart", lang="en-us")  # its first call loads lazily
    for _ in range(repeat):
        (audio, rate), seconds = _timed(lambda: shipped.create(SPEED_TEXT, voice="af_heart", lang="en-us"))
        rates["kokoro-onnx create()"].append(len(audio) / rate / seconds)
        shipped_60.append(_timed(lambda: shipped.create(PIECE_60, voice="af_heart", lang="en-us"))[1])
        for name, engine in engines.items():
            whole, seconds = _timed(lambda e=engine: e.synthesize(SPEED_TEXT, "af_heart"))  # type: ignore[misc]
            rates[f"{name}: whole piece"].append(len(whole) / SAMPLE_RATE / seconds)
            windows = time_windows(engine, "af_heart")
            rates[f"{name}: full windows"].append(sum(a for a, _ in windows) / sum(w for _, w in windows))
            piece = engine.planner.plan(PIECE_60, "en-us")[0]
            spec = engine.parse_voice("af_heart")
            stream = engine.stream_piece(piece, spec, 1.0)
            onset[name].append(_timed(lambda s=stream: next(s))[1])  # type: ignore[misc]
            stream.close()
    base = statistics.median(rates["kokoro-onnx create()"])
    rows = [
        {"path": k, "audio_s_per_s": statistics.median(v), "vs_kokoro_onnx": statistics.median(v) / base}
        for k, v in rates.items()
    ]
    whole_60 = statistics.median(shipped_60)
    onsets = [
        {"graph": k, "first_window_ms": statistics.median(v) * 1000, "share": statistics.median(v) / whole_60}
        for k, v in onset.items()
    ]
    return {"rows": rows, "onset": onsets, "kokoro_onnx_piece60_ms": whole_60 * 1000}


def served_onset(engines: dict[str, KokoroEngine], trials: int) -> dict[str, Any]:
    """Heard onset of a fresh session's first sentence on each graph's server, and kokoro-onnx's time for
    the same sentence whole (alternating with the sessions, so drift hits both)."""
    from kokoro_onnx import Kokoro

    cuts, _ = sentence_cuts(FOUR_SENTENCES, final=True)
    sentence = FOUR_SENTENCES[: cuts[0]].strip()
    files = next(iter(engines.values())).files
    shipped = Kokoro(str(files.model), str(files.voices))
    shipped.create(sentence, voice="af_heart", lang="en-us")
    whole: list[float] = []
    heard: dict[str, list[float]] = {name: [] for name in engines}
    servers = {
        name: LoopbackServer(create_app(ServerConfig(), engine=e)).start() for name, e in engines.items()
    }
    try:
        for _ in range(trials):
            whole.append(_timed(lambda: shipped.create(sentence, voice="af_heart", lang="en-us"))[1] * 1000)
            for name, server in servers.items():
                heard[name] += asyncio.run(heard_trials(server.url, sentence, 1))["heard"]
    finally:
        for server in servers.values():
            server.stop()
    kokoro_ms = statistics.median(whole)
    return {
        "sentence": sentence,
        "kokoro_onnx_ms": kokoro_ms,
        "rows": [
            {"graph": k, "heard_ms": statistics.median(v), "share": statistics.median(v) / kokoro_ms}
            for k, v in heard.items()
        ],
    }


def voice_quality(engines: dict[str, KokoroEngine], voices: list[str]) -> list[dict[str, Any]]:
    exported, static = engines["exported"], engines["static int8"]
    rows = []
    for voice in voices:
        lang = describe(voice).lang
        spec = exported.parse_voice(voice)
        piece = exported.planner.plan(calibration_text(lang), lang)[0]
        a = exported.synthesize_piece(piece, spec, 1.0)
        b = static.synthesize_piece(piece, spec, 1.0)
        streamed = {
            name: np.concatenate(list(e.stream_piece(piece, spec, 1.0))) for name, e in engines.items()
        }
        row = {
            "voice": voice,
            "pesq": pesq_score(a, b),
            "streamed_pesq_exported": pesq_score(a, streamed["exported"]),
            "streamed_pesq_static": pesq_score(b, streamed["static int8"]),
            "dnsmos_exported": dnsmos(a),
            "dnsmos_static": dnsmos(b),
            "audible": audible(a) and audible(b),
            "clipped_exported": clipped(a),
            "clipped_static": clipped(b),
        }
        rows.append(row)
        print(f"  {voice}: PESQ {row['pesq']:.2f}, DNSMOS {row['dnsmos_exported']:.2f} -> "
              f"{row['dnsmos_static']:.2f}, clipped {row['clipped_exported']:.2%} -> {row['clipped_static']:.2%}"
              f"{'' if row['audible'] else ', NOT AUDIBLE'}", flush=True)  # fmt: skip
    return rows


# Whisper base, forced to Hindi, writes the same clip in Devanagari, Urdu script or English words from one
# run to the next: no error rate means anything there, so Hindi's transcripts are printed, not scored.
UNSCORED = ("hi",)


def heard(engines: dict[str, KokoroEngine], transcriber: Transcriber) -> list[dict[str, Any]]:
    rows = []
    for lang, (voice, whisper_lang, sentences) in SENTENCES.items():
        errors: dict[str, list[float]] = {name: [] for name in engines}
        transcripts: list[dict[str, str]] = []
        for sentence in sentences:
            texts = {
                name: transcriber.transcribe(engine.synthesize(sentence, voice), language=whisper_lang)
                for name, engine in engines.items()
            }
            transcripts.append(texts)
            if lang in UNSCORED:
                continue
            for name, text in texts.items():
                errors[name].append(character_error_rate(comparable(sentence, lang), comparable(text, lang)))
        row: dict[str, Any] = {
            "lang": lang,
            "voice": voice,
            **{k: statistics.fmean(v) if v else None for k, v in errors.items()},
            "heard": transcripts,
        }
        rows.append(row)
        print(f"  {lang}: CER exported {md_value(row['exported'], 3)}, static {md_value(row['static int8'], 3)}; "
              f"heard {transcripts}", flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--voices", default="all", help="'all' or a comma-separated list")
    parser.add_argument("--no-asr", action="store_true", help="skip the languages heard by Whisper")
    args = parser.parse_args(argv)
    engines = {name: KokoroEngine.load(None, variant) for name, variant in GRAPHS.items()}
    for engine in engines.values():
        prepare(engine)
        warm_up(engine)
    print("speed ...", flush=True)
    measured = speed(engines, args.repeat)
    print(table(measured["rows"], [("path", "path"), ("audio_s_per_s", "audio s/s"),
                                   ("vs_kokoro_onnx", "x kokoro-onnx")]))  # fmt: skip
    print(table(measured["onset"], [("graph", "graph"), ("first_window_ms", "first window ms"),
                                    ("share", "of kokoro-onnx's whole piece")]))  # fmt: skip
    served = served_onset(engines, 2 * args.repeat)
    print(f"served heard onset, fresh session (kokoro-onnx whole: {served['kokoro_onnx_ms']:.0f} ms)")
    print(table(served["rows"], [("graph", "graph"), ("heard_ms", "heard ms"), ("share", "of kokoro-onnx")]))
    names = engines["exported"].voice_names
    voices = sorted(names) if args.voices == "all" else args.voices.split(",")
    print(f"quality, {len(voices)} voices ...", flush=True)
    per_voice = voice_quality(engines, voices)
    languages = [] if args.no_asr else heard(engines, Transcriber.load())
    data = {
        "machine": machine(),
        "repeat": args.repeat,
        **measured,
        "served": served,
        "voices": per_voice,
        "languages": languages,
        "summary": {
            "pesq_mean": statistics.fmean(r["pesq"] for r in per_voice),
            "pesq_min": min(r["pesq"] for r in per_voice),
            "pesq_min_voice": min(per_voice, key=lambda r: r["pesq"])["voice"],
            "dnsmos_exported": statistics.fmean(r["dnsmos_exported"] for r in per_voice),
            "dnsmos_static": statistics.fmean(r["dnsmos_static"] for r in per_voice),
            "audible": sum(r["audible"] for r in per_voice),
            "streamed_pesq_exported": statistics.fmean(r["streamed_pesq_exported"] for r in per_voice),
            "streamed_pesq_static": statistics.fmean(r["streamed_pesq_static"] for r in per_voice),
            "clipped_exported": max(r["clipped_exported"] for r in per_voice),
            "clipped_static": max(r["clipped_static"] for r in per_voice),
        },
    }
    print(data["summary"])
    print("wrote", write_result("engine", data))
    return data


def report(d: dict[str, Any]) -> str:
    s = d["summary"]
    speed_rows = [
        [r["path"], md_value(r["audio_s_per_s"], 2), md_value(r["vs_kokoro_onnx"], 2)] for r in d["rows"]
    ]
    onset_rows = [
        [r["graph"], md_value(r["first_window_ms"], 0), md_value(r["share"], 3)] for r in d["onset"]
    ]
    lang_rows = [[r["lang"], r["voice"], md_value(r["exported"], 3), md_value(r["static int8"], 3)]
                 for r in d["languages"]]  # fmt: skip
    worst = sorted(d["voices"], key=lambda r: r["pesq"])[:5]
    voice_rows = [[r["voice"], md_value(r["pesq"], 2), md_value(r["dnsmos_exported"], 2),
                   md_value(r["dnsmos_static"], 2)] for r in worst]  # fmt: skip
    return (
        f"The same official int8 file; medians of {d['repeat']} interleaved rounds.\n\n"
        + md_table(["path", "audio s per s", "x kokoro-onnx"], speed_rows)
        + f"\n\nA fresh 60-token piece: kokoro-onnx makes it whole in {md_value(d['kokoro_onnx_piece60_ms'], 0)} ms; "
        "our engine's first window (front + first decoder window) takes:\n\n"
        + md_table(["decoder graph", "first window ms", "share of kokoro-onnx's piece"], onset_rows)
        + (
            f'\n\nServed: heard onset of "{d["served"]["sentence"]}" on a fresh session (median of '
            f"{2 * d['repeat']}), against kokoro-onnx making it whole in "
            f"{md_value(d['served']['kokoro_onnx_ms'], 0)} ms:\n\n"
            + md_table(
                ["decoder graph", "heard onset ms", "share of kokoro-onnx's whole"],
                [
                    [r["graph"], md_value(r["heard_ms"], 0), md_value(r["share"], 3)]
                    for r in d["served"]["rows"]
                ],
            )
            if "served" in d
            else ""
        )
        + f"\n\nThe static-int8 decoder against the exported one, same phonemes, {len(d['voices'])} voices "
        f"(each its language's greeting): PESQ {md_value(s['pesq_mean'], 2)} on average, lowest "
        f"{md_value(s['pesq_min'], 2)} ({s['pesq_min_voice']}); DNSMOS {md_value(s['dnsmos_exported'], 2)} "
        f"exported, {md_value(s['dnsmos_static'], 2)} static; audible {s['audible']} of {len(d['voices'])}; "
        f"samples at full scale, most of any voice: {s['clipped_exported']:.2%} exported, "
        f"{s['clipped_static']:.2%} static. Each graph's streamed windows against its own whole piece (the "
        f"streamed path's bar), PESQ: exported {md_value(s['streamed_pesq_exported'], 2)}, static "
        f"{md_value(s['streamed_pesq_static'], 2)}. "
        "The five lowest PESQ:\n\n"
        + md_table(["voice", "PESQ vs exported", "DNSMOS exported", "DNSMOS static"], voice_rows)
        + (
            "\n\nHeard by Whisper base, language forced (character error rate; Hindi is not scored: Whisper "
            "base writes the same clip in Devanagari, Urdu script or English words, so its transcripts are "
            "shown):\n\n"
            + md_table(["language", "voice", "CER exported", "CER static int8"], lang_rows)
            + "".join(
                "\n\nWhat Whisper wrote for "
                + r["lang"]
                + ", exported / static: "
                + "; ".join(f'"{h["exported"]}" / "{h["static int8"]}"' for h in r.get("heard", []))
                for r in d["languages"]
                if r["lang"] in UNSCORED
            )
            if lang_rows
            else ""
        )
    )


if __name__ == "__main__":
    main()
