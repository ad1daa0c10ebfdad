"""Prometheus text-format metrics, without a client library: a handful of counters and histograms."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable

# Keys labelled by name in ``/metrics``; past this many, the rest are counted as "other" (a series per key
# must not grow without bound).
MAX_LABELLED_KEYS = 200
_BUCKETS_S = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = _BUCKETS_S) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
        self.total += value
        self.n += 1

    def render(self, name: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        for edge, count in zip(self.buckets, self.counts, strict=True):
            lines.append(f'{name}_bucket{{le="{edge}"}} {count}')
        lines += [
            f'{name}_bucket{{le="+Inf"}} {self.n}',
            f"{name}_sum {self.total:.6f}",
            f"{name}_count {self.n}",
        ]
        return lines


def emf_line(
    metric: str, value: float, unit: str, dimensions: dict[str, str], namespace: str = "streamvoice"
) -> str:
    """A CloudWatch Embedded Metric Format record: logged to stdout, it becomes a metric (SageMaker ships logs)."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": namespace,
                        "Dimensions": [list(dimensions)],
                        "Metrics": [{"Name": metric, "Unit": unit}],
                    }
                ],
            },
            **dimensions,
            metric: value,
        }
    )


class KeyUse:
    """What one key has used since the process started: ``/metrics``' per-key counters."""

    def __init__(self) -> None:
        self.characters = 0
        self.audio_seconds = 0.0
        self.requests = 0
        self.refusals: Counter[str] = Counter()


def _key_lines(uses: dict[str, KeyUse]) -> list[str]:
    rows = sorted(uses.items())
    lines = ["# TYPE streamvoice_key_characters_total counter"]
    lines += [f'streamvoice_key_characters_total{{key="{k}"}} {u.characters}' for k, u in rows]
    lines += ["# TYPE streamvoice_key_audio_seconds_total counter"]
    lines += [f'streamvoice_key_audio_seconds_total{{key="{k}"}} {u.audio_seconds:.3f}' for k, u in rows]
    lines += ["# TYPE streamvoice_key_requests_total counter"]
    lines += [f'streamvoice_key_requests_total{{key="{k}"}} {u.requests}' for k, u in rows]
    lines += ["# TYPE streamvoice_key_refusals_total counter"]
    for k, use in rows:
        lines += [
            f'streamvoice_key_refusals_total{{key="{k}",reason="{r}"}} {n}'
            for r, n in sorted(use.refusals.items())
        ]
    return lines


class Metrics:
    def __init__(self, emf_endpoint: str | None = None) -> None:
        """``emf_endpoint``: also print CloudWatch embedded-metric lines, with this EndpointName dimension."""
        self.emf_dimensions = {"EndpointName": emf_endpoint} if emf_endpoint else None
        self._lock = threading.Lock()
        self.first_audio = Histogram()
        self.model_call = Histogram()
        self.rtf = Histogram((0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0))
        self.errors: Counter[str] = Counter()
        self.messages = 0
        self.shed = 0  # listeners stopped to keep the earlier ones fed when the machine slowed down
        self.audio_seconds = 0.0
        self.active_sessions: Callable[[], int] = lambda: 0  # sockets holding a room (``service.rooms``)
        self.active_streams: Callable[[], int] = lambda: 0  # HTTP answers being streamed
        self.queue_depth: Callable[[], int] = lambda: 0
        # For autoscaling: sessions with a message queued or in flight (an idle open session costs nothing),
        # the session capacity, and whether this replica is draining (it takes no new work).
        self.busy_sessions: Callable[[], int] = lambda: 0
        self.capacity_sessions = 0
        self.draining: Callable[[], bool] = lambda: False
        # Admission (real-time listeners): what the server can keep fed, holds, has waiting, and has left.
        self.listeners: Callable[[], dict[str, int]] = lambda: {}
        # Decoder batching: batched calls made and the windows they carried (rows / calls = mean batch).
        self.decoder_batches: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self.pace: Callable[[], float] = lambda: 1.0  # ``Load.pace``: 2.0 decodes at half the measured speed
        self._keys: dict[str, KeyUse] = {}  # by key name (key names are checked: safe in a label)

    def key(self, name: str) -> KeyUse:
        """The counters of the key with this name (the first ``MAX_LABELLED_KEYS`` by name; "other" after);
        the caller holds no lock: counts are made on the event loop, read under the lock at a scrape."""
        if name not in self._keys and len(self._keys) >= MAX_LABELLED_KEYS:
            name = "other"
        with self._lock:
            return self._keys.setdefault(name, KeyUse())

    def observe_first_audio(self, seconds: float) -> None:
        with self._lock:
            self.first_audio.observe(seconds)
        if self.emf_dimensions is not None:
            print(
                emf_line("TimeToFirstAudio", round(seconds * 1000, 1), "Milliseconds", self.emf_dimensions),
                flush=True,
            )

    def observe_model_call(self, seconds: float, audio_s: float) -> None:
        with self._lock:
            self.model_call.observe(seconds)
            if audio_s > 0:
                self.rtf.observe(seconds / audio_s)
            self.audio_seconds += audio_s

    def count_error(self, code: str) -> None:
        with self._lock:
            self.errors[code] += 1
        server_side = code in ("synthesis_failed", "internal_error", "slow_consumer", "too_many_pending")
        if self.emf_dimensions is not None and server_side:
            print(emf_line("Errors", 1, "Count", self.emf_dimensions), flush=True)

    def count_message(self) -> None:
        with self._lock:
            self.messages += 1

    def render(self) -> str:
        with self._lock:
            lines: list[str] = []
            lines += self.first_audio.render("streamvoice_time_to_first_audio_seconds")
            lines += self.model_call.render("streamvoice_model_call_seconds")
            lines += self.rtf.render("streamvoice_real_time_factor")
            lines += [
                "# TYPE streamvoice_messages_total counter",
                f"streamvoice_messages_total {self.messages}",
            ]
            lines += [
                "# TYPE streamvoice_shed_listeners_total counter",
                f"streamvoice_shed_listeners_total {self.shed}",
                "# TYPE streamvoice_audio_seconds_total counter",
                f"streamvoice_audio_seconds_total {self.audio_seconds:.3f}",
            ]
            lines += ["# TYPE streamvoice_errors_total counter"]
            lines += [f'streamvoice_errors_total{{code="{c}"}} {n}' for c, n in sorted(self.errors.items())]
            lines += [
                "# TYPE streamvoice_active_sessions gauge",
                f"streamvoice_active_sessions {self.active_sessions()}",
                "# TYPE streamvoice_active_streams gauge",
                f"streamvoice_active_streams {self.active_streams()}",
            ]
            lines += ["# TYPE streamvoice_queue_depth gauge", f"streamvoice_queue_depth {self.queue_depth()}"]
            lines += [
                "# TYPE streamvoice_busy_sessions gauge",
                f"streamvoice_busy_sessions {self.busy_sessions()}",
                "# TYPE streamvoice_capacity_sessions gauge",
                f"streamvoice_capacity_sessions {self.capacity_sessions}",
                "# TYPE streamvoice_draining gauge",
                f"streamvoice_draining {int(self.draining())}",
            ]
            for name, value in self.listeners().items():
                lines += [
                    f"# TYPE streamvoice_{name}_listeners gauge",
                    f"streamvoice_{name}_listeners {value}",
                ]
            lines += ["# TYPE streamvoice_decode_pace gauge", f"streamvoice_decode_pace {self.pace():.3f}"]
            calls, rows = self.decoder_batches()
            lines += [
                "# TYPE streamvoice_decoder_batched_calls_total counter",
                f"streamvoice_decoder_batched_calls_total {calls}",
                "# TYPE streamvoice_decoder_batched_windows_total counter",
                f"streamvoice_decoder_batched_windows_total {rows}",
            ]
            lines += _key_lines(self._keys) if self._keys else []
        return "\n".join(lines) + "\n"
