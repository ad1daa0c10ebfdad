"""Speech server settings: defaults a public endpoint can run with, every one overridable by environment.

The one place settings are read: ``from_env`` turns ``STREAMVOICE_<FIELD>`` variables and command-line flags
into this typed object; everything below it (the engine included) takes its settings as arguments. Each
setting carries its default, its range and a one-line meaning (``setting``): the start refuses a value out of
range and an unknown ``STREAMVOICE_`` name, saying which; ``docs/configuration.md`` and ``streamvoice serve
--help`` are rendered from them (``settings_markdown``, checked by ``pytest tests/test_config.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast, get_args
from urllib.parse import ParseResult, urlparse

from streamvoice.engine.options import EngineOptions, Runtime
from streamvoice.model_files import VARIANTS
from streamvoice.protocol import DEFAULT_VOICE, MAX_PAUSE_MS, Limits, Pauses
from streamvoice.server.core.admission import Mode
from streamvoice.settings import (
    ConfigError,
    check,
    env_names,
    from_environ,
    setting,
)
from streamvoice.store import open_store
from streamvoice.text.chunker import QUIET_CUT_S

MAX_DECODE_BATCH = 16  # each row is a model worker thread


@dataclass(frozen=True)
class ServerConfig:
    host: str = setting("127.0.0.1", "address to listen on (the container sets 0.0.0.0)")
    port: int = setting(8080, "port to listen on", 1, 65_535)
    model_dir: str | None = setting(
        None,
        "folder with kokoro-v1.0*.onnx and voices-v1.0.bin (also KOKORO_MODEL_DIR; default: the user cache)",
    )
    model_variant: str | None = setting(
        None,
        "which export to load (default: int8-static on a CPU when the int8 file is present): int8-static is "
        "the int8 file with its decoder and its front's energy branch derived as static int8 (the first start "
        "derives them once from the shipped ranges, ~10 s on 2 cores; `streamvoice models derive` ahead), int8 the file as exported",
        choices=tuple(VARIANTS),
    )
    engine: str = setting(
        "auto",
        "which runtime runs the model: onnx (ONNX Runtime), torch (PyTorch: each piece whole, batched across "
        "listeners on the GPU; needs `.[torch]`), auto (torch where PyTorch sees a CUDA GPU, else onnx)",
        choices=("auto", "onnx", "torch"),
    )
    ort_threads: int = setting(0, "ONNX Runtime intra-op threads (0: all cores)", 0, 1024)
    ort_spin: bool = setting(
        False, "let idle ONNX Runtime threads spin (its own default; sleeping is faster here)"
    )
    synth_workers: int = setting(1, "concurrent model calls (one is fastest on a small CPU)", 1, 64)
    decode_batch: int = setting(
        1, "windows of one size from up to this many listeners share one decoder call (1: off; a GPU's lever)",
        1, MAX_DECODE_BATCH,
    )  # fmt: skip
    decode_batch_linger_ms: float = setting(
        10.0, "how long a window waits for company while other work runs", 0, 1000
    )
    admission: Mode = setting(
        "queue",
        "a listener beyond capacity: let in (off), answered `server_busy` (refuse), or waits, told `queued` (queue)",
        choices=get_args(Mode),
    )
    admission_listeners: int = setting(
        0,
        "capacity in real-time listeners (0: measured at warm-up from what full windows make)",
        0,
        100_000,
    )
    admission_queue: int = setting(8, "listeners waiting for a slot at most", 0, 100_000)
    admission_wait_s: float = setting(
        10.0, "how long a listener waits for a slot before `server_busy`", 0, 3600
    )
    admission_idle_s: float = setting(
        2.0, "how long a listener keeps its slot after its last message", 0, 3600
    )
    admission_max_hold_s: float = setting(
        30.0,
        "while others wait, a slot held this long is handed over at its holder's next pause",
        0.1,
        86_400,
    )
    admission_shed: bool = setting(
        True, "when the machine slows down under admitted listeners, shed the newest so the earlier stay fed"
    )
    stream_windows: bool = setting(True, "in-piece streaming (decoder windows); off: whole-piece synthesis")
    max_message_bytes: int = setting(64 * 1024, "bytes per message, on every surface", 256, 16 * 1024 * 1024)
    max_text_chars: int = setting(10_000, "characters of text per message", 1, 1_000_000)
    max_queued_messages: int = setting(
        64, "messages per session (contexts per vendor connection)", 1, 100_000
    )
    max_sessions: int = setting(64, "sessions, streams and vendor connections per server", 1, 1_000_000)
    max_connections: int = setting(
        4096,
        "connections open at once, HTTP and WebSocket (more: 503 and closed at once; the start lifts the "
        "open-file limit to fit, or lowers this with a warning)",
        1,
        1_000_000,
    )
    max_keyless_sockets: int = setting(
        64,
        "sockets accepted while their key is still due in a first message (ElevenLabs' browser form) at "
        "most; they hold no session room, each waits at most BODY_TIMEOUT_S",
        1,
        1_000_000,
    )
    idle_timeout_s: float = setting(300.0, "a connection with no message this long is closed", 0.1, 86_400)
    send_timeout_s: float = setting(
        30.0, "a client that reads nothing this long is disconnected (1008)", 0.1, 3600
    )
    max_send_ahead_s: float = setting(
        8.0, "audio is sent at most this far ahead of the listener's playback", 0.5, 600
    )
    max_body_bytes: int = setting(
        1024 * 1024, "HTTP request body bytes (larger: 413 before reading)", 1024, 1 << 30
    )
    body_timeout_s: float = setting(10.0, "an HTTP body must arrive whole within this (else 408)", 0.1, 3600)
    head_timeout_s: float = setting(
        10.0,
        "an HTTP request's line and headers must arrive within this of the connection opening or of the "
        "last answer (else 408 and the connection closes)",
        0.1,
        3600,
    )
    ws_ping_interval_s: float = setting(20.0, "WebSocket keepalive ping interval", 0.1, 3600)
    ws_ping_timeout_s: float = setting(20.0, "WebSocket keepalive: a pong must come within this", 0.1, 3600)
    drain_timeout_s: float = setting(15.0, "on SIGTERM: how long open sessions get to finish", 0, 86_400)
    session_lifetime_s: float = setting(3600.0, "a connection lasts at most this long", 0.1, 7 * 86_400)
    auth_token: str | None = setting(
        None,
        "the bootstrap key: when set, callers send a key (Authorization: Bearer, or each vendor's key header) on "
        "every route but /ping; it manages the tenants' keys (`streamvoice keys`, /v1/keys)",
    )
    warm_up: bool = setting(True, "synthesise at start-up before /ping says ready (and time full windows)")
    warm_voices: str = setting(
        DEFAULT_VOICE, "voices synthesised at start-up (comma-separated): the health check"
    )
    voice_stats_dir: str | None = setting(
        None,
        "where every stock voice's decoder statistics are cached (default: beside the model, else the user cache)",
    )
    pause_clause_ms: int = setting(Pauses.clause_ms, "silence after a clause break", 0, MAX_PAUSE_MS)
    pause_sentence_ms: int = setting(Pauses.sentence_ms, "silence after a sentence", 0, MAX_PAUSE_MS)
    pause_paragraph_ms: int = setting(Pauses.paragraph_ms, "silence after a paragraph", 0, MAX_PAUSE_MS)
    wyoming_uri: str | None = setting(
        None,
        "also serve Home Assistant's Wyoming protocol here, e.g. tcp://127.0.0.1:10200 (no authentication)",
    )
    wyoming_max_connections: int = setting(
        64, "Wyoming sockets open at once (more: `server_busy`)", 1, 100_000
    )
    wyoming_allow_unauthenticated: bool = setting(
        False, "with AUTH_TOKEN set, let a non-loopback WYOMING_URI start (the network in front is trusted)"
    )
    max_stream_chars: int = setting(20_000, "characters of one streamed utterance at most", 1, 10_000_000)
    stream_text_timeout_s: float = setting(
        30.0, "a streamed utterance with no text this long is spoken as it stands and ended", 0.1, 86_400
    )
    stream_quiet_cut_ms: int = setting(
        round(QUIET_CUT_S * 1000),
        "a streamed sentence whose text stops is spoken after this much quiet (0: off)",
        0,
        10_000,
    )
    lexicon_file: str | None = setting(None, 'JSON word -> "/phonemes/" or a respelling, for every request')
    store_url: str | None = setting(
        None,
        "where callers' pronunciation dictionaries are kept: redis://HOST:6379/0 (replicas share it) or "
        "sqlite:///path (default: SQLite in the user data folder)",
    )
    vendor_voices_file: str | None = setting(
        None, "JSON map of vendor voice id -> our voice (ElevenLabs, Cartesia, Deepgram)"
    )
    vendor_voices_strict: bool = setting(
        False, "a vendor voice id neither ours nor mapped is refused (else the default voice)"
    )
    emf: bool = setting(False, "CloudWatch embedded-metric lines on stdout (the SageMaker stack sets it)")
    endpoint_name: str = setting("local", "the EMF lines' endpoint dimension")

    @property
    def warm_voice_list(self) -> tuple[str, ...]:
        return tuple(v.strip() for v in self.warm_voices.split(",") if v.strip())

    @property
    def engine_options(self) -> EngineOptions:
        return EngineOptions(
            intra_op_threads=self.ort_threads,
            spin=self.ort_spin,
            stream_windows=self.stream_windows,
            runtime=cast(Runtime, self.engine),
        )

    @property
    def pauses(self) -> Pauses:
        return Pauses(self.pause_clause_ms, self.pause_sentence_ms, self.pause_paragraph_ms)

    def __post_init__(self) -> None:
        check(self)
        if self.store_url is not None:
            try:
                open_store(self.store_url)  # only reads the URL: nothing connects until first use
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
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
        values = from_environ(cls, os.environ)
        unknown = sorted(n for n in os.environ if n.startswith("STREAMVOICE_") and n not in KNOWN_NAMES)
        if unknown and unknown[0] in REMOVED_NAMES:
            raise ConfigError(f"{unknown[0]} is no longer a setting: {REMOVED_NAMES[unknown[0]]}")
        if unknown:
            raise ConfigError(
                f"{unknown[0]} is not a setting of this server or of the agent: check its spelling "
                "(docs/configuration.md lists them; streamvoice serve --help too)"
            )
        if "model_dir" not in values and os.environ.get("KOKORO_MODEL_DIR"):
            values["model_dir"] = os.environ["KOKORO_MODEL_DIR"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# What else reads ``STREAMVOICE_`` names: the agent, the deployment tools and the benchmarks. A name neither
# theirs nor the server's is a typo the start refuses (``tests/test_config.py`` finds every name the code reads).
OTHER_NAMES = frozenset(
    {
        "STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED", "STREAMVOICE_AGENT_HOST", "STREAMVOICE_AGENT_IMAGE_URI",
        "STREAMVOICE_AGENT_PORT", "STREAMVOICE_AGENT_TOKEN", "STREAMVOICE_ALLOWED_HOSTS",
        "STREAMVOICE_CORS_ORIGINS", "STREAMVOICE_IMAGE_URI", "STREAMVOICE_INSTANCE_TYPE", "STREAMVOICE_LLM",
        "STREAMVOICE_LLM_THREADS", "STREAMVOICE_MAX_TURNS", "STREAMVOICE_MODEL_ID", "STREAMVOICE_RESULTS",
        "STREAMVOICE_SPEECH_ENDPOINT", "STREAMVOICE_SPEECH_TOKEN", "STREAMVOICE_SPEECH_URL",
    }
)  # fmt: skip
KNOWN_NAMES = OTHER_NAMES | env_names(ServerConfig)
# Settings an earlier release read, and what to do instead: refused by name, never silently ignored.
REMOVED_NAMES = {
    "STREAMVOICE_SCHEDULER": "the server always runs the model job with the earliest playback deadline first; "
    "unset it (the arrival-order baseline is bench.capacity's own)",
}


def _port(uri: ParseResult) -> int | None:
    try:
        return uri.port
    except ValueError:  # a port that is not a number, or out of range
        return None
