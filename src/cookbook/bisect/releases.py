"""The registry's releases of an engine distribution between two pins, oldest first, read
from PyPI's JSON API (`GET <index>/pypi/<dist>/json`: every release with its files, each file
marked yanked or not) and ordered with packaging.version.

Between the ends, pre-releases and development releases are left out, and so are releases
whose every file is yanked and releases with no files; each is returned with why. Post
releases are releases and stay in. The ends themselves must be releases that have files.
COOKBOOK_PYPI_URL points the reader at another index that serves the same JSON.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import httpx
from packaging.version import InvalidVersion, Version

from cookbook.errors import CookbookError
from cookbook.untrusted import printable

DEFAULT_INDEX = "https://pypi.org"


def index_url() -> str:
    return os.environ.get("COOKBOOK_PYPI_URL", DEFAULT_INDEX).rstrip("/")


@dataclass
class ReleaseList:
    dist: str
    index: str
    versions: list[str]  # oldest first, the ends included
    excluded: list[tuple[str, str]] = field(default_factory=list)  # (version, why), between the ends


def fetch_releases(dist: str, index: str | None = None, timeout_s: float = 15.0) -> dict[str, list[dict]]:
    """version -> its files, as the index's JSON API lists them."""
    index = (index or index_url()).rstrip("/")
    url = f"{index}/pypi/{dist}/json"
    try:
        r = httpx.get(
            url, timeout=httpx.Timeout(timeout_s, connect=10.0), follow_redirects=True
        )  # a stalled index: 15 s
    except httpx.HTTPError as e:
        raise CookbookError(
            f"cannot read the release list of {dist} from {url}: {e}",
            help="check the network (or COOKBOOK_PYPI_URL), then run again",
            exit_code=1,
        ) from None
    if r.status_code == 404:
        raise CookbookError(
            f"{dist} is not on the index {index} ({url}: 404)", help="check the recipe's engine package"
        )
    try:
        r.raise_for_status()
        releases = r.json()["releases"]
        if not isinstance(releases, dict):
            raise TypeError("releases is not an object")
    except (httpx.HTTPError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise CookbookError(
            f"the index answered {url} with no readable release list ({printable(str(e))[:200]})",
            help="check COOKBOOK_PYPI_URL points at a PyPI-compatible JSON API",
            exit_code=1,
        ) from None
    return {str(v): files if isinstance(files, list) else [] for v, files in releases.items()}


def _why_left_out(version: Version, files: list[dict]) -> str | None:
    if version.is_prerelease:  # a, b, rc and .dev
        return "pre-release"
    if not files:
        return "no files"
    if all(isinstance(f, dict) and f.get("yanked") for f in files):
        return "yanked"
    return None


def releases_between(dist: str, good: str, bad: str, index: str | None = None) -> ReleaseList:
    """Releases of dist from good to bad, both included, oldest first."""
    from cookbook.upgrade.scratch import release

    lo, hi = Version(release(good, "--good", dist)), Version(release(bad, "--bad", dist))
    if lo >= hi:
        raise CookbookError(
            f"--good {good} is not older than --bad {bad}",
            help="--good is the release where the gate still passes, --bad a later one where it fails",
        )
    index = (index or index_url()).rstrip("/")
    raw = fetch_releases(dist, index)
    parsed: dict[Version, tuple[str, list[dict]]] = {}
    for text, files in raw.items():
        try:
            v = Version(text) if len(text) <= 64 else None
        except (InvalidVersion, ValueError):  # ValueError: thousands of digits
            v = None
        if v is None:
            continue  # legacy or absurd version strings cannot be ordered; PEP 440 leaves them out
        parsed[v] = (str(v), files)  # the normal form: no spaces, safe as a folder name and a pip pin
    usable = sorted(v for v, (_, files) in parsed.items() if _why_left_out(v, files) is None)
    for end, flag in ((lo, "--good"), (hi, "--bad")):
        hit = parsed.get(end)
        if hit is None or _why_left_out(end, hit[1]) in ("no files", "yanked"):
            near = [str(max(v for v in usable if v < end))] if any(v < end for v in usable) else []
            near += [str(min(v for v in usable if v > end))] if any(v > end for v in usable) else []
            raise CookbookError(
                f"{flag} {end} is not a release of {dist} on {index}"
                + (" (its files are yanked or missing)" if hit else ""),
                help=f"the nearest releases: {', '.join(near) or 'none'}",
            )
    versions, excluded = [], []
    for v in sorted(parsed):
        if not lo <= v <= hi:
            continue
        text, files = parsed[v]
        why = None if v in (lo, hi) else _why_left_out(v, files)
        if why:
            excluded.append((text, why))
        else:
            versions.append(text)
    return ReleaseList(dist=dist, index=index, versions=versions, excluded=excluded)
