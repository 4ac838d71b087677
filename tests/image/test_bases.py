"""docker/<platform>/base.yaml: every platform of the catalogue has exactly one base; each is
pinned by digest, by tag or as a build input; a recipe on a GPU platform records in
image.extra.base_pin how its base is pinned and why, naming the same image and file."""

from pathlib import Path

import pytest
from test_dockerfiles import RECIPES

from cookbook import platforms
from cookbook.errors import CookbookError
from cookbook.host_cpu import CPU_RECIPES
from cookbook.image import bases, ports
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]


def test_every_platform_has_one_base():
    every = bases.all_bases()
    assert {b.folder for b in every} == {"cpu", "cuda", "rocm", "gaudi"}
    for pid in platforms.CATALOGUE:
        assert sum(pid in b.platforms for b in every) == 1, pid


@pytest.mark.parametrize("slug", [s for s in RECIPES if s not in CPU_RECIPES])  # their base: scripts/make-cpu-base
def test_recipe_records_its_base_pin_and_why(slug):
    r = resolve(slug).recipe
    port = ports.for_recipe(r)
    if port.base and not r.image.base:  # the engine's own image at the pin (ports/vllm-cuda): the port says how
        assert "{pin}" in port.base and port.base_why.startswith("by tag: ") and "@sha256" in port.base_why
        assert port.base_for(r.image.engine.version) == f"vllm/vllm-openai:v{r.image.engine.version}"
        return
    base = bases.for_platform(r.hardware.platform)
    pin = r.image.extra.get("base_pin")
    assert pin is not None and pin.why, f"{slug}: image.extra.base_pin (how the base is pinned, and why)"
    assert base.path in pin.value
    if base.pin == "tag":
        assert pin.value.startswith("by tag: ") and base.image in pin.value
    else:
        assert base.pin == "build-input" and "build input" in pin.value


def test_the_cpu_base_is_made_here():
    cpu = bases.for_platform("cpu")
    assert cpu.get == "scripts/make-cpu-base" and (ROOT / cpu.get).is_file()
    assert "python3" in cpu.make["packages"]


def test_a_digest_pin_without_a_digest_is_refused(tmp_path):
    (tmp_path / "docker" / "x").mkdir(parents=True)
    (tmp_path / "docker" / "x" / "base.yaml").write_text(
        "platforms: [cpu]\nimage: debian:12\npin: digest\nwhy: w\nget: g\n"
    )
    with pytest.raises(CookbookError) as exc:
        bases.all_bases(tmp_path)
    assert "pin is digest but image has no @sha256:" in exc.value.format_message()
