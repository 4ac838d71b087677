"""Recipes: schema, loading, resolution, refusal and rendering."""

from cookbook.recipe.errors import Diagnostic, RecipeError
from cookbook.recipe.resolve import ResolvedRecipe, all_slugs, resolve

__all__ = ["Diagnostic", "RecipeError", "ResolvedRecipe", "all_slugs", "resolve"]
