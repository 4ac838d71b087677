"""Fetch and convert agree on where the checkpoint is (issue 47): the convert step reads exactly the
folder `cookbook fetch` wrote ($SOURCE_DIR), for every recipe, and the Gaudi recipe's repack runs
end to end on what a stand-in Hub served (tests/helpers/standin_hub.py with the real huggingface_hub
client; the real Hub is not reachable here) from a small checkpoint in AMD Quark's layout.
`fetch --dry-run` without a network still prints what the recipe knows."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.commands.fetch import _local_dir, convert_env
from cookbook.convert.safetensors_io import read_header
from cookbook.errors import CookbookError
from cookbook.recipe import shell
from cookbook.recipe.errors import RecipeError
from cookbook.recipe.resolve import all_slugs, resolve
from cookbook.serving import fetch as F
from cookbook.serving import local

pytest.importorskip("huggingface_hub", reason="the data extra: pip install -e '.[data]'")
from quark_synthetic import make_quark_checkpoint  # noqa: E402
from standin_hub import StandinHub  # noqa: E402

GAUDI = "glm52-mxfp4-8x-gaudi2"
# Recipes whose source is not a Hub repository fetch cannot download: `serve` fetches the CPU
# recipes' GGUF from PyPI; the K3 document never names its text repository.
NOT_FROM_THE_HUB = {
    "k3-6",
    "k3-8",
    "gemma3-270m-cpu",
    "gemma3-270m-cpu-avx2",
    "gemma3-270m-h200",
    "gemma3-270m-h100",
    "dsv3-perf-h200",
    "dsv4-flash-perf-h200",
}


def _fetchable():
    out = []
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if r.recipe.abstract or not r.recipe.convert:
            continue
        for quant in [None, *r.recipe.quants]:
            try:
                resolved = resolve(slug, quant)
            except RecipeError:  # a quant refused on this recipe's GPU count
                continue
            try:
                F.downloads(resolved)
            except CookbookError:
                assert slug in NOT_FROM_THE_HUB, f"{slug} cannot be fetched: say why in NOT_FROM_THE_HUB"
                break
            out.append((slug, quant))
    return out


CASES = _fetchable()


def test_the_gaudi_and_glm52_recipes_are_checked():
    assert (GAUDI, None) in CASES and ("glm52-2", None) in CASES and ("glm52-4", "Q4_K") in CASES


@pytest.mark.parametrize("slug,quant", CASES, ids=[f"{s}-{q or 'default'}" for s, q in CASES])
def test_the_first_convert_step_reads_what_fetch_wrote(slug, quant, tmp_path, monkeypatch):
    """Path by path: the first step's input, expanded as `fetch` expands it, is the download folder
    or a pattern inside it that the recipe's include patterns fetch."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    resolved = resolve(slug, quant)
    dls = F.downloads(resolved)
    env = local.exported_env(resolved, local.shell_env(None))
    target = _local_dir(resolved, None, env)
    expanded = shell.expand(resolved.recipe.convert[0].args[0], convert_env(env, target, dls))
    if expanded == str(target):
        return
    assert expanded.startswith(str(target) + "/"), f"{slug}: the convert step reads {expanded}, fetch writes {target}"
    rel = expanded[len(str(target)) + 1 :]
    assert any(rel == p or fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(p, rel) for p in dls[0].patterns), (
        f"{slug}: the convert step reads {rel}; fetch downloads {dls[0].patterns}"
    )


@pytest.fixture
def quark_hub(tmp_path, monkeypatch):
    src = make_quark_checkpoint(tmp_path / "quark", layers=2, experts=4, hidden=64, inter=32, shard_bytes=40_000)
    files = {p.relative_to(src).as_posix(): p.read_bytes() for p in sorted(src.rglob("*")) if p.is_file()}
    hub = StandinHub(files, repo="amd/GLM-5.2-MXFP4", repo_type="model")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.chdir(tmp_path)  # fetch's default folder, .cache/models/<repo name>, lands here
    yield files
    hub.close()


def test_gaudi_fetch_then_convert_end_to_end_standin(quark_hub, tmp_path):
    fused = tmp_path / "fused"
    argv = ["fetch", GAUDI, "--set", f"CHECKPOINT_DIR={fused}"]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 0, r.output
    fetched = tmp_path / ".cache" / "models" / "GLM-5.2-MXFP4"
    for rel, data in quark_hub.items():  # every served file, where fetch says it wrote it
        assert (fetched / rel).read_bytes() == data, rel
    # the repack read that folder: the fused checkpoint's experts are stacked, AMD's per-expert names gone
    index = {k for f in fused.glob("*.safetensors") for k in read_header(f)[0]}
    assert "model.layers.0.mlp.experts.w13_weight" in index
    assert not any(".experts.0." in k for k in index)
    assert (fused / "config.json").is_file()
    # a second fetch keeps the repack (its `creates` exists)
    again = CliRunner().invoke(main, argv)
    assert again.exit_code == 0 and "skipped" in again.output.lower(), again.output


def test_gaudi_dry_run_names_the_download_folder_as_source_dir(quark_hub, tmp_path):
    r = CliRunner().invoke(main, ["fetch", GAUDI, "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["local_dir"] == ".cache/models/GLM-5.2-MXFP4" and out["file_list"] is None
    assert sorted(f["path"] for f in out["downloads"][0]["files"]) == sorted(quark_hub)
    assert out["convert"][0]["args"] == ["$SOURCE_DIR", "$CHECKPOINT_DIR"]
    assert not (tmp_path / ".cache" / "models").exists(), "a dry run downloaded something"


@pytest.mark.parametrize("as_json", [False, True])
def test_dry_run_without_a_network_prints_what_the_recipe_knows(monkeypatch, tmp_path, as_json):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["fetch", "glm52-2", "--dry-run", *(["--json"] if as_json else [])])
    assert r.exit_code == 0, r.output
    if as_json:
        out = json.loads(r.stdout)
        assert out["file_list"].startswith("needs the Hub: cannot list QuixiAI/GLM-5.2-Vision-GGUF")
        model = out["downloads"][0]
        assert model["repo"] == "QuixiAI/GLM-5.2-Vision-GGUF" and model["files"] is None
        assert model["include"] == ["antirez-routed/GLM-5.2-UD-Q2_K_RoutedQ2K-*"] and model["recipe_size_gib"] > 100
        assert out["convert"][0]["tool"] == "gguf-join" and out["plan"]["fits"] is True
    else:
        text = r.stdout
        assert "QuixiAI/GLM-5.2-Vision-GGUF" in text and "antirez-routed/GLM-5.2-UD-Q2_K_RoutedQ2K-*" in text
        assert "GiB by the recipe" in text and "the file list needs the Hub" in text
        assert "then the convert steps" in text and "gguf-join $SOURCE_DIR/antirez-routed/" in text


def test_a_real_fetch_without_a_network_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["fetch", "glm52-2"])
    assert r.exit_code == 1 and "cannot list QuixiAI/GLM-5.2-Vision-GGUF" in r.stderr
    assert not Path(tmp_path / ".cache").exists()


@pytest.mark.parametrize("argv", [["fetch", "glm52-2", "--json"], ["image", "glm52-2", "--json"]])
def test_json_without_dry_run_is_refused_before_anything_runs(argv, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and "--json goes with --dry-run" in r.stderr and r.stdout == ""
