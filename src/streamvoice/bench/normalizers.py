"""The candidates for reading values outside English, on the sentences of ``bench.spoken_values``: our
rules (``text.language_rules``) and NVIDIA's ``nemo-text-processing`` (weighted finite-state grammars over
pynini), where it is installed. Per language: the readings (each printed, with whether it holds the words
a native speaker says), the start-up (a grammar compile, then its cached load), the cost per sentence and
the process's peak memory.

NeMo is not one of our dependencies (pynini's wheel is 165 MB, it pulls transformers and pandas): run this
in an environment of its own, with our source on the path::

    python -m venv /tmp/nemo && /tmp/nemo/bin/pip install nemo-text-processing
    PYTHONPATH=src /tmp/nemo/bin/python -m streamvoice.bench.normalizers --langs es fr-fr

and ours from the project's environment: ``python -m streamvoice.bench.normalizers --engine ours``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from streamvoice.bench.spoken_values import VALUES, fold
from streamvoice.text.normalize import say

NEMO_LANG = {"es": "es", "fr-fr": "fr", "it": "it", "pt-br": "pt", "hi": "hi", "ja": "ja", "cmn": "zh"}


def _holds(read: str, said: tuple[str, ...]) -> bool:
    """Whether the text reading holds the expected words, folded and without spaces ("duecento
    cinquanta" and "duecentocinquanta" are one sound)."""
    return any(_bare(fold(s)) in _bare(fold(read)) for s in said)


def _bare(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


def measure(lang: str, engine: str, cache_dir: str) -> dict[str, Any]:
    started = time.perf_counter()
    if engine == "nemo":
        from nemo_text_processing.text_normalization.normalize import Normalizer

        normalizer = Normalizer(input_case="cased", lang=NEMO_LANG[lang], cache_dir=cache_dir)
        start_s = time.perf_counter() - started
        started = time.perf_counter()
        normalizer = Normalizer(input_case="cased", lang=NEMO_LANG[lang], cache_dir=cache_dir)
        cached_s = time.perf_counter() - started

        def read(text: str) -> str:
            return str(normalizer.normalize(text, verbose=False))
    else:
        say("1", lang)  # the rules' compile and the number engine's import
        start_s = cached_s = time.perf_counter() - started

        def read(text: str) -> str:
            return say(text, lang)

    rows, costs = [], []
    for value in VALUES[lang][2]:
        t0 = time.perf_counter()
        try:
            said = read(value.text)
        except Exception as exc:  # NeMo's grammars fail on some inputs: a wrong reading, not the end
            said = f"(failed: {type(exc).__name__})"
        costs.append((time.perf_counter() - t0) * 1000)
        rows.append({"kind": value.kind, "text": value.text, "read": said, "right": _holds(said, value.said)})
        print(f"  {lang} {value.kind:8} {'ok ' if rows[-1]['right'] else 'NO '} {said}", flush=True)
    return {
        "lang": lang,
        "engine": engine,
        "right": sum(r["right"] for r in rows),
        "sentences": len(rows),
        "start_s": round(start_s, 2),
        "cached_start_s": round(cached_s, 2),
        "ms_per_sentence": round(statistics.median(costs), 2),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=["ours", "nemo"], default="nemo")
    parser.add_argument("--langs", nargs="+", default=list(VALUES))
    parser.add_argument(
        "--cache-dir", default="/tmp/nemo-cache", help="where NeMo keeps its compiled grammars"
    )
    parser.add_argument("--out", default=None, help="default results/normalizers-<engine>.json")
    args = parser.parse_args(argv)
    results = [measure(lang, args.engine, args.cache_dir) for lang in args.langs]
    for r in results:
        print(
            f"{r['lang']:6} {r['engine']:5} right {r['right']}/{r['sentences']}  start {r['start_s']} s "
            f"(cached {r['cached_start_s']} s)  {r['ms_per_sentence']} ms/sentence  peak {r['peak_rss_mb']} MB"
        )
    out = Path(args.out or f"results/normalizers-{args.engine}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
