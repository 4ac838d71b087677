"""What every gate's spec shares: GateBase (calibrated_on, timeout, concurrency, seed, request_extra)
and the names of the gate data that ships inside the package."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Gate data that ships inside the package (cookbook.gates.gatedata; a test checks these
# names against it). Kept here as names only: this module imports nothing but pydantic.
BUILTIN_HAYSTACKS: tuple[str, ...] = ("builtin:cookbook-prose",)
BUILTIN_PROMPTS: dict[str, int] = {"builtin:cookbook-tasks": 24}  # name -> how many prompts it holds


def _calibrated_on_not_required(schema: dict, cls) -> None:
    """In the JSON schema a gate may leave out calibrated_on (gates.calibrated_on fills it
    before validation); the model still refuses a gate with neither."""
    required = schema.get("required", [])
    if "calibrated_on" in required:
        required.remove("calibrated_on")
        if not required:
            del schema["required"]


class GateBase(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_calibrated_on_not_required)

    calibrated_on: str = Field(
        min_length=1,
        description=(
            "Which run set this gate's thresholds: an evidence bundle path, a hardware + "
            "engine + date note, or 'reported: <source>'. Say 'uncalibrated' when a "
            "threshold is a placeholder. Default: gates.calibrated_on."
        ),
    )
    timeout_s: float = Field(
        600.0, gt=0, description="Wall-clock limit for the whole gate; past it the gate fails as timed out."
    )
    max_concurrent_requests: int = Field(
        4, ge=1, le=256, description="Bound on requests this gate has in flight at once."
    )
    seed: int = Field(
        1234, description="Seed for the gate's random choices (codes, depths, prefixes) and sampled requests."
    )
    request_extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields merged into every request body of this gate, e.g. {chat_template_kwargs: "
        "{enable_thinking: false}} or {reasoning_effort: low}; recorded in the transcripts.",
    )
