"""The index's hardware filter says what to do when it matches nothing (issue 63, item 3): the
nearest recipes (an H200 recipe whose plan fits as many H100s) and the families none of whose
checkpoints fits one GPU of that kind, both derived from the planner and the catalogue.
scripts/check-site loads it in Chromium (?hw=h100)."""

from __future__ import annotations

from cookbook.recipe.resolve import all_slugs, resolve
from cookbook.site.index import hardware_notes, index_page
from cookbook.site.markdown import benchmark_reason


def real():
    recipes = [x for x in (resolve(s, check=False) for s in all_slugs()) if not x.recipe.abstract]
    return [x for x in recipes if not benchmark_reason(x.recipe)]


def notes(platform, own=frozenset()):
    return "\n".join(hardware_notes(platform, real(), set(own)))


def test_h100_with_no_recipe_of_its_own_says_so_names_the_nearest_and_the_families_that_do_not_fit():
    text = notes("h100")
    assert "**No recipe is written for the H100 80GB yet.**" in text and ".cb-empty" in text
    assert "[dsv4-flash-8x-h200](recipes/dsv4-flash-8x-h200.md) (8x)" in text
    assert "[gemma3-270m-h200](recipes/gemma3-270m-h200.md) (1x)" in text
    assert "glm52-fp8-8x-h200" not in text  # its plan does not fit 8x H100
    assert "None of DeepSeek-V4-Flash, GLM-5.2 or Kimi K3 fits one H100 80GB" in text
    assert 'data-hw-note="h100"' in text and "gemma" not in text.split("None of", 1)[1].lower()


def test_the_families_that_fit_come_from_the_planner_not_a_sentence():
    # one H200 (141 GB) holds DeepSeek-V4-Flash's IQ2_XXS (81 GiB) by the plan: it is not named there
    h200 = notes("h200", {"gemma3-270m-h200"})
    assert "None of GLM-5.2 or Kimi K3 fits one H200 (141 GB)" in h200
    assert "No recipe is written" not in h200  # the H200 has recipes of its own
    assert notes("cpu") == ""


def test_every_filter_option_of_a_gpu_kind_has_its_notes_on_the_index():
    page = index_page(all_slugs())
    assert '<option value="a100-40gb">' in page  # every GPU kind of the catalogue is offered
    assert '{: .cb-note .cb-empty data-hw-note="a100-40gb" }' in page  # no recipe is written for it
    for hw in ("a100-40gb", "a100-80gb", "h100", "h200", "mi300x", "gaudi2", "rtx-pro-6000"):
        assert f'data-hw-note="{hw}"' in page, hw


def test_a_kind_with_no_recipe_and_no_plan_that_fits_names_its_kin_and_says_why():
    text = notes("a100-40gb")
    assert "**No recipe is written for the A100 40GB yet.** Of its GPU kind, [glm52-4-a100]" in text
    assert "their plans do not fit as many A100 40GBs" in text
    # a kind with a plan-fits sibling points at those instead
    assert "The nearest are below." in notes("h100") and "Nearest for the H100 80GB:" in notes("h100")
