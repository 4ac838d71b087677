"""The documentation site: the Markdown pages `cookbook docs` generates into docs/ (never
edited by hand) and `mkdocs build --strict` (mkdocs.yml, `make site`) turns into the site.
Every relative link a page holds names a generated page, so the strict build resolves them all.

    pages         every generated file (path -> text), and the pages nothing generates any more
    index         docs/index.md: the hardware x model matrix with each recipe's status
    recipe_page   docs/recipes/<slug>.md: summary, fetch, convert, launch, multi-node, buckets, rules, settings
    fix_section   its Fixes section
    evidence      its Gates, Reported figures and Performance sections (the sweep as inline SVG)
    compare       docs/compare/<base>.md: the variants of one base side by side, what differs and why
    errors_page   docs/errors.md: every recipe diagnostic by ID
    rules_page    docs/rules.md: the rule language
    markdown      the pieces every page uses: marker, front matter, table cells, badges

Writing the files, or `--check`ing them, is the CLI's (cookbook.commands.docs).
"""
