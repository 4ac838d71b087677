"""The mkdocs hook (mkdocs.yml `hooks:`) that draws each recipe page's plots into the built site.

The pages link plots/<slug>-<key>.svg (cookbook.site.plots decides which); this adds those files
to the build as generated files, so they exist in site/ only and the strict build resolves them.
"""

from __future__ import annotations

from mkdocs.structure.files import File

from cookbook.errors import CookbookError
from cookbook.recipe.errors import RecipeError
from cookbook.recipe.resolve import resolve
from cookbook.site.plots import plots_of, svg


def on_files(files, config):
    for page in list(files.documentation_pages()):
        if not page.src_uri.startswith("recipes/"):
            continue
        slug = page.src_uri[len("recipes/") : -len(".md")]
        try:
            resolved = resolve(slug, check=False)
        except (RecipeError, CookbookError):  # a page without a recipe (a stale file) has no plots
            continue
        for key, plot in plots_of(resolved).items():
            files.append(File.generated(config, f"plots/{slug}-{key}.svg", content=svg(plot)))
    return files
