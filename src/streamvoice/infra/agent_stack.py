"""The agent on Bedrock AgentCore Runtime, in front of the speech endpoint. Least privilege: it may invoke
only its one endpoint and its one Bedrock model, and write only its own log groups."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from streamvoice.infra.images import container_image


@dataclass(frozen=True)
class AgentSettings:
    bedrock_model_id: str
    speech_endpoint_name: str = "streamvoice-kokoro-82m"
    runtime_name: str = "streamvoice_agent"
    image_uri: str | None = None


def bedrock_model_arns(scope: cdk.Stack, model_id: str) -> list[str]:
    """A model id or a cross-region inference profile id (``us.<model>``) -> the ARNs to allow."""
    partition, region, account = scope.partition, scope.region, scope.account
    if model_id.split(".", 1)[0] in ("us", "eu", "apac", "global"):
        base = model_id.split(".", 1)[1]
        return [
            f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}",
            f"arn:{partition}:bedrock:*::foundation-model/{base}",
        ]
    return [f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"]


class AgentRuntimeStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, settings: AgentSettings, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        s = settings
        role = iam.Role(
            self,
            "RuntimeRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            ),
            description="streamvoice agent: invoke one speech endpoint and one Bedrock model",
        )
        endpoint_arn = (
            f"arn:{self.partition}:sagemaker:{self.region}:{self.account}:endpoint/{s.speech_endpoint_name}"
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:InvokeEndpoint",
                    "sagemaker:InvokeEndpointWithResponseStream",
                    "sagemaker:InvokeEndpointWithBidirectionalStream",
                ],
                resources=[endpoint_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                resources=bedrock_model_arns(self, s.bedrock_model_id),
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[  # this runtime's log groups only (AgentCore names them after the runtime id)
                    f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:/aws/bedrock-agentcore/runtimes/{s.runtime_name}-*"
                ],
            )
        )
        # AgentCore Runtime runs ARM64 containers.
        image_uri = container_image(
            self, "AgentImage", "docker/Dockerfile.agent", ecr_assets.Platform.LINUX_ARM64, role, s.image_uri
        )
        runtime = agentcore.CfnRuntime(
            self,
            "Runtime",
            agent_runtime_name=s.runtime_name,
            role_arn=role.role_arn,
            agent_runtime_artifact=agentcore.CfnRuntime.AgentRuntimeArtifactProperty(
                container_configuration=agentcore.CfnRuntime.ContainerConfigurationProperty(
                    container_uri=image_uri
                )
            ),
            network_configuration=agentcore.CfnRuntime.NetworkConfigurationProperty(network_mode="PUBLIC"),
            protocol_configuration="HTTP",
            environment_variables={
                # Configuration, never request data: the agent can only reach this endpoint.
                "STREAMVOICE_SPEECH_URL": f"sagemaker://{s.speech_endpoint_name}?region={self.region}",
                "STREAMVOICE_LLM": "bedrock",
                "BEDROCK_MODEL_ID": s.bedrock_model_id,
                "AWS_REGION": self.region,
            },
            description="streamvoice agent: streams LLM text into Kokoro and audio back to the caller",
        )
        runtime.node.add_dependency(role)
        endpoint = agentcore.CfnRuntimeEndpoint(
            self, "RuntimeEndpoint", agent_runtime_id=runtime.attr_agent_runtime_id, name="default_endpoint"
        )
        cdk.CfnOutput(self, "AgentRuntimeArn", value=runtime.attr_agent_runtime_arn)
        cdk.CfnOutput(self, "AgentRuntimeEndpointArn", value=endpoint.attr_agent_runtime_endpoint_arn)
