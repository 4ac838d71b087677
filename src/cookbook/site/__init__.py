"""The documentation site: the Markdown pages `cookbook docs` generates into docs/ (never
edited by hand) and `mkdocs build --strict` (mkdocs.yml, `make site`) turns into the site.
Every relative link a page holds names a generated page, so the strict build resolves them all.

    pages          every generated file (path -> text: the pages and the stylesheet; the index's filter
                   script, docs/assets/cookbook.js, is hand-written), and the pages nothing generates any more
    index          docs/index.md: one matrix per model family (hardware columns, H100/H200 always),
                   a hardware filter, the benchmark-only recipes set apart, every recipe
    recipe_page    docs/recipes/<slug>.md in the order a user works (its docstring lists the parts)
    plan_section   its "Will it fit": the memory plan (`cookbook plan`)
    image_section  its "Build or get the image": `make image`, the base, the port, the build inputs
    talk           its "Talk to it": curl and openai-client examples, reasoning and tool fields
    fix_section    its Fixes section
    evidence       its Gates and Performance sections (measured, then reported)
    plots          which throughput plots a page has, and drawing them (matplotlib)
    hooks          the mkdocs hook that draws the plots into the built site (never into docs/)
    compare        docs/compare/<base>.md: the variants of one base side by side, what differs and why
    errors_page    docs/errors.md: every recipe diagnostic by ID
    rules_page     docs/rules.md: the rule language
    markdown       the pieces every page uses: marker, front matter, table cells, badges, benchmark-only

Writing the files, or `--check`ing them, is the CLI's (cookbook.commands.docs).
"""
