"""Kokoro-82M on ONNX Runtime: text in, 24 kHz float32 audio out, one model call per piece.

The engine is synchronous and transport-free on purpose: the server decides which thread runs a model
call and in what order (see ``streamvoice.server.core.scheduler``). Phonemisation comes from kokoro-onnx's
espeak-ng tokenizer; inference is our own thin ONNX Runtime call so threads and providers are ours to tune.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from streamvoice.engine.alignment import WordTime
from streamvoice.engine.g2p import G2P
from streamvoice.engine.g2p.packs import require as require_language_pack
from streamvoice.engine.graphs import Decoding, Graph, RunStop, WholeGraph
from streamvoice.engine.greeting import calibration_text
from streamvoice.engine.options import (
    CUDA_DID_NOT_START,
    DecoderGraph,
    EngineError,
    EngineOptions,
    choose_providers,
    cuda_started,
)
from streamvoice.engine.planning import Piece, Planner
from streamvoice.engine.streaming import speech_estimate
from streamvoice.engine.streaming.speech_estimate import Reference
from streamvoice.engine.streaming.split_kokoro import SplitKokoro
from streamvoice.engine.streaming.voice_memory import VoiceMemory
from streamvoice.engine.streaming.windows import WindowCap, WindowPlan
from streamvoice.engine.styles import VoiceStyles
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.engine.timing import TrimmedPiece, pause_samples, trim_whole, word_times
from streamvoice.engine.voices import (
    SUPPORTED_LANGS,
    VoiceInfo,
    VoiceSpec,
    default_lang,
    describe,
    parse_voice_spec,
)
from streamvoice.model_files import (
    STATIC_DECODER_VARIANTS,
    VARIANTS,
    ModelFiles,
    naming_hash,
    resolve_model_files,
    verify_model_files,
)
from streamvoice.protocol import DEFAULT_PAUSES, DEFAULT_VOICE, SAMPLE_RATE, Pauses

log = logging.getLogger("streamvoice.engine")
# phonemizer warns on every call about word counts it cannot match; the phonemes are still right.
logging.getLogger("phonemizer").setLevel(logging.ERROR)

MODEL_MAX_TOKENS = 510  # the model's input holds 512 with the two padding tokens


# The file the static-int8 decoder is derived from (and judged on: ``python -m streamvoice.bench.engine``).
STATIC_SOURCE = VARIANTS["int8"]


def torch_on_cuda() -> bool:
    """PyTorch installed and a CUDA GPU it can use (PyTorch is imported only where it is installed)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    from streamvoice.engine.torch_kokoro.graph import available

    return available()


class KokoroEngine:
    sample_rate = SAMPLE_RATE

    def __init__(
        self, files: ModelFiles, options: EngineOptions | None = None, graph: Graph | None = None
    ) -> None:
        """``graph``: decode with this instead of ``files.model`` (a test's scripted graph: the engine and
        everything above it as shipped, the model's arithmetic replaced where a property is not the sound)."""
        self.files = files
        options = options or EngineOptions()
        so = options.session_options()
        self.providers = choose_providers(options.providers)
        self.window_plan = options.window_plan
        self.cold_window_plan = options.cold_window_plan
        on_torch = graph is None and (
            options.runtime == "torch" or (options.runtime == "auto" and torch_on_cuda())
        )
        self._split, self.graph = self._graphs(files, options, so, graph, on_torch)
        if graph is None and not cuda_started(self._sessions(), self.providers):
            if options.providers:
                raise EngineError(f"{CUDA_DID_NOT_START}, or ask for CPUExecutionProvider alone")
            log.warning("%s; running on the CPU", CUDA_DID_NOT_START)
            self.providers = ["CPUExecutionProvider"]
            self._split, self.graph = self._graphs(files, options, so, None, on_torch)
        self.styles = VoiceStyles(files.voices)
        self.voice_names = self.styles.names
        self.g2p = G2P(SUPPORTED_LANGS, english=options.english_g2p)
        self.planner = Planner(self.g2p)
        self.memory = VoiceMemory(self.voice_names)
        self.decoder_graph: DecoderGraph = "torch" if on_torch else "exported"
        static = options.decoder == "static-int8" or (options.decoder is None and self._static_by_default())
        if static and self.decoder_graph != "torch":  # the static-int8 graphs are ONNX Runtime's, for CPUs
            self._use_static_graphs()
        if self._split is not None and self._split.norms:
            self._split.estimator = speech_estimate.shipped(naming_hash(files.model))

    def _graphs(
        self,
        files: ModelFiles,
        options: EngineOptions,
        so: ort.SessionOptions,
        graph: Graph | None,
        on_torch: bool,
    ) -> tuple[SplitKokoro | None, Graph]:
        split = graph if isinstance(graph, SplitKokoro) else None
        if on_torch:
            from streamvoice.engine.torch_kokoro.graph import TorchGraph

            torch_graph = TorchGraph(files.model)
            log.info("PyTorch engine on %s: pieces whole, batched across listeners", torch_graph.device)
            return None, torch_graph
        if graph is None and options.stream_windows:
            try:
                split = SplitKokoro(files.model, so, self.providers)
            except Exception as exc:  # any graph that does not split falls back to whole-piece synthesis
                log.warning(
                    "in-piece streaming is off for %s (%s); using whole-piece synthesis",
                    files.model.name,
                    exc,
                )
        return split, graph or split or WholeGraph(files.model, so, self.providers)

    def _sessions(self) -> list[Any]:
        if self._split is not None:
            return [self._split.front, self._split.decoder]
        return [self.graph.session] if isinstance(self.graph, WholeGraph) else []

    def _static_by_default(self) -> bool:
        return (
            self._split is not None
            and self.files.model.name == STATIC_SOURCE
            and "CUDAExecutionProvider" not in self.providers
        )

    def _use_static_graphs(self) -> None:
        """The split graph's decoder and the front's energy branch in static int8, each derived once from
        the official file and cached beside it (``static_decoder.prepare_derived``)."""
        from streamvoice.engine.static_int8 import static_decoder, static_front
        from streamvoice.engine.static_int8.static_decoder import CALIBRATION

        if self._split is None:
            raise EngineError(
                "the static-int8 decoder replaces the split decoder, which this engine does not use "
                "(in-piece streaming is off or the graph does not split); use the int8 variant"
            )
        if "CUDAExecutionProvider" in self.providers:  # QLinearConv is the CPU's kernel; a GPU runs float
            log.warning("the static-int8 decoder is for CPUs; on CUDA the decoder stays as exported")
            return
        graph, source = static_decoder.prepare(
            self.files.model, lambda: static_decoder.calibration_windows(self)
        )
        front, front_source = static_front.prepare(self.files.model, lambda: self.front_feeds(CALIBRATION))
        self._split.replace_decoder(graph, static_decoder.DISABLED_OPTIMIZERS)
        self._split.replace_front(front)
        self.decoder_graph = "static-int8"
        log.info("static-int8 decoder: %s; front's energy branch: %s", source, front_source)

    @classmethod
    def load(
        cls,
        model_dir: str | Path | None = None,
        variant: str | None = None,
        options: EngineOptions | None = None,
    ) -> KokoroEngine:
        files = resolve_model_files(model_dir, variant)
        verify_model_files(files)
        options = options or EngineOptions()
        if variant is not None:  # int8: the file as exported; int8-static: its decoder derived
            options = replace(
                options, decoder="static-int8" if variant in STATIC_DECODER_VARIANTS else "exported"
            )
        return cls(files, options)

    # -- voices ---------------------------------------------------------------------------------------
    def voices(self) -> list[VoiceInfo]:
        return [describe(n) for n in sorted(self.voice_names)]

    def parse_voice(self, spec: str) -> VoiceSpec:
        return parse_voice_spec(spec, self.voice_names)

    def style_pack(self, voice: VoiceSpec) -> NDArray[np.float32]:
        return self.styles.pack(voice)

    @staticmethod
    def resolve_lang(voice: VoiceSpec, lang: str | None) -> str:
        """The language to read the text in (the voice's own unless asked), or ``EngineError``; a language
        whose pack is not installed raises ``LanguagePackMissing``, so it is refused, never mumbled."""
        resolved = default_lang(voice) if lang is None else lang
        if resolved not in SUPPORTED_LANGS:
            raise EngineError(f"unsupported lang {resolved!r}; use one of {', '.join(SUPPORTED_LANGS)}")
        require_language_pack(resolved)
        return resolved

    # -- inference ------------------------------------------------------------------------------------
    @property
    def streams_in_piece(self) -> bool:
        return self.graph.windows

    @property
    def split(self) -> SplitKokoro | None:
        """The front and decoder sessions when this export streams in-piece (None: whole-piece only): the
        low-level API that benchmarks and tests drive directly (features, windows, batches)."""
        return self._split

    @property
    def cached_styles(self) -> int:
        """Blended style vectors held (bounded by ``styles.BLEND_STYLE_CACHE``)."""
        return self.styles.blends_kept

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]:
        """Model runs on this thread inside the block end early once ``stop.stop()`` is called."""
        return self.graph.interruptible(stop)

    def enable_batching(self, max_rows: int, linger_s: float, busy: Callable[[], int] | None = None) -> None:
        """Let up to ``max_rows`` concurrent windows of one size share a decoder call (``decode_batcher``);
        ``busy`` counts the model jobs in progress, so a window only waits while another may join it."""
        if self._split is None or not self._split.batchable:
            raise EngineError(
                "decoder batching needs the windowed decoder with a batch dimension, which this model's "
                "graph does not allow; run with decode_batch=1"
            )
        self._split.enable_batching(max_rows, linger_s, busy)

    @property
    def batch_counts(self) -> tuple[int, int]:
        """Batched decoder calls made and the windows they carried (0, 0 without batching)."""
        batcher = self._split.batcher if self._split is not None else None
        return (batcher.calls, batcher.rows) if batcher is not None else (0, 0)

    def feeds(
        self, tokens: tuple[int, ...] | list[int], pack: NDArray[np.float32], speed: float
    ) -> tuple[dict[str, NDArray[Any]], NDArray[np.float32]]:
        """The front model's inputs for these tokens at this speed, and the style row they select."""
        n = len(tokens)
        if not 0 < n <= MODEL_MAX_TOKENS:
            raise EngineError(f"a model call takes 1-{MODEL_MAX_TOKENS} tokens, got {n}")
        style = pack[min(n, len(pack)) - 1].reshape(1, -1)
        return self.graph.inputs.feeds(tuple(tokens), style, speed), style

    def voice_stats(self, voice_key: str | None) -> NormStats | None:
        """The decoder statistics this voice showed in earlier pieces (None before its first piece)."""
        return None if voice_key is None else self.memory.get(self.parse_voice(voice_key))

    def set_voice_stats(self, voice_key: str, stats: NormStats | None, silence: NormStats | None) -> None:
        """Replace (or with None, forget) what the engine knows about a stock voice's statistics: both, as
        a pair, because the speech estimate counts the silence a trimmed piece never decodes (a benchmark
        that restored the speech alone streamed without it: PESQ 2.5 where the engine gives 3.0)."""
        self.memory.set(voice_key, stats)
        self.memory.set_silence(voice_key, silence)

    def calibrate(self, name: str) -> tuple[NormStats, NormStats | None] | None:
        """Measure a stock voice's decoder statistics on a short greeting and remember them: over its speech,
        and over the model's leading silence. None when this export has no streaming decoder or durations.

        With them, the voice's very first piece streams as well as any later one (without, it takes the
        slower, less faithful cold path). ``voice_stats_cache`` keeps them on disk between runs.
        """
        split = self._split
        if split is None or split.boundary.durations is None or not split.norms:
            return None
        spec = self.parse_voice(name)
        lang = default_lang(spec)
        if not self.g2p.installed(lang):  # statistics of the voice, not the text: any language measures it
            lang = "en-us"
        piece = self.planner.plan(calibration_text(lang), lang)[0]  # the greeting's first sentence
        feeds, style = self.feeds(piece.tokens, self.style_pack(spec), 1.0)
        speech, silence, reference = split.piece_statistics(feeds, style, piece.voiced)
        self.set_voice_stats(name, speech, silence)
        self.set_voice_reference(name, reference)
        return speech, silence

    def set_voice_reference(self, name: str, reference: Reference | None) -> None:
        """A stock voice's calibration piece (the whole piece's statistics and frame summaries) as the
        reference its pieces are estimated from (``speech_estimate``), given the fit's bias, share and gain
        for it; None forgets it."""
        estimator = self._split.estimator if self._split is not None else None
        if reference is None or estimator is None:
            self.memory.set_reference(name, None)
            return
        self.memory.set_reference(
            name,
            replace(
                reference, bias=estimator.bias(name), share=estimator.share(name), gain=estimator.gain(name)
            ),
        )

    def decoder_windows(
        self, said: tuple[tuple[str, str], ...], frames: int, context: int
    ) -> list[dict[str, NDArray[Any]]]:
        """The decoder's feeds for every full window of each (voice, phonemes), as the server cuts them
        (``frames`` kept, ``context`` each side): what ``static_decoder`` measures activation ranges on.
        Phonemes, not text: no language's G2P pack is needed."""
        split = self._split
        if split is None:
            raise EngineError("this export does not split into front and decoder: it has no decoder windows")
        out: list[dict[str, NDArray[Any]]] = []
        for voice, phonemes in said:
            if self.voice_stats(voice) is None:
                self.calibrate(voice)
            feeds, style = self.feeds(
                self.g2p.tokenize(phonemes), self.style_pack(self.parse_voice(voice)), 1.0
            )
            out += split.window_feeds(feeds, style, self.voice_stats(voice), frames, context)
        return out

    def front_feeds(self, said: tuple[tuple[str, str], ...]) -> list[dict[str, NDArray[Any]]]:
        """The front's feeds for each (voice, phonemes): what ``static_front`` measures activation ranges on."""
        return [
            self.feeds(self.g2p.tokenize(phonemes), self.style_pack(self.parse_voice(voice)), 1.0)[0]
            for voice, phonemes in said
        ]

    # -- the face: a piece in, its audio window by window -------------------------------------------------
    def stream_piece(
        self,
        piece: Piece,
        voice: VoiceSpec,
        speed: float,
        windowed: bool = True,
        plan: WindowPlan | None = None,
        cap: WindowCap | None = None,
        on_words: Callable[[list[WordTime]], None] | None = None,
        *,
        trim: bool = True,
        learn: bool = True,
        deadline: float | None = None,
    ) -> Generator[NDArray[np.float32]]:
        """A piece's speech, chunk by chunk as it is decoded. Blocking. Every way to synthesise comes here.

        ``windowed``: window by window (``plan``, sizes limited by ``cap`` as they are decided; see
        ``WindowPlan.iter_windows``), or the whole piece in one decoder call (the reference the windows are
        judged against). ``trim``: only the frames around the speech are decoded and the model's leading
        and trailing silence is cut (``timing``); off, the bare model's audio, silences and all.
        ``learn``: the voice's statistics from earlier pieces steer this one and it adds to them
        (``norm_stats``); off, the piece decodes as a voice's very first. ``on_words`` gets the word times
        (ms from the first yielded sample) before the first audio. ``deadline``: when the listener runs out
        of audio (monotonic s), which a batching GPU orders pieces by (``torch_kokoro.scheduler``).
        """
        feeds, style = self.feeds(piece.tokens, self.style_pack(voice), speed)
        known = learn and self.graph.windows
        prior = self.memory.get(voice) if known else None
        how = Decoding(
            windowed=windowed and self.graph.windows,
            plan=plan or self.window_plan,
            cold_plan=self.cold_window_plan,
            voiced=piece.voiced if trim else None,
            prior=prior,
            silence=self.memory.silence(voice) if known else None,
            remember=self.memory.recorder(voice) if known else None,
            # The estimate's shares and gains were measured on trimmed pieces (``speech_estimate``): a piece
            # decoded with its silences, or of a voice sent down the cold path (no statistics), goes without.
            reference=self.memory.reference(voice) if known and trim and prior is not None else None,
            cap=cap,
            deadline=deadline,
        )
        started = time.perf_counter()
        decoded = self.graph.decode_piece(feeds, style, how)
        if not trim:
            yield from (audio for audio, _ in decoded.chunks)
        elif not how.windowed:  # one chunk: trimmed at once, so the word times end where its audio does
            audio, first = trim_whole(next(decoded.chunks)[0])
            if on_words is not None:
                on_words(word_times(piece.words, decoded.durations, first, len(audio)))
            yield audio
        else:

            def started_at(first_sample: int) -> None:
                if on_words is not None:
                    on_words(word_times(piece.words, decoded.durations, first_sample, decoded.samples))

            yield from TrimmedPiece(decoded.chunks, decoded.first_sample, started_at)
        log.debug(
            "piece of %d tokens decoded (%s) in %.0f ms",
            len(piece.tokens),
            "windows" if how.windowed else "whole",
            (time.perf_counter() - started) * 1000,
        )

    def synthesize_piece(
        self, piece: Piece, voice: VoiceSpec, speed: float, *, trim: bool = True, learn: bool = True
    ) -> NDArray[np.float32]:
        """A piece in one decoder call (``stream_piece`` with ``windowed`` off), as one array."""
        return np.concatenate(list(self.stream_piece(piece, voice, speed, False, trim=trim, learn=learn)))

    def stream(
        self,
        text: str,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        lang: str | None = None,
        pauses: Pauses = DEFAULT_PAUSES,
    ) -> Iterator[NDArray[np.float32]]:
        """Audio per model call, in order, each followed by the pause its punctuation calls for (the simple
        synchronous path used by the CLI)."""
        spec = self.parse_voice(voice)
        for piece in self.planner.plan(text, self.resolve_lang(spec, lang)):
            yield self.synthesize_piece(piece, spec, speed)
            yield pause_samples(piece.pause, pauses, SAMPLE_RATE)

    def synthesize(
        self,
        text: str,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        lang: str | None = None,
        pauses: Pauses = DEFAULT_PAUSES,
    ) -> NDArray[np.float32]:
        parts = list(self.stream(text, voice, speed, lang, pauses))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
