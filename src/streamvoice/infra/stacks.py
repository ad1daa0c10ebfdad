"""AWS CDK stacks: the Kokoro speech server as a SageMaker AI real-time endpoint (bidirectional streaming),
and the agent on Bedrock AgentCore Runtime in front of it.

Least privilege throughout: no managed full-access policies; the endpoint's role reads only its model
bucket and pulls only its image; the agent may invoke only its one endpoint and its one Bedrock model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[3]
VARIANT = "AllTraffic"
METRIC_NAMESPACE = "streamvoice"


def is_gpu_instance(instance_type: str) -> bool:
    family = instance_type.removeprefix("ml.").split(".")[0]
    return family[:1] in ("g", "p") or family.startswith("inf")


def ecr_repository_arn(image_uri: str) -> str | None:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:tag|@digest]`` -> the repository's ARN (None: not ECR)."""
    host, _, path = image_uri.partition("/")
    parts = host.split(".")
    if len(parts) < 6 or parts[1:3] != ["dkr", "ecr"] or not path:
        return None
    account, region = parts[0], parts[3]
    repo = path.split("@", 1)[0].rsplit(":", 1)[0]
    partition = "aws-cn" if host.endswith(".com.cn") else "aws"
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repo}"


def container_image(
    scope: Construct,
    construct_id: str,
    dockerfile: str,
    platform: ecr_assets.Platform,
    role: iam.IRole,
    prebuilt: str | None,
) -> str:
    """A prebuilt image URI as given, or an image asset built from this repository; the role may pull it."""
    if prebuilt:
        repository = ecr_repository_arn(prebuilt)
        if repository is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
            )
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                        "ecr:BatchCheckLayerAvailability",
                    ],
                    resources=[repository],
                )
            )
        return prebuilt
    image = ecr_assets.DockerImageAsset(
        scope,
        construct_id,
        directory=str(REPO_ROOT),
        file=dockerfile,
        platform=platform,
        # What the image never needs, and what other processes write while a deploy copies the tree
        # (the type checker's cache changing under the copy failed it: ENOENT on cache.1.db-shm).
        exclude=[
            ".venv",
            ".venv-pipecat",
            ".git",
            "results",
            "cdk.out",
            "tests",
            "tests_pipecat",
            "demo-out",
            "**/__pycache__",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
            "**/*.egg-info",
        ],
    )
    image.repository.grant_pull(role)
    return image.image_uri


@dataclass(frozen=True)
class SpeechSettings:
    model_id: str = "kokoro-82m"
    instance_type: str = "ml.g5.xlarge"
    initial_instances: int = 1
    max_instances: int = 4
    target_concurrency: float = 8.0  # concurrent requests (open sessions) per instance
    first_audio_alarm_ms: float = 1000.0
    image_uri: str | None = None  # use a prebuilt image instead of building one
    model_dir: Path | None = None  # local folder with the model files to upload

    @property
    def endpoint_name(self) -> str:
        return f"streamvoice-{self.model_id}"

    @property
    def dockerfile(self) -> str:
        return "docker/Dockerfile.gpu" if is_gpu_instance(self.instance_type) else "docker/Dockerfile"


class SpeechEndpointStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, settings: SpeechSettings, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        s = settings

        # Model cache: kept on stack deletion (it can be shared across models); `destroy --purge` removes it.
        bucket = s3.Bucket(
            self,
            "ModelCache",
            bucket_name=cdk.PhysicalName.GENERATE_IF_NEEDED,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        prefix = f"{s.model_id}/"
        if s.model_dir is not None:
            s3_deploy.BucketDeployment(
                self,
                "ModelFiles",
                destination_bucket=bucket,
                destination_key_prefix=prefix,
                sources=[s3_deploy.Source.asset(str(s.model_dir))],
                retain_on_delete=True,
                memory_limit=1024,
            )

        role = iam.Role(
            self,
            "ExecutionRole",
            # Only SageMaker acting for this account may assume it (no confused deputy).
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            ),
            description="Kokoro speech endpoint: read its model files, pull its image, write logs and metrics",
        )
        # Read the model prefix, list only inside it (grant_read would allow listing the whole bucket).
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{prefix}*")])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=[  # this endpoint's log group exactly (a prefix would match other endpoints)
                    f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:/aws/sagemaker/Endpoints/{s.endpoint_name}",
                    f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:/aws/sagemaker/Endpoints/{s.endpoint_name}:log-stream:*",
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource type; scoped by namespace below
                conditions={
                    "StringEquals": {"cloudwatch:namespace": [METRIC_NAMESPACE, "/aws/sagemaker/Endpoints"]}
                },
            )
        )

        image_uri = container_image(
            self, "SpeechImage", s.dockerfile, ecr_assets.Platform.LINUX_AMD64, role, s.image_uri
        )

        model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=role.role_arn,
            # The container needs no network: SageMaker fetches the model files and image for it.
            enable_network_isolation=True,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=bucket.s3_url_for_object(prefix),
                        s3_data_type="S3Prefix",
                        compression_type="None",
                    )
                ),
                environment={
                    "STREAMVOICE_EMF": "1",  # first-audio latency and errors as CloudWatch metrics
                    "STREAMVOICE_ENDPOINT_NAME": s.endpoint_name,
                    "STREAMVOICE_MAX_SESSIONS": "64",
                },
            ),
        )
        model.node.add_dependency(role)

        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT,
                    model_name=model.attr_model_name,
                    initial_instance_count=s.initial_instances,
                    instance_type=s.instance_type,
                    container_startup_health_check_timeout_in_seconds=600,
                    model_data_download_timeout_in_seconds=600,
                )
            ],
        )
        endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_config_name=config.attr_endpoint_config_name,
            endpoint_name=s.endpoint_name,
        )
        self.endpoint_name = s.endpoint_name
        self.bucket = bucket

        target = appscaling.ScalableTarget(
            self,
            "ScalingTarget",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{s.endpoint_name}/variant/{VARIANT}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=s.initial_instances,
            max_capacity=s.max_instances,
        )
        target.node.add_dependency(endpoint)
        target.scale_to_track_metric(
            "ConcurrentRequests",
            target_value=s.target_concurrency,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
            scale_in_cooldown=cdk.Duration.minutes(5),
            scale_out_cooldown=cdk.Duration.minutes(1),
        )

        dims = {"EndpointName": s.endpoint_name}
        cloudwatch.Alarm(
            self,
            "FirstAudioLatency",
            metric=cloudwatch.Metric(
                namespace=METRIC_NAMESPACE,
                metric_name="TimeToFirstAudio",
                dimensions_map=dims,
                statistic="p95",
                period=cdk.Duration.minutes(1),
                unit=cloudwatch.Unit.MILLISECONDS,
            ),
            threshold=s.first_audio_alarm_ms,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="p95 time to first audio above target",
        )
        cloudwatch.Alarm(
            self,
            "SynthesisErrors",
            metric=cloudwatch.Metric(
                namespace=METRIC_NAMESPACE,
                metric_name="Errors",
                dimensions_map=dims,
                statistic="Sum",
                period=cdk.Duration.minutes(1),
            ),
            threshold=5,
            evaluation_periods=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="server-side synthesis errors",
        )
        cloudwatch.Alarm(
            self,
            "Invocation5xx",
            metric=cloudwatch.Metric(
                namespace="AWS/SageMaker",
                metric_name="Invocation5XXErrors",
                dimensions_map={**dims, "VariantName": VARIANT},
                statistic="Sum",
                period=cdk.Duration.minutes(1),
            ),
            threshold=1,
            evaluation_periods=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        cdk.CfnOutput(self, "EndpointName", value=s.endpoint_name)
        cdk.CfnOutput(self, "ModelCacheBucket", value=bucket.bucket_name)


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


SPEECH_STACK = "StreamvoiceSpeech"
AGENT_STACK = "StreamvoiceAgent"


def build_app(
    speech: SpeechSettings | None = None,
    agent: AgentSettings | None = None,
    outdir: str | None = None,
    env: cdk.Environment | None = None,
) -> cdk.App:
    app = cdk.App(outdir=outdir)
    if speech is not None:
        SpeechEndpointStack(app, f"{SPEECH_STACK}-{speech.model_id}", speech, env=env)
    if agent is not None:
        AgentRuntimeStack(app, AGENT_STACK, agent, env=env)
    return app
