"""Byte units and how the cookbook prints them: one GiB, one GiB formatter."""

from __future__ import annotations

GIB = 2**30


def gib(n: float, width: int = 0) -> str:
    """n bytes as GiB, two decimals with thousands separators ("1,234.56 GiB"); the number right-aligned
    in `width` characters (the plan's tables)."""
    return f"{f'{n / GIB:,.2f}'.rjust(width)} GiB"
