"""The Kimi K3 stale-extension check: a _C_stable_libtorch older than a .cuh it compiles fails
(exit 1), a rebuilt one passes, and a tree with no built extension fails. Real files; their
times set as a build would leave them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.errors import CookbookError
from cookbook.image.stale_extension import check


def tree(tmp_path: Path, ext_time: float, cuh_time: float) -> Path:
    cuh = tmp_path / "csrc" / "quantization" / "mmq_expert_ids.cuh"
    cuh.parent.mkdir(parents=True)
    cuh.write_text("// the MMQ expert-id fix\n")
    ext = tmp_path / "vllm" / "_C_stable_libtorch.abi3.so"
    ext.parent.mkdir(parents=True)
    ext.write_bytes(b"\x7fELF")
    os.utime(cuh, (cuh_time, cuh_time))
    os.utime(ext, (ext_time, ext_time))
    return tmp_path


def test_extension_older_than_its_cuh_fails(tmp_path):
    t = tree(tmp_path, ext_time=1_000_000, cuh_time=2_000_000)
    with pytest.raises(CookbookError) as exc:
        check(t)
    assert exc.value.exit_code == 1
    msg = exc.value.format_message()
    assert "vllm/_C_stable_libtorch.abi3.so is older than csrc/quantization/mmq_expert_ids.cuh" in msg
    assert "zeroes every expert above 255" in msg


def test_rebuilt_extension_passes(tmp_path):
    t = tree(tmp_path, ext_time=2_000_001, cuh_time=2_000_000)
    assert "newer than all 1 .cuh files" in check(t)


def test_no_extension_built_fails(tmp_path):
    t = tree(tmp_path, ext_time=1, cuh_time=2)
    (t / "vllm" / "_C_stable_libtorch.abi3.so").unlink()
    with pytest.raises(CookbookError) as exc:
        check(t)
    assert exc.value.exit_code == 1 and "was not built from this tree" in exc.value.format_message()


def test_the_ports_check_script_runs_it(tmp_path):
    t = tree(tmp_path, ext_time=1_000_000, cuh_time=2_000_000)
    done = subprocess.run(
        [sys.executable, "-m", "cookbook.image.stale_extension", str(t)], capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stderr.startswith("error: vllm/_C_stable_libtorch.abi3.so is older")
    script = Path(__file__).resolve().parents[2] / "ports" / "slimserve" / "check.sh"
    assert "cookbook.image.stale_extension /opt/slimserve" in script.read_text()
