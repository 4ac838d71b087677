"""cookbook.kernel_catalogue: every kernel a recipe may name, with a backend per platform."""

from cookbook import kernel_catalogue as catalogue
from cookbook import platforms
from cookbook.kernels.mxfp4_moe.shapes import VARIANTS
from cookbook.recipe.paths import repo_root


def test_every_kernel_has_its_folder_and_build_script():
    for kernel in catalogue.KERNELS.values():
        assert (repo_root() / "kernels" / kernel.name / "build.sh").is_file(), kernel.name


def test_mxfp4_moe_variants_are_the_kernels_own():
    assert catalogue.MXFP4_MOE.variants == tuple(sorted(VARIANTS))


def test_the_backend_follows_the_platform():
    k = catalogue.MXFP4_MOE
    assert k.backend_for("h200").id == "sm90" and k.backend_for("h200").missing is None
    assert k.backend_for("gaudi2").id == "hpu" and "kernels/mxfp4-moe/hpu/" in k.backend_for("gaudi2").missing
    for platform in ("mi300x", "a100-80gb", "rtx-pro-6000", "cpu", "no-such-platform"):
        assert k.backend_for(platform) is None, platform
    arches = {p.arch for p in platforms.CATALOGUE.values()}
    assert all(set(b.archs) <= arches for b in k.backends)
    assert k.build_command("glm", k.backend("hpu")) == "kernels/mxfp4-moe/build.sh --backend hpu --variant glm"
