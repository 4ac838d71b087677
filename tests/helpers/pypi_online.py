"""Whether pypi.org answers from here: tests against the real index skip, saying so, when it does not."""

from __future__ import annotations

import httpx


def answers(url: str) -> bool:
    try:
        return httpx.head(url, timeout=10, follow_redirects=True).status_code == 200
    except httpx.HTTPError:
        return False
