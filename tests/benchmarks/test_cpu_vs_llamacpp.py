"""benchmarks/cpu_vs_llamacpp.py (`make bench`), its parts that need no server: what the client is
told to send for each workload, llama-server's flags per concurrency, and a table that reports
failed requests beside the throughput and ratios per round."""

from pathlib import Path

import benchmark_scripts
import pytest

from cookbook.recipe.gates_spec.speed import SpeedChat


@pytest.fixture(scope="module")
def bench():
    return benchmark_scripts.load("cpu_vs_llamacpp")


def _opt(argv, name):
    return argv[argv.index(name) + 1]


def test_chat_goes_to_the_chat_endpoint_at_the_workloads_sampling(bench, tmp_path):
    chat = SpeedChat(temperature=0.7, top_p=0.9)
    argv = bench.bench_argv("http://h:1", "m", "/tok", tmp_path / "p.jsonl", 16, 4, 128, chat, tmp_path, "r.json")
    assert _opt(argv, "--backend") == "openai-chat" and _opt(argv, "--endpoint") == "/v1/chat/completions"
    assert (_opt(argv, "--temperature"), _opt(argv, "--top-p")) == ("0.7", "0.9")
    assert "--skip-chat-template" in argv  # the question is the user message; the server applies its template
    assert "--ignore-eos" in argv and _opt(argv, "--custom-output-len") == "128"
    assert _opt(argv, "--header") == "Connection=close"  # no kept-alive connection for llama-server to drop
    prose = bench.bench_argv("http://h:1", "m", "/tok", tmp_path / "p.jsonl", 16, 4, 128, None, tmp_path, "r.json")
    assert _opt(prose, "--endpoint") == "/v1/completions" and _opt(prose, "--temperature") == "0"
    assert "--top-p" not in prose


def test_llama_server_gets_a_slot_per_stream_and_its_spec_flags(bench):
    argv = bench.llama_argv("/b/llama-server", Path("/m.gguf"), "m", 8000, 16, 2, "/t.jinja", bench.LLAMA_SPEC_FLAGS)
    assert (_opt(argv, "-np"), _opt(argv, "-c"), _opt(argv, "-t"), _opt(argv, "-tb")) == ("16", "16384", "2", "2")
    assert _opt(argv, "-fa") == "on" and _opt(argv, "--chat-template-file") == "/t.jinja" and "--jinja" in argv
    assert _opt(argv, "--spec-type") == "ngram-simple"
    plain = bench.llama_argv("/b/llama-server", Path("/m.gguf"), "m", 8000, 1, 2, None, "")
    assert _opt(plain, "-np") == "1" and "--spec-type" not in plain and "--jinja" not in plain


def test_requests_per_level(bench):
    assert bench.requests_per_level([16], [1, 4, 16]) == {1: 16, 4: 16, 16: 16}
    assert bench.requests_per_level([8, 16, 16], [1, 4, 16]) == {1: 8, 4: 16, 16: 16}
    with pytest.raises(SystemExit, match="fewer requests than streams"):
        bench.requests_per_level([8], [1, 16])


def test_table_reports_failures_beside_throughput_and_ratios_per_round(bench):
    def row(server, rnd, tput, failed=0):
        return {
            "round": rnd,
            "server": server,
            "workload": "prose",
            "load": "quiet",
            "c": 16,
            "output_throughput": tput,
            "median_tpot_ms": 50.0,
            "failed": failed,
        }

    results = [row("recipe", 1, 200.0), row("recipe", 2, 180.0), row("defaults", 1, 100.0), row("defaults", 2, 200.0)]
    results += [row("llama.cpp", 1, 100.0, failed=1), row("llama.cpp", 2, 90.0)]
    results += [row("llama.cpp+ngram", 1, 160.0), row("llama.cpp+ngram", 2, 60.0)]
    servers = ["recipe", "defaults", "llama.cpp", "llama.cpp+ngram"]
    lines = bench.tables(results, servers, [16], ["prose"], ["quiet"])
    line = next(x for x in lines if x.startswith("| 16 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:5] == ["180.0-200.0 (0)", "100.0-200.0 (0)", "90.0-100.0 (1)", "60.0-160.0 (0)"]
    # round 1: 200 / max(100, 160); round 2: 180 / max(90, 60) -> 1.25 and 2.00
    assert cells[5] == "1.25-2.00x"
    assert cells[6] == "0.90-2.00x"  # 180/200 and 200/100


def test_the_defaults_server_keeps_only_what_it_is_told(bench):
    from cookbook.recipe.resolve import resolve

    recipe = resolve("gemma3-270m-cpu-avx2")
    plain = bench.defaults_server("gemma3-270m-cpu-avx2", recipe, [])
    assert set(plain.recipe.serve.args) == {"served_model_name", "host", "port", "max_model_len"}
    assert set(plain.recipe.env) <= set(bench.KEEP_ENV_FOR_DEFAULTS)
    kept = bench.defaults_server("gemma3-270m-cpu-avx2", recipe, ["dtype"])
    assert kept.recipe.serve.args["dtype"].value == "float32"
    assert "speculative_config" not in kept.recipe.serve.args


def test_a_defaults_keep_name_the_recipe_lacks_is_refused_with_the_names_it_has(bench, capsys):
    from cookbook.recipe.resolve import resolve

    recipe = resolve("gemma3-270m-cpu-avx2")
    with pytest.raises(SystemExit) as e:
        bench.defaults_server("gemma3-270m-cpu-avx2", recipe, ["dtype", "no_such_flag"])
    assert "--defaults-keep no_such_flag: not a serve setting of gemma3-270m-cpu-avx2" in str(e.value)
    assert "dtype" in str(e.value).split("name one of:")[1]


def _grow_and_report(n_mib):
    import os

    hold = bytearray(n_mib << 20)  # what a leaking run would leave behind
    return os.getpid(), len(hold)


def _die():
    import os

    os._exit(3)


def test_each_bench_run_goes_to_a_child_whose_memory_dies_with_it(bench):
    import os
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pid, n = bench.in_fork(_grow_and_report, 256)
    assert pid != os.getpid() and n == 256 << 20
    # the parent never held the child's 256 MiB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 128 << 10


def test_a_child_that_dies_is_reported_not_hung(bench):
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):
        bench.in_fork(_die)


def test_a_resumed_run_sends_the_prompts_its_first_part_sent(bench, tmp_path):
    import json

    a, b = tmp_path / "round-1" / "defaults", tmp_path / "round-1" / "recipe"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (a / "prompts-prose-quiet-c4.jsonl").write_text(json.dumps({"prompt": "p1 abc"}) + "\n")
    fresh = {(1, "quiet", "prose", 4): ["p1 new-suffix"], (1, "loaded", "prose", 4): ["p2 new-suffix"]}
    got = bench.saved_prompts(tmp_path, fresh)
    # the saved prompts replace the fresh ones; a level the first part never reached keeps its own
    assert got == {(1, "quiet", "prose", 4): ["p1 abc"]}


def test_a_resumed_run_refuses_saved_prompts_it_cannot_use(bench, tmp_path):
    import json
    import os

    d = tmp_path / "round-1" / "recipe"
    d.mkdir(parents=True)
    fresh = {(1, "quiet", "prose", 4): ["a", "b"]}
    f = d / "prompts-prose-quiet-c4.jsonl"
    cases = {
        "not JSON\n": 'not one {"prompt": TEXT} a line (JSONDecodeError',
        json.dumps({"text": "a"}) + "\n": "(KeyError",
        json.dumps({"prompt": 3}) + "\n": "a prompt that is not text",
        json.dumps({"prompt": "a"}) + "\n": "holds 1 prompts where these arguments send 2",
    }
    for text, said in cases.items():
        f.write_text(text)
        with pytest.raises(SystemExit) as e:
            bench.saved_prompts(tmp_path, fresh)
        assert said in str(e.value) and "--resume" in str(e.value)
    f.unlink()
    os.mkfifo(f)  # a FIFO planted in a /tmp folder must not hang the run
    with pytest.raises(SystemExit) as e:
        bench.saved_prompts(tmp_path, fresh)
    assert "NotRegularFile" in str(e.value)


def test_a_saved_measurement_is_read_only_as_a_small_regular_json_of_its_kind(bench, tmp_path):
    import json
    import os

    good = tmp_path / "bench-prose-quiet-c4.json"
    good.write_text(json.dumps({"output_throughput": 41.3}))
    assert bench.read_saved(good, dict) == {"output_throughput": 41.3}
    with pytest.raises(SystemExit) as e:
        bench.read_saved(good, list)  # a load file must hold the load average's list
    assert "holds no JSON list" in str(e.value)
    cut = tmp_path / "bench-chat-quiet-c4.json"
    cut.write_text('{"output_throughput": 4')  # a run killed while it wrote
    with pytest.raises(SystemExit) as e:
        bench.read_saved(cut, dict)
    assert "cannot be read as JSON" in str(e.value) and "remove it" in str(e.value)
    fifo = tmp_path / "load-prose-quiet-c4.json"
    os.mkfifo(fifo)
    with pytest.raises(SystemExit) as e:
        bench.read_saved(fifo, list)
    assert "cannot be read as JSON" in str(e.value)


def test_a_resumed_run_refuses_what_is_not_a_regular_file_where_a_measurement_would_be_written(bench, tmp_path):
    import json
    import os

    assert not bench.in_resumed_folder(tmp_path / "bench-prose-quiet-c4.json")  # missing: measured anew
    empty = tmp_path / "llama-bench-loaded.json"
    empty.write_text("")
    assert bench.in_resumed_folder(empty) and not bench.in_resumed_folder(empty, empty_is_missing=True)
    fifo = tmp_path / "llama-bench-quiet.json"
    os.mkfifo(fifo)  # seen as missing, the run would write llama-bench's output into it and hang
    assert bench.in_resumed_folder(fifo, empty_is_missing=True)
    with pytest.raises(SystemExit) as e:
        bench.llama_bench("/nonexistent/llama-bench", tmp_path / "m.gguf", [2], tmp_path, False, reuse=True)
    assert "cannot be read as JSON" in str(e.value) and "is a FIFO" in str(e.value)
    # a link is read where it points (a regular file, bounded), never written through
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps([1.0, 1.0, 1.0]))
    link = tmp_path / "load-chat-quiet-c4.json"
    link.symlink_to(target)
    assert bench.in_resumed_folder(link) and bench.read_saved(link, list) == [1.0, 1.0, 1.0]
    dangling = tmp_path / "bench-chat-quiet-c4.json"
    dangling.symlink_to(tmp_path / "gone.json")  # seen as missing, the new result would be written where it points
    assert bench.in_resumed_folder(dangling)
    with pytest.raises(SystemExit) as e:
        bench.read_saved(dangling, dict)
    assert "cannot be read as JSON" in str(e.value)
    assert not (tmp_path / "gone.json").exists()


def test_resume_refuses_a_round_folder_that_links_out(tmp_path):
    """Issue 64, item 10: --resume followed a round-1 linking to /etc, reading and writing there."""
    import subprocess
    import sys

    (tmp_path / "round-1").symlink_to("/etc")
    run = subprocess.run(
        [sys.executable, str(benchmark_scripts.path("cpu_vs_llamacpp")), "--resume", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=benchmark_scripts.env("cpu_vs_llamacpp"),
    )
    assert run.returncode != 0 and "round-1 is a link out of the folder" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_a_deeply_nested_saved_measurement_is_one_message(bench, tmp_path):
    """Issue 64, item 10: read_saved recursed to death on deeply nested JSON."""
    deep = tmp_path / "load-prose-quiet-c4.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SystemExit) as e:
        bench.read_saved(deep, list)
    assert "cannot be read as JSON" in str(e.value) and "nests more than" in str(e.value)
