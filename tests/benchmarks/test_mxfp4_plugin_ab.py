"""benchmarks/mxfp4_plugin_ab.py's judgement, on recorded figures: which greedy divergences pass as
near-ties, the Amdahl prediction from the recipe's own config, and a side kept by one `--side` call
read back by the next (the servers themselves run on the H200: scripts/offline-gpu/plugin-check)."""

from __future__ import annotations

import json
import sys

import benchmark_scripts
import pytest

from cookbook.files import repo_root


@pytest.fixture(scope="module")
def ab():
    yield benchmark_scripts.load("mxfp4_plugin_ab")
    sys.modules.pop("mxfp4_plugin_ab", None)


def _run(tokens, top=None):
    """One prompt's greedy output: token ids, their logprobs, and each position's top-5."""
    top = top or [{t: -0.1} for t in tokens]
    return {"tokens": tokens, "logprobs": [-0.1] * len(tokens), "top": top}


def test_identical_outputs_count_as_identical(ab):
    g = ab.compare([_run(["a", "b"])], [_run(["a", "b"])])
    assert (g["identical"], g["near_ties"], g["refused"]) == (1, 0, [])


def test_a_divergence_at_a_near_tie_passes_and_a_clear_one_is_refused(ab):
    tie = [{"a": -0.1}, {"x": -0.70, "y": -0.72}]
    off = _run(["a", "x"], tie)
    on = _run(["a", "y"], [{"a": -0.1}, {"x": -0.71, "y": -0.69}])
    g = ab.compare([off], [on])
    assert g["near_ties"] == 1 and not g["refused"]
    # the same tokens, but the on run prefers y by 0.5 nats: not a tie
    far = _run(["a", "y"], [{"a": -0.1}, {"x": -0.7, "y": -0.2}])
    g = ab.compare([off], [far])
    assert g["refused"] == [{"prompt": 0, "position": 1}]
    # the other run's token is not in its top-5 at all
    absent = _run(["a", "z"], [{"a": -0.1}, {"z": -0.70}])
    assert ab.compare([off], [absent])["refused"] == [{"prompt": 0, "position": 1}]


def test_one_run_stopping_early_is_a_divergence(ab):
    g = ab.compare([_run(["a", "b", "c"])], [_run(["a", "b"])])
    assert g["refused"] == [{"prompt": 0, "position": 2}]


def test_amdahl_from_the_recipes_config(ab):
    cfg = json.loads((repo_root() / "recipes" / "dsv4-flash-perf-h200" / "config.json").read_text())
    h, i = cfg["hidden_size"], cfg["moe_intermediate_size"]
    expert = 3 * h * i // 2 + 3 * h * i // 32  # w13 and w2: nibbles plus one E8M0 scale per 32
    assert expert == 13_369_344
    weights_gib = 31.42
    read = weights_gib * 2**30 - 8 * (256 - 6) * expert - cfg["vocab_size"] * h * 2
    f = 8 * 6 * expert / read
    a = ab.amdahl(cfg, weights_gib, {"1": {"vllm_us": 53.8, "ours_us": 31.8}})
    assert a["moe_share_of_bytes"] == pytest.approx(f)
    assert a["kernel_speedup_1_token"] == pytest.approx(53.8 / 31.8)
    assert a["predicted_gain"] == pytest.approx(1 / ((1 - f) + f / (53.8 / 31.8)))
    assert ab.amdahl(cfg, None, {"1": {"vllm_us": 1, "ours_us": 1}}) is None


def test_a_kept_side_reads_back_with_its_concurrencies(ab, tmp_path):
    run = {"ready_s": 250.0, "greedy": [], "sweep": {1: {"tok_s": 50.0, "tpot_ms": 20.0}, 64: {"tok_s": 900.0}}}
    kept = tmp_path / "run.json"
    kept.write_text(json.dumps(run))
    back = ab.kept_side(kept)
    assert back["sweep"][1]["tok_s"] == 50.0 and set(back["sweep"]) == {1, 64}


def test_each_timed_run_follows_warm_ups_at_its_concurrency(ab, tmp_path):
    for c in ab.CONCURRENCIES:
        argv = ab.bench_argv("http://h:1", "m", "tok", c, tmp_path)
        assert int(argv[argv.index("--num-warmups") + 1]) >= c
        assert int(argv[argv.index("--max-concurrency") + 1]) == c
        assert int(argv[argv.index("--num-prompts") + 1]) >= 4 * c


def test_every_bench_flag_is_one_vllm_0_26_0_defines(ab, tmp_path):
    """The H200 runs vLLM 0.26.0's `vllm bench serve`: a flag it lacks stops the run minutes in."""
    import ast

    from vllm_sdist import source_or_skip

    v026 = source_or_skip("0.26.0")
    defined = {
        node.value
        for path in (v026 / "benchmarks").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--")
    }
    flags = [a for a in ab.bench_argv("http://h:1", "m", "tok", 4, tmp_path) if a.startswith("--")]
    assert "--num-warmups" in defined
    assert [f for f in flags if f not in defined] == []


def test_a_stopped_side_resumes_only_for_the_same_recipe(ab, tmp_path):
    progress = tmp_path / "progress.json"
    assert ab.resumable(progress, "h1") is None
    progress.write_text(json.dumps({"recipe_hash": "h1", "ready_s": [150.0], "greedy": [], "sweep": {"1": {}}}))
    assert ab.resumable(progress, "h1")["sweep"] == {1: {}}
    assert ab.resumable(progress, "h2") is None, "a run of another recipe version was continued"


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.slow_tier("serving")
def test_a_stopped_side_continues_on_a_real_cpu_server(ab, tmp_path, monkeypatch):
    """serve_side on the pinned CPU engine (the host's CPU recipe, as make run picks it): the greedy outputs and the
    concurrency a stopped run finished are kept, the next concurrency is measured by vLLM's own
    `vllm bench serve` with its warm-ups, and progress.json holds both."""
    import socket

    from cookbook.host_cpu import cpu_recipe
    from cookbook.recipe.resolve import resolve
    from cookbook.serving import local

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    resolved = resolve(cpu_recipe(), sets=[f"serve.args.port={port}"])
    monkeypatch.setattr(ab, "CONCURRENCIES", (1, 2))
    work = tmp_path / "off"
    work.mkdir()
    seeded = {"tok_s": 1.0, "tpot_ms": 2.0, "ttft_ms": 3.0}
    earlier = {"recipe_hash": resolved.content_hash, "ready_s": [99.0], "greedy": ["kept"], "sweep": {"1": seeded}}
    (work / "progress.json").write_text(json.dumps(earlier))
    env = local.prepare(resolved, tmp_path)
    run = ab.serve_side(resolved, "off", {**env, ab.ENV: "0"}, work, 900, fresh=False)
    assert run["greedy"] == ["kept"] and run["sweep"][1] == seeded
    assert run["ready_s"][0] == 99.0 and len(run["ready_s"]) == 2
    row = run["sweep"][2]
    assert row["tok_s"] > 0 and row["tpot_ms"] > 0 and row["ttft_ms"] > 0
    assert ab.kept_side(work / "progress.json")["sweep"][2] == row
    assert json.loads((work / "bench-c2.json").read_text())["completed"] == 16


def test_compiles_are_counted_only_after_the_server_was_up(ab):
    # lines as the H200's off server logged them (2026-12-02), the warm-up's compile first
    tl = "(EngineCore pid=2861) 2026-12-02 03:25:43  [TileLang:tilelang.jit.kernel:INFO] (kernel.py:133): "
    mon = "(EngineCore pid=2861) WARNING 12-02 03:27:00 [jit_monitor.py:135] "
    log = "\n".join(
        [
            tl + "TileLang begins to compile kernel `mhc_fused_tilelang` with `out_idx=None`",
            "(APIServer pid=2789) INFO:     Application startup complete.",
            mon + "Triton kernel JIT compilation during inference: _compute_slot_mapping_kernel. This causes a",
            mon + "TileLang JIT compilation during inference: mhc_pre_big_fuse_with_norm_tilelang. This causes a",
            tl + "TileLang begins to compile kernel `mhc_pre_big_fuse_with_norm_tilelang` with `out_idx=None`",
            tl + "TileLang begins to compile kernel `mhc_pre_big_fuse_with_norm_tilelang` with `out_idx=None`",
        ]
    )
    late = ab.compiled_after_ready(log)
    assert late["tilelang_compiles"] == 2
    assert late["jit_monitor_kernels"] == ["_compute_slot_mapping_kernel", "mhc_pre_big_fuse_with_norm_tilelang"]
    assert ab.compiled_after_ready(log.split("\n")[0])["tilelang_compiles"] == 0


def test_the_together_settings_give_each_side_its_port_and_a_fixed_kv_pool(ab):
    """Both servers on one GPU: vLLM's profiled pool would count the other server's memory as its own."""
    from cookbook.recipe.resolve import resolve

    args = {p: resolve("dsv4-flash-perf-h200", sets=ab.together_sets(p)).recipe.serve for p in (8000, 8001)}
    assert [a.arg("port") for a in args.values()] == [8000, 8001]
    for serve in args.values():
        assert serve.arg("kv_cache_memory_bytes") == 8 * 2**30
        assert serve.arg("gpu_memory_utilization") * 2 < 1, "the second server could not start beside the first"


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.slow_tier("serving")
def test_both_sides_served_together_on_real_cpu_servers(ab, tmp_path, monkeypatch):
    """serve_together on the pinned CPU engine: two servers of the host's CPU recipe up at once,
    each with its own port, greedy outputs from both, and each concurrency measured
    on each by `vllm bench serve`; both are stopped afterwards, and their progress is on disk."""
    import socket

    from cookbook.host_cpu import cpu_recipe
    from cookbook.recipe.resolve import resolve
    from cookbook.serving import local

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    recipes = [resolve(cpu_recipe(), sets=[f"serve.args.port={p}"]) for p in ports]
    env = local.prepare(recipes[0], tmp_path)
    # the plugin refuses the CPU engine (vLLM 0.32.0), so both run with it off: two servers, one GPU's worth
    sides = {label: (r, {**env, ab.ENV: "0"}) for label, r in zip(("off", "on"), recipes)}
    monkeypatch.setattr(ab, "CONCURRENCIES", (2,))
    runs = ab.serve_together(sides, tmp_path, 900, rounds={2: 2})
    assert set(runs) == {"off", "on"}
    for label, run in runs.items():
        assert run["mode"] == "together" and len(run["greedy"]) == len(ab.PROMPTS)
        assert len(run["rounds"][2]) == 2 and run["sweep"][2] == ab.median_row(run["rounds"][2])
        assert run["warm"][2][0]["tok_s"] > 0, "the untimed pass did not run"
        assert len(run["warm"][2]) == 1 + sum(ab.stalled(row) for row in run["warm"][2][:-1])
        assert run["sweep"][2]["tok_s"] > 0 and run["sweep"][2]["tpot_ms"] > 0
        for row in run["rounds"][2]:
            # the measured CPU server's engine computes on the CPU; this machine has no GPU to sample
            assert row["host"]["server_cpu_pct"] > 10, row["host"]
            assert row["host"]["gpu_busy_pct"] is None and "NVML" in row["host"]["gpu_note"]
            assert row["gpu_ms_per_token"] is None
        for r in range(2):
            assert json.loads((tmp_path / label / f"bench-c2-r{r}.json").read_text())["completed"] == 16
        assert ab.kept_side(tmp_path / label / "progress.json")["sweep"][2] == run["sweep"][2]
        launched = (tmp_path / label / "launch.sh").read_text()
        assert f"--port {ports[0] if label == 'off' else ports[1]}" in launched
    # the untimed pass first; then ABBA: off finished first in round 0, on in round 1
    done = {(label, r): (tmp_path / label / f"bench-c2-r{r}.json").stat().st_mtime_ns for label in runs for r in (0, 1)}
    assert done["off", 0] < done["on", 0] and done["on", 1] < done["off", 1]
    warm = max((tmp_path / label / "warm-c2.json").stat().st_mtime_ns for label in runs)
    assert warm < min(done.values())
    # greedy decoding on one engine and one trained model: the two servers agree token for token, and the
    # comparison could have failed (a real model's logits are not flat)
    g = ab.compare(runs["off"]["greedy"], runs["on"]["greedy"])
    assert g["identical"] == len(ab.PROMPTS) and g["informative"]
    for p in ports:
        assert local._get(f"http://127.0.0.1:{p}/health", 2) is None, "a server was left running"


def test_flat_logits_make_the_greedy_comparison_uninformative(ab):
    """Random weights give near-uniform logits (the H200's off server: every top 5 within 1e-5 nats of
    -ln 262144): any divergence would pass as a near-tie, and the report must say it could not fail."""
    flat = _run(["a", "b"], [{"a": -12.476567, "x": -12.476577}, {"b": -12.476568, "y": -12.476579}])
    g = ab.compare([flat], [flat])
    assert g["identical"] == 1 and not g["informative"] and g["top5_spread_nats"] < 1e-4
    peaked = _run(["a", "b"], [{"a": -0.1, "x": -2.5}, {"b": -0.2, "y": -3.0}])
    assert ab.compare([peaked], [peaked])["informative"]


def test_rounds_give_medians_and_paired_ratios(ab):
    rows = [{"tok_s": 100.0, "tpot_ms": 3.0}, {"tok_s": 40.0, "tpot_ms": 9.0}, {"tok_s": 110.0, "tpot_ms": 2.9}]
    assert ab.median_row(rows) == {"tok_s": 100.0, "tpot_ms": 3.0}, "one stalled round moved the median"
    # the host figures of each round: numbers by median, a round without GPU samples left out of theirs
    host = [
        {"gpu_busy_pct": 70.0, "cpu_steal_pct": 1.0, "gpu_note": None},
        {"gpu_busy_pct": None, "cpu_steal_pct": 9.0, "gpu_note": "no NVML sample in the run"},
        {"gpu_busy_pct": 90.0, "cpu_steal_pct": 2.0, "gpu_note": None},
    ]
    rows = [{**row, "host": h} for row, h in zip(rows, host, strict=True)]
    assert ab.median_row(rows)["host"] == {
        "gpu_busy_pct": 80.0,
        "cpu_steal_pct": 2.0,
        "gpu_note": "no NVML sample in the run",
    }
    off = {"rounds": {1: [{"tok_s": 100.0}, {"tok_s": 50.0}]}}
    on = {"rounds": {1: [{"tok_s": 110.0}, {"tok_s": 60.0}]}}
    assert ab.round_ratios(off, on, 1) == [1.1, 1.2]
    assert ab.round_ratios({"sweep": {}}, {"sweep": {}}, 1) == [], "a one-round run has no range"
    off = {"rounds": {1: [{"tpot_ms": 4.0}]}}
    on = {"rounds": {1: [{"tpot_ms": 3.2}]}}
    assert ab.round_ratios(off, on, 1, "tpot_ms") == [1.25], "TPOT: off over on, above 1 when on is faster"


def test_a_run_with_a_few_requests_held_for_seconds_is_a_stall(ab):
    # the H200's off side at 64 streams, 2026-12-03: a round with a compile in it, then a clean one
    assert ab.stalled({"ttft_ms": 8608.0, "ttft_median_ms": 387.0})
    assert not ab.stalled({"ttft_ms": 360.0, "ttft_median_ms": 374.0})
    assert not ab.stalled({"ttft_ms": 53.0, "ttft_median_ms": 54.0})


def test_the_in_process_client_is_what_vllm_0_26_0_defines(ab):
    """bench() imports vLLM's client code rather than running its CLI: the H200's 0.26.0 must have the
    same three names (the CPU engine's pin runs them in the slow tests)."""
    import ast

    from vllm_sdist import source_or_skip

    v026 = source_or_skip("0.26.0")

    def defined(path):
        tree = ast.parse(path.read_text())
        return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}

    assert {"add_cli_args", "main_async"} <= defined(v026 / "benchmarks" / "serve.py")
    assert "FlexibleArgumentParser" in defined(v026 / "utils" / "argparse_utils.py")


def _row(tok_s, tpot, ttft, ttft_median, compiled=0):
    return {"tok_s": tok_s, "tpot_ms": tpot, "ttft_ms": ttft, "ttft_median_ms": ttft_median, "compiled": compiled}


def test_the_together_table_from_recorded_rounds(ab, tmp_path, monkeypatch, capsys):
    """main()'s report for a --together run, on the H200's 64-stream rounds of 2026-12-03 (the servers are
    replaced by their recorded figures: the GPU runs them, and a report that fails there costs its
    session's device time): medians, both ratio ranges, the stalled rounds, the round counts."""
    rounds = {
        "off": [_row(792.3, 13.60, 8608, 387, 9), _row(5498.1, 8.84, 360, 374), _row(6457.6, 7.76, 278, 271)],
        "on": [_row(3672.6, 8.38, 1160, 352, 2), _row(4194.3, 9.49, 744, 349, 1), _row(6227.3, 7.80, 321, 327)],
    }
    one = {"off": [_row(236.9, 3.82, 53, 54)], "on": [_row(255.3, 3.57, 46, 47)]}
    for label, busy, gpu_ms in (("off", 61.0, 2.331), ("on", 58.0, 2.205)):  # made-up host figures
        host = {"gpu_busy_pct": busy, "sm_clock_mhz": 1980, "server_cpu_pct": 98.0, "cpu_steal_pct": 1.0}
        one[label][0].update(host=host, gpu_ms_per_token=gpu_ms)
    lb = tmp_path / "layer-bench.json"
    lb.write_text(json.dumps({"1": {"ours_us": 31.7, "vllm_us": 53.6}}))
    greedy = [_run(["a", "b"], [{"a": -0.1, "x": -2.5}, {"b": -0.2, "y": -3.0}])]

    def recorded(sides, out, ready_timeout_s, counts):
        assert counts == ab.ROUNDS, "without --rounds, every concurrency runs its ROUNDS"
        runs = {}
        for label in ("off", "on"):
            per_c = {1: one[label], 64: rounds[label]}
            runs[label] = {
                "mode": "together",
                "greedy": greedy,
                "rounds": per_c,
                "sweep": {c: ab.median_row(rows) for c, rows in per_c.items()},
                "weights_gib": 31.45 if label == "off" else 56.95,
                "plugin_on_logged": label == "on",
                "compiled_after_ready": [{"tilelang_compiles": 0, "jit_monitor_kernels": []}],
            }
            (out / label).mkdir(parents=True, exist_ok=True)
        return runs

    monkeypatch.setattr(ab, "CONCURRENCIES", (1, 64))
    monkeypatch.setattr(ab, "serve_together", recorded)
    monkeypatch.setattr(ab.local, "prepare", lambda resolved, out: {"COOKBOOK": str(repo_root())})
    argv = ["mxfp4_plugin_ab.py", "--out", str(tmp_path), "--together", "--layer-bench", str(lb)]
    monkeypatch.setattr(sys, "argv", argv)
    assert ab.main() == 0
    md = (tmp_path / "ab.md").read_text()
    # the host table: 1 stream from the recorded figures, 64 streams recorded none
    assert "| 1 | 2.331 / 2.205 | 1.057 | 61 / 58 | 1980 / 1980 | 98 / 98 | 1 / 1 |" in md
    assert "| 64 | - | - | - / - |" in md
    assert "1 stream, the GPU's busy time per token: off 2.331 ms, on 2.205 ms, 1.057x" in md
    assert "Amdahl predicts 1.05" in md
    row64 = next(line for line in md.splitlines() if line.startswith("| 64 |"))
    assert "| 5498.1 | 4194.3 | 0.763 (0.76-4.64) |" in row64
    assert "| 1.055 (0.93-1.62) |" in row64  # TPOT off/on: medians 8.84 and 8.38; rounds 13.60/8.38 ...
    assert "rounds (1 at 1 stream, 3 at 64 streams)" in md
    # off's round 0 (8.6 s mean TTFT, 0.39 s median) and on's (1.16 s against 0.35 s)
    assert "Rounds with a stall (mean TTFT over 3x its median): 64 streams: off 1, on 1." in md
    assert "Kernels compiled inside timed rounds (new entries in DeepGEMM's and Triton's caches): " in md
    assert "64 streams: off 9, on 3." in md
    result = json.loads((tmp_path / "ab.json").read_text())
    assert result["sweep"]["64"]["stalled_rounds"] == {"off": 1, "on": 1}


def test_kernels_in_the_jit_caches_are_counted_by_what_each_compiler_writes(ab, tmp_path, monkeypatch):
    """The layouts the H200's caches had (jit-cache.tar.xz, 2026-12-03): DeepGEMM a folder per kernel
    under cache/, Triton a folder per hash holding the cubin and its metadata."""
    dg, triton = tmp_path / "deep_gemm", tmp_path / "triton"
    for name in ("kernel.sm90_fp8_gemm_1d2d.0d1191", "kernel.sm90_tf32_hc_prenorm_gemm.138588"):
        (dg / "cache" / name).mkdir(parents=True)
        (dg / "cache" / name / "kernel.cubin").write_bytes(b"")
    (triton / "5Q3K").mkdir(parents=True)
    for f in ("_combine_topk_swa_indices_kernel.cubin", "_combine_topk_swa_indices_kernel.json"):
        (triton / "5Q3K" / f).write_text("")
    monkeypatch.delenv("DG_JIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert ab.jit_kernels() == 0, "no caches named: nothing to count"
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(dg))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton))
    assert ab.jit_kernels() == 3
    (triton / "7ZZZ").mkdir()
    (triton / "7ZZZ" / "_compute_slot_mapping_kernel.cubin").write_bytes(b"")
    assert ab.jit_kernels() == 4


@pytest.mark.parametrize(("given", "want"), [("2", {1: 2, 4: 2, 16: 2, 64: 2}), ("4", {1: 4, 4: 4, 16: 3, 64: 3})])
def test_rounds_caps_each_concurrencys_rounds(ab, tmp_path, monkeypatch, given, want):
    seen = []

    def capture(sides, out, ready_timeout_s, rounds):
        seen.append(rounds)
        raise SystemExit(0)

    monkeypatch.setattr(ab, "serve_together", capture)
    monkeypatch.setattr(ab.local, "prepare", lambda resolved, out: {"COOKBOOK": str(repo_root())})
    monkeypatch.setattr(sys, "argv", ["mxfp4_plugin_ab.py", "--out", str(tmp_path), "--together", "--rounds", given])
    with pytest.raises(SystemExit):
        ab.main()
    assert seen == [want]


def test_rounds_below_one_is_refused(ab, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["mxfp4_plugin_ab.py", "--out", str(tmp_path), "--together", "--rounds", "0"])
    with pytest.raises(SystemExit) as exc:
        ab.main()
    assert exc.value.code == 2 and "--rounds 0: give 1 or more" in capsys.readouterr().err


def test_rounds_without_together_is_refused(ab, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["mxfp4_plugin_ab.py", "--out", str(tmp_path), "--side", "off", "--rounds", "2"])
    with pytest.raises(SystemExit) as exc:
        ab.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--rounds 2: only --together runs rounds" in err and "add --together" in err
    assert list(tmp_path.iterdir()) == [], "nothing written before the refusal"


def test_host_table_shows_each_side_and_a_dash_for_a_missing_figure(ab):
    def side(busy, gpu_ms=None):
        host = {"gpu_busy_pct": busy, "sm_clock_mhz": 1980, "server_cpu_pct": 99.6, "cpu_steal_pct": 0.4}
        return {"host": host, "gpu_ms_per_token": gpu_ms}

    sweep = {1: {"off": side(62.4, 2.2), "on": side(None)}, 64: {"off": side(97.0, 0.2), "on": side(98.0, 0.16)}}
    table = ab.host_table(sweep)
    assert table[0].startswith("| streams | GPU ms per token off / on | GPU time off/on | GPU busy % off / on |")
    assert len(table) == 4 and table[1].count("---") == 3 + len(ab.HOST_COLUMNS)
    assert table[2] == "| 1 | - | - | 62 / - | 1980 / 1980 | 100 / 100 | 0 / 0 |"
    assert table[3].startswith("| 64 | 0.200 / 0.160 | 1.250 | 97 / 98 |"), "off/on: above 1 when on is faster"
    assert ab.host_table({1: {"off": {"tok_s": 1.0}, "on": {"tok_s": 1.0}}}) == [], "a run without host figures"
