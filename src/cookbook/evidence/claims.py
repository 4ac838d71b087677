"""results.json's own claims: what the run says of itself, before any file is checked.

The bundle's files and figures are re-checked by the rest of the wing (cookbook.evidence.recheck);
this is the first list of reasons, read from results.json alone.
"""

from __future__ import annotations


def refusals(resolved, doc: dict) -> list[str]:
    """Every reason results.json's own claims cannot verify this recipe (empty list: they can)."""
    out = []
    declared = resolved.recipe.gates.declared()
    if resolved.recipe.gates.benchmark_only:
        out.append(
            f"the recipe is a benchmark only ({resolved.recipe.gates.benchmark_only.strip()[:160]}), "
            "so it can never be verified"
        )
    if not declared:
        out.append("the recipe declares no gates, so there is nothing to verify")
    if not doc.get("complete"):
        out.append("the bundle is incomplete (the run was interrupted); run the gates again")
    if doc.get("recipe_hash") != resolved.content_hash:
        out.append(
            f"the bundle ran on recipe {doc.get('recipe_hash')} but the recipe is now "
            f"{resolved.content_hash}; run the gates again on the current recipe"
        )
    if doc.get("recipe") not in (None, resolved.slug):
        out.append(f"the bundle is for recipe {doc.get('recipe')!r}, not {resolved.slug!r}")
    if doc.get("only"):
        out.append(f"the bundle ran only {doc['only']} (--only); verification needs every declared gate")
    gates = doc.get("gates", {})
    # Every gate in the bundle is one the recipe declares: a verified block lists only evidence
    # the recipe asked for (an extra `passed` gate would read as checked when nothing re-checked it).
    undeclared = sorted(str(k)[:60] for k in gates if k not in declared)
    if undeclared:
        out.append(
            f"the bundle records gates the recipe does not declare: {', '.join(undeclared[:10])}; "
            "a bundle holds exactly the recipe's declared gates"
        )
    for name in declared:
        g = gates.get(name)
        if g is None:
            out.append(f"gate {name} is declared but absent from the bundle")
        elif g.get("status") != "passed":
            out.append(f"gate {name} {g.get('status')}: {g.get('reason', '')[:200]}")
    env = doc.get("environment") or {}
    if env.get("kind") not in ("env-lock", "image"):
        out.append(
            "the bundle records neither an environment lock nor an image digest "
            "(pass --env-lock, --env-lock-cmd or --image-digest to `gates run`)"
        )
    return out


def served_name(resolved) -> str:
    """The model name the recipe's server answers to (served_model_name, else the model)."""
    serve = resolved.recipe.serve
    return str(serve.arg("served_model_name") or serve.model)


def served_model_refusals(resolved, doc: dict) -> list[str]:
    """The bundle's server served the recipe's model name."""
    served = served_name(resolved)
    if doc.get("served_model_name") != served:
        return [f"the bundle's server served {doc.get('served_model_name')!r}, the recipe serves {served!r}"]
    return []
