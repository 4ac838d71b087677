"""Which recipes run on a GPU kind and count: a recipe written for that platform, or one written for
a sibling of the same vendor and architecture (an H200 recipe on an H100: sm90 both) whose plan fits
there. `cookbook list` (on this machine, or --platform/--gpus), `serve`'s refusal (the closest recipe
that runs here) and the site's hardware filter (what is nearest, and which families fit one GPU)
all judge by it, so they agree.

A sibling whose plan fits is "plan fits", never "yes": its launch block, bars and evidence were
written for the other platform, and nothing proves them on this one until a recipe of its own
is verified there.
"""

from __future__ import annotations

from dataclasses import dataclass

from cookbook import platforms
from cookbook.errors import CookbookError

YES, PLAN, NO = "yes", "plan fits", "no"


@dataclass(frozen=True)
class Fit:
    slug: str
    verdict: str  # YES | PLAN | NO
    reason: str

    @property
    def fits(self) -> bool:
        return self.verdict != NO


def kind(platform_id: str) -> tuple[str, str] | None:
    """(vendor, arch) of a GPU platform; None for the CPU and ids outside the catalogue."""
    p = platforms.get(platform_id)
    return None if p is None or p.vendor == "cpu" else (p.vendor, p.arch)


def same_kind(a: str, b: str) -> bool:
    """Two GPU platforms of one vendor and architecture (h100 and h200: nvidia sm90)."""
    return kind(a) is not None and kind(a) == kind(b)


def name(platform_id: str) -> str:
    p = platforms.get(platform_id)
    return p.name if p else platform_id


def fit_on(resolved, platform: str, gpus: int | None = None) -> Fit:
    """How `resolved` (as written) fares on `gpus` (None: as many as it needs) GPUs of `platform`."""
    hw = resolved.recipe.hardware
    slug = resolved.slug
    have = hw.gpus if gpus is None else gpus
    if hw.platform == platform:
        if platform != "cpu" and have < hw.gpus:
            return Fit(slug, NO, f"needs {hw.gpus}x {name(platform)}; {have} given")
        return Fit(slug, YES, f"written for {hw.gpus}x {name(platform)}" if platform != "cpu" else "runs on the CPU")
    if not same_kind(hw.platform, platform):
        return Fit(slug, NO, f"written for {name(hw.platform)}, another GPU kind")
    if have < hw.gpus:
        return Fit(slug, NO, f"needs {hw.gpus} GPUs; {have} given")
    from cookbook.plan.budget import make_plan

    try:
        plan = make_plan(resolved, platform=platform)
    except CookbookError as e:
        return Fit(slug, NO, f"cannot plan it on {name(platform)}: {e.format_message()}")
    if not plan.fits:
        return Fit(
            slug, NO, f"written for {hw.platform}; its plan does not fit {hw.gpus}x {platform}: {plan.refusals[0]}"
        )
    return Fit(
        slug,
        PLAN,
        f"written for {hw.gpus}x {hw.platform}; its plan fits {hw.gpus}x {platform} "
        f"(`cookbook plan {slug} --platform {platform}`)",
    )


def candidates(platform: str, gpus: int | None, recipes) -> list[tuple[object, Fit]]:
    """(resolved, fit) of every recipe that runs on `gpus` x `platform`: written for it first,
    then plan-fits siblings; each group by GPU count, then slug."""
    out = [(x, fit_on(x, platform, gpus)) for x in recipes if not x.recipe.gates.benchmark_only]
    out = [(x, f) for x, f in out if f.fits]
    return sorted(out, key=lambda xf: (xf[1].verdict != YES, xf[0].recipe.hardware.gpus, xf[0].slug))


def closest(resolved, platform: str, gpus: int, recipes) -> tuple[object, Fit] | None:
    """The recipe nearest to `resolved` that runs on `gpus` x `platform`: the same model first,
    then the same family, then anything; written-for-it before plan-fits. None: nothing runs there."""
    model, family = resolved.recipe.model.name, resolved.recipe.model.family
    found = [(x, f) for x, f in candidates(platform, gpus, recipes) if x.slug != resolved.slug]

    def rank(xf):
        x, f = xf
        return (x.recipe.model.name != model, x.recipe.model.family != family, f.verdict != YES)

    return min(found, key=rank, default=None) if found else None


def one_gpu_fit(recipes, platform: str) -> dict[str, tuple[bool, float]]:
    """Per model family among `recipes`: whether its smallest checkpoint fits one GPU of `platform`
    by the planner's count, and that checkpoint's size in GiB. The planner judges each recipe with
    its smallest quant on one such GPU (--gpus 1 --platform); a family fits when one of them does."""
    from cookbook.plan.budget import make_plan

    out: dict[str, tuple[bool, float]] = {}
    for x in recipes:
        r = x.recipe
        if r.hardware.platform == "cpu" or r.gates.benchmark_only:  # a benchmark's checkpoint is no model
            continue
        sizes = {q: s.size_gib for q, s in r.quants.items() if s.size_gib} or {None: r.model.source.size_gib}
        quant, size = min(sizes.items(), key=lambda kv: kv[1] or float("inf"))
        if size is None:
            continue
        try:
            fits = make_plan(_on_one_gpu(x, quant), platform=platform).fits
        except CookbookError:  # not plannable on one GPU as written: the weights alone decide
            fits = size * 2**30 < (platforms.get(platform).device_mib or 0) * 2**20
        was = out.get(r.model.family)
        out[r.model.family] = (bool(was and was[0]) or fits, min(size, was[1]) if was else size)
    return out


def _on_one_gpu(resolved, quant):
    """`resolved` with its smallest quant on one GPU, the rules unjudged (they would refuse before
    the planner counts: that is the planner's question here, not the recipe's)."""
    from cookbook.recipe.resolve import resolve

    sets = ["hardware.gpus=1", "serve.args.tensor_parallel_size=1"]
    args = resolved.recipe.serve.args
    sets += [f"serve.args.{k}=1" for k in ("data_parallel_size", "pipeline_parallel_size") if k in args]
    return resolve(resolved.slug, quant, sets, check=False)
