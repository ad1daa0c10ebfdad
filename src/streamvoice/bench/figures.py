"""The results tables of README.md and docs/results.md, rendered from the result files the benchmarks wrote,
so a figure in the text is the figure in its file and the two pages cannot disagree.

A benchmark writes ``results/<name>.json`` with its machine, date and commit (``common.write_result``).
The files behind the published figures are kept in ``docs/results/`` (``--keep`` copies them there); each
row below either reads its figure from one of them (``Measured``) or is kept for history (``Kept``: its text
says so and where it came from, until its benchmark is rerun and kept). Both pages are rendered from these
rows between their markers, and ``pytest tests/test_figures.py`` fails when a page and the files disagree.

    python -m streamvoice.bench.figures [--keep demo transport windows quality served_quality continuity listener]
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamvoice.settings import with_table

ROOT = Path(__file__).resolve().parents[3]
KEPT_DIR = ROOT / "docs" / "results"
PAGES = (ROOT / "README.md", ROOT / "docs" / "results.md")
TABLE_START = "<!-- figures: rendered from docs/results/*.json by python -m streamvoice.bench.figures -->"
TABLE_END = "<!-- end of figures -->"

Results = Mapping[str, dict[str, Any]]


@dataclass(frozen=True)
class Measured:
    """A row whose figure is read from ``docs/results/<source>.json``."""

    what: str
    reference: str  # the AWS reference sample's published figure, or "-"
    source: str
    cell: Callable[[dict[str, Any]], str]
    command: str
    in_readme: bool = True


@dataclass(frozen=True)
class Kept:
    """A row kept for history: its figure and where it came from, not yet rerun into a kept result."""

    what: str
    reference: str
    text: str
    origin: str
    command: str
    in_readme: bool = True


Row = Measured | Kept


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _rows(result: dict[str, Any], key: str = "case") -> dict[str, dict[str, Any]]:
    return {str(r[key]): r for r in result["rows"]}


def demo_cell(d: dict[str, Any]) -> str:
    s = d["summary"]
    bidi, batch = s["bidi"], s["batch"]
    return (
        f"**{s['ratio_batch_over_bidi_first_audio']:.2f}x** ({_ms(bidi['first_audio_ms']['median'])} vs "
        f"{_ms(batch['first_audio_ms']['median'])} ms; heard onset {s['ratio_batch_over_bidi_heard']:.2f}x, "
        f"{bidi['heard_ms']['median'] / 1000:.2f} s vs {batch['heard_ms']['median'] / 1000:.2f} s), medians "
        f"of {d['runs_per_mode']}"
    )


def transport_cell(d: dict[str, Any]) -> str:
    rows = _rows(d)
    fast = rows["streamvoice session: fast first piece"]
    block = rows["reference design, whole block (bare engine, whole piece)"]
    return (
        f"**{fast['of_baseline']:.1%}** ({fast['mean']:.0f} vs {_ms(block['mean'])} ms; heard "
        f"{fast['heard_of_baseline']:.1%}), means of {d['trials']}"
    )


def windows_cell(d: dict[str, Any]) -> str:
    s = d["summary"]
    return (
        f"**{s['trimmed_first_over_whole']:.1%}** on the served path (first audio "
        f"{s['trimmed_first_ms']['mean']:.0f} ms of {_ms(s['whole_ms']['mean'])} ms whole), same words"
    )


def quality_cell(d: dict[str, Any]) -> str:
    s = d["summary"]
    return (
        f"PESQ **{s['pesq_warm']:.2f}** warm, {s['pesq_first_use']:.2f} on a voice's first piece; DNSMOS "
        f"{s['dnsmos_streamed']:.2f} streamed vs {s['dnsmos_whole']:.2f} whole, {len(d['voices'])} voices"
    )


def served_quality_cell(d: dict[str, Any]) -> str:
    at = next(r for r in d["rows"] if r["listeners"] == d["capacity"])
    return (
        f"DNSMOS **{at['dnsmos_served']:.2f}** served vs {at['dnsmos_bare']:.2f} the bare engine's stream and "
        f"{at['dnsmos_whole']:.2f} whole, PESQ {at['pesq']:.2f}: {at['listeners']} listeners (the capacity "
        f"measured), {at['sentences']} sentences"
    )


def silence_cell(d: dict[str, Any]) -> str:
    rows = _rows(d, "measure")
    lead = rows["leading silence per message, max (ms)"]["value"]
    tail = rows["trailing silence beyond its pause, max (ms)"]["value"]
    return f"**{lead:.0f} / {tail:.0f} ms** max"


def wer_cell(d: dict[str, Any]) -> str:
    rows = _rows(d, "measure")
    rates = ("pcm 24 kHz", "pcm 16 kHz", "mu-law 8 kHz")
    return " / ".join(str(rows[f"WER, {rate}"]["value"]) for rate in rates)


def listener_onset_cell(d: dict[str, Any]) -> str:
    rows = _rows(d, "measure")
    onset = next(r for m, r in rows.items() if m.startswith("heard onset, "))
    whole = rows["bare engine, whole piece, same sentence (ms)"]
    ratio = rows["heard onset / whole piece"]["value"]
    return f"**{ratio:.2f}** ({onset['value']:.0f} of {_ms(whole['value'])} ms)"


def continuity_cell(d: dict[str, Any]) -> str:
    ours = _rows(d, "design")["streamvoice: pipelined, windowed"]
    return f"**{ours['starvation_ms']:.0f} ms** over {ours['audio_s']:.1f} s (heard after {ours['heard_ms']:.0f} ms)"


ROWS: tuple[Row, ...] = (
    Measured(
        "batch / bidi time to first audio, local model",
        "2.4x",
        "demo",
        demo_cell,
        'make demo ARGS="--runs 3"',
    ),
    Measured(
        "first audio of a four-sentence block: fast first piece / the whole block in one call",
        "47.6%",
        "transport",
        transport_cell,
        "python -m streamvoice.bench.transport",
    ),
    Measured(
        "in-piece streaming: first audio / whole-piece synthesis, ~62-token piece",
        "-",
        "windows",
        windows_cell,
        "python -m streamvoice.bench.windows",
    ),
    Measured(
        "in-piece streaming against the same piece whole, sentences nothing was tuned on",
        "-",
        "quality",
        quality_cell,
        "python -m streamvoice.bench.quality",
    ),
    Measured(
        "what a listener hears with the server full, against the bare engine",
        "-",
        "served_quality",
        served_quality_cell,
        "python -m streamvoice.bench.served_quality",
    ),
    Measured(
        "silence before each message's speech / beyond its pause",
        "~300 / ~450-500 ms",
        "listener",
        silence_cell,
        "python -m streamvoice.bench.listener",
    ),
    Measured(
        "ten-sentence answer, one listener: stalls",
        "-",
        "continuity",
        continuity_cell,
        "python -m streamvoice.bench.continuity",
    ),
    Kept(
        "the engine alone, same official file: audio per second against kokoro-onnx as shipped (`create()`)",
        "-",
        "**2.03x** in full windows, 2.12x whole pieces, with the static-int8 decoder (its elementwise chains "
        "folded, its snakes without `Sin`) and the front's energy branch in static int8 (the default on a "
        "CPU; the graph as exported 0.99x / 0.96x); PESQ against the exported graph 3.79 on average over 54 "
        "voices, lowest 3.17; DNSMOS 2.91 vs 2.93; each language heard as well (8-bit weights then, on a VNNI "
        "CPU; 7-bit since 2026-12-07, so AVX2-only CPUs compute the same: 3.74 / 3.20 on one, docs/benchmarks.md "
        "7e)",
        "2026-12-04, AMD EPYC, closing note of issue #48",
        "python -m streamvoice.bench.engine --repeat 3",
    ),
    Kept(
        "heard onset of a 60-token sentence, fresh session, against kokoro-onnx making it whole",
        "-",
        "**0.110** (123 of 1,119 ms; 0.114 and 0.119 in two before/after runs the same hour, against 0.122 "
        "and 0.125 for the release before)",
        "2026-12-04, AMD EPYC, closing note of issue #48",
        "python -m streamvoice.bench.engine --repeat 3",
    ),
    Kept(
        "the served path at saturation (8 listeners' whole answers at once, admission off) against "
        "kokoro-onnx as shipped",
        "-",
        "**1.89x** (5.83 vs 3.08 audio s/s; the release before, same hour: 1.81x, 5.47 vs 3.02; earlier "
        "runs 1.74x / 1.89x, and 1.60x on a slower VM)",
        "2026-12-04, AMD EPYC, closing note of issue #48",
        "python -m streamvoice.bench.capacity --ks 8 --options deadline",
    ),
    Kept(
        "real-time listeners kept fed on 2 cores, as shipped",
        "-",
        "**3** with the static-int8 decoder (K=1-3 all fed, 0 ms of stalls, the fourth caller refused at "
        "once), against **1** with the graph as exported in an earlier session (an earlier release's 10 "
        "runs on a faster VM: 2)",
        "2026-12-04, AMD EPYC, closing note of issue #48",
        "python -m streamvoice.bench.capacity --ks 1,2,3,4 --options default --variant int8-static "
        "(and --variant int8)",
    ),
    Kept(
        "what was heard at a cut: the server's words vs Whisper's in the played audio",
        "-",
        "**at most one word apart** (English, Spanish)",
        "asserted by the tests on every run",
        "pytest tests/test_heard_audio.py tests/test_deepgram_flux.py -k heard",
    ),
    Kept(
        "character error rate per language, ours / the official G2P",
        "-",
        "Japanese **0.07 / 0.07**, Mandarin **0.00 / 0.00**, the rest within 0.02",
        "issue #33's run, docs/benchmarks.md",
        "python -m streamvoice.bench.languages",
    ),
    Measured(
        "WER at 24 kHz / 16 kHz / 8 kHz mu-law",
        "-",
        "listener",
        wer_cell,
        "python -m streamvoice.bench.listener",
    ),
    Measured(
        "heard onset of a 60-token sentence / the bare engine's whole-piece time (fresh session)",
        "-",
        "listener",
        listener_onset_cell,
        "python -m streamvoice.bench.listener",
        in_readme=False,
    ),
)


def load(folder: Path = KEPT_DIR) -> dict[str, dict[str, Any]]:
    """The kept result files, by benchmark name."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def _when(result: dict[str, Any]) -> str:
    machine = result.get("machine", {})
    return str(machine.get("when", "?")).split(" ")[0]


def cell(row: Row, results: Results) -> str:
    if isinstance(row, Kept):
        return f"{row.text} (kept for history: {row.origin})"
    result = results.get(row.source)
    if result is None:
        raise FileNotFoundError(
            f"docs/results/{row.source}.json is missing: run `{row.command}`, then "
            f"`python -m streamvoice.bench.figures --keep {row.source}`"
        )
    return f"{row.cell(result)} ({_when(result)})"


def table(results: Results, readme: bool) -> str:
    lines = [
        "| what | AWS reference sample (GPU) | streamvoice (2-core CPU) | command |",
        "| --- | --- | --- | --- |",
    ]
    for row in ROWS:
        if readme and not row.in_readme:
            continue
        lines.append(f"| {row.what} | {row.reference} | {cell(row, results)} | `{row.command}` |")
    lines.append("")
    lines.append("Where each measured row came from (`docs/results/`, as its benchmark wrote it):")
    lines.append("")
    for name in sorted({r.source for r in ROWS if isinstance(r, Measured)}):
        result = results[name]
        machine = result.get("machine", {})
        lines.append(
            f"- `{name}.json`: {machine.get('processor', '?')}, {machine.get('cpu_count', '?')} cores, "
            f"{machine.get('when', '?')}, commit {result.get('commit', 'not recorded')}"
        )
    lines.append("")
    return "\n".join(lines)


def render(page: str, results: Results, readme: bool) -> str:
    """``page`` with its figures table rendered anew between the markers."""
    return with_table(page, TABLE_START, TABLE_END, table(results, readme))


def keep(names: list[str], results_dir: Path = Path("results")) -> None:
    KEPT_DIR.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = results_dir / f"{name}.json"
        if not source.is_file():
            raise SystemExit(f"{source} does not exist: run the benchmark first")
        shutil.copyfile(source, KEPT_DIR / f"{name}.json")
        print(f"kept {source} as {KEPT_DIR / f'{name}.json'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", nargs="*", default=[], help="copy results/<name>.json into docs/results/")
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    keep(args.keep, args.results)
    results = load()
    for page in PAGES:
        page.write_text(render(page.read_text(), results, readme=page.name == "README.md"))
        print(f"rendered {page}")


if __name__ == "__main__":
    main()
