"""benchmarks/step_profile.py: py-spy raw samples summed by step, each sample counted once, where it is spent."""

import benchmark_scripts
import pytest

sp = benchmark_scripts.load("step_profile")

RAW = """\
process 1:"VLLM::EngineCore";run_busy_loop (vllm/v1/engine/core.py:10);execute_model (vllm/v1/worker/cpu_model_runner.py:5);forward (vllm/model_executor/models/gemma3.py:300);forward (vllm/model_executor/models/gemma3.py:120);forward (vllm/attention/layer.py:40) 30
process 1:"VLLM::EngineCore";run_busy_loop (vllm/v1/engine/core.py:10);execute_model (vllm/v1/worker/cpu_model_runner.py:5);forward (vllm/model_executor/models/gemma3.py:300);forward (vllm/model_executor/models/gemma3.py:90);_mlp (vllm/model_executor/models/gemma3.py:95) 20
process 1:"VLLM::EngineCore";run_busy_loop (vllm/v1/engine/core.py:10);execute_model (vllm/v1/worker/cpu_model_runner.py:5);compute_logits (vllm/model_executor/models/gemma3.py:400);forward (vllm/model_executor/layers/logits_processor.py:60) 40
process 1:"VLLM::EngineCore";run_busy_loop (vllm/v1/engine/core.py:10);sample_tokens (vllm/v1/worker/cpu_model_runner.py:9);forward (vllm/v1/sample/sampler.py:70) 8
process 1:"VLLM::EngineCore";run_busy_loop (vllm/v1/engine/core.py:10);schedule (vllm/v1/core/sched/scheduler.py:200) 2
Thread.run (threading.py:982);process_output_sockets (vllm/v1/engine/core.py:1968);Queue.get (queue.py:171);Condition.wait (threading.py:327) 50
"""


def test_samples_are_filed_once_under_the_step_they_are_spent_in():
    c = sp.parse(RAW)
    # a thread blocked in a wait inside vLLM's own code is waiting, not the step around it
    assert c == {"attention": 30, "MLP": 20, "output head (logits)": 40, "sampling": 8, "scheduler": 2, sp.WAITING: 50}
    t = sp.table(c)
    assert "| output head (logits) | 40 | 40.0% |" in t and "| busy | 100 | 100% |" in t
    assert f"| {sp.WAITING} | 50 | not counted |" in t


@pytest.mark.parametrize("bad", ["not a profile\n", "a;b;c twelve\n", "", "frame (x.py:1) 3\n" + "x" * 10 + "\n"])
def test_a_truncated_or_foreign_file_is_refused_not_summed(bad, tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_text(bad)
    assert sp.main([str(f)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "help:" in err
    assert sp.main([str(tmp_path / "missing.txt")]) == 2
