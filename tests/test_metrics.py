"""``server.metrics``: Prometheus text without a client library, and CloudWatch embedded-metric lines."""

from __future__ import annotations

import json

import httpx
import pytest

from streamvoice.server.core.metrics import Histogram, Metrics
from tests.helpers import RunningServer


def test_a_histogram_counts_cumulatively_per_bucket() -> None:
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.5, 5.0):
        histogram.observe(value)
    lines = histogram.render("x_seconds")
    assert 'x_seconds_bucket{le="0.1"} 1' in lines and 'x_seconds_bucket{le="1.0"} 2' in lines
    assert 'x_seconds_bucket{le="+Inf"} 3' in lines and "x_seconds_count 3" in lines


def test_errors_are_counted_by_code_and_server_side_ones_reach_cloudwatch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    metrics = Metrics(emf_endpoint="speech")
    metrics.count_error("unknown_voice")  # the caller's mistake: not an alarm
    metrics.count_error("synthesis_failed")
    text = metrics.render()
    assert 'streamvoice_errors_total{code="unknown_voice"} 1' in text
    assert 'streamvoice_errors_total{code="synthesis_failed"} 1' in text
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["Errors"] == 1


def test_metrics_are_prometheus_text(scripted_server: RunningServer) -> None:
    httpx.post(scripted_server.url + "/invocations", json={"text": "Counting."}, timeout=60)
    text = httpx.get(scripted_server.url + "/metrics").text
    assert "streamvoice_model_call_seconds_count" in text and "streamvoice_active_sessions" in text
    # the gauges an autoscaler reads
    assert "streamvoice_busy_sessions 0" in text and "streamvoice_draining 0" in text
    assert "streamvoice_capacity_sessions 64" in text
    # how much slower than its measure the machine decodes now (1.0: as measured; bench.noisy_neighbour)
    (pace,) = [
        float(line.split()[1]) for line in text.splitlines() if line.startswith("streamvoice_decode_pace ")
    ]
    assert 0.25 <= pace <= 8.0


def test_first_audio_is_measured_on_the_http_routes_too(scripted_server: RunningServer) -> None:
    """Only the WebSocket surfaces recorded time to first audio; the HTTP answers do as well now."""
    from tests.helpers import metric

    name = "streamvoice_time_to_first_audio_seconds_count"
    before = metric(scripted_server, name)
    httpx.post(scripted_server.url + "/invocations", json={"text": "Counted."}, timeout=60)
    body = {"input": "Counted too.", "response_format": "pcm"}
    httpx.post(scripted_server.url + "/v1/audio/speech", json=body, timeout=60)
    assert metric(scripted_server, name) == before + 2


def test_each_keys_use_is_labelled_by_its_name_and_the_labels_are_bounded() -> None:
    """Issue #67: a series per key, but never more than ``MAX_LABELLED_KEYS`` of them: the rest count as one."""
    from streamvoice.server.core.metrics import MAX_LABELLED_KEYS

    metrics = Metrics()
    for i in range(MAX_LABELLED_KEYS + 5):
        use = metrics.key(f"key-{i:03d}")
        use.characters += 10
        use.refusals["quota_exceeded"] += 1
    text = metrics.render()
    labelled = [line for line in text.splitlines() if line.startswith("streamvoice_key_characters_total{")]
    assert len(labelled) == MAX_LABELLED_KEYS + 1
    assert 'streamvoice_key_characters_total{key="other"} 50' in text
    assert 'streamvoice_key_refusals_total{key="key-000",reason="quota_exceeded"} 1' in text
