"""A recipe page's "Build or get the image" section: the `make image` line, the base and what
the port adds, the build inputs nobody publishes, all from cookbook.image.context.plan (what
`cookbook image SLUG --dry-run` prints)."""

from __future__ import annotations

from cookbook.errors import CookbookError
from cookbook.image import context
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
        f"cookbook image {slug} --dry-run   # the Dockerfile, the context and the docker build line; builds nothing",
        "```",
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
        "`cookbook fixes check`."
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
    return lines
