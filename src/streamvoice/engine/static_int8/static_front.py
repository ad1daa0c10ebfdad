"""The front's energy branch as static int8: milliseconds off every piece's first audio, the sound kept.

A fresh piece hears nothing before the front (text encoder, durations, prosody) has run once over it, ~45 ms
of a ~130 ms heard onset on 2 cores. Its prosody predictor ends in two branches of convolutions over the
piece's frames, F0 (pitch) and N (energy), ~8 ms of dynamic int8 (``ConvInteger``, each activation quantized
at run time). Here the N branch's convolutions become ``QLinearConv`` (static int8 as in ``static_decoder``:
7-bit signed weights per output channel, u8 activations with ranges measured beforehand, on the front of every
calibration phrase of ``static_decoder.CALIBRATION``). Durations and pitch come out exactly as exported.

What was measured (``python -m streamvoice.bench.front_int8``, docs/benchmarks.md 10e): the N branch alone
takes ~6% off a front call and leaves the whole piece's PESQ against the exported graph where the static
decoder has it; the F0 branch as well moves pitch by ~0.7% (rms) and costs PESQ 0.4 on average; the whole
front in static int8 moves durations.

Cached like the static decoder, keyed by the model file's hash and ``FORMAT``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamvoice.engine.static_int8 import static_decoder
from streamvoice.engine.static_int8.static_decoder import float_weights
from streamvoice.model_files import naming_hash

FORMAT = 3  # bump when the derivation changes: old files then no longer match
ENERGY_BRANCH = r"^/encoder/N\.\d/"  # the convolutions quantized statically, by node name


def cache_name(model: Path) -> str:
    return f"front-static-int8-v{FORMAT}-{naming_hash(model)[:16]}.onnx"


def derive_graph(
    front: bytes, feeds: list[dict[str, Any]], nodes: str = ENERGY_BRANCH, ranges: Path | None = None
) -> bytes:
    """The front graph with the dynamic-int8 convolutions whose names match ``nodes`` in static int8,
    activation ranges read from ``ranges`` when it exists, else measured on ``feeds`` (front inputs) and
    written there when given; everything else as exported."""
    import onnx

    model = onnx.load_from_string(front)
    float_weights(model, nodes)
    convs = [n.name for n in model.graph.node if n.op_type == "Conv" and re.search(nodes, n.name)]
    if not convs:
        raise RuntimeError(f"no convolution of this front matches {nodes!r}: nothing to quantize")
    return static_decoder.quantize(model, feeds, include=convs, ranges=ranges)


def derive(model: Path, feeds: Callable[[], list[dict[str, Any]]], ranges_out: Path | None = None) -> bytes:
    """The static-int8 front for ``model`` (its split front as exported): with the ranges shipped for this
    file, else measured on ``feeds()`` (``KokoroEngine.front_feeds``; a few seconds); ``ranges_out`` as
    ``static_decoder.derive``'s."""
    from streamvoice.engine.surgery.graph_split import split_model

    ranges = static_decoder.ranges_for(cache_name(model), ranges_out)
    measured = ranges is None or not ranges.is_file()
    return derive_graph(split_model(model).front, feeds() if measured else [], ranges=ranges)


def prepare(model: Path, feeds: Callable[[], list[dict[str, Any]]]) -> tuple[bytes, str]:
    """The derived front for ``model``, and where it came from (``static_decoder.prepare_derived``)."""
    return static_decoder.prepare_derived(
        model, cache_name(model), lambda: derive(model, feeds), "static-int8 front (seconds)"
    )
