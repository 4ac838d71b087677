"""The CPU engine pin has one home: the CPU recipe's image.engine and its fix profile.
cookbook.engine and scripts/setup-engine read it; pyproject cannot, so it is checked here."""

import re
import subprocess
import sys

import tomllib

from cookbook import engine
from cookbook.fixes import pack
from cookbook.recipe import resolve


def test_pin_is_the_cpu_recipes_engine():
    r = resolve(engine.CPU_RECIPE)
    p = engine.pin()
    assert (p.dist, p.version) == (r.recipe.image.engine.package, r.recipe.image.engine.version)
    assert p.profile == r.recipe.image.fixes.profile
    assert r.recipe.extends is None  # pin() reads the file as plain YAML


def test_fix_profile_is_pinned_to_the_same_engine():
    p = engine.pin()
    prof = pack.load_profile(p.profile)
    assert (prof.distribution, prof.version) == (p.dist, p.version)


def test_pyproject_torch_pin_agrees_with_the_recipe():
    data = tomllib.loads((engine.repo_root() / "pyproject.toml").read_text())
    deps = [d for group in data["project"]["optional-dependencies"].values() for d in group]
    torch = [d for d in deps if re.match(r"torch\s*==", d)]
    assert torch, "pyproject pins torch for the kernel tests"
    public = engine.pin().torch.split("+")[0]  # 2.13.0+cpu -> 2.13.0 (PyPI has no local versions)
    assert all(d.split("==")[1].strip() == public for d in torch), (torch, engine.pin().torch)


def test_setup_engine_reads_the_pin_from_cookbook_engine():
    out = subprocess.run([sys.executable, "-m", "cookbook.engine"], capture_output=True, text=True, check=True).stdout
    p = engine.pin()
    assert out.split() == [
        f"VLLM_DIST={p.dist}",
        f"VLLM_PIN={p.version}",
        f"TORCH_PIN={p.torch}",
        f"FIX_PROFILE={p.profile}",
    ]
    script = (engine.repo_root() / "scripts" / "setup-engine").read_text()
    assert "-m cookbook.engine" in script
    assert not re.search(r"^(VLLM_PIN|TORCH_PIN|FIX_PROFILE)=", script, re.MULTILINE)  # no second copy
