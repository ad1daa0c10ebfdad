"""The front graph in static int8: a candidate for heard onset, timed and heard against the front as exported.

A fresh piece waits for the front (text encoder, prosody and durations) before its first decoder window, ~50
ms of a ~165 ms heard onset on 2 cores. The exported front is dynamic int8: 90 ``MatMulInteger`` and 19
``ConvInteger`` chains, each quantizing its activation at run time (71 ``DynamicQuantizeLinear``), and six
``DynamicQuantizeLSTM``. Two candidates are built from the official file's front:

- float: every chain on its dequantized weights, the LSTMs as float ``LSTM``;
- static int8: the chains' MatMuls and Convs quantized statically (QDQ, s8 weights per channel, u8
  activations with ranges measured on the calibration greeting of nine voices in the nine languages), the
  LSTMs left as exported.

And two that leave the durations alone, the prosody predictor's frame-rate convolution branches in static
int8 as ``engine.static_front`` derives them (ranges on the static decoder's ten calibration phrases):

- F0 and N: the pitch and energy branches;
- N alone: the energy branch (what the ``int8-static`` variant ships).

Each runs in the engine in place of the exported front (the same decoder after it). Speed: median ms per
front call on three English sentences, the fronts taking turns call by call. Sound, per language
on ``bench.languages``' sentences (not the calibration text): whole-piece PESQ against the exported front's
(durations move, so PESQ reads timing as well as timbre), Whisper base's character error rate with the
language forced (Mandarin as toneless pinyin), DNSMOS, and the length against the exported front's.

Sessions take the engine's options (idle threads sleep, as in the server); ``--spin`` times them spinning.

Run: ``python -m streamvoice.bench.front_int8 [--repeat 7] [--sentences 2] [--no-asr] [--spin]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import onnxruntime as ort

from streamvoice.bench.common import table, write_result
from streamvoice.bench.languages import SENTENCES, comparable
from streamvoice.bench.quality import dnsmos, pesq_score
from streamvoice.bench.tables import md_table, md_value
from streamvoice.bench.wer import character_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.engine.greeting import calibration_text
from streamvoice.engine.options import EngineOptions
from streamvoice.engine.static_int8 import static_front
from streamvoice.engine.static_int8.static_decoder import CALIBRATION, float_lstms, float_weights, quantize
from streamvoice.engine.surgery.graph_split import split_model
from streamvoice.engine.voices import describe

TIMED = (
    "Thanks for calling, I can help you with that order today.",
    "The museum opens at nine in the morning, and the guided tours start every half hour after that.",
    "Your package left our warehouse on Monday and is now with the courier.",
)
PROSODY_BRANCHES = r"^/encoder/(F0|N)\.\d/"  # pitch and energy: static_front quantizes energy's alone
CALIBRATION_VOICES = (
    "af_heart", "am_michael", "bf_emma", "ef_dora", "ff_siwis", "jf_alpha", "zf_xiaobei", "if_sara", "pf_dora",
)  # fmt: skip


def front_feeds(engine: KokoroEngine, text: str, voice: str, lang: str) -> list[dict[str, Any]]:
    assert engine.split is not None
    names = [i.name for i in engine.split.front.get_inputs()]
    spec = engine.parse_voice(voice)
    feeds = [engine.feeds(p.tokens, engine.style_pack(spec), 1.0)[0] for p in engine.planner.plan(text, lang)]
    return [{k: v for k, v in f.items() if k in names} for f in feeds]


def candidates(engine: KokoroEngine) -> dict[str, bytes]:
    import onnx

    front = split_model(engine.files.model).front
    floating = onnx.load_from_string(front)
    float_weights(floating)
    static_source = floating.SerializeToString()  # LSTMs as exported
    float_lstms(floating)
    calibration = [
        f
        for voice in CALIBRATION_VOICES
        for f in front_feeds(engine, calibration_text(describe(voice).lang), voice, describe(voice).lang)
    ]
    static = quantize(onnx.load_from_string(static_source), calibration, ("MatMul", "Conv"), percentile=None)
    shipped_feeds = engine.front_feeds(CALIBRATION)
    return {
        "exported": front,
        "float": floating.SerializeToString(),
        "static int8": static,
        "static int8, F0 and N branches": static_front.derive_graph(front, shipped_feeds, PROSODY_BRANCHES),
        "static int8, N branch (shipped)": static_front.derive_graph(front, shipped_feeds),
    }


def speed(
    sessions: dict[str, ort.InferenceSession], feeds: list[dict[str, Any]], repeat: int
) -> dict[str, float]:
    """Median ms per call, the sessions taking turns call by call (a drifting machine hits them alike: timed
    one after another, a session's ~10 s block could land in a slow spell and read 20% slower)."""
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for session in sessions.values():
        session.run(None, feeds[0])
    for _ in range(2 * repeat):
        for f in feeds:
            for name, session in sessions.items():
                started = time.perf_counter()
                session.run(None, f)
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def sound(
    engine: KokoroEngine, sessions: dict[str, ort.InferenceSession], sentences: int, asr: bool
) -> list[dict[str, Any]]:
    assert engine.split is not None
    transcriber = None
    if asr:
        from streamvoice.bench.asr import Transcriber

        transcriber = Transcriber.load()
    rows = []
    for lang, (voice, whisper_lang, texts) in SENTENCES.items():
        for text in texts[:sentences]:
            audio = {}
            for name, session in sessions.items():
                engine.split.front = session
                audio[name] = engine.synthesize(text, voice, lang=lang)
            reference = audio["exported"]
            for name in sessions:
                if name == "exported":
                    continue
                row: dict[str, Any] = {
                    "lang": lang,
                    "front": name,
                    "pesq": pesq_score(reference, audio[name]),
                    "dnsmos_exported": dnsmos(reference),
                    "dnsmos": dnsmos(audio[name]),
                    "length": audio[name].size / reference.size,
                }
                if transcriber is not None:
                    truth = comparable(text, lang)
                    for key, clip in (("cer_exported", reference), ("cer", audio[name])):
                        heard = transcriber.transcribe(clip, language=whisper_lang)
                        row[key] = character_error_rate(truth, comparable(heard, lang))
                rows.append(row)
    engine.split.front = sessions["exported"]
    return rows


def _mean(rows: list[dict[str, Any]], key: str, lang: str | None = None) -> float:
    return statistics.mean(float(r[key]) for r in rows if lang is None or r["lang"] == lang)


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in dict.fromkeys(r["front"] for r in rows):
        mine = [r for r in rows if r["front"] == name]
        heard = [r for r in mine if "cer" in r and r["lang"] != "hi"]  # Whisper ran (not --no-asr)
        langs = dict.fromkeys(r["lang"] for r in heard)  # in bench.languages' order
        worse = [
            lang for lang in langs if _mean(heard, "cer", lang) > _mean(heard, "cer_exported", lang) + 1e-9
        ]
        out.append(
            {
                "front": name,
                "pesq_mean": _mean(mine, "pesq"),
                "pesq_min": min(r["pesq"] for r in mine),
                "dnsmos_delta": statistics.mean(r["dnsmos"] - r["dnsmos_exported"] for r in mine),
                "cer_exported": _mean(heard, "cer_exported") if heard else None,
                "cer": _mean(heard, "cer") if heard else None,
                "cer_worse_in": ", ".join(worse) if heard else None,
            }
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sentences", type=int, default=2, help="per language, from bench.languages")
    parser.add_argument("--no-asr", action="store_true")
    parser.add_argument(
        "--spin", action="store_true", help="idle ONNX Runtime threads spin (the server's do not)"
    )
    args = parser.parse_args(argv)
    ort.set_default_logger_severity(3)
    engine = KokoroEngine.load()
    assert engine.split is not None
    graphs = candidates(engine)
    options = EngineOptions(spin=args.spin).session_options()  # the engine's own, as it loads by default
    sessions = {
        name: ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
        for name, graph in graphs.items()
    }
    timed = [f for text in TIMED for f in front_feeds(engine, text, "af_heart", "en-us")]
    ms = speed(sessions, timed, args.repeat)
    rows = sound(engine, sessions, args.sentences, not args.no_asr)
    result = {
        "spin": args.spin,
        "speed": [{"front": k, "ms_per_call": v, "vs_exported": ms["exported"] / v} for k, v in ms.items()],
        "rows": rows,
        "summary": summary(rows),
    }
    print(
        table(result["speed"], [("front", "front"), ("ms_per_call", "ms per call"), ("vs_exported", "speed")])
    )
    print()
    print(
        table(
            result["summary"],
            [
                ("front", "front"),
                ("pesq_mean", "PESQ mean"),
                ("pesq_min", "PESQ min"),
                ("dnsmos_delta", "DNSMOS delta"),
                ("cer_exported", "CER exported"),
                ("cer", "CER"),
                ("cer_worse_in", "CER worse in"),
            ],
        )
    )
    print(f"wrote {write_result('front_int8', result)}")
    return result


def report(d: dict[str, Any]) -> str:
    speed_rows = [
        [r["front"], md_value(r["ms_per_call"], 1), md_value(r["vs_exported"], 2)] for r in d["speed"]
    ]
    sound_rows = [
        [r["front"], md_value(r["pesq_mean"], 2), md_value(r["pesq_min"], 2), md_value(r["dnsmos_delta"], 3),
         md_value(r["cer_exported"], 3), md_value(r["cer"], 3), r["cer_worse_in"] or "-"]
        for r in d["summary"]
    ]  # fmt: skip
    threads = "idle threads spinning" if d.get("spin") else "idle threads asleep, as the server runs it"
    return (
        f"Speed ({threads}):\n\n"
        + md_table(["front", "ms per front call", "speed vs exported"], speed_rows)
        + "\n\n"
        + md_table(
            ["front", "PESQ mean", "PESQ min", "DNSMOS delta", "CER exported", "CER", "CER worse in"],
            sound_rows,
        )
    )


if __name__ == "__main__":
    main()
