"""Graph surgery for in-piece streaming: cut Kokoro's exported graph where the decoder starts.

On CPU the ISTFTNet decoder is ~96% of a model call and it is convolutional over time, so it can run on
slices of a piece. The exported graph is split in two at the tensors where the decoder starts:

- front (text encoder + prosody predictor): tokens, style, speed -> aligned features ``asr`` [1, C, F],
  the F0 and energy curves [1, 2F], and the harmonic source's accumulated phase [1, H, 2F];
- decoder: those tensors (any time slice of them) + style -> audio, 600 samples per frame.

The phase is the subtle part: the sine source integrates F0 over time (a cumulative sum), so a window that
recomputed it would restart every harmonic at phase zero. Cutting the graph *after* that cumulative sum
makes the front compute the phase for the whole piece once; every window slices the same continuous phase.
The decoder's instance norms are rewritten to take prior statistics (``norm_stats``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamvoice.engine.surgery.batch_graph import BatchGraphError, make_batchable
from streamvoice.engine.surgery.norm_stats import add_prior_inputs, find_norms

log = logging.getLogger("streamvoice.engine")


class GraphSplitError(RuntimeError):
    """The model's graph does not have the structure in-piece streaming needs."""


@dataclass(frozen=True)
class Boundary:
    asr: str
    f0: str
    noise: str
    phase: str
    # Per-token durations in frames, [1, tokens + 2] with the pads (None: this export does not show them).
    durations: str | None = None

    @property
    def names(self) -> list[str]:
        return [self.asr, self.f0, self.noise, self.phase]

    @property
    def front_outputs(self) -> list[str]:
        return [*self.names, *([self.durations] if self.durations else [])]


def find_boundary(graph: Any) -> Boundary:
    """Locate the decoder's input tensors by the structure around them, not by export-specific ids.

    - F0 and energy curves: the inputs of the decoder's first two Unsqueeze nodes (``/decoder/decoder/
      Unsqueeze`` and ``..._1``), which feed ``F0_conv`` and ``N_conv``.
    - ``asr``: the first input of the decoder's top-level Concat (features, F0 conv, N conv).
    - phase: the input of the sine generator's upsampling Resize (the one just before ``Sin``).
    """
    by_name = {n.name: n for n in graph.node}

    def node(pattern: str) -> Any:
        rx = re.compile(pattern)
        found = [n for name, n in by_name.items() if rx.search(name)]
        if len(found) != 1:
            raise GraphSplitError(f"expected one node matching {pattern!r}, found {len(found)}")
        return found[0]

    f0 = node(r"^/decoder/decoder/Unsqueeze$").input[0]
    noise = node(r"^/decoder/decoder/Unsqueeze_1$").input[0]
    asr = node(r"^/decoder/decoder/Concat$").input[0]
    phase = node(r"/m_source/l_sin_gen/Resize_1$").input[0]
    return Boundary(asr=asr, f0=f0, noise=noise, phase=phase, durations=find_durations(graph))


def find_durations(graph: Any) -> str | None:
    """The predicted duration of every token, in frames: the graph's only ``Round``, then ``Clip`` (at least
    one frame), then ``Cast`` to integers, which the alignment is built from. None if the export differs
    (trimming then falls back to the audio's levels alone, and word times to one span per piece)."""
    consumers: dict[str, list[Any]] = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    rounds = [n for n in graph.node if n.op_type == "Round"]
    if len(rounds) != 1:
        return None
    clips = [n for n in consumers.get(rounds[0].output[0], []) if n.op_type == "Clip"]
    if len(clips) != 1:
        return None
    casts = [n for n in consumers.get(clips[0].output[0], []) if n.op_type == "Cast"]
    return casts[0].output[0] if len(casts) == 1 else None


@dataclass(frozen=True)
class SplitGraphs:
    front: bytes
    decoder: bytes
    boundary: Boundary
    norms: int  # instance norms rewritten to take prior statistics (see ``norm_stats``)
    batchable: bool  # the decoder takes a batch of windows (see ``batch_graph``)


def split_model(model_path: Path) -> SplitGraphs:
    """Extract the front and decoder subgraphs as serialized models.

    The decoder's instance norms are rewritten to take prior statistics (see ``norm_stats``), and its
    graph to take a batch of windows where the export allows (see ``batch_graph``).
    """
    import onnx
    from onnx.utils import Extractor

    model = onnx.load(str(model_path))
    boundary = find_boundary(model.graph)
    inputs = [i.name for i in model.graph.input]
    if not {"style", "speed"} <= set(inputs):
        raise GraphSplitError(f"unexpected model inputs {inputs}")
    extractor = Extractor(model)
    front = extractor.extract_model(inputs, boundary.front_outputs)
    decoder = extractor.extract_model([*boundary.names, "style"], [model.graph.output[0].name])
    decoder_inputs = {i.name for i in decoder.graph.input}
    if decoder_inputs - {*boundary.names, "style"}:
        raise GraphSplitError(
            f"the decoder still needs {sorted(decoder_inputs - {*boundary.names, 'style'})}"
        )
    norms = find_norms(decoder.graph)
    add_prior_inputs(decoder, norms)
    unbatched = decoder.SerializeToString()  # the surgery may fail half-way
    try:
        make_batchable(decoder)
    except BatchGraphError as exc:
        log.info("decoder windows are not batched for %s: %s", model_path.name, exc)
        return SplitGraphs(front.SerializeToString(), unbatched, boundary, len(norms), False)
    return SplitGraphs(front.SerializeToString(), decoder.SerializeToString(), boundary, len(norms), True)
