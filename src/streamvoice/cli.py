"""``streamvoice`` command line: serve, say, voices, models, agent, demo, bench.

Heavy imports happen inside each command so ``streamvoice --help`` stays instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from streamvoice.model_files import VARIANTS
from streamvoice.protocol import DEFAULT_VOICE
from streamvoice.settings import LOG_LEVELS


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model-dir",
        help="folder with kokoro-v1.0*.onnx and voices-v1.0.bin (default: $KOKORO_MODEL_DIR, then the user cache)",
    )
    p.add_argument(
        "--variant",
        choices=list(VARIANTS),
        help="which export to load when several are present (int8-static: the int8 file, its decoder "
        "derived as static int8)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from streamvoice.server import ServerConfig
    from streamvoice.server.runner import build_server

    config = ServerConfig.from_env(
        host=args.host,
        port=args.port,
        model_dir=args.model_dir,
        model_variant=args.variant,
        drain_timeout_s=args.drain_timeout,
        wyoming_uri=args.wyoming_uri,
    )
    # Graceful: the first SIGTERM turns /ping unhealthy and lets sessions finish, then exits.
    build_server(config, log_level=args.log_level).run()
    return 0


def cmd_say(args: argparse.Namespace) -> int:
    from streamvoice.audio.encoders import make_encoder
    from streamvoice.engine import KokoroEngine
    from streamvoice.protocol import ProtocolError, validate_format, validate_speed

    try:
        speed = validate_speed(args.speed)
        fmt = validate_format(args.format or _format_from_name(args.output))
    except ProtocolError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    engine = KokoroEngine.load(args.model_dir, args.variant)
    encoder = make_encoder(fmt)
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: SIM115
    audio_s = 0.0
    try:
        for audio in engine.stream(args.text, args.voice, speed, args.lang):
            out.write(encoder.encode(audio))
            audio_s += audio.size / engine.sample_rate
        out.write(encoder.flush())
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    if fmt == "wav" and args.output != "-":
        _fix_wav_sizes(Path(args.output))
    if args.output != "-":
        print(f"wrote {args.output} ({audio_s:.2f} s of {fmt} audio)", file=sys.stderr)
    return 0


def _format_from_name(path: str) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in ("wav", "mp3", "opus", "pcm") else "wav"


def _fix_wav_sizes(path: Path) -> None:
    """A file has a known length, so replace the streaming header's placeholder sizes."""
    from streamvoice.audio.encoders import wav_header

    data = path.read_bytes()
    body = data[44:]
    path.write_bytes(wav_header(data_bytes=len(body)) + body)


def cmd_voices(args: argparse.Namespace) -> int:
    import numpy as np

    from streamvoice.engine.g2p import packs
    from streamvoice.engine.voices import describe
    from streamvoice.model_files import resolve_model_files

    files = resolve_model_files(args.model_dir)
    with np.load(files.voices) as npz:
        names = sorted(npz.files)
    rows = [describe(n) for n in names]
    if args.json:
        print(json.dumps([{**r.__dict__, "installed": packs.installed(r.lang)} for r in rows], indent=2))
        return 0
    print(f"{'voice':16} {'lang':6} {'language':22} {'gender':7} installed")
    for r in rows:
        pack = packs.PACK_OF_LANG.get(r.lang)
        where = "yes" if packs.installed(r.lang) else f"no: pip install 'streamvoice[{pack}]'"
        print(f"{r.name:16} {r.lang:6} {r.language:22} {r.gender:7} {where}")
    print(f"\n{len(rows)} voices. Blend them with weights, e.g. --voice 'af_heart*0.7+am_michael*0.3'")
    return 0


def cmd_models_calibrate(args: argparse.Namespace) -> int:
    from streamvoice.engine.kokoro import KokoroEngine
    from streamvoice.engine.streaming.voice_stats_cache import calibrate_all

    engine = KokoroEngine.load(args.model_dir, args.variant)
    path = calibrate_all(engine, Path(args.out) if args.out else None)
    if path is None:
        print("this model export has no streaming decoder or durations: nothing to calibrate")
        return 1
    print(f"wrote {path} ({len(engine.voice_names)} voices)")
    return 0


def cmd_models_derive(args: argparse.Namespace) -> int:
    from streamvoice.engine.kokoro import KokoroEngine
    from streamvoice.engine.static_int8 import static_decoder, static_front

    engine = KokoroEngine.load(args.model_dir, "int8")
    if engine.split is None:
        print("this model export does not split into front and decoder: nothing to derive")
        return 1
    folder = Path(args.out) if args.out else None
    ranges = Path(args.ranges_out) if args.ranges_out else None
    if ranges is not None:
        ranges.mkdir(parents=True, exist_ok=True)
    graph = static_decoder.derive(
        engine.files.model, lambda: static_decoder.calibration_windows(engine), ranges
    )
    path = static_decoder.save(graph, engine.files.model, folder)
    front = static_front.derive(
        engine.files.model, lambda: engine.front_feeds(static_decoder.CALIBRATION), ranges
    )
    front_path = static_decoder.save(
        front, engine.files.model, folder, static_front.cache_name(engine.files.model)
    )
    print(f"wrote {path} and {front_path}; serve them with STREAMVOICE_MODEL_VARIANT=int8-static")
    return 0


def cmd_models_download(args: argparse.Namespace) -> int:
    from streamvoice.model_files import (
        RELEASE_BASE_URL,
        DownloadError,
        download_models,
        text_progress,
        user_cache_dir,
    )

    dest = Path(args.dest) if args.dest else user_cache_dir()
    if args.if_missing:
        from streamvoice.model_files import ModelNotFoundError, resolve_model_files

        try:
            found = resolve_model_files(args.dest)
        except ModelNotFoundError:
            pass
        else:
            print(f"model files present: {found.model.parent}")
            return 0
    try:
        files = download_models(dest, args.variant, args.base_url or RELEASE_BASE_URL, text_progress())
    except DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"model: {files.model}\nvoices: {files.voices}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module("streamvoice.bench." + ("suite" if args.name == "all" else args.name))
    module.main(args.args)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamvoice", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="library log lines too (debug level)")
    parser.add_argument(
        "--log",
        choices=["debug", "info", "warning", "error"],
        help="log level of library log lines (default: warning)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    from streamvoice.server.core.config_docs import settings_help

    p = sub.add_parser(
        "serve",
        help="run the speech server (SageMaker container contract)",
        description="Run the speech server. Every setting is also an environment variable (docs/configuration.md).",
        epilog="settings (environment):\n" + settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default=None, help="default 127.0.0.1 (the container passes 0.0.0.0)")
    p.add_argument("--port", type=int, default=None, help="default 8080")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=None,
        help="seconds open sessions get to finish after SIGTERM (default 15; env STREAMVOICE_DRAIN_TIMEOUT_S)",
    )
    p.add_argument(
        "--wyoming-uri",
        default=None,
        help="also serve Home Assistant's Wyoming protocol, e.g. tcp://127.0.0.1:10200 (same model and "
        "scheduler; no authentication, so keep it on loopback or a trusted network; env STREAMVOICE_WYOMING_URI)",
    )
    p.add_argument("--log-level", default="info", choices=list(LOG_LEVELS))
    _add_model_args(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("say", help="synthesise text to a file (or - for stdout)")
    p.add_argument("text")
    p.add_argument("-o", "--output", default="out.wav")
    p.add_argument("--voice", default=DEFAULT_VOICE)
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--format", choices=["pcm", "wav", "mp3", "opus"], default=None)
    p.add_argument("--lang", default=None)
    _add_model_args(p)
    p.set_defaults(func=cmd_say)

    p = sub.add_parser("voices", help="list the 54 voices with language and gender")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model-dir")
    p.set_defaults(func=cmd_voices)

    p = sub.add_parser("models", help="manage model files")
    msub = p.add_subparsers(dest="models_command", required=True)
    d = msub.add_parser("download", help="fetch the official Kokoro v1.0 release and verify sha256")
    d.add_argument("--variant", action="append", choices=["int8", "fp32"], help="repeatable; default int8")
    d.add_argument("--dest", help="default: the user cache")
    d.add_argument("--if-missing", action="store_true", help="do nothing when the files are already found")
    d.add_argument("--base-url", help=argparse.SUPPRESS)
    d.set_defaults(func=cmd_models_download)
    c = msub.add_parser(
        "calibrate",
        help="measure every stock voice's decoder statistics once and cache them (no voice then streams cold)",
    )
    c.add_argument(
        "--out", help="folder for the file (default: the user cache; images put it beside the model)"
    )
    _add_model_args(c)
    c.set_defaults(func=cmd_models_calibrate)
    c = msub.add_parser(
        "derive",
        help="derive the static-int8 decoder and front from the int8 file once and cache them (MODEL_VARIANT=int8-static)",
    )
    c.add_argument(
        "--out", help="folder for the file (default: the user cache; images put it beside the model)"
    )
    c.add_argument("--model-dir", help="folder with kokoro-v1.0.int8.onnx (default: as `serve` finds it)")
    c.add_argument(
        "--ranges-out",
        help="measure the activation ranges on this machine (not the shipped ones) and write them here "
        "(how src/streamvoice/engine/static_int8/ranges/ is made)",
    )
    c.set_defaults(func=cmd_models_derive)

    from streamvoice.bench.registry import NAMES

    p = sub.add_parser("bench", help=f"run a benchmark: {', '.join(NAMES)}, or all of them")
    p.add_argument("name", choices=[*NAMES, "load", "all"])
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmark (see its --help)")
    p.set_defaults(func=cmd_bench)

    from streamvoice.key_commands import add_key_commands

    add_key_commands(sub)

    try:
        from streamvoice.agent_commands import add_agent_commands
    except ImportError:  # the agent extra is not installed
        pass
    else:
        add_agent_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "models_command", None) == "download" and not args.variant:
        args.variant = ["int8"]
    # Commands print their own output; library log lines (httpx requests, ...) only when asked for.
    # The services (serve, agent) log their own operational lines at their --log-level.
    level = "debug" if args.verbose else (args.log or "warning")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command in ("serve", "agent") and not args.verbose and not args.log:
        logging.getLogger("streamvoice").setLevel(LOG_LEVELS[getattr(args, "log_level", "info")])
    from streamvoice.engine.options import EngineError
    from streamvoice.engine.voices import VoiceError
    from streamvoice.model_files import ModelNotFoundError
    from streamvoice.settings import ConfigError

    try:
        return int(args.func(args))
    except (ModelNotFoundError, VoiceError, EngineError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
