"""Does a server answer at all? One request with a short deadline and no retries, asked before a
command hands a URL to a client that retries a stalled server for minutes (huggingface_hub's
downloads and listings back off and retry each timeout).

`why_not(url)` is None once the server sends a response (any status: a 404 is an answer), else one
line saying why: refused, unresolvable, or silent past the deadline. A stalled server therefore
costs a command STALL_S seconds, not the client's retries.
"""

from __future__ import annotations

import httpx

STALL_S = 15.0  # seconds a server may stay silent before a command gives up on it


def why_not(url: str, timeout_s: float = STALL_S) -> str | None:
    try:
        with httpx.stream("GET", url, timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))) as r:
            r.status_code  # noqa: B018 - the headers arrived: it answers
    except httpx.TimeoutException:
        return f"no answer within {timeout_s:g} s (the server accepts connections but stays silent)"
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return f"{type(e).__name__}: {first}" if first else type(e).__name__
    return None
