"""The CDK app the CLIs hand to ``cdk``: ``python -m streamvoice.infra.app speech|agent``.

Settings come from the environment the CLI sets, so ``cdk deploy`` and ``speech-infra synth`` build the
same stacks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import aws_cdk as cdk

from streamvoice.infra.agent_stack import AgentSettings
from streamvoice.infra.stacks import SpeechSettings, build_app


def build_from_env(kind: str, outdir: str | None = None) -> cdk.App:
    env = cdk.Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
        region=os.environ.get("CDK_DEFAULT_REGION") or os.environ.get("AWS_REGION"),
    )
    if kind == "speech":
        model_dir = os.environ.get("KOKORO_MODEL_DIR")
        speech = SpeechSettings(
            model_id=os.environ.get("STREAMVOICE_MODEL_ID", "kokoro-82m"),
            instance_type=os.environ.get("STREAMVOICE_INSTANCE_TYPE", "ml.g5.xlarge"),
            image_uri=os.environ.get("STREAMVOICE_IMAGE_URI") or None,
            model_dir=Path(model_dir) if model_dir else None,
        )
        return build_app(speech=speech, outdir=outdir, env=env)
    if kind == "agent":
        model_id = os.environ.get("BEDROCK_MODEL_ID")
        if not model_id:
            raise SystemExit("BEDROCK_MODEL_ID is required for the agent stack")
        agent = AgentSettings(
            bedrock_model_id=model_id,
            speech_endpoint_name=os.environ.get("STREAMVOICE_SPEECH_ENDPOINT", "streamvoice-kokoro-82m"),
            image_uri=os.environ.get("STREAMVOICE_AGENT_IMAGE_URI") or None,
        )
        return build_app(agent=agent, outdir=outdir, env=env)
    raise SystemExit(f"unknown stack kind {kind!r}: use speech or agent")


if __name__ == "__main__":
    build_from_env(sys.argv[1] if len(sys.argv) > 1 else "speech").synth()
