"""benchmarks/mxfp4_moe/compare_vllm.py finds vLLM's vendored triton_kernels in the vLLM on the path (the offline payload's
unpacked engine), without importing vLLM, and refuses with the fix when there is none."""

import subprocess
import sys
from pathlib import Path

import benchmark_scripts

TOOL = "mxfp4_moe/compare_vllm"


def _find(path_entry: Path | None) -> str:
    code = (
        "import sys\n"
        + (f"sys.path.insert(0, {str(path_entry)!r})\n" if path_entry else "sys.modules['vllm'] = None\n")
        + "from compare_vllm import vendored_triton_kernels\n"
        "print(vendored_triton_kernels(), 'vllm' in sys.modules and sys.modules['vllm'] is not None)\n"
    )
    env = benchmark_scripts.env(TOOL)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split()


def test_the_engine_on_the_path_gives_its_third_party_folder(tmp_path):
    engine = tmp_path / "engine"
    (engine / "vllm" / "third_party" / "triton_kernels").mkdir(parents=True)
    (engine / "vllm" / "__init__.py").write_text("raise SystemExit('imported vllm')\n")
    (engine / "vllm" / "third_party" / "triton_kernels" / "matmul_ogs.py").write_text("")
    found, imported = _find(engine)
    assert Path(found) == engine / "vllm" / "third_party" and imported == "False"


def test_an_engine_without_triton_kernels_gives_none(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    assert _find(tmp_path)[0] == "None"


def test_without_vllm_the_tool_stops_with_the_fix():
    code = (
        "import sys; sys.modules['vllm'] = None; sys.argv = ['compare_vllm']\n"
        "from compare_vllm import main\nsys.exit(main())\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=benchmark_scripts.env(TOOL))
    assert res.returncode == 2
    assert "receive.py --installed" in res.stderr and "--triton-kernels DIR" in res.stderr
