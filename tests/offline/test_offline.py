"""cookbook offline: pieces cut here (pack.split) and taken in on the host (receive.py, run as the
host runs it: a bare python3 on the script file). The payload is built like pack.pack builds it:
a tar of contents.json, an engine tar.xz with a console script, and a real wheel pip installs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from offline_payload import RECEIVE, only, payload_tar

from cookbook.errors import CookbookError
from cookbook.files import repo_root
from cookbook.offline import pack


@pytest.fixture
def pieces(tmp_path):
    payload = payload_tar(tmp_path)
    out = tmp_path / "pieces"
    out.mkdir()
    manifest = pack.split(payload, out, piece_bytes=max(1, payload.stat().st_size // 3 + 1))
    (out / "pieces.json").write_text(json.dumps(manifest))
    return out, manifest


def _receive(src: Path, into: Path):
    return subprocess.run([sys.executable, str(RECEIVE), str(src), "--into", str(into)], capture_output=True, text=True)


def test_split_covers_the_payload_exactly(pieces, tmp_path):
    out, manifest = pieces
    assert len(manifest["pieces"]) == 3
    joined = b"".join((out / p["name"]).read_bytes() for p in manifest["pieces"])
    assert hashlib.sha256(joined).hexdigest() == manifest["sha256"]
    assert [p["offset"] for p in manifest["pieces"]] == [
        0,
        manifest["pieces"][1]["offset"],
        manifest["pieces"][2]["offset"],
    ]


def test_pieces_one_per_transfer_any_order_then_install(pieces, tmp_path):
    out, manifest = pieces
    into = tmp_path / "host"
    names = [p["name"] for p in manifest["pieces"]]
    # the third arrives first: it waits; a repeated transfer of the first is not appended twice
    for i, batch in enumerate([[names[2]], [names[0]], [names[0]], [names[1]]]):
        r = _receive(only(out, batch, tmp_path / f"t{i}"), into)
        assert r.returncode == 0, r.stderr
    assert "installed fakeengine==9.9 and 2 wheels" in r.stdout
    env = (into / "env.sh").read_text()
    # `hidden` is importable only through the .pth's folder: env.sh must list what the .pth adds
    run = subprocess.run(
        ["bash", "-c", f"{env}\nfakeengine && python3 -c 'import tinydep, hidden; print(tinydep.VALUE, hidden.WHERE)'"],
        capture_output=True,
        text=True,
    )
    assert run.stdout.split() == ["engine", "main", "ran", "42", "inner"], run.stderr
    assert not (into / "payload.tar").exists()  # unpacked, then removed


def test_corrupt_piece_is_refused_and_nothing_appended(pieces, tmp_path):
    out, manifest = pieces
    into = tmp_path / "host"
    bad = only(out, [manifest["pieces"][0]["name"]], tmp_path / "bad")
    p = bad / manifest["pieces"][0]["name"]
    p.write_bytes(b"x" + p.read_bytes()[1:])
    r = _receive(bad, into)
    assert r.returncode == 1
    assert "sha256 mismatch" in r.stderr and "help:" in r.stderr
    assert not (into / "payload.tar").exists()


def test_pieces_of_another_payload_are_refused(pieces, tmp_path):
    out, manifest = pieces
    into = tmp_path / "host"
    assert _receive(only(out, [manifest["pieces"][0]["name"]], tmp_path / "a"), into).returncode == 0
    other = json.loads((out / "pieces.json").read_text())
    other["sha256"] = "0" * 64
    (out / "pieces.json").write_text(json.dumps(other))
    r = _receive(out, into)
    assert r.returncode == 1 and "another payload" in r.stderr


def test_requirements_evaluates_markers_and_drops_what_the_host_has(tmp_path):
    meta = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: eng",
            "Version: 1",
            "Requires-Dist: numpy",
            "Requires-Dist: fastapi[standard]<1",
            "Requires-Dist: video-codec; platform_system == 'Linux'",
            "Requires-Dist: winonly; sys_platform == 'win32'",
            "Requires-Dist: old-py; python_version < '3.10'",
            "Requires-Dist: testing-tool; extra == 'test'",
        ]
    )
    whl = tmp_path / "eng-1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("eng-1.dist-info/METADATA", meta + "\n")
    spec = pack.OfflineSpec(
        python="3.12",
        platforms=["any"],
        host="test",
        host_packages={"numpy"},
        engine_drop={},
        skip={"video-codec": "no video"},
        no_deps={},
    )
    assert pack.requirements(whl, spec) == ["fastapi[standard]<1"]


def test_malformed_offline_spec_is_one_clear_error(tmp_path):
    bad = tmp_path / "offline.yaml"
    bad.write_text("python: '3.12'\n")
    with pytest.raises(CookbookError, match="malformed offline spec"):
        pack.OfflineSpec.load(bad)
    with pytest.raises(CookbookError, match="no offline spec"):
        pack.OfflineSpec.load(tmp_path / "absent.yaml")


def test_the_h200_recipes_offline_spec_loads():
    spec = pack.OfflineSpec.load(repo_root() / "recipes" / "gemma3-270m-h200" / "offline.yaml")
    assert {"torch", "transformers", "triton"} <= spec.host_packages
    assert "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" in spec.engine_drop
    assert not spec.skip.keys() & spec.no_deps.keys()


def test_dsv4_spec_extends_the_gemma_one_and_carries_tilelang():
    recipes = repo_root() / "recipes"
    base = pack.OfflineSpec.load(recipes / "gemma3-270m-h200" / "offline.yaml")
    spec = pack.OfflineSpec.load(recipes / "dsv4-flash-perf-h200" / "offline.yaml")
    assert spec.host_packages == base.host_packages
    assert base.constraints.items() <= spec.constraints.items() and "quack-kernels==0.6.1" in spec.constraints
    assert "tilelang" in base.skip and "tilelang" not in spec.skip and "tilelang" in spec.no_deps
    assert spec.extra[: len(base.extra)] == base.extra and any(e.startswith("z3-solver") for e in spec.extra)
    # the CuTe DSL (the KV compressor's `import cutlass`) with CUDA 13's libraries, not the CUDA 12 ones
    assert "nvidia-cutlass-dsl" in base.skip and "nvidia-cutlass-dsl" not in spec.skip
    assert "nvidia-cutlass-dsl" in spec.no_deps and "nvidia-cutlass-dsl-libs-cu12" in spec.skip
    # and quack, which those kernels import too (quack.compile_utils), carried where the base skips it
    assert "quack-kernels" in base.skip and "quack-kernels" not in spec.skip and "quack-kernels" in spec.no_deps


def test_dsv4_payload_carries_the_cute_dsl_release_vllm_026_pins():
    """vLLM 0.26.0 pins nvidia-cutlass-dsl[cu13]==X (requirements/cuda.txt); the payload carries the
    [cu13] extra's libraries at that X, since nvidia-cutlass-dsl itself comes without its requirements."""
    from vllm_sdist import source_or_skip

    cuda_txt = (source_or_skip("0.26.0").parent / "requirements" / "cuda.txt").read_text()
    (pin,) = [ln.split("==")[1].strip() for ln in cuda_txt.splitlines() if ln.startswith("nvidia-cutlass-dsl[cu13]==")]
    spec = pack.OfflineSpec.load(repo_root() / "recipes" / "dsv4-flash-perf-h200" / "offline.yaml")
    assert f"nvidia-cutlass-dsl-libs-cu13=={pin}" in spec.extra
    assert f"nvidia-cutlass-dsl-libs-base=={pin}" in spec.extra


def _spec_file(folder: Path, slug: str, text: str) -> Path:
    (folder / slug).mkdir(parents=True)
    path = folder / slug / "offline.yaml"
    path.write_text(text)
    return path


def test_extends_merges_mappings_and_refuses_loops_and_missing_bases(tmp_path):
    base = "python: '3.12'\nplatforms: [any]\nhost: h\nhost_packages: [numpy]\nskip: {a: why a, b: why b}\n"
    _spec_file(tmp_path, "base", base + "extra: [x==1]\n")
    child = _spec_file(tmp_path, "child", "extends: base\nskip: {a: null, c: why c}\nextra: [y==2]\n")
    spec = pack.OfflineSpec.load(child)
    assert spec.skip == {"b": "why b", "c": "why c"} and spec.extra == ["x==1", "y==2"]
    assert spec.host_packages == {"numpy"}
    missing = _spec_file(tmp_path, "orphan", "extends: nowhere\n")
    with pytest.raises(CookbookError, match="`extends: nowhere` names no recipe"):
        pack.OfflineSpec.load(missing)
    _spec_file(tmp_path, "loop-a", "extends: loop-b\n")
    loop_b = _spec_file(tmp_path, "loop-b", "extends: loop-a\n")
    with pytest.raises(CookbookError, match="loops back"):
        pack.OfflineSpec.load(loop_b)


def test_a_no_deps_requirement_neither_carried_on_host_nor_skipped_is_refused():
    spec = pack.OfflineSpec(
        python="3.12",
        platforms=["any"],
        host="test",
        host_packages={"torch"},
        engine_drop={},
        skip={"cudnn-frontend": "not on this path"},
        no_deps={"compressed-tensors": "pulls torch"},
    )
    meta = {
        "name": "compressed-tensors",
        "version": "0.17.0",
        "requires_dist": ["torch", "cudnn-frontend", "pydantic>=2", "loguru", "winonly; sys_platform == 'win32'"],
    }
    with pytest.raises(CookbookError) as err:
        pack._check_unresolved([meta], {"pydantic": ("pydantic", "2.11.0")}, spec)
    assert "needs loguru: neither carried, on the host, nor skipped" in str(err.value)
    assert "winonly" not in str(err.value) and "cudnn" not in str(err.value)
    pack._check_unresolved([meta], {"pydantic": ("pydantic", "2.11.0"), "loguru": ("loguru", "0.7.3")}, spec)
    with pytest.raises(CookbookError, match="needs pydantic>=2, the payload has 1.10"):
        pack._check_unresolved([meta], {"pydantic": ("pydantic", "1.10"), "loguru": ("loguru", "0.7.3")}, spec)


def test_checkout_size_counts_tracked_and_untracked_files_but_not_ignored_ones(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text(".carry/\n")
    (repo / "tracked.bin").write_bytes(b"t" * 2**20)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    (repo / "untracked.bin").write_bytes(b"u" * 2**19)
    (repo / ".carry").mkdir()
    (repo / ".carry" / "piece-01").write_bytes(b"p" * 5 * 2**20)
    assert pack.checkout_mib(repo) == pytest.approx(1.5, abs=0.01)
    with pytest.raises(CookbookError, match="not a git checkout"):
        pack.checkout_mib(tmp_path / "elsewhere")


# Import name -> distribution, for the libraries vLLM 0.26.0's DeepSeek-V4 code imports (a new one
# fails the test below until it is named here and the payload carries it or the host has it).
DSV4_IMPORTS = {
    "cutlass": "nvidia-cutlass-dsl",
    "quack": "quack-kernels",
    "cuda": "cuda-bindings",
    "regex": "regex",
    "transformers": "transformers",
    "torch": "torch",
    "numpy": "numpy",
    "triton": "triton",
    "tilelang": "tilelang",
    "einops": "einops",
}


def _imported_top_levels(root: Path, leave_out: set[str]) -> set[str]:
    import ast

    names = set()
    for path in root.rglob("*.py"):
        if leave_out & set(path.relative_to(root).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports inside functions included
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"vllm", "__future__"}


def test_every_library_dsv4_imports_is_on_the_host_or_carried():
    """Each library vLLM 0.26.0's models/deepseek_v4 imports (other platforms' folders left out), at
    module level or lazily inside a kernel, reaches the H200 host: the host has it, or it is not
    skipped by the payload spec (so the engine's requirements or the spec's extras carry it). A library
    skipped here surfaced on the H200 only minutes into a server start ("No module named 'cutlass'")."""
    from vllm_sdist import source_or_skip

    src = source_or_skip("0.26.0")
    spec = pack.OfflineSpec.load(repo_root() / "recipes" / "dsv4-flash-perf-h200" / "offline.yaml")
    from packaging.requirements import Requirement

    lines = [*spec.extra]
    for txt in ("cuda.txt", "common.txt"):
        lines += (src.parent / "requirements" / txt).read_text().splitlines()
    wanted = {
        pack.normalize(Requirement(ln.split("#")[0].strip()).name)
        for ln in lines
        if ln.split("#")[0].strip() and not ln.lstrip().startswith("-")
    }
    unknown, missing = [], []
    for name in sorted(_imported_top_levels(src / "models" / "deepseek_v4", {"amd", "xpu"})):
        dist = DSV4_IMPORTS.get(name)
        if dist is None:
            unknown.append(name)
        elif dist not in spec.host_packages and (dist in spec.skip or dist not in wanted):
            missing.append(f"{name} ({dist})")
    assert not unknown, f"imports not in DSV4_IMPORTS: {unknown}"
    assert not missing, f"neither on the host nor carried: {missing}"
