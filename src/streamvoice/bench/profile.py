"""Where the time goes in one piece: phonemiser, planning, the front graph (text encoder + prosody), the
decoder per frame and per call, and each encoder per second of audio.

``--flame PATH`` also records a py-spy flame graph (native frames included, so ONNX Runtime's kernels
show) of a real speech server on loopback answering a client for ``--seconds``.

Run: ``python -m streamvoice.bench.profile [--flame docs/img/flame.svg]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from streamvoice.audio.encoders import make_encoder
from streamvoice.bench.common import table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import EngineOptions
from streamvoice.protocol import DEFAULT_VOICE

TEXT = "The museum opens at nine, and tours start every half hour. Please bring your passport with you."


def decoder_costs(rows: list[dict[str, Any]], audio_s: float) -> dict[str, float] | None:
    """The decoder's fixed cost per call and cost per frame (a line through the smallest and the whole-piece
    call), its share of a whole-piece call, and the whole call's real-time factor."""
    decoder = [r for r in rows if r["step"].startswith("decoder, ")]
    whole = next((r for r in rows if r["step"] == "whole piece, one call"), None)
    if len(decoder) < 2 or whole is None:
        return None
    small, full = decoder[0], decoder[-1]
    frames_small, frames_full = small["ms"] / small["per_frame_ms"], full["ms"] / full["per_frame_ms"]
    per_frame = (full["ms"] - small["ms"]) / (frames_full - frames_small)
    return {
        "fixed_ms": small["ms"] - per_frame * frames_small,
        "ms_per_frame": per_frame,
        "share_of_whole_call": full["ms"] / whole["ms"],
        "real_time_factor": whole["ms"] / (audio_s * 1000),
    }


def timed(fn: Callable[[], Any], repeat: int = 5) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


def serve_and_speak(seconds: float) -> None:
    """The workload py-spy samples: the whole speech path, server and client, as a user drives it."""
    from streamvoice.bench.loopback import LoopbackServer
    from streamvoice.client.speech import speak
    from streamvoice.server import ServerConfig, create_app

    engine = KokoroEngine.load()
    with LoopbackServer(create_app(ServerConfig(), engine=engine)) as server:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            speak(server.url, TEXT, voice=DEFAULT_VOICE, format="mp3")


def flame(path: str, seconds: float) -> None:
    import shutil
    import subprocess
    import sys

    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy (it is in the dev extra)")
    workload = [sys.executable, "-m", "streamvoice.bench.profile", "--serve-for", str(seconds)]
    command = [
        spy,
        "record",
        "--native",
        "--rate",
        "50",
        "--format",
        "flamegraph",
        "-o",
        path,
        "--",
        *workload,
    ]
    subprocess.run(command, check=True)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flame", default=None, help="also write a py-spy flame graph (SVG) here")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the flame graph samples")
    parser.add_argument("--serve-for", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_for is not None:
        serve_and_speak(args.serve_for)
        return {}
    engine = KokoroEngine.load()
    spec = engine.parse_voice(DEFAULT_VOICE)
    piece = engine.planner.plan(TEXT, "en-us")[0]
    pack = engine.style_pack(spec)
    rows: list[dict[str, Any]] = [
        {
            "step": "phonemise the sentence (espeak-ng)",
            "ms": timed(lambda: engine.planner.phonemizer.phonemize(TEXT, "en-us")),
        },
        {
            "step": "plan the message (chunk + phonemise + tokenise)",
            "ms": timed(lambda: engine.planner.plan(TEXT, "en-us")),
        },
    ]
    split = engine.split
    if split is not None:
        feeds, style = engine.feeds(piece.tokens, pack, 1.0)
        feats = split.features(feeds)
        frames = int(feats[split.boundary.asr].shape[2])
        rows.append(
            {
                "step": f"front graph ({len(piece.tokens)} tokens -> {frames} frames)",
                "ms": timed(lambda: split.features(feeds)),
            }
        )
        for size in (2, 16, 32, 64, frames):  # 2 frames: the fixed cost of a call
            n = min(size, frames)

            def decode(n: int = n) -> None:
                split.decode(feats, style, 0, n)

            ms = timed(decode, repeat=3)
            rows.append(
                {"step": f"decoder, {n} frames ({n * 25} ms of audio)", "ms": ms, "per_frame_ms": ms / n}
            )
        # ONNX Runtime's default lets idle intra-op threads spin; the engine turns that off. The front and
        # the decoder are two sessions with a thread pool each: on the first-audio path (front, then the
        # first window) a spinning front pool takes CPU from the decoder's.
        spinning = KokoroEngine(engine.files, replace(EngineOptions(), spin=True)).split
        assert spinning is not None
        for label, split_ in (
            ("idle threads sleep (ours)", split),
            ("idle threads spin (ORT default)", spinning),
        ):

            def first_audio_path(s: Any = split_) -> None:
                s.decode(s.features(feeds), style, 0, 14)

            rows.append({"step": f"front + first window (14 frames), {label}", "ms": timed(first_audio_path)})
    whole = engine.synthesize_piece(piece, spec, 1.0, trim=False, learn=False)
    rows.append(
        {
            "step": "whole piece, one call",
            "ms": timed(lambda: engine.synthesize_piece(piece, spec, 1.0, trim=False, learn=False), repeat=3),
        }
    )
    seconds = whole.size / engine.sample_rate
    for fmt in ("pcm", "mp3", "opus", "aac"):

        def encode(fmt: str = fmt) -> None:
            enc = make_encoder(fmt)
            for i in range(0, whole.size, 4800):
                enc.encode(whole[i : i + 4800])
            enc.flush()

        rows.append({"step": f"encode {fmt}, per second of audio", "ms": timed(encode) / seconds})
    print(f"One {len(piece.tokens)}-token piece, {seconds:.2f} s of audio\n")
    print(table(rows, [("step", "step"), ("ms", "median ms"), ("per_frame_ms", "ms per frame")]))
    path = write_result(
        "profile",
        {
            "rows": rows,
            "audio_s": seconds,
            "tokens": len(piece.tokens),
            "peak": float(np.abs(whole).max()),
            "decoder": decoder_costs(rows, seconds),
        },
    )
    print(f"wrote {path}")
    if args.flame:
        flame(args.flame, args.seconds)
    return {"rows": rows}


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["step"],
            md_value(r["ms"], 2 if r["ms"] < 10 else 0),
            md_value(r["per_frame_ms"], 2) if r.get("per_frame_ms") else "",
        ]
        for r in d["rows"]
    ]
    return (
        f"One {d['tokens']}-token piece, {d['audio_s']:.2f} s of audio; medians.\n\n"
        + md_table(["step", "ms", "ms per 25 ms frame"], rows)
        + (_decoder_prose(d["decoder"]) if d.get("decoder") else "\n\n")
        + "`python -m streamvoice.bench.profile --flame docs/img/flame.svg` records a py-spy flame graph of a "
        "real server on loopback answering a client (MP3) for 20 s, start-up included: `SplitKokoro.decode` "
        "(ONNX Runtime's `Session.run`, on the model worker thread) against the event loop (WebSocket, "
        "encoding, scheduling) and the warm-up. ONNX Runtime's own frames show as addresses: the wheel ships "
        "without symbols.\n\n"
        "![flame graph](img/flame.svg)"
    )


def _decoder_prose(c: dict[str, float]) -> str:
    return (
        f"\n\nThe decoder is {c['share_of_whole_call']:.0%} of a whole-piece call: a fixed "
        f"{c['fixed_ms']:.0f} ms per call, then {c['ms_per_frame']:.1f} ms per 25 ms frame (the whole call's "
        f"real-time factor: {c['real_time_factor']:.2f}). The phonemiser, planning and encoders are noise next "
        "to it, so the first audio of a piece costs the front plus one small window, and each extra window "
        "costs the fixed part plus its context again.\n\n"
    )


if __name__ == "__main__":
    main()
