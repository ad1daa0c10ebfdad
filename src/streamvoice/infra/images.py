"""The containers the stacks run: a prebuilt image as given (its role may pull it), or one built from this
repository as a CDK image asset."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[3]


# What an image never needs, and what other processes write while a deploy copies the tree (the type
# checker's cache changing under the copy failed it: ENOENT on cache.1.db-shm). Every environment the
# Makefile builds is here: a 5 GB .venv-torch copied into the asset filled the disk
# (tests/test_infra.py checks each .venv* the .gitignore names is excluded, here and in .dockerignore).
IMAGE_EXCLUDE = (
    ".venv",
    ".venv-pipecat",
    ".venv-torch",
    ".git",
    "results",
    "cdk.out",
    "tests",
    "tests_pipecat",
    "tests_torch",
    "demo-out",
    "**/__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "**/*.egg-info",
)


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
        exclude=list(IMAGE_EXCLUDE),
    )
    image.repository.grant_pull(role)
    return image.image_uri
