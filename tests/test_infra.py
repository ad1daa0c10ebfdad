"""Cloud deployment, verified offline: CDK synth with assertions, the CLIs, and the SageMaker transports."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Match, Template
from botocore.response import StreamingBody
from botocore.stub import Stubber

from streamvoice.infra.agent_stack import AgentRuntimeStack, AgentSettings
from streamvoice.infra.cli import agent_main, speech_main
from streamvoice.infra.stacks import SpeechEndpointStack, SpeechSettings

ROOT = Path(__file__).resolve().parents[1]
ENV = cdk.Environment(account="123456789012", region="us-east-1")
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/streamvoice:test"
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture(scope="module")
def speech_template() -> Template:
    app = cdk.App()
    return Template.from_stack(SpeechEndpointStack(app, "Speech", SpeechSettings(image_uri=IMAGE), env=ENV))


@pytest.fixture(scope="module")
def agent_template() -> Template:
    app = cdk.App()
    return Template.from_stack(
        AgentRuntimeStack(app, "Agent", AgentSettings(bedrock_model_id=MODEL, image_uri=IMAGE), env=ENV)
    )


def flat(value: Any) -> str:
    """An ARN as CloudFormation writes it (Fn::Join with the partition), as a plain string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flat(p) for p in parts)
    if isinstance(value, dict) and value.get("Ref") == "AWS::Partition":
        return "aws"
    if isinstance(value, list):
        return " ".join(flat(v) for v in value)
    return json.dumps(value)


def all_statements(template: Template) -> list[dict[str, Any]]:
    out = []
    for res in template.find_resources("AWS::IAM::Policy").values():
        out += res["Properties"]["PolicyDocument"]["Statement"]
    return out


def test_speech_endpoint_instance_model_and_autoscaling(speech_template: Template) -> None:
    speech_template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like({"InstanceType": "ml.g5.xlarge", "VariantName": "AllTraffic"})
            ]
        },
    )
    speech_template.has_resource_properties(
        "AWS::SageMaker::Endpoint", {"EndpointName": "streamvoice-kokoro-82m"}
    )
    speech_template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    "Image": IMAGE,
                    "ModelDataSource": Match.object_like(
                        {
                            "S3DataSource": Match.object_like(
                                {"S3DataType": "S3Prefix", "CompressionType": "None"}
                            )
                        }
                    ),
                }
            )
        },
    )
    speech_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "endpoint/streamvoice-kokoro-82m/variant/AllTraffic",
            "MinCapacity": 1,
            "MaxCapacity": 4,
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        },
    )
    speech_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                    }
                }
            )
        },
    )
    alarms = speech_template.find_resources("AWS::CloudWatch::Alarm")
    names = {a["Properties"]["MetricName"] for a in alarms.values()}
    assert {"TimeToFirstAudio", "Errors", "Invocation5XXErrors"} <= names
    speech_template.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Retain"})


def test_nothing_is_full_access(speech_template: Template, agent_template: Template) -> None:
    for template in (speech_template, agent_template):
        text = json.dumps(template.to_json())
        assert "FullAccess" not in text and "AdministratorAccess" not in text
        for role in template.find_resources("AWS::IAM::Role").values():
            assert not role["Properties"].get("ManagedPolicyArns")
        for st in all_statements(template):
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            assert "*" not in actions and not any(a.endswith(":*") for a in actions), st


def test_agent_may_invoke_only_its_endpoint_and_model(agent_template: Template) -> None:
    statements = all_statements(agent_template)
    sm = next(s for s in statements if "sagemaker:InvokeEndpointWithBidirectionalStream" in s["Action"])
    assert set(sm["Action"]) == {
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    }
    assert flat(sm["Resource"]) == "arn:aws:sagemaker:us-east-1:123456789012:endpoint/streamvoice-kokoro-82m"
    bedrock = next(s for s in statements if "bedrock:InvokeModel" in s["Action"])
    resources = bedrock["Resource"] if isinstance(bedrock["Resource"], list) else [bedrock["Resource"]]
    assert resources and all("anthropic.claude-3-5-haiku-20241022-v1:0" in flat(r) for r in resources)
    assert all("*" not in flat(r).split("bedrock:")[1].split(":")[-1] for r in resources)
    agent_template.has_resource_properties(
        "AWS::BedrockAgentCore::Runtime",
        {
            "EnvironmentVariables": Match.object_like(
                {
                    "STREAMVOICE_SPEECH_URL": "sagemaker://streamvoice-kokoro-82m?region=us-east-1",
                    "BEDROCK_MODEL_ID": MODEL,
                }
            ),
            "NetworkConfiguration": {"NetworkMode": "PUBLIC"},
        },
    )
    agent_template.resource_count_is("AWS::BedrockAgentCore::RuntimeEndpoint", 1)


def test_images_carry_the_bidirectional_label_and_torch_only_on_the_gpu() -> None:
    for name in ("Dockerfile", "Dockerfile.gpu"):
        text = (ROOT / "docker" / name).read_text()
        assert "LABEL com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true" in text
        assert "EXPOSE 8080" in text and "USER app" in text
    assert "find_spec('torch') is None" in (ROOT / "docker" / "Dockerfile").read_text()
    gpu = (ROOT / "docker" / "Dockerfile.gpu").read_text()
    assert "-c requirements-torch.lock" in gpu and ".[languages,torch]" in gpu
    assert "find_spec('torch') is not None" in gpu


def test_gpu_instances_build_the_gpu_image() -> None:
    assert SpeechSettings(instance_type="ml.g5.xlarge").dockerfile == "docker/Dockerfile.gpu"
    assert SpeechSettings(instance_type="ml.c7i.xlarge").dockerfile == "docker/Dockerfile"


def test_cost_prints_the_estimate_and_the_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert speech_main(["cost", "kokoro-82m"]) == 0
    out = capsys.readouterr().out
    assert "$1.4080 per instance-hour" in out and "$1,028" in out and "$0.016 per GB" in out
    assert "bills from the moment it is InService until it is deleted" in out


def test_synth_writes_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = agent_main(["synth", "--bedrock-model-id", MODEL, "--image-uri", IMAGE, "--out", str(tmp_path)])
    assert rc == 0
    template = json.loads((tmp_path / "StreamvoiceAgent.template.json").read_text())
    assert any(r["Type"] == "AWS::BedrockAgentCore::Runtime" for r in template["Resources"].values())
    rc = speech_main(["synth", "kokoro-82m", "--image-uri", IMAGE, "--out", str(tmp_path)])
    assert rc == 0 and (tmp_path / "StreamvoiceSpeech-kokoro-82m.template.json").exists()


class FakeSession:
    """A boto3 session whose clients are real botocore clients with stubbed responses."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.stubs: dict[str, Stubber] = {}

    def client(self, name: str) -> Any:
        if name not in self.clients:
            c = boto3.client(name, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
            self.clients[name] = c
            self.stubs[name] = Stubber(c)
            self.stubs[name].activate()
        return self.clients[name]

    def stub(self, name: str) -> Stubber:
        self.client(name)
        return self.stubs[name]


def test_status_probes_synthesis_not_just_state(capsys: pytest.CaptureFixture[str]) -> None:
    ok = FakeSession()
    ok.stub("sagemaker").add_response(
        "describe_endpoint", _endpoint("InService"), {"EndpointName": "streamvoice-kokoro-82m"}
    )
    audio = b"\x01\x00" * 24_000
    ok.stub("sagemaker-runtime").add_response(
        "invoke_endpoint", {"Body": StreamingBody(io.BytesIO(audio), len(audio)), "ContentType": "audio/L16"}
    )
    assert speech_main(["status", "kokoro-82m"], boto=ok) == 0
    assert "probe ok" in capsys.readouterr().out

    broken = FakeSession()
    broken.stub("sagemaker").add_response(
        "describe_endpoint", _endpoint("InService"), {"EndpointName": "streamvoice-kokoro-82m"}
    )
    broken.stub("sagemaker-runtime").add_client_error(
        "invoke_endpoint", "ModelError", "KeyError: 'text'", 424
    )
    assert speech_main(["status", "kokoro-82m"], boto=broken) == 2
    assert "InService but not producing audio" in capsys.readouterr().out


def _endpoint(status: str) -> dict[str, Any]:
    from datetime import datetime

    return {
        "EndpointName": "streamvoice-kokoro-82m",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/x",
        "EndpointConfigName": "c",
        "EndpointStatus": status,
        "CreationTime": datetime(2026, 1, 1),
        "LastModifiedTime": datetime(2026, 1, 1),
    }


def test_destroy_takes_the_agent_down_first_and_lists_what_stays(capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import datetime

    session = FakeSession()
    cfn = session.stub("cloudformation")
    stack = {
        "StackName": "StreamvoiceAgent",
        "StackStatus": "CREATE_COMPLETE",
        "CreationTime": datetime(2026, 1, 1),
    }
    cfn.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "StreamvoiceAgent"})
    speech = {
        "StackName": "StreamvoiceSpeech-kokoro-82m",
        "StackStatus": "CREATE_COMPLETE",
        "CreationTime": datetime(2026, 1, 1),
        "Outputs": [{"OutputKey": "ModelCacheBucket", "OutputValue": "streamvoice-models-abc"}],
    }
    cfn.add_response("describe_stacks", {"Stacks": [speech]}, {"StackName": "StreamvoiceSpeech-kokoro-82m"})
    session.stub("sts").add_response(
        "get_caller_identity", {"Account": "123456789012", "Arn": "arn:aws:iam::1:user/x", "UserId": "x"}
    )
    calls: list[list[str]] = []

    def runner(args: Any, env: dict[str, str]) -> int:
        calls.append(list(args))
        return 0

    assert speech_main(["destroy", "kokoro-82m", "--yes"], runner=runner, boto=session) == 0
    assert [c[:2] for c in calls] == [
        ["destroy", "StreamvoiceAgent"],
        ["destroy", "StreamvoiceSpeech-kokoro-82m"],
    ]
    out = capsys.readouterr().out
    assert "streamvoice-models-abc" in out and "cdk-hnb659fds-container-assets-123456789012-us-east-1" in out
    assert "--purge" in out


def test_image_assets_build_from_this_repo(tmp_path: Path) -> None:
    """Without --image-uri the stacks build images from docker/: GPU image for GPU instances, ARM64 for AgentCore."""
    app = cdk.App(outdir=str(tmp_path))
    SpeechEndpointStack(app, "SpeechGpu", SpeechSettings(instance_type="ml.g5.xlarge"), env=ENV)
    SpeechEndpointStack(
        app, "SpeechCpu", SpeechSettings(instance_type="ml.c7i.2xlarge", model_id="kokoro-cpu"), env=ENV
    )
    AgentRuntimeStack(app, "AgentImg", AgentSettings(bedrock_model_id=MODEL), env=ENV)
    app.synth()

    def images(stack: str) -> list[dict[str, Any]]:
        data = json.loads((tmp_path / f"{stack}.assets.json").read_text())
        return [img["source"] for img in data["dockerImages"].values()]

    assert [(i["dockerFile"], i.get("platform")) for i in images("SpeechGpu")] == [
        ("docker/Dockerfile.gpu", "linux/amd64")
    ]
    assert [i["dockerFile"] for i in images("SpeechCpu")] == ["docker/Dockerfile"]
    assert [(i["dockerFile"], i.get("platform")) for i in images("AgentImg")] == [
        ("docker/Dockerfile.agent", "linux/arm64")
    ]
    template = json.loads((tmp_path / "AgentImg.template.json").read_text())
    pulls = [
        st
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if "ecr:BatchGetImage" in st["Action"]
    ]
    assert pulls, "the runtime role must be able to pull its image"


def test_purge_empties_and_deletes_the_bucket_and_our_images(tmp_path: Path) -> None:
    from streamvoice.infra.cli import image_tags, purge_bucket, purge_images

    session = FakeSession()
    s3 = session.stub("s3")
    s3.add_response(
        "list_object_versions",
        {
            "Versions": [{"Key": "kokoro-82m/voices-v1.0.bin", "VersionId": "v1"}],
            "DeleteMarkers": [],
            "IsTruncated": False,
        },
        {"Bucket": "models"},
    )
    s3.add_response(
        "delete_objects",
        {"Deleted": [{"Key": "kokoro-82m/voices-v1.0.bin"}]},
        {
            "Bucket": "models",
            "Delete": {"Objects": [{"Key": "kokoro-82m/voices-v1.0.bin", "VersionId": "v1"}], "Quiet": True},
        },
    )
    s3.add_response("delete_bucket", {}, {"Bucket": "models"})
    purge_bucket(session.client("s3"), "models")
    s3.assert_no_pending_responses()

    (tmp_path / "Stack.assets.json").write_text(
        json.dumps({"dockerImages": {"h": {"destinations": {"d": {"imageTag": "abc123"}}}}})
    )
    assert image_tags(tmp_path) == ["abc123"]
    ecr = session.stub("ecr")
    ecr.add_response(
        "batch_delete_image",
        {"imageIds": [{"imageTag": "abc123"}], "failures": []},
        {"repositoryName": "repo", "imageIds": [{"imageTag": "abc123"}]},
    )
    assert purge_images(session.client("ecr"), "repo", ["abc123"]) == 1


# --- hardening: least privilege and reproducible builds ---------------------------------------------------


def test_speech_role_reads_only_its_prefix_and_its_own_logs(speech_template: Template) -> None:
    statements = all_statements(speech_template)
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        if any(a.startswith("s3:List") for a in actions):
            assert actions == ["s3:ListBucket"] and "s3:prefix" in flat(st.get("Condition", {}))
        if any(a.startswith("logs:") for a in actions):
            assert "Endpoints/streamvoice-kokoro*" not in flat(st["Resource"])
            assert "*" not in flat(st["Resource"]).replace("log-stream:*", "")
    roles = speech_template.find_resources("AWS::IAM::Role")
    trust = [r["Properties"]["AssumeRolePolicyDocument"] for r in roles.values()]
    sagemaker_trust = [t for t in trust if "sagemaker.amazonaws.com" in flat(t)]
    assert sagemaker_trust and all("aws:SourceAccount" in flat(t) for t in sagemaker_trust)
    speech_template.has_resource_properties("AWS::SageMaker::Model", {"EnableNetworkIsolation": True})


def test_prebuilt_image_can_be_pulled_from_its_repository_only(speech_template: Template) -> None:
    pulls = [st for st in all_statements(speech_template) if "ecr:BatchGetImage" in flat(st["Action"])]
    assert pulls
    assert flat(pulls[0]["Resource"]) == "arn:aws:ecr:us-east-1:123456789012:repository/streamvoice"


def test_agent_logs_scoped_to_its_runtime(agent_template: Template) -> None:
    for st in all_statements(agent_template):
        if "logs:" in flat(st["Action"]):
            assert "runtimes/*" not in flat(st["Resource"])


def test_images_and_cdk_cli_are_pinned() -> None:
    from streamvoice.infra.cli import CDK_CLI_VERSION

    for name in ("Dockerfile", "Dockerfile.gpu", "Dockerfile.agent"):
        text = (ROOT / "docker" / name).read_text()
        froms = [line for line in text.splitlines() if line.startswith("FROM ")]
        assert froms and all("@sha256:" in line for line in froms), name
        assert "-c requirements.lock" in text and "COPY pyproject.toml README.md requirements.lock" in text
    assert CDK_CLI_VERSION.count(".") == 2 and all(p.isdigit() for p in CDK_CLI_VERSION.split("."))


def test_no_environment_the_makefile_builds_is_copied_into_an_image() -> None:
    from streamvoice.infra.images import IMAGE_EXCLUDE

    venvs = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()]
    venvs = [v for v in venvs if v.startswith(".venv")]
    assert {".venv", ".venv-pipecat", ".venv-torch"} <= set(venvs)
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    for venv in venvs:
        assert venv in IMAGE_EXCLUDE and venv in dockerignore, venv
