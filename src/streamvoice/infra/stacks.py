"""AWS CDK stacks: the Kokoro speech server as a SageMaker AI real-time endpoint (bidirectional streaming),
and the agent on Bedrock AgentCore Runtime in front of it (``agent_stack``); their images (``images``).

Least privilege throughout: no managed full-access policies; the endpoint's role reads only its model
bucket and pulls only its image; the agent may invoke only its one endpoint and its one Bedrock model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from streamvoice.infra.agent_stack import AgentRuntimeStack, AgentSettings
from streamvoice.infra.images import container_image

VARIANT = "AllTraffic"
METRIC_NAMESPACE = "streamvoice"


def is_gpu_instance(instance_type: str) -> bool:
    family = instance_type.removeprefix("ml.").split(".")[0]
    return family[:1] in ("g", "p") or family.startswith("inf")


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
