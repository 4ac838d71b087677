"""docs/rules.md: the rule language recipes write their `conflicts`/`requires` rules in."""

from __future__ import annotations

from cookbook.recipe import expr
from cookbook.site.markdown import MARKER


def rules_page() -> str:
    return "\n".join(
        [
            MARKER,
            "# The rule language",
            "",
            "Recipes state their `conflicts`/`requires` rules as expressions:",
            "",
            "```text",
            expr.__doc__.strip(),
            "```",
            "",
        ]
    )
