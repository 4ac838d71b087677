"""Fetch a released vLLM source tree from PyPI (the sdist), to check a profile's fixes
against the source of a pin this machine cannot run (e.g. vllm 0.30.0 for Gaudi).
Used by tests/fixes/test_v030_source.py and test_v026_source.py.

The sdist is found on PyPI's simple index, checked against the sha256 the index gives,
and unpacked under .cache/vllm-src/<version>/ (reused on later calls).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tarfile
from pathlib import Path

import httpx

from cookbook.files import repo_root
from cookbook.fixes.pack import FixError

INDEX = "https://pypi.org/simple/vllm/"


def cache_dir() -> Path:
    return repo_root() / ".cache" / "vllm-src"


def vllm_source(version: str) -> Path:
    """The `vllm` package directory of the vllm==version sdist (downloaded once)."""
    dest = cache_dir() / version
    pkg = dest / f"vllm-{version}" / "vllm"
    if (pkg / "_version.py").is_file():
        return pkg
    name = f"vllm-{version}.tar.gz"
    try:
        r = httpx.get(INDEX, headers={"Accept": "text/html"}, timeout=60, follow_redirects=True)
        r.raise_for_status()
        page = r.text
    except (httpx.HTTPError, OSError) as e:
        raise FixError(f"cannot read {INDEX}: {e}\nhelp: check network access to PyPI") from None
    m = re.search(r'href="([^"]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', page)
    if not m:
        raise FixError(f"{name} is not on {INDEX}\nhelp: check the version")
    url, sha = m.group(1), m.group(2)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / name
    tmp = archive.with_suffix(".part")
    h = hashlib.sha256()
    try:
        with httpx.stream("GET", url, timeout=300, follow_redirects=True) as r, open(tmp, "wb") as f:
            r.raise_for_status()
            for chunk in r.iter_bytes(1 << 20):
                h.update(chunk)
                f.write(chunk)
    except (httpx.HTTPError, OSError) as e:
        tmp.unlink(missing_ok=True)
        raise FixError(f"cannot download {url}: {e}\nhelp: check network access to PyPI") from None
    if h.hexdigest() != sha:
        tmp.unlink()
        raise FixError(f"{url}: sha256 {h.hexdigest()} is not the index's {sha}\nhelp: retry the download")
    tmp.rename(archive)
    unpack = dest / "unpack.tmp"
    shutil.rmtree(unpack, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpack, filter="data")
    (unpack / f"vllm-{version}").rename(dest / f"vllm-{version}")
    shutil.rmtree(unpack)
    return pkg
