"""Issue 64, items 9 and 11: `plan --checkpoint` on a FIFO (a file or a shard in a folder) is one
message at once, never a hang; a config.json beside it that is a FIFO or too deep is one message;
a checkpoint of another model (a Gemma GGUF planned as GLM-5.2) is refused, not counted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cookbook.cli import main


def _plan_subprocess(args: list[str]) -> subprocess.CompletedProcess:
    """In a child with a deadline: a FIFO read would block this process forever."""
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "plan", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", ["m.gguf", "m.safetensors", "folder"])
def test_a_fifo_checkpoint_is_refused_at_once(tmp_path, name):
    if name == "folder":
        (tmp_path / "ck").mkdir()
        os.mkfifo(tmp_path / "ck" / "model.safetensors")
        target = tmp_path / "ck"
    else:
        target = tmp_path / name
        os.mkfifo(target)
    run = _plan_subprocess(["gemma3-270m-cpu", "--checkpoint", str(target)])
    assert run.returncode == 2, run.stderr
    assert "FIFO" in run.stderr and "Traceback" not in run.stderr and run.stderr.count("error:") == 1


def test_a_fifo_config_beside_a_checkpoint_is_refused(tmp_path):
    st = tmp_path / "ck"
    st.mkdir()
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"model.embed_tokens.weight": np.zeros((4, 4), dtype=np.float32)}, str(st / "model.safetensors"))
    os.mkfifo(st / "config.json")
    run = _plan_subprocess(["gemma3-270m-cpu", "--checkpoint", str(st)])
    assert run.returncode == 2 and "config.json" in run.stderr and "FIFO" in run.stderr, run.stderr
    os.unlink(st / "config.json")
    (st / "config.json").write_text("[" * 5000 + "]" * 5000)
    run = _plan_subprocess(["gemma3-270m-cpu", "--checkpoint", str(st)])
    assert run.returncode == 2 and "nests more than" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_another_models_checkpoint_is_refused(gemma_gguf):
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--checkpoint", str(gemma_gguf)])
    assert res.exit_code == 2, res.output
    assert "not this recipe's model: attention_heads 64 (recipe) against 4 (checkpoint)" in res.output
    ok = CliRunner().invoke(main, ["plan", "gemma3-270m-cpu", "--checkpoint", str(gemma_gguf)])
    assert ok.exit_code == 0, ok.output


def test_a_config_with_numbers_past_int64_is_read_as_absent(tmp_path):
    """Issue 64, item 10: a 400-digit hidden_size overflowed the plan's float arithmetic (OverflowError)."""
    import json

    import numpy as np
    from safetensors.numpy import save_file

    save_file({"model.embed_tokens.weight": np.zeros((4, 4), dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    big = {"hidden_size": 10**400, "num_hidden_layers": 10**300, "vocab_size": 2**70, "num_attention_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps(big))
    res = CliRunner().invoke(main, ["plan", "gemma3-270m-cpu", "--checkpoint", str(tmp_path)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output and res.exit_code in (0, 2), res.output
