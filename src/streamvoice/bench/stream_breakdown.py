"""Where streamed speech differs from the whole piece, cause by cause (issue #66). Each piece runs the front
once, so streamed and whole share every input (durations, pitch, noise, phase), and both are compared
untrimmed and sample-aligned over the frames the stream decodes: what is left is the decoder's windows.

- **shipped**: the engine's windows, each normalised with one estimate of the whole piece's norm statistics
  made before the first from what the front made of the piece (``speech_estimate``), blended with a little
  of its own by the voice's measured share (``SpeechEstimator.shares``);
- **blended, before the estimate**: the engine's windows as they were before it: the voice's statistics
  from earlier pieces for what is not decoded yet, blended with each window's own;
- **shipped, context 12**: the same, three times the context on each side of every window;
- **exact statistics**: the same windows normalised with the whole piece's own statistics (what no
  stream can know before decoding the whole piece: the ceiling of any better estimate);
- **speech statistics, blended as before**: the blended stream with the voice's statistics replaced by
  this piece's own speech statistics (a perfect estimate of the speech, blended with each window's own);
- **exact statistics, blended**: each window blends the whole piece's statistics with its own, weighted as
  the engine weighs them (what blending alone costs, with nothing left to estimate);
- **the estimate alone**: the blended stream's estimate (the frames decoded so far with their own statistics, the
  voice's for the speech still to come, its silence's for the silence) without blending in each window's own
  statistics: whether blending helps once the estimate is what it really is;
- **its speech's statistics and the voice's silence, alone**: every window normalised with one fixed
  estimate, this piece's speech statistics (the speech decoded by itself) merged with the voice's silence for
  the silent frames, nothing of the windows' own: the ceiling of a per-piece estimate of the speech; and the
  same refreshed as the engine refreshes its estimate (the frames kept so far by their windows' statistics);
- **exact statistics for norms [0:k]**: the whole piece's statistics for the first ``k`` of the decoder's
  norms, the voice's estimate for the rest (every window at the estimate alone): which layers the error
  lives in;
- **the estimate at share s**: the shipped stream with every voice's share of the estimate set to ``s`` (1.0:
  the estimate alone; ``SpeechEstimator.shares`` is what each voice takes), with the voice's gain;
- **whole, second front**: the whole piece from a second front run (is the model deterministic?).

PESQ (wide band) of each against the whole piece, per sentence and on average, and its loudness (streamed /
whole RMS over the same samples). ``--heard`` adds every
language's sentences heard by Whisper base (``heard``): whole, whole 5 ms later, streamed as shipped, blended,
and with exact statistics.

    python -m streamvoice.bench.stream_breakdown [--voices af_heart,am_michael,bf_emma,...] [--ks 10,24,40]
    python -m streamvoice.bench.stream_breakdown --short-replies --voices af_heart,af_bella,...

``--short-replies`` measures how short replies blend instead (``short_replies``): a voice's share and gain are
measured on sentences, and a short reply's loudness answers the share far more steeply.

The last three default voices are held out of the speech estimate's fit (``fit_speech_estimate``).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from streamvoice.bench.common import table, write_result
from streamvoice.bench.fit_speech_estimate import SHARES
from streamvoice.bench.quality import SHORT_REPLIES, dnsmos_over_alignments, loudness_ratio, pesq_score
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import DecoderGraph, EngineOptions
from streamvoice.engine.planning import Piece
from streamvoice.engine.streaming.speech_estimate import DEFAULT_SHARE, Reference
from streamvoice.engine.streaming.split_kokoro import SplitKokoro
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME, WindowBlend, WindowPlan, window_prior
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.engine.timing import decode_range, trim_whole
from streamvoice.engine.voices import VoiceSpec

# Sentences no window size or statistic was tuned on (held out from bench.quality's and the tests', and from
# the speech estimate's fit: ``fit_speech_estimate``).
SENTENCES = (
    "Your appointment is confirmed for nine thirty on Tuesday morning.",
    "Got it, thanks!",
    "The quarterly report shows revenue up eleven percent over last year.",
    "Please hold while I transfer you to a specialist who can look into the billing question.",
    "The museum opens at ten, and the guided tour of the east wing starts at half past eleven.",
    "I checked three stores nearby, and only one has the blue jacket in your size.",
    "Thank you for calling. Goodbye!",
    "The interest rate on this savings account is two point five percent.",
)


class EstimateAlone:
    """The shipped estimate (``window_prior``) used alone by every window: what the frames kept so far said
    (``seen``), the voice's statistics for the rest."""

    def __init__(
        self, voice: NormStats | None, silence: NormStats | None, frames: int, span: tuple[int, int]
    ):
        self.voice, self.silence, self.frames, self.span = voice, silence, frames, span

    def __call__(
        self, lo: int, hi: int, start: int, end: int, seen: NormStats | None
    ) -> tuple[NormStats | None, float]:
        first, last = self.span
        rest, _ = window_prior(
            seen, self.voice, self.frames, 0, hi - lo, seen is None, self.silence,
            self.frames - (last - first),
        )  # fmt: skip
        return rest, 1.0


class Fronted(NamedTuple):
    """A piece through the front once: the front's inputs and outputs, the style row, its frames and the
    frames a stream decodes (``decode_range``)."""

    feeds: dict[str, Any]
    feats: dict[str, Any]
    style: NDArray[np.float32]
    frames: int
    span: tuple[int, int]


def fronted(engine: KokoroEngine, piece: Piece, spec: VoiceSpec) -> Fronted:
    split = engine.split
    assert split is not None, "the breakdown needs the split decoder (in-piece streaming on)"
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    frames = split.frames(feats)
    return Fronted(feeds, feats, style, frames, decode_range(split.durations(feats), piece.voiced, frames))


def windows_with(
    split: SplitKokoro, feats: dict[str, Any], style: NDArray[np.float32], span: tuple[int, int], plan: WindowPlan,
    blend: WindowBlend,
) -> NDArray[np.float32]:  # fmt: skip
    """The span decoded in ``plan``'s windows and joined as the engine joins them (``SplitKokoro.decode_windows``,
    the engine's own loop), each window normalised with what ``blend`` says."""
    return np.concatenate([audio for audio, _, _ in split.decode_windows(feats, style, plan, blend, span)])


def fixed(stats: NormStats | None, share: float = 1.0) -> WindowBlend:
    """Every window blends ``stats`` at ``share`` with its own (1.0: ``stats`` alone)."""
    return lambda lo, hi, start, end, seen: (stats, share)


def blended(stats: NormStats, frames: int) -> WindowBlend:
    """Every window blends ``stats`` (counted as the piece's ``frames``) with its own computed frames."""
    return lambda lo, hi, start, end, seen: (stats, frames / (frames + hi - lo))


def with_silence(
    speech: NormStats, silence: NormStats | None, span: tuple[int, int], frames: int
) -> NormStats:
    """The piece's statistics as its speech's and, for the frames outside ``span``, the voice's silence's."""
    spoken, silent = span[1] - span[0], frames - (span[1] - span[0])
    merged = NormStats.merge(
        speech.weighted(float(spoken)),
        silence.weighted(float(silent)) if silence is not None and silent else None,
    )
    assert merged is not None
    return merged


def mixed(exact: NormStats, estimate: NormStats, k: int) -> NormStats:
    """The exact statistics for the first ``k`` norms, the estimate's for the rest."""
    return NormStats(
        (*exact.means[:k], *estimate.means[k:]), (*exact.variances[:k], *estimate.variances[k:]), exact.frames
    )


def breakdown(
    engine: KokoroEngine, voice: str, text: str, ks: list[int], only: frozenset[str] | None = None
) -> dict[str, float]:
    """PESQ of each variant (those in ``only``, if given) against the whole piece."""
    split = engine.split
    assert split is not None, "the breakdown needs the split decoder (in-piece streaming on)"
    spec = engine.parse_voice(voice)
    piece = engine.planner.plan(text, "en-us")[0]
    feeds, feats, style, frames, span = fronted(engine, piece, spec)
    whole, exact = split.decode(feats, style, 0, frames)
    reference = whole[span[0] * SAMPLES_PER_FRAME : span[1] * SAMPLES_PER_FRAME]
    voice_prior, silence = engine.memory.get(spec), engine.memory.silence(spec)
    plan = engine.window_plan
    wide = replace(plan, context=12, lookahead=12, lead_context=12)
    voice_reference = engine.memory.reference(spec)

    def shipped(
        p: WindowPlan, prior: NormStats | None = voice_prior, blend: bool = False, share: float | None = None
    ) -> NDArray[np.float32]:
        estimated = (
            voice_reference
            if share is None or voice_reference is None
            else replace(voice_reference, share=share)
        )
        chunks = split.stream(
            feats,
            style,
            p,
            prior,
            engine.cold_window_plan,
            None,
            None,
            span,
            silence,
            None if blend else estimated,
        )
        return np.concatenate([audio for audio, _ in chunks])

    speech_stats = split.decode(feats, style, *span)[1]
    alone = EstimateAlone(voice_prior, silence, frames, span)
    refreshed = EstimateAlone(speech_stats, silence, frames, span)
    made: dict[str, Callable[[], NDArray[np.float32]]] = {
        "shipped": lambda: shipped(plan),
        "blended, before the estimate": lambda: shipped(plan, blend=True),
        "shipped, context 12": lambda: shipped(wide),
        "speech statistics, blended as before": lambda: shipped(plan, speech_stats, blend=True),
        "exact statistics, blended": lambda: windows_with(
            split, feats, style, span, plan, blended(exact, frames)
        ),
        "the estimate alone": lambda: windows_with(split, feats, style, span, plan, alone),
        "its speech's statistics and the voice's silence, alone": lambda: windows_with(
            split, feats, style, span, plan, fixed(with_silence(speech_stats, silence, span, frames))
        ),
        "the same, refreshed by the kept windows' statistics": lambda: windows_with(
            split, feats, style, span, plan, refreshed
        ),
        "exact statistics": lambda: windows_with(split, feats, style, span, plan, fixed(exact)),
        **{
            f"the estimate at share {share}": lambda share=share: shipped(plan, share=share)  # type: ignore[misc]
            for share in (1.0, *SHARES)  # 1.0: the estimate alone, which no voice takes
        },
        "whole, second front": lambda: split.decode(split.features(feeds), style, 0, frames)[0][
            span[0] * SAMPLES_PER_FRAME : span[1] * SAMPLES_PER_FRAME
        ],
    }
    if voice_prior is not None:
        speech = span[1] - span[0]
        estimate = NormStats.merge(
            voice_prior.weighted(speech), silence.weighted(frames - speech) if silence is not None else None
        )
        assert estimate is not None
        for k in ks:
            made[f"exact statistics for norms [0:{k}]"] = lambda k=k: windows_with(  # type: ignore[misc]
                split, feats, style, span, plan, fixed(mixed(exact, estimate, k))
            )
    variants = {name: make() for name, make in made.items() if only is None or name in only}
    scores = {}
    for name, audio in variants.items():
        n = min(len(reference), len(audio))
        scores[name] = pesq_score(reference[:n], audio[:n])
        scores[f"{name}: loudness"] = loudness_ratio(reference, audio)
    return scores


# Who is heard in each language (``heard``): up to three of its voices, the first ``bench.languages``'.
HEARD_VOICES = {
    "en-us": ("af_heart", "am_michael", "af_bella"), "en-gb": ("bf_emma", "bm_george", "bf_isabella"),
    "ja": ("jf_alpha", "jf_nezumi", "jm_kumo"), "cmn": ("zf_xiaobei", "zf_xiaoyi", "zm_yunjian"),
    "es": ("ef_dora", "em_alex", "em_santa"), "fr-fr": ("ff_siwis",), "it": ("if_sara", "im_nicola"),
    "pt-br": ("pf_dora", "pm_alex", "pm_santa"), "hi": ("hf_alpha", "hf_beta", "hm_omega"),
}  # fmt: skip
# What they say besides ``bench.languages``' sentences: one sentence in a language's voice heard by Whisper
# is one or two characters of error either way, so a column of two or three sentences in one voice cannot
# tell a stream from a whole piece (Japanese read 0.071 against 0.024 that way, and 0.138 against 0.141 over
# three voices and six sentences).
HEARD_MORE = {
    "en-us": ("The library closes early on Fridays during the summer.",),
    "en-gb": ("I'll ring you back once the match has finished.",),
    "ja": ("お荷物は明日の午前中にお届けします。", "ご予約の変更は電話でも承っております。",
           "申し訳ありませんが、その商品は在庫切れです。"),
    "cmn": ("您的包裹明天上午送到。", "如果需要改签，请提前一天联系我们。", "很抱歉，这件商品已经卖完了。"),
    "es": ("¿A qué hora abre la farmacia los sábados?",),
    "fr-fr": ("Le musée est fermé le mardi, mais ouvert tard le jeudi.",),
    "it": ("La farmacia apre alle nove anche il sabato.",),
    "pt-br": ("A farmácia abre às nove também no sábado.",),
    "hi": ("कल सुबह दफ़्तर जल्दी खुलेगा।",),
}  # fmt: skip


# ``heard``'s columns: whole pieces, the same 5 ms later, the stream as shipped, the blended stream (the
# estimate off) and the windows normalised with each piece's exact statistics (no estimate's residual).
HEARD_COLUMNS = ("whole", "whole, 5 ms later", "shipped", "blended", "exact statistics")
HEARD_LABELS = {"whole": "CER whole", "whole, 5 ms later": "CER whole 5 ms later", "shipped": "CER streamed",
                "blended": "CER blended", "exact statistics": "CER exact statistics"}  # fmt: skip


def exact_statistics_stream(engine: KokoroEngine, piece: Piece, spec: VoiceSpec) -> NDArray[np.float32]:
    """The piece's speech in the engine's windows, each normalised with the whole piece's own statistics
    (the ceiling of any estimate), trimmed as the engine trims a whole piece."""
    split = engine.split
    assert split is not None
    _, feats, style, frames, span = fronted(engine, piece, spec)
    exact = split.decode(feats, style, 0, frames)[1]
    return trim_whole(windows_with(split, feats, style, span, engine.window_plan, fixed(exact)))[0]


# How a short reply may blend, each a (share, gain) from the voice's reference.
REPLY_RULES: dict[str, Callable[[Reference], tuple[float, float]]] = {
    "as shipped: the voice's share and gain": lambda ref: (ref.share, ref.gain),
    "the voice's share, no gain": lambda ref: (ref.share, 1.0),
    "the default share 0.875, no gain (the rule before)": lambda ref: (DEFAULT_SHARE, 1.0),
    "0.8125, no gain": lambda ref: (0.8125, 1.0),
}
LOUDNESS_BOUNDS = (0.8, 1.25)  # the guard's (``tests/test_streaming_engine.py``)


def short_replies(engine: KokoroEngine, voices: list[str]) -> dict[str, Any]:
    """``SHORT_REPLIES`` in each voice, the speech streamed in the engine's windows at every share a rule in
    ``REPLY_RULES`` can pick, against the same speech decoded whole: each rule's
    loudness (streamed / whole RMS, gained), PESQ (not gained) and DNSMOS drop (whole less streamed, each the mean over
    ``quality.ALIGNMENTS``' leads, gained) over the pieces, and how many leave ``LOUDNESS_BOUNDS`` or drop
    by more than 0.10."""
    split = engine.split
    assert split is not None and split.estimator is not None, "short replies measure the estimate's blend"
    pieces = []
    for voice in voices:
        spec = engine.parse_voice(voice)
        reference = engine.memory.reference(spec)
        assert reference is not None
        for text in SHORT_REPLIES:
            piece = engine.planner.plan(text, "en-us")[0]
            _, feats, style, frames, span = fronted(engine, piece, spec)
            whole = split.decode(feats, style, 0, frames)[0][
                span[0] * SAMPLES_PER_FRAME : span[1] * SAMPLES_PER_FRAME
            ]
            whole_dnsmos = dnsmos_over_alignments(whole)
            estimate = split.estimate(feats, reference)
            speech = span[1] - span[0]
            at: dict[float, tuple[NDArray[np.float32], float, float]] = {}  # audio, loudness, PESQ; no gain
            drops: dict[tuple[float, float], float] = {}  # DNSMOS drop at each (share, gain)
            row: dict[str, Any] = {"voice": voice, "text": text, "speech_frames": speech}
            for name, rule in REPLY_RULES.items():
                share, gain = rule(reference)
                if share not in at:
                    prior_at = fixed(estimate, share)
                    audio = windows_with(split, feats, style, span, engine.window_plan, prior_at)
                    at[share] = (audio, loudness_ratio(whole, audio), pesq_score(whole, audio))
                audio, loudness, quality = at[share]
                if (share, gain) not in drops:
                    drops[share, gain] = whole_dnsmos - dnsmos_over_alignments(audio * np.float32(gain))
                row[name] = (loudness * gain, quality, drops[share, gain])
            pieces.append(row)
            print(pieces[-1], flush=True)
    lo, hi = LOUDNESS_BOUNDS
    rows = [
        {"rule": name, "pesq": statistics.fmean(p[name][1] for p in pieces),
         "pesq_min": min(p[name][1] for p in pieces),
         "loudness_lowest": min(p[name][0] for p in pieces), "loudness_highest": max(p[name][0] for p in pieces),
         "out_of_bounds": sum(not lo <= p[name][0] <= hi for p in pieces),
         "dnsmos_drop": statistics.fmean(p[name][2] for p in pieces),
         "dnsmos_drop_worst": max(p[name][2] for p in pieces),
         "dnsmos_over_0_10": sum(p[name][2] > 0.10 for p in pieces)}
        for name in REPLY_RULES
    ]  # fmt: skip
    return {"voices": voices, "replies": SHORT_REPLIES, "pieces": pieces, "rows": rows}


def heard(engine: KokoroEngine) -> list[dict[str, Any]]:
    """Every language's sentences (``bench.languages``' and ``HEARD_MORE``, none in the estimate's fit or its
    share sentences) in each of its ``HEARD_VOICES``, heard by Whisper base with the language forced: each of
    ``HEARD_COLUMNS`` as the character error rate against the text, per voice and over the language. The
    whole pieces 5 ms later are the judge's own spread on the same audio, and the exact statistics' windows
    what is left without the estimate's residual. Mandarin is scored on its pinyin (``bench.languages.
    comparable``): Whisper base writes the same words in simplified or traditional characters from one clip to
    the next, which read as up to 0.5 CER apart though no sound differs. Hindi is written by Whisper base in
    other scripts (``bench.languages``), so for it only the difference between the columns says anything."""
    from streamvoice.bench.asr import Transcriber
    from streamvoice.bench.languages import SENTENCES as SAID
    from streamvoice.bench.languages import comparable
    from streamvoice.bench.wer import character_error_rate

    split = engine.split
    assert split is not None
    asr, estimator, rows = Transcriber.load(), split.estimator, []
    for lang, (_, whisper, texts) in SAID.items():
        per_language: dict[str, list[float]] = {name: [] for name in HEARD_COLUMNS}
        for voice in HEARD_VOICES[lang]:
            spec = engine.parse_voice(voice)
            stats, silence = engine.voice_stats(voice), engine.memory.silence(spec)
            said: dict[str, list[float]] = {name: [] for name in HEARD_COLUMNS}
            for text in [*texts, *HEARD_MORE[lang]]:
                pieces = engine.planner.plan(text, lang)
                audio = {"whole": np.concatenate([engine.synthesize_piece(p, spec, 1.0) for p in pieces])}
                # The judge's own spread: the same whole pieces, 5 ms later (Whisper's frames fall elsewhere).
                audio["whole, 5 ms later"] = np.concatenate([np.zeros(120, np.float32), audio["whole"]])
                audio["exact statistics"] = np.concatenate(
                    [exact_statistics_stream(engine, p, spec) for p in pieces]
                )
                for name, fit in (("shipped", estimator), ("blended", None)):
                    split.estimator = fit
                    engine.set_voice_stats(voice, stats, silence)  # each from the voice's cached statistics
                    audio[name] = np.concatenate(
                        [c for p in pieces for c in engine.stream_piece(p, spec, 1.0)]
                    )
                split.estimator = estimator
                engine.set_voice_stats(voice, stats, silence)
                for name, clip in audio.items():
                    transcript = asr.transcribe(clip, language=whisper)
                    said[name].append(
                        character_error_rate(comparable(text, lang), comparable(transcript, lang))
                    )
            rows.append({"lang": lang, "voice": voice, **{k: statistics.fmean(v) for k, v in said.items()}})
            print(rows[-1], flush=True)
            for k, v in said.items():
                per_language[k] += v
        rows.append(
            {"lang": lang, "voice": "all", **{k: statistics.fmean(v) for k, v in per_language.items()}}
        )
    return rows


def run(
    voices: list[str],
    ks: list[int],
    decoder: DecoderGraph | None = None,
    hear: bool = False,
    only: frozenset[str] | None = None,
) -> dict[str, Any]:
    engine = KokoroEngine.load(options=EngineOptions(decoder=decoder))
    prepare(engine)  # every stock voice's statistics, as a server starts
    heard_rows = heard(engine) if hear else []
    rows: list[dict[str, Any]] = []
    for voice in voices:
        for text in SENTENCES:
            rows.append({"voice": voice, "text": text, **breakdown(engine, voice, text, ks, only)})
            print(voice, text[:40], {k: round(v, 2) for k, v in rows[-1].items() if isinstance(v, float)})
    names = [k for k in rows[0] if k not in ("voice", "text")] if rows else []
    summary = {
        name: {
            "mean": statistics.fmean(r[name] for r in rows),
            "min": min(r[name] for r in rows),
            "max": max(r[name] for r in rows),
        }
        for name in names
    }
    return {"voices": voices, "decoder": engine.decoder_graph, "norms": engine.split.norms if engine.split else 0,
            "rows": rows, "summary": summary, "heard": heard_rows}  # fmt: skip


def report(d: dict[str, Any]) -> str:
    rows = [
        [name, md_value(s["mean"], 2), md_value(s["min"], 2)]
        for name, s in d["summary"].items() if not name.endswith(": loudness")
    ]  # fmt: skip
    loud = [
        [name.removesuffix(": loudness"), md_value(s["mean"], 2), md_value(s["min"], 2), md_value(s["max"], 2)]
        for name, s in d["summary"].items() if name.endswith(": loudness")
    ]  # fmt: skip
    out = md_table(["streamed against the whole piece (same front), PESQ", "mean", "lowest"], rows) + (
        f"\n\n{len(d['rows'])} pieces ({', '.join(d['voices'])}; the {d['decoder']} decoder, {d['norms']} norms).\n"
    )
    if loud:
        out += "\n" + md_table(["loudness, streamed / whole RMS", "mean", "lowest", "highest"], loud) + "\n"
    if d.get("heard"):
        heard_rows = [[r["lang"], r["voice"], *(md_value(r[k], 3) for k in HEARD_COLUMNS if k in r)]
                      for r in d["heard"]]  # fmt: skip
        columns = [HEARD_LABELS[k] for k in HEARD_COLUMNS if k in d["heard"][0]]
        out += "\n" + md_table(["language", "voice", *columns], heard_rows) + "\n"
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--voices", default="af_heart,am_michael,bf_emma,af_nicole,am_puck,bf_isabella")
    parser.add_argument("--ks", default="10,24,40", help="exact statistics for the first k norms")
    parser.add_argument("--decoder", choices=["static-int8", "exported"], help="default: the engine's")
    parser.add_argument("--heard", action="store_true", help="also every language heard by Whisper base")
    parser.add_argument("--only", help="these variants alone (names as the table prints them, ';' between)")
    parser.add_argument("--short-replies", action="store_true", help="short replies' loudness by rule, alone")
    args = parser.parse_args(argv)
    voices = [v for v in args.voices.split(",") if v]
    if args.short_replies:
        engine = KokoroEngine.load(options=EngineOptions(decoder=args.decoder))
        prepare(engine)
        replies = short_replies(engine, voices)
        print(table(replies["rows"], [("rule", "short replies blend at"), ("pesq", "PESQ"), ("pesq_min", "lowest"),
                                      ("loudness_lowest", "loudness lowest"), ("loudness_highest", "highest"),
                                      ("out_of_bounds", f"outside {LOUDNESS_BOUNDS}"),
                                      ("dnsmos_drop", "DNSMOS drop"), ("dnsmos_drop_worst", "worst"),
                                      ("dnsmos_over_0_10", "over 0.10")]))  # fmt: skip
        print(f"wrote {write_result('short_replies', replies)}")
        return replies
    only = frozenset(args.only.split(";")) if args.only else None
    result = run(voices, [int(k) for k in args.ks.split(",") if k], args.decoder, args.heard, only)
    if result["heard"]:
        labels = [(k, HEARD_LABELS[k]) for k in HEARD_COLUMNS]
        print(table(result["heard"], [("lang", "language"), ("voice", "voice"), *labels]))
    print(
        table(
            [{"variant": k, **v} for k, v in result["summary"].items()],
            [
                ("variant", "streamed vs whole (same front)"),
                ("mean", "mean"),
                ("min", "lowest"),
                ("max", "highest"),
            ],
        )
    )
    print(f"wrote {write_result('stream_breakdown', result)}")
    return result


if __name__ == "__main__":
    main()
