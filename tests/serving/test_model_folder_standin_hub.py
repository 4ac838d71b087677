"""One model folder (issue 63): for every recipe that serves its model folder ($CHECKPOINT_DIR,
with the fetch folder as its default; dsv4-flash-8x-h200 and glm52-fp8-8x-h200 among them), the
folder `cookbook fetch` writes is the one `launch`, `serve --dry-run` and the image's run line and
launch.sh serve. Fetched from a stand-in for the Hub (tests/helpers/standin_hub.py, with the real
huggingface_hub client; the real Hub is not reachable here), then each command's folder is read
back: the blocks run in bash with stand-in `vllm` and `python3` commands that print what they were
given, the image's run line expanded by bash."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.image.run import CHECKPOINT_IN_IMAGE
from cookbook.model_folder import MARKER
from cookbook.recipe.resolve import all_slugs, resolve
from cookbook.serving import fetch as F

pytest.importorskip("huggingface_hub", reason="the data extra: pip install -e '.[data]'")
from standin_hub import StandinHub  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FILES = {"config.json": b'{"architectures": ["X"]}\n', "model-00001-of-00001.safetensors": b"\0" * 256}


def _serves_its_folder() -> list[str]:
    out = []
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if r.recipe.abstract or r.recipe.convert or r.recipe.serve.model != "$CHECKPOINT_DIR":
            continue
        if F.REPO_ID.match(r.recipe.model.source.repo):
            out.append(slug)
    return out


SLUGS = _serves_its_folder()


def test_the_h200_recipes_of_the_issue_are_covered():
    assert {"dsv4-flash-8x-h200", "glm52-fp8-8x-h200", "dsv4-flash-4x-h200"} <= set(SLUGS)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    hubs = []

    def make(slug):
        h = StandinHub(FILES, repo=resolve(slug).recipe.model.source.repo, repo_type="model")
        hubs.append(h)
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        return h

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("CHECKPOINT_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.chdir(tmp_path)
    yield make
    for h in hubs:
        h.close()


def served_by(block: str, cwd: Path, env_extra: dict | None = None) -> Path:
    """The folder the block hands `vllm serve`, run in bash with stand-ins for the engine's commands
    (python3: the fix check passes; vllm: prints its model argument)."""
    bin_dir = cwd / "standin-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "vllm").write_text('#!/bin/sh\nprintf "%s" "$2"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CHECKPOINT_DIR"}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    env["COOKBOOK"] = str(ROOT)  # the checkout, as a user exports it when not running from it
    p = subprocess.run(["bash", "-c", block], cwd=cwd, capture_output=True, text=True, env={**env, **(env_extra or {})})
    assert p.returncode == 0, p.stderr
    return (cwd / p.stdout).resolve()


def image_mount(run_line: str, cwd: Path, env_extra: dict | None = None) -> tuple[Path, str]:
    """(host folder, folder in the container) of the run line's model-folder volume, as bash expands it."""
    m = re.search(r"-v (\S+):(/\S+):ro", run_line)
    assert m, run_line
    env = {k: v for k, v in os.environ.items() if k != "CHECKPOINT_DIR"}
    p = subprocess.run(
        ["bash", "-c", f"printf %s {m.group(1)}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**env, **(env_extra or {})},
    )
    return (cwd / p.stdout).resolve(), m.group(2)


@pytest.mark.parametrize("slug", SLUGS)
def test_fetch_launch_serve_and_image_name_one_model_folder_standin(slug, hub, tmp_path):
    h = hub(slug)
    r = CliRunner().invoke(main, ["fetch", slug])
    assert r.exit_code == 0, r.output
    assert set(h.resolved("GET")) == set(FILES)
    dry = CliRunner().invoke(main, ["fetch", slug, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    out = json.loads(dry.stdout)
    fetched = (tmp_path / out["local_dir"]).resolve()
    assert out["model_folder"] == out["local_dir"] and out["refused"] is None
    assert (fetched / "config.json").read_bytes() == FILES["config.json"] and (fetched / MARKER).is_file()
    assert out["local_dir"] == ".cache/models/" + resolve(slug).recipe.model.source.repo.rsplit("/", 1)[-1]

    launch = CliRunner().invoke(main, ["launch", slug])
    serve = CliRunner().invoke(main, ["serve", slug, "--dry-run"])
    assert launch.exit_code == 0 and serve.exit_code == 0, launch.output + serve.output
    assert serve.stdout == launch.stdout
    assert served_by(launch.stdout, tmp_path) == fetched

    image = CliRunner().invoke(main, ["image", slug, "--dry-run", "--json"])
    assert image.exit_code == 0, image.output
    doc = json.loads(image.stdout)
    host, inside = image_mount(doc["run"], tmp_path)
    assert host == fetched and inside == CHECKPOINT_IN_IMAGE
    assert f"CHECKPOINT_DIR={CHECKPOINT_IN_IMAGE}" in doc["dockerfile"]  # the image's block reads the mount
    assert doc["launch_sh"] == launch.stdout
    assert served_by(doc["launch_sh"], tmp_path, {"CHECKPOINT_DIR": CHECKPOINT_IN_IMAGE}) == Path(CHECKPOINT_IN_IMAGE)


def test_an_exported_checkpoint_dir_moves_every_one_of_them_standin(hub, tmp_path):
    slug = "dsv4-flash-8x-h200"
    hub(slug)
    elsewhere = tmp_path / "data" / "dsv4"
    env = {"CHECKPOINT_DIR": str(elsewhere)}
    r = CliRunner().invoke(main, ["fetch", slug], env=env)
    assert r.exit_code == 0, r.output
    assert (elsewhere / "config.json").is_file() and not (tmp_path / ".cache" / "models").exists()
    launch = CliRunner().invoke(main, ["launch", slug])
    assert served_by(launch.stdout, tmp_path, env) == elsewhere
    image = json.loads(CliRunner().invoke(main, ["image", slug, "--dry-run", "--json"]).stdout)
    assert image_mount(image["run"], tmp_path, env)[0] == elsewhere


def test_fetch_into_a_users_folder_is_refused_before_the_first_byte_standin(hub, tmp_path):
    slug = "glm52-fp8-8x-h200"
    h = hub(slug)
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    for argv, env in ((["--local-dir", str(d)], None), ([], {"CHECKPOINT_DIR": str(d)})):
        r = CliRunner().invoke(main, ["fetch", slug, *argv], env=env)
        assert r.exit_code == 2 and f"model folder {d}" in r.stderr and "help:" in r.stderr, r.output
    assert h.resolved("GET") == [] and sorted(p.name for p in d.iterdir()) == ["notes.txt"]
    dry = CliRunner().invoke(main, ["fetch", slug, "--dry-run"], env={"CHECKPOINT_DIR": str(d)})
    assert dry.exit_code == 0 and "refused:" in dry.stdout


def test_fetch_with_local_dir_says_how_to_serve_it_standin(hub, tmp_path):
    slug = "glm52-fp8-8x-h200"
    hub(slug)
    r = CliRunner().invoke(main, ["fetch", slug, "--local-dir", str(tmp_path / "x")])
    assert r.exit_code == 0, r.output
    assert f"CHECKPOINT_DIR={tmp_path / 'x'} cookbook launch {slug}" in r.stderr
