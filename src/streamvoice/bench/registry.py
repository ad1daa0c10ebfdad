"""The benchmarks, once: the suite runs them in this order, the report renders them in this order, and
``streamvoice bench NAME`` accepts these names. ``{plots}`` in an argument is the suite's plot folder."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    name: str  # the module under streamvoice.bench and the results/<name>.json it writes
    title: str
    args: tuple[str, ...] = ()  # what the suite passes for publishable figures
    quick_args: tuple[str, ...] = ()  # a smoke run
    needs_gpu: bool = False  # the suite runs it only where ONNX Runtime has its CUDA provider

    @property
    def command(self) -> str:
        """How a reader reruns it: the module with the arguments the suite gives it, so the command next to a
        figure is the one that made it."""
        args = (arg.replace("{plots}", "docs/img") for arg in self.args)
        return " ".join(["python -m streamvoice.bench." + self.name, *args])


BENCHMARKS = (
    Benchmark("profile", "Where the time goes"),
    Benchmark(
        "transport", "1. Transport isolation and server overhead", ("--trials", "20"), ("--trials", "3")
    ),
    Benchmark(
        "windows",
        "In-piece streaming (windowed decoder) vs whole-piece synthesis",
        ("--trials", "3", "--plots", "{plots}"),
        ("--trials", "1", "--plots", "{plots}"),
    ),
    Benchmark("e2e", "2. End to end: bidi vs batch", ("--runs", "3"), ("--runs", "1")),
    Benchmark(
        "continuity",
        "3. Continuity: audio ahead of playback",
        ("--plot", "{plots}/continuity.png"),
        ("--plot", "{plots}/continuity.png"),
    ),
    Benchmark(
        "capacity",
        "4. Capacity: real-time listeners per machine, and overload",
        ("--ks", "1,2,3,4", "--plot", "{plots}/capacity.png"),
        ("--ks", "1,2", "--options", "deadline,admission", "--plot", "{plots}/capacity.png"),
    ),
    Benchmark("encodings", "5. Encodings", ("--clips", "24"), ("--clips", "4")),
    Benchmark("listener", "6. What the listener hears", ("--trials", "10"), ("--trials", "2")),
    Benchmark("quality", "7. Streamed vs whole-piece quality", (), ("--voices", "af_heart")),
    Benchmark(
        "stream_breakdown",
        "7b. Where streamed and whole differ, cause by cause",
        (),
        ("--voices", "af_heart", "--ks", "24"),
    ),
    Benchmark(
        "integrations", "8. Every surface: what the listener hears", ("--trials", "5"), ("--trials", "1")
    ),
    Benchmark(
        "batching",
        "9. Batched decoder windows",
        (),
        ("--sizes", "12", "--max-batch", "2", "--repeat", "1", "--no-fidelity"),
    ),
    Benchmark(
        "gpu",
        "9b. Kokoro on a GPU",
        ("--audio", "results/gpu_audio.npz"),
        ("--ks", "4", "--max-batch", "4", "--repeat", "1"),
        needs_gpu=True,
    ),
    Benchmark("kernels", "10. Decoder kernels on this CPU", (), ("--sizes", "12", "--repeat", "1")),
    Benchmark(
        "static_int8",
        "10b. Static int8 decoder candidates",
        (),
        ("--candidates", "conv_post", "--repeat", "1"),
    ),
    Benchmark(
        "engine",
        "10c. The engine: kokoro-onnx as shipped, the exported graph, the static-int8 decoder",
        ("--repeat", "3"),
        ("--repeat", "1", "--voices", "af_heart,zm_yunxia", "--no-asr"),
    ),
    Benchmark("limits", "10d. Know the limit: the engine's arithmetic against this machine's peaks"),
    Benchmark(
        "front_int8",
        "10e. The front graph: float and static int8 candidates",
        (),
        ("--repeat", "1", "--sentences", "1", "--no-asr"),
    ),
    Benchmark(
        "hostile", "12. Another caller while hostile text is planned", ("--trials", "5"), ("--trials", "2")
    ),
    Benchmark(
        "key_flood", "13. A good key beside a flood of wrong keys", ("--trials", "5"), ("--trials", "2")
    ),
)
NAMES = tuple(b.name for b in BENCHMARKS)
