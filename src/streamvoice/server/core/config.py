"""Speech server settings: defaults a public endpoint can run with, every one overridable by environment.

The one place settings are read: ``from_env`` turns ``STREAMVOICE_<FIELD>`` variables and command-line flags
into this typed object; everything below it (the engine included) takes its settings as arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import ParseResult, urlparse

from streamvoice.engine.kokoro import EngineOptions
from streamvoice.protocol import DEFAULT_VOICE, MAX_PAUSE_MS, Limits, Pauses
from streamvoice.server.core.admission import Mode
from streamvoice.server.core.scheduler import Policy
from streamvoice.text.chunker import QUIET_CUT_S

MAX_DECODE_BATCH = 16  # each row is a model worker thread


class ConfigError(ValueError):
    """A setting that cannot be read; the message names the variable."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    model_dir: str | None = None
    model_variant: str | None = None  # "int8" | "fp32"; None picks int8 when present
    ort_threads: int = 0  # 0 = all cores
    ort_spin: bool = False  # let idle ONNX Runtime threads spin (its default); sleeping is faster here
    synth_workers: int = 1  # concurrent model calls; one is fastest on a small CPU
    # Windows of one size from up to this many listeners share one decoder call (1: off). Runs this many
    # model workers. A GPU's lever; on a small CPU it buys little (bench.batching, docs/benchmarks.md).
    decode_batch: int = 1
    decode_batch_linger_ms: float = 10.0  # how long a window waits for company while other work runs
    scheduler: Policy = "deadline"  # or "fifo"
    # Admission of real-time listeners: "queue" (wait, bounded, told at once), "refuse" (server_busy when
    # full) or "off"; capacity from ADMISSION_LISTENERS, or measured (0): 0.85 of the audio this machine's
    # full windows make per second. On by default: past it, every listener stalls, not only the newcomer.
    admission: Mode = "queue"
    admission_listeners: int = 0
    admission_queue: int = 8
    admission_wait_s: float = 10.0
    admission_idle_s: float = 2.0
    admission_max_hold_s: float = 30.0  # while others wait, a slot held this long goes at its next pause
    # When the machine slows down under admitted listeners, shed the newest so the earlier ones stay fed
    # (``core/watch.py``); off: every admitted listener stalls together instead.
    admission_shed: bool = True
    stream_windows: bool = True  # in-piece streaming (decoder windows); False = whole-piece synthesis
    pipeline: bool = True  # synthesise later messages while earlier ones are sent; False = reference design
    max_message_bytes: int = 64 * 1024
    max_text_chars: int = 10_000
    max_queued_messages: int = 64  # per session
    max_sessions: int = 64
    idle_timeout_s: float = 300.0
    send_timeout_s: float = 30.0  # a client that reads nothing for this long is disconnected
    # Audio is sent at most this far ahead of the listener's playback: what sits in socket buffers delays
    # keepalive pings, and a client that reads at playback speed must never fall behind them.
    max_send_ahead_s: float = 8.0
    max_body_bytes: int = 1024 * 1024  # HTTP request bodies (POST /invocations)
    body_timeout_s: float = 10.0  # a request body must arrive whole within this (no slow-loris buffers)
    ws_ping_interval_s: float = 20.0  # WebSocket keepalive
    ws_ping_timeout_s: float = 20.0
    drain_timeout_s: float = 15.0  # on SIGTERM: how long sessions get to finish before the process exits
    session_lifetime_s: float = 3600.0
    auth_token: str | None = None
    warm_up: bool = True
    # Voices synthesised at start-up (comma-separated), as a health check.
    warm_voices: str = DEFAULT_VOICE
    # Where every stock voice's decoder statistics are cached (default: beside the model, else the user
    # cache); without them a voice's first piece would stream on the cold path.
    voice_stats_dir: str | None = None
    # Silence after a piece, by the punctuation that ended it (sessions may change theirs with configure).
    pause_clause_ms: int = Pauses.clause_ms
    pause_sentence_ms: int = Pauses.sentence_ms
    pause_paragraph_ms: int = Pauses.paragraph_ms
    # Home Assistant's Wyoming protocol from the same process (e.g. tcp://127.0.0.1:10200); None: off.
    # Wyoming has no authentication: bind it to loopback unless the network is trusted.
    wyoming_uri: str | None = None
    wyoming_max_connections: int = 64  # open Wyoming sockets at once; more are told server_busy and closed
    # Wyoming has no authentication: with AUTH_TOKEN set, a non-loopback WYOMING_URI is refused unless this
    # says the network in front of it is trusted.
    wyoming_allow_unauthenticated: bool = False
    # A streamed utterance (Wyoming's synthesize-chunk) is capped at this much text, and is spoken as it
    # stands and ended when no text comes for this long.
    max_stream_chars: int = 20_000
    stream_text_timeout_s: float = 30.0
    # A streamed sentence whose text stops after its final stop is spoken after this much quiet instead
    # of waiting for a next character that may never come (0: wait for the next character or the end).
    stream_quiet_cut_ms: int = round(QUIET_CUT_S * 1000)
    lexicon_file: str | None = None  # JSON word -> "/phonemes/" or respelling, for every request
    # The vendor protocols (ElevenLabs, Cartesia, Deepgram): a JSON file of vendor voice id -> our voice (a
    # name or a blend). An id neither ours nor mapped speaks with the default voice (logged once), or with
    # this strict setting is refused in the vendor's error shape.
    vendor_voices_file: str | None = None
    vendor_voices_strict: bool = False
    emf: bool = False  # CloudWatch embedded-metric lines on stdout (SageMaker)
    endpoint_name: str = "local"  # the EMF dimension

    @property
    def warm_voice_list(self) -> tuple[str, ...]:
        return tuple(v.strip() for v in self.warm_voices.split(",") if v.strip())

    @property
    def engine_options(self) -> EngineOptions:
        return EngineOptions(
            intra_op_threads=self.ort_threads, spin=self.ort_spin, stream_windows=self.stream_windows
        )

    @property
    def pauses(self) -> Pauses:
        return Pauses(self.pause_clause_ms, self.pause_sentence_ms, self.pause_paragraph_ms)

    def __post_init__(self) -> None:
        for name in ("pause_clause_ms", "pause_sentence_ms", "pause_paragraph_ms"):
            if not 0 <= getattr(self, name) <= MAX_PAUSE_MS:
                raise ConfigError(f"STREAMVOICE_{name.upper()} must be 0-{MAX_PAUSE_MS} (milliseconds)")
        if not 1 <= self.decode_batch <= MAX_DECODE_BATCH:
            raise ConfigError(
                f"STREAMVOICE_DECODE_BATCH must be 1-{MAX_DECODE_BATCH} (windows per decoder call; 1 = off)"
            )
        if self.scheduler not in ("deadline", "fifo"):
            raise ConfigError(f"STREAMVOICE_SCHEDULER must be deadline or fifo, not {self.scheduler!r}")
        if self.admission not in ("off", "refuse", "queue"):
            raise ConfigError(f"STREAMVOICE_ADMISSION must be off, refuse or queue, not {self.admission!r}")
        if self.wyoming_uri is not None:
            uri = urlparse(self.wyoming_uri)
            tcp_ok = uri.scheme == "tcp" and uri.hostname is not None and _port(uri) is not None
            if not (tcp_ok or (uri.scheme == "unix" and uri.path)):
                raise ConfigError(
                    f"STREAMVOICE_WYOMING_URI {self.wyoming_uri!r} must be tcp://HOST:PORT "
                    "(e.g. tcp://127.0.0.1:10200) or unix:///path/to/socket"
                )
            remote = uri.scheme == "tcp" and uri.hostname not in ("127.0.0.1", "localhost", "::1")
            if remote and self.auth_token and not self.wyoming_allow_unauthenticated:
                raise ConfigError(
                    f"STREAMVOICE_WYOMING_URI {self.wyoming_uri!r} listens beyond loopback, but Wyoming has no "
                    "authentication: AUTH_TOKEN would not protect it. Bind it to 127.0.0.1, or set "
                    "STREAMVOICE_WYOMING_ALLOW_UNAUTHENTICATED=1 if the network in front of it is trusted."
                )

    @property
    def limits(self) -> Limits:
        return Limits(max_message_bytes=self.max_message_bytes, max_text_chars=self.max_text_chars)

    @classmethod
    def from_env(cls, **overrides: Any) -> ServerConfig:
        """``STREAMVOICE_<FIELD>`` for every field, then explicit overrides (CLI flags) on top."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = f"STREAMVOICE_{f.name.upper()}"
            raw = os.environ.get(name)
            if raw is None:
                continue
            kind = type(getattr(cls(), f.name))
            try:
                values[f.name] = _convert(raw, kind)
            except ValueError:
                raise ConfigError(f"{name}={raw[:40]!r} is not a valid {kind.__name__}") from None
        if "model_dir" not in values and os.environ.get("KOKORO_MODEL_DIR"):
            values["model_dir"] = os.environ["KOKORO_MODEL_DIR"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# Names platforms set for their own purposes: never read as ours without the prefix, and not warned about.
_COMMON_NAMES = frozenset({"HOST", "PORT"})


def startup_notes(config: ServerConfig, environ: Mapping[str, str]) -> list[tuple[bool, str]]:
    """What the start-up log says about settings, as (is a warning, line): whether callers need the token,
    and each setting of ours found without its ``STREAMVOICE_`` prefix (ignored: ``AUTH_TOKEN=...`` alone
    left a server open without a word)."""
    notes: list[tuple[bool, str]] = []
    if config.auth_token:
        notes.append(
            (False, "authentication on: every route but /ping needs the token (STREAMVOICE_AUTH_TOKEN)")
        )
    else:
        notes.append(
            (
                False,
                "authentication off: anyone who reaches this port can use it (set STREAMVOICE_AUTH_TOKEN)",
            )
        )
    for f in fields(ServerConfig):
        bare = f.name.upper()
        if bare in environ and bare not in _COMMON_NAMES and f"STREAMVOICE_{bare}" not in environ:
            notes.append((True, f"{bare} is set but ignored: this server reads STREAMVOICE_{bare}"))
    return notes


def _port(uri: ParseResult) -> int | None:
    try:
        return uri.port
    except ValueError:  # a port that is not a number, or out of range
        return None


def _convert(raw: str, kind: type) -> Any:
    if kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if kind is int:
        return int(raw)
    if kind is float:
        return float(raw)
    return raw
