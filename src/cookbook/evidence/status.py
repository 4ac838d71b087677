"""verified / stale / unverified: the one answer every command shows (list, show, lint, the docs, serve).

    verified                      the verified block's recipe_hash is the recipe's current content hash,
                                  AND the bundle it names is present, records the block's environment
                                  and passes the re-check (cookbook.evidence.recheck: manifest,
                                  environment, resolved recipe, every gate's figures recomputed and
                                  judged against the recipe)
    stale                         the block's recipe_hash differs: the recipe changed after it was verified
    unverified                    no block (or the recipe does not resolve)
    unverified (bundle missing)   the block's hash is current but the bundle it names is not there
                                  (or it names none): a hand-written or orphaned block
    unverified (bundle refused)   the bundle is there but fails the re-check (edited, forged, an older
                                  bundle format without a manifest, or figures that miss a threshold)

The words, and what the block alone says (no block, or a stale one), are the recipe package's
(cookbook.recipe.verified), so `cookbook lint` can say `stale` without this wing; only here is a
recipe called verified. A passed re-check is remembered (cookbook.evidence.passed_cache); the files
are checked against the manifest every time. One status check reads results.json once and checks
(hashes) the manifest once, and hands both to the re-check.
"""

from __future__ import annotations

from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.evidence import engine_check
from cookbook.evidence.environment import environment_of
from cookbook.evidence.manifest import checked_manifest
from cookbook.evidence.passed_cache import passed_before, remember_pass
from cookbook.evidence.recheck import recheck
from cookbook.gates.bundle import RESULTS
from cookbook.gates.recorded import read_json
from cookbook.recipe import errors as E
from cookbook.recipe import paths
from cookbook.recipe.resolve import resolve
from cookbook.recipe.verified import BUNDLE_MISSING, BUNDLE_REFUSED, UNVERIFIED, VERIFIED, block_status
from cookbook.untrusted import inside, printable


def bundle_path(ref: str) -> Path:
    """A verified block's `bundle:`, relative to the checkout root (or the recipes folder's parent).
    ValueError for a path `gates verify` would never write: absolute, or leading out of the checkout
    (`..`, a link), so a hand-written block cannot point at evidence the repository does not hold."""
    try:
        root = inside(paths.repo_root(), ref)
    except ValueError as e:
        raise ValueError(
            f"the verified block's bundle {printable(str(ref)[:200])!r} {e}; `gates verify` writes only paths "
            "inside the repository"
        ) from None
    return root if root.exists() else inside(paths.recipes_dir().parent, ref)


def bundle_problem(resolved) -> tuple[str, list[str]] | None:
    """None when the recipe's verified block names a present bundle that agrees with the block and
    passes the re-check; else (BUNDLE_MISSING or BUNDLE_REFUSED, the reasons)."""
    block = resolved.recipe.verified
    if not block.bundle:
        return BUNDLE_MISSING, ["the verified block names no bundle"]
    try:
        path = bundle_path(block.bundle)
    except ValueError as e:
        return BUNDLE_REFUSED, [str(e)]
    if not (path / RESULTS).is_file():
        return BUNDLE_MISSING, [f"the verified block's bundle {block.bundle} is not there"]
    try:
        doc = read_json(path / RESULTS)
    except (ValueError, UnicodeDecodeError) as e:
        return BUNDLE_REFUSED, [f"{RESULTS} cannot be read ({e})"]
    if not isinstance(doc, dict) or block.environment != environment_of(doc):
        return BUNDLE_REFUSED, [
            f"the verified block records environment {block.environment!r}, the bundle "
            f"{environment_of(doc) if isinstance(doc, dict) else None!r}"
        ]
    reasons, manifest_sha = checked_manifest(path)
    if reasons:
        return BUNDLE_REFUSED, reasons
    if passed_before(manifest_sha, resolved):
        return None
    reasons = recheck(resolved, path, doc, manifest=[])  # results.json as read above; its manifest passed
    if reasons:
        return BUNDLE_REFUSED, reasons
    remember_pass(path, manifest_sha, resolved)
    return None


def status_and_reasons(resolved) -> tuple[str, list[str]]:
    """(status, the reasons behind an 'unverified (...)' status; empty otherwise). The recorded hash
    is of the configuration the gates ran on (the recipe as written: default quant, no --set)."""
    word = block_status(resolved)
    if word is not None:
        return word, []
    problem = bundle_problem(resolved)
    return (VERIFIED, []) if problem is None else problem


def status_of(resolved) -> str:
    """Status of an already resolved recipe."""
    return status_and_reasons(resolved)[0]


def shown_status(resolved, word: str, checked: tuple[str | None, list[str]] | None = None) -> str:
    """What the status list, show and the site print: verified as it is; otherwise the engine check's
    word beside it (cookbook.evidence.engine_check; `checked`: its status, when the caller has it)."""
    if word == VERIFIED:
        return word
    if checked is None:
        try:
            checked = engine_check.status(resolved)
        except (CookbookError, ValueError, OSError) as e:  # a recipe the planner refuses shows no engine check
            checked = f"engine-check refused ({str(e).splitlines()[0][:80]})", []
    found = checked[0]
    return word if found is None else f"{word}; {found}"


def verified_status(slug_or_path: str | Path) -> str:
    """Status of a recipe by slug or path; 'unverified' when it cannot resolve."""
    try:
        resolved = resolve(slug_or_path, check=False)
    except E.RecipeError:
        return UNVERIFIED
    return status_of(resolved)
