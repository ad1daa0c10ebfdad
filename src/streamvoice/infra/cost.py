"""Cost estimates from a dated price file, printed before anything is deployed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any


def load_prices() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files("streamvoice.infra").joinpath("prices.json").read_text()
    )
    return data


@dataclass(frozen=True)
class Estimate:
    instance_type: str
    region: str
    instances: int
    hourly: float
    monthly: float
    per_gb: float
    as_of: str

    def render(self) -> str:
        return "\n".join(
            [
                f"{self.instances} x {self.instance_type} in {self.region}, on demand (prices as of {self.as_of}):",
                f"  ${self.hourly:.4f} per instance-hour -> about ${self.monthly:,.0f} for a {730}-hour month, compute only",
                f"  plus ${self.per_gb:.3f} per GB of data processed in and out",
                "WARNING: an endpoint bills from the moment it is InService until it is deleted, whatever the traffic.",
                "         Tear it down with `agent-infra destroy` then `speech-infra destroy kokoro-82m`.",
            ]
        )


def estimate(
    instance_type: str, region: str, instances: int = 1, prices: dict[str, Any] | None = None
) -> Estimate:
    prices = prices or load_prices()
    by_region = prices["instance_hourly"].get(region, {})
    if instance_type not in by_region:
        known = ", ".join(f"{r}/{t}" for r, ts in prices["instance_hourly"].items() for t in ts)
        raise KeyError(
            f"no price on file for {instance_type} in {region} (on file: {known}); see the AWS pricing page"
        )
    hourly = float(by_region[instance_type]) * instances
    return Estimate(
        instance_type=instance_type,
        region=region,
        instances=instances,
        hourly=hourly,
        monthly=hourly * prices["hours_per_month"],
        per_gb=float(prices["data_processed_per_gb"]),
        as_of=str(prices["as_of"]),
    )
