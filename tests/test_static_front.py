"""The front's energy branch in static int8 (``engine.static_front``): only that branch changes, so a piece's
durations and pitch are the exported front's and its energy curve stays close. Its speed and what the whole
piece sounds like are ``python -m streamvoice.bench.front_int8``'s and ``bench.engine``'s."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine.static_int8 import static_front
from streamvoice.engine.surgery.graph_split import split_model

SENTENCE = "Your package left our warehouse on Monday and is now with the courier."


def test_only_the_energy_branch_is_static(engine: KokoroEngine) -> None:
    """The shipped front's static convolutions (each read through a ``DequantizeLinear``) are the N branch's,
    and every other convolution is still the exported dynamic int8."""
    from streamvoice.engine.static_int8.static_decoder import CALIBRATION

    graph = onnx.load_from_string(
        static_front.derive(engine.files.model, lambda: engine.front_feeds(CALIBRATION[:2]))
    )
    produced_by = {o: n.op_type for n in graph.graph.node for o in n.output}
    static = [
        n.name
        for n in graph.graph.node
        if n.op_type == "Conv" and produced_by.get(n.input[0]) == "DequantizeLinear"
    ]
    dynamic = [n.name for n in graph.graph.node if n.op_type == "ConvInteger"]
    assert static and all(name.startswith("/encoder/N.") for name in static)
    assert any(name.startswith("/encoder/F0.") for name in dynamic)
    assert not any(name.startswith("/encoder/N.") for name in dynamic)


def test_durations_and_pitch_are_the_exported_fronts(
    engine: KokoroEngine, exported_engine: KokoroEngine
) -> None:
    """Same feeds through the shipped front and the exported one: every output but the energy curve is
    identical, and the energy curve is within 3% (rms)."""
    assert engine.split is not None and exported_engine.split is not None
    piece = engine.planner.plan(SENTENCE, "en-us")[0]
    feeds, _ = engine.feeds(piece.tokens, engine.style_pack(engine.parse_voice("af_heart")), 1.0)
    names = [o.name for o in engine.split.front.get_outputs()]
    ours = engine.split.front.run(names, feeds)
    theirs = exported_engine.split.front.run(names, feeds)
    differing = [n for n, a, b in zip(names, ours, theirs, strict=True) if not np.array_equal(a, b)]
    assert len(differing) == 1  # the energy curve, the only output downstream of the N branch
    (a,) = (o for n, o in zip(names, ours, strict=True) if n == differing[0])
    (b,) = (o for n, o in zip(names, theirs, strict=True) if n == differing[0])
    assert np.sqrt(np.mean((a - b) ** 2)) <= 0.03 * np.sqrt(np.mean(b**2))


def test_a_front_with_other_outputs_is_refused(engine: KokoroEngine) -> None:
    assert engine.split is not None
    decoder = split_model(engine.files.model).decoder  # a graph, but not a front
    with pytest.raises(RuntimeError, match="outputs differ"):
        engine.split.replace_front(decoder)


def test_the_shipped_ranges_make_one_front_wherever_it_is_derived(engine: KokoroEngine) -> None:
    """As the decoder's (issue #66): the official file's front ranges are shipped, so its derivation runs
    nothing and every machine derives the graph the session's engine uses."""
    from streamvoice.engine.static_int8 import static_decoder

    model = engine.files.model
    assert static_decoder.shipped_ranges(static_front.cache_name(model)) is not None

    def no_feeds() -> list[dict[str, object]]:
        raise AssertionError("the shipped ranges were not used: the derivation asked for calibration feeds")

    in_use = static_decoder.find(model, static_front.cache_name(model))
    assert in_use is not None and static_front.derive(model, no_feeds) == in_use.read_bytes()
