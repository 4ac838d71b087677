"""A recorded series of evidence bundles, one per engine version, for the bisect tests.

Passed and failed bundles are written by the gate suite's own writer (cookbook.gates.bundle:
Bundle, GateResult.judge, finish). A version marked "down" gets the bundle the real runner
writes against a server that is not there (run_suite on a closed port): every gate "not run",
fault server_down, which bisect treats as a skip.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from cookbook.gates.bundle import Bundle
from cookbook.gates.result import GateResult
from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.resolve import resolve

SLUG = "gemma3-270m-cpu"
GATE = "greedy"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def write_bundle(root: Path, version: str, verdict: str) -> Path:
    """root/<version>/: a finished bundle whose greedy gate passed ("pass"), failed ("fail"),
    or never ran because the server was down ("down")."""
    out = root / version
    if verdict == "down":
        spec = resolve(SLUG).recipe.gates
        cfg = SuiteConfig(
            base_url=f"http://127.0.0.1:{closed_port()}",
            model="gemma3-270m",
            spec=spec,
            out_dir=out,
            only=[GATE],
            header={"recipe": SLUG, "engine_version": version},
            echo=lambda _line: None,
        )
        asyncio.run(run_suite(cfg))
        return out
    bundle = Bundle(out, {"recipe": SLUG, "engine_version": version, "declared_gates": [GATE], "only": [GATE]})
    identical = 3 if verdict == "pass" else 1
    result = GateResult(name=GATE, measured={"identical_prompts": identical, "prompts": 3}, wall_s=4.2)
    result.judge([(identical == 3, f"{3 - identical} of 3 prompts differ from the reference")])
    bundle.record(result)
    bundle.finish()
    return out


def record_series(root: Path, verdicts: dict[str, str]) -> Path:
    for version, verdict in verdicts.items():
        write_bundle(root, version, verdict)
    return root
