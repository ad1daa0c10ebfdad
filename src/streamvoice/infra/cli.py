"""``speech-infra`` and ``agent-infra``: deploy, diff, synth, status, cost, destroy (and the agent demo).

``synth`` and ``cost`` run offline; ``deploy``, ``diff`` and ``destroy`` drive the AWS CDK CLI
(``npx aws-cdk@2``) against the app in ``streamvoice.infra.app``; ``status`` asks SageMaker for the
endpoint state *and* synthesises a probe sentence, because an endpoint can be InService while every
request fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamvoice.infra.cost import estimate
from streamvoice.infra.stacks import AGENT_STACK, SPEECH_STACK

Runner = Callable[[Sequence[str], dict[str, str]], int]
DEFAULT_REGION = "us-east-1"
# The CDK CLI that deploys: an exact release (checked with `npm view aws-cdk version`), so a deploy never
# runs whatever was published this morning. Bump deliberately.
CDK_CLI_VERSION = "2.1148.1"


def run_cdk(args: Sequence[str], env: dict[str, str]) -> int:
    """Run the CDK CLI with our app; output streams straight to the terminal."""
    cmd = ["npx", "--yes", f"aws-cdk@{CDK_CLI_VERSION}", *args]
    print("$ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    return subprocess.call(cmd, env={**os.environ, **env})


def _app_command(kind: str) -> str:
    return f"{shlex.quote(sys.executable)} -m streamvoice.infra.app {kind}"


def _speech_env(args: argparse.Namespace) -> dict[str, str]:
    env = {
        "STREAMVOICE_MODEL_ID": args.model_id,
        "STREAMVOICE_INSTANCE_TYPE": args.instance_type,
        "CDK_DEFAULT_REGION": args.region,
        "AWS_REGION": args.region,
    }
    if args.image_uri:
        env["STREAMVOICE_IMAGE_URI"] = args.image_uri
    if getattr(args, "model_dir", None):
        env["KOKORO_MODEL_DIR"] = str(args.model_dir)
    return env


def speech_stack_name(model_id: str) -> str:
    return f"{SPEECH_STACK}-{model_id}"


# --- speech-infra ----------------------------------------------------------------------------------


def speech_main(argv: list[str] | None = None, runner: Runner = run_cdk, boto: Any = None) -> int:
    p = argparse.ArgumentParser(prog="speech-infra", description="Kokoro speech endpoint on SageMaker AI")
    p.add_argument("command", choices=["deploy", "diff", "synth", "status", "cost", "destroy"])
    p.add_argument("model_id", nargs="?", default="kokoro-82m")
    p.add_argument("--instance-type", default="ml.g5.xlarge")
    p.add_argument("--region", default=os.environ.get("AWS_REGION", DEFAULT_REGION))
    p.add_argument("--image-uri", help="use a prebuilt image instead of building docker/Dockerfile[.gpu]")
    p.add_argument("--model-dir", help="model files to upload (default: $KOKORO_MODEL_DIR or the user cache)")
    p.add_argument("--out", default="cdk.out", help="synth output folder")
    p.add_argument(
        "--purge", action="store_true", help="destroy: also empty and delete the model bucket and image"
    )
    p.add_argument("--yes", action="store_true", help="deploy/destroy without the confirmation prompt")
    args = p.parse_args(argv)
    stack = speech_stack_name(args.model_id)

    if args.command == "cost":
        print(estimate(args.instance_type, args.region).render())
        return 0
    if args.command == "synth":
        return synth("speech", args, stack)
    if args.command == "status":
        return speech_status(args.model_id, args.region, boto)
    if args.command in ("deploy", "diff") and not args.model_dir:
        from streamvoice.model_files import ModelNotFoundError, resolve_model_files

        try:
            args.model_dir = str(resolve_model_files().model.parent)
        except ModelNotFoundError as exc:
            print(f"error: the endpoint needs the model files to upload. {exc}", file=sys.stderr)
            return 2
    if args.command == "deploy":
        print(estimate(args.instance_type, args.region).render(), file=sys.stderr)
        extra = [] if not args.yes else ["--require-approval", "never"]
        return runner(["deploy", stack, "--app", _app_command("speech"), *extra], _speech_env(args))
    if args.command == "diff":
        return runner(["diff", stack, "--app", _app_command("speech")], _speech_env(args))
    return speech_destroy(args, stack, runner, boto)


def synth(kind: str, args: argparse.Namespace, stack: str) -> int:
    from streamvoice.infra.app import build_from_env

    env = _speech_env(args) if kind == "speech" else _agent_env(args)
    os.environ.update(env)
    app = build_from_env(kind, outdir=args.out)
    assembly = app.synth()
    for s in assembly.stacks:
        print(f"{s.stack_name}: {Path(args.out) / s.template_file}")
    return 0


def _session(region: str, boto: Any) -> Any:
    if boto is not None:
        return boto
    import boto3

    return boto3.Session(region_name=region)


def speech_status(model_id: str, region: str, boto: Any = None) -> int:
    """Endpoint state plus a real synthesis probe; exit 0 only when both are healthy."""
    session = _session(region, boto)
    name = f"streamvoice-{model_id}"
    sm = session.client("sagemaker")
    try:
        desc = sm.describe_endpoint(EndpointName=name)
    except Exception as exc:  # botocore ClientError when the endpoint does not exist
        print(
            f"{name}: not found ({exc.__class__.__name__}); deploy it with `speech-infra deploy {model_id}`"
        )
        return 1
    state = desc["EndpointStatus"]
    print(f"{name}: {state}")
    if state != "InService":
        if desc.get("FailureReason"):
            print(f"  failure reason: {desc['FailureReason']}")
        return 1
    runtime = session.client("sagemaker-runtime")
    try:
        resp = runtime.invoke_endpoint(
            EndpointName=name,
            ContentType="application/json",
            Accept="audio/L16",
            Body=json.dumps({"text": "Status check.", "format": "pcm"}),
        )
        audio = resp["Body"].read()
    except Exception as exc:
        print(f"  synthesis probe FAILED ({exc.__class__.__name__}): InService but not producing audio")
        return 2
    seconds = len(audio) / 48_000
    if seconds < 0.3:
        print(f"  synthesis probe FAILED: only {len(audio)} bytes of audio came back")
        return 2
    print(f"  synthesis probe ok: {seconds:.2f} s of audio")
    return 0


def _stack_exists(cfn: Any, name: str) -> bool:
    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except Exception:
        return False
    return any(s.get("StackStatus") != "DELETE_COMPLETE" for s in stacks)


def _stack_outputs(cfn: Any, name: str) -> dict[str, str]:
    try:
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    except Exception:
        return {}
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def speech_destroy(args: argparse.Namespace, stack: str, runner: Runner, boto: Any) -> int:
    """Agent first (it depends on the endpoint), then the endpoint; then say what stays and costs money."""
    session = _session(args.region, boto)
    cfn = session.client("cloudformation")
    confirm = ["--force"] if args.yes else []
    if _stack_exists(cfn, AGENT_STACK):
        print(f"{AGENT_STACK} uses this endpoint: destroying it first", file=sys.stderr)
        rc = runner(
            ["destroy", AGENT_STACK, "--app", _app_command("agent"), *confirm], {"AWS_REGION": args.region}
        )
        if rc != 0:
            return rc
    outputs = _stack_outputs(cfn, stack)
    rc = runner(["destroy", stack, "--app", _app_command("speech"), *confirm], _speech_env(args))
    if rc != 0:
        return rc
    bucket = outputs.get("ModelCacheBucket")
    account = session.client("sts").get_caller_identity()["Account"]
    repo = f"cdk-hnb659fds-container-assets-{account}-{args.region}"
    print(
        "\nStill there after destroy (kept on purpose, they can be shared; small storage charges continue):"
    )
    print(f"  model-cache bucket: {bucket or '(unknown: the stack had no outputs)'}")
    print(f"  image repository:   {repo} (images pushed by this project)")
    if not args.purge:
        print("Run again with --purge to empty and delete the bucket and this project's images.")
        return 0
    if bucket:
        purge_bucket(session.client("s3"), bucket)
        print(f"  deleted bucket {bucket}")
    deleted = purge_images(session.client("ecr"), repo, image_tags(Path(args.out)))
    print(f"  deleted {deleted} image(s) from {repo}")
    return 0


def purge_bucket(s3: Any, bucket: str) -> None:
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket):
        objects = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if objects:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
    s3.delete_bucket(Bucket=bucket)


def image_tags(cdk_out: Path) -> list[str]:
    """The image tags CDK pushed for our stacks, read from the synthesised asset manifests."""
    tags: list[str] = []
    for manifest in cdk_out.glob("*.assets.json"):
        data = json.loads(manifest.read_text())
        for image in data.get("dockerImages", {}).values():
            for dest in image.get("destinations", {}).values():
                tags.append(dest["imageTag"])
    return tags


def purge_images(ecr: Any, repo: str, tags: list[str]) -> int:
    if not tags:
        return 0
    resp = ecr.batch_delete_image(repositoryName=repo, imageIds=[{"imageTag": t} for t in tags])
    return len(resp.get("imageIds", []))


# --- agent-infra -----------------------------------------------------------------------------------


def _agent_env(args: argparse.Namespace) -> dict[str, str]:
    env = {"CDK_DEFAULT_REGION": args.region, "AWS_REGION": args.region}
    if getattr(args, "bedrock_model_id", None):
        env["BEDROCK_MODEL_ID"] = args.bedrock_model_id
    if getattr(args, "speech_endpoint", None):
        env["STREAMVOICE_SPEECH_ENDPOINT"] = args.speech_endpoint
    if getattr(args, "image_uri", None):
        env["STREAMVOICE_AGENT_IMAGE_URI"] = args.image_uri
    return env


def agent_main(argv: list[str] | None = None, runner: Runner = run_cdk, boto: Any = None) -> int:
    p = argparse.ArgumentParser(
        prog="agent-infra", description="streamvoice agent on Bedrock AgentCore Runtime"
    )
    p.add_argument("command", choices=["deploy", "diff", "synth", "status", "destroy", "demo"])
    p.add_argument("--bedrock-model-id", default=os.environ.get("BEDROCK_MODEL_ID"))
    p.add_argument("--speech-endpoint", default="streamvoice-kokoro-82m")
    p.add_argument("--region", default=os.environ.get("AWS_REGION", DEFAULT_REGION))
    p.add_argument("--image-uri")
    p.add_argument("--out", default="cdk.out")
    p.add_argument("--yes", action="store_true")
    p.add_argument(
        "--endpoint-url", help="demo: the agent's HTTP URL (a bearer token from STREAMVOICE_AGENT_TOKEN)"
    )
    p.add_argument("--prompt", default="Why is the sky blue?")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    if args.command in ("deploy", "diff", "synth") and not args.bedrock_model_id:
        p.error("--bedrock-model-id is required (the agent may invoke only this one model)")
    if args.command == "synth":
        return synth("agent", args, AGENT_STACK)
    if args.command == "deploy":
        extra = [] if not args.yes else ["--require-approval", "never"]
        return runner(["deploy", AGENT_STACK, "--app", _app_command("agent"), *extra], _agent_env(args))
    if args.command == "diff":
        return runner(["diff", AGENT_STACK, "--app", _app_command("agent")], _agent_env(args))
    if args.command == "destroy":
        return runner(
            ["destroy", AGENT_STACK, "--app", _app_command("agent"), *(["--force"] if args.yes else [])],
            _agent_env(args),
        )
    if args.command == "status":
        cfn = _session(args.region, boto).client("cloudformation")
        outputs = _stack_outputs(cfn, AGENT_STACK)
        if not outputs:
            print(f"{AGENT_STACK}: not deployed")
            return 1
        for key, value in outputs.items():
            print(f"{key}: {value}")
        return 0
    if not args.endpoint_url:
        p.error("demo needs --endpoint-url (the agent's HTTP URL; runtime ARNs are not supported)")
    from streamvoice.client.agent_turns import format_table, measure

    summary = measure(
        args.endpoint_url,
        args.prompt,
        args.runs,
        os.environ.get("STREAMVOICE_AGENT_TOKEN"),
        lambda m: print(m, file=sys.stderr),
    )
    print(json.dumps(summary, indent=2) if args.json else format_table(summary))
    return 0


def speech_entry() -> None:
    raise SystemExit(speech_main())


def agent_entry() -> None:
    raise SystemExit(agent_main())
