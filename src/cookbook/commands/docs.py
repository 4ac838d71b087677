"""`cookbook maint docs`: generate docs/ from the recipes and the code (never edited by hand).

The pages themselves are cookbook.site's; this command writes them, or with --check fails
when any is stale or extra.
"""

from __future__ import annotations

import click

from cookbook.errors import FAILED, CookbookError
from cookbook.generated_files import write_or_check


@click.command("docs")
@click.option("--check", is_flag=True, help="Fail if any generated page is stale or extra.")
def docs_cmd(check):
    """Generate docs/ (recipe pages with launch blocks, the index matrix, comparisons, errors, rules)."""
    from cookbook.recipe.errors import RecipeError
    from cookbook.site.pages import obsolete, pages

    try:
        generated = pages()
    except RecipeError as exc:
        raise CookbookError(
            exc.refusing("cannot generate docs: a recipe does not resolve").format_message(),
            help="run `cookbook lint` and fix the recipe first",
            exit_code=FAILED,
        ) from None
    n = write_or_check(generated, check=check, command="cookbook docs", obsolete=obsolete(generated))
    if check:
        click.echo(f"docs/: {n} pages up to date")
