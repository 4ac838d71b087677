"""The engine-checked status (cookbook.evidence.engine_check) on stand-in run folders: no GPU runs
here, so each test writes the files scripts/offline-gpu/engine-check leaves (launch.sh from the real
`cookbook launch` renderer, a server.log in vLLM's wording whose figures come from the real plan or
are pushed off it) into a copy of a real recipe, and checks what is written, refused and shown."""

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cookbook.cli import main
from cookbook.evidence import engine_check as E
from cookbook.evidence.status import shown_status
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
SLUG = "glm52-fp8-8x-h200"
CONFIG = ROOT / "recipes" / SLUG / "engine-check" / "config.json"
CKPT = "/root/.cache/engine-check/ckpt/glm"
LOAD_GIB = 61.25


@pytest.fixture
def recipe(tmp_path):
    d = tmp_path / "recipes" / SLUG
    d.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / SLUG / "recipe.yaml", d / "recipe.yaml")
    return d / "recipe.yaml"


def _planned(resolved):
    sets = E.scaled_sets(resolved, CKPT)
    cfg = json.loads(CONFIG.read_text())
    return E.plan_of(resolved, [*sets, *E.geometry_sets(cfg), f"model.source.size_gib={LOAD_GIB}"])


def make_run(tmp_path, resolved, *, rc="ready 212", pool_scale=1.0, extra=" \\\n  --load-format dummy", text="Paris"):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    block = E.block_of(resolved, E.scaled_sets(resolved, CKPT)).rstrip("\n")
    (run / "launch.sh").write_text(block + extra + "\n")
    shutil.copy(CONFIG, run / "config.json")
    p = _planned(resolved)
    gib = p.vllm_pool_bytes * pool_scale / 2**30
    tokens = int(gib * 2**30 / p.kv.bytes_per_token)
    log = [
        f"(APIServer pid=7) INFO 12-05 06:00:00 [utils.py:1] non-default args: {{'model': '{CKPT}', "
        "'tensor_parallel_size': 1, 'kv_cache_dtype': 'fp8', 'max_model_len': 131072}",
        "(EngineCore pid=9) INFO 12-05 06:00:09 [cuda.py:2] Using FLASHMLA_SPARSE attention backend.",
        "(EngineCore pid=9) INFO 12-05 06:00:10 [fp8.py:3] Using DEEPGEMM Fp8 MoE backend",
        f"(EngineCore pid=9) INFO 12-05 06:01:00 [loader.py:4] Model loading took {LOAD_GIB:.2f} GiB memory",
        f"(EngineCore pid=9) INFO 12-05 06:02:00 [worker.py:5] Available KV cache memory: {gib:.2f} GiB",
        f"(EngineCore pid=9) INFO 12-05 06:02:00 [kv.py:6] GPU KV cache size: {tokens:,} tokens",
    ]
    (run / "server.log").write_text("\n".join(log) + "\n")
    (run / "metrics.prom").write_text(
        'vllm:cache_config_info{block_size="64",cache_dtype="fp8",num_gpu_blocks="9"} 1.0\n'
    )
    (run / "responses.json").write_text(json.dumps([{"choices": [{"text": text}]}]))
    (run / "rc").write_text(rc + "\n")
    return run


def test_a_run_that_matches_the_plan_earns_engine_checked_standin(tmp_path, recipe):
    r = resolve(recipe)
    dest = E.write(make_run(tmp_path, r), r, {}, stamp="20261205T000000Z")
    rec = json.loads((dest / E.RECORD).read_text())
    assert rec["recipe_hash"] == r.content_hash and rec["scaled_sets"][-1] == "tensor_parallel_size=1"
    assert rec["vllm"]["args"]["tensor_parallel_size"] == 1
    assert any("FLASHMLA_SPARSE" in b for b in rec["vllm"]["backends"])
    assert all(c["off"] <= E.TOLERANCE for c in rec["comparison"].values()) and len(rec["comparison"]) == 3
    assert rec["cache_config_info"]["num_gpu_blocks"] == "9"
    assert E.status(r) == (E.ENGINE_CHECKED, [])
    assert shown_status(r, "unverified") == "unverified; engine-checked"
    # an edited file of the bundle: refused
    (dest / "server.log").write_text(
        (dest / "server.log").read_text().replace("Available KV cache memory: ", "Available KV cache memory: 1")
    )
    word, reasons = E.status(r)
    assert word == E.REFUSED and any("differs from manifest.json" in x for x in reasons)


def test_an_edited_recipe_makes_it_stale_standin(tmp_path, recipe):
    r = resolve(recipe)
    E.write(make_run(tmp_path, r), r, {}, stamp="20261205T000000Z")
    recipe.write_text(recipe.read_text().replace("value: 131072", "value: 65536"))
    r2 = resolve(recipe)
    assert E.status(r2)[0] == E.STALE
    assert shown_status(r2, "unverified") == "unverified; engine-check stale"


def test_a_broken_copy_the_engine_rejects_does_not_earn_it_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = make_run(tmp_path, r, rc="refused 2", extra=" \\\n  --load-format dummy \\\n  --cookbook-not-a-vllm-flag 1")
    with pytest.raises(ValueError) as e:
        E.write(run, r, {})
    assert "never answered (refused 2)" in str(e.value) and "--cookbook-not-a-vllm-flag 1" in str(e.value)
    assert not (recipe.parent / E.FOLDER).exists()  # nothing written


def test_a_pool_off_the_plan_needs_an_explanation_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = make_run(tmp_path, r, pool_scale=0.9)
    with pytest.raises(ValueError, match=r"pool_gib .* 11\.1% off"):
        E.write(run, r, {})
    dest = E.write(run, r, {"pool_gib": "vLLM's profile saw X", "pool_tokens": "the same"}, stamp="a")
    assert json.loads((dest / E.RECORD).read_text())["explanations"]["pool_gib"] == "vLLM's profile saw X"
    assert E.status(r)[0] == E.ENGINE_CHECKED


def test_a_block_changed_beyond_the_parallel_sizes_is_refused_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = make_run(tmp_path, r, extra=" \\\n  --load-format dummy \\\n  --enforce-eager true")
    with pytest.raises(ValueError, match="not a checkpoint substitution"):
        E.write(run, r, {})
    launch = run / "launch.sh"
    launch.write_text(
        re.sub(r"--max-num-seqs \d+", "--max-num-seqs 999", launch.read_text()).replace(
            " \\\n  --enforce-eager true", ""
        )
    )
    with pytest.raises(ValueError, match="not the recipe's launch block"):
        E.write(run, r, {})


def test_an_unanswered_server_and_hostile_files_are_refused_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = make_run(tmp_path, r, text="")
    with pytest.raises(ValueError, match="no request was answered"):
        E.write(run, r, {})
    (run / "server.log").unlink()
    (run / "server.log").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="server.log is missing or not a regular file"):
        E.write(run, r, {})


def test_the_cli_refuses_in_one_line_and_writes_nothing(tmp_path):
    res = CliRunner().invoke(main, ["maint", "engine-check", "write", SLUG, str(tmp_path / "nope")])
    assert res.exit_code == 2 and "is not a folder" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["maint", "engine-check", "write", SLUG, str(tmp_path), "--explain", "bogus"])
    assert res.exit_code == 2 and "--explain 'bogus'" in res.output
    res = CliRunner().invoke(main, ["maint", "engine-check", "status", "glm52-2"])
    assert res.exit_code == 1 and "not engine-checked (no bundle)" in res.output


def test_geometry_sets_follow_vllms_indexer_rule():
    cfg = json.loads(CONFIG.read_text())
    sets = E.geometry_sets(cfg)
    # 8 layers, offset 3, every 4th: layers 0, 1, 2 and 6 keep an indexer (vLLM 0.26.0 models/deepseek_v2.py)
    assert "model.architecture.indexer.layers=4" in sets and "model.architecture.layers=8" in sets
    dsv4 = json.loads((ROOT / "recipes" / "dsv4-flash-perf-h200" / "config.json").read_text())
    assert "model.architecture.indexer.layers=3" in E.geometry_sets(dsv4)  # the ratio-4 layers of the first 8


@pytest.mark.parametrize(
    "config",
    [
        "not json",
        "[1, 2]",
        '{"num_hidden_layers": "8", "vocab_size": 5}',
        '{"num_hidden_layers": true, "vocab_size": 5}',
        '{"num_hidden_layers": 8, "vocab_size": 5, "index_topk": 1, "index_topk_freq": "x"}',
    ],
)
def test_a_hostile_config_is_refused_in_one_reason_standin(tmp_path, recipe, config):
    r = resolve(recipe)
    run = make_run(tmp_path, r)
    (run / "config.json").write_text(config)
    with pytest.raises(ValueError, match="config.json|cannot be read"):
        E.write(run, r, {})
    assert not (recipe.parent / E.FOLDER).exists()


@given(st.text(max_size=2000))
@settings(max_examples=200, deadline=None)
def test_parse_server_log_never_raises(text):
    out = E.parse_server_log(text + "\nnon-default args: " + text)
    assert set(out) >= {"args", "backends", "available_kv_gib", "kv_tokens"}
    assert E.parse_metrics(text) is not None and E.answered(text) >= 0


def test_the_device_script_serves_the_scaled_block_and_records_a_refusal_standin(tmp_path):
    """scripts/offline-gpu/engine-check's one case, with a stand-in `vllm` that refuses an unknown
    flag as vLLM's parser does (no server starts here): the block that ran is the recipe's, scaled,
    plus --load-format dummy; the broken copy is recorded as refused and does not earn the status."""
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(
        '#!/bin/bash\nfor a in "$@"; do [[ $a == --cookbook-not-a-vllm-flag ]] && '
        '{ echo "vllm: error: unrecognized arguments: $a 1" >&2; exit 2; }; done; exit 7\n'
    )
    (bin_dir / "vllm").chmod(0o755)
    # python3: the block's fix check passes, as on the device, where the payload's engine has the profile
    # applied (run_all); everything else runs in the real interpreter
    (bin_dir / "python3").write_text(
        f'#!/bin/bash\n[[ "$1" == */fixes/apply_all.py ]] && exit 0\nexec {sys.executable} "$@"\n'
    )
    (bin_dir / "python3").chmod(0o755)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "env.txt").write_text(H200_ENV)  # run_all writes it on the device
    ck = tmp_path / "ckpt" / f"engine-check-{SLUG}-8l"  # the 8-layer checkpoint fits an H200: made already
    ck.mkdir(parents=True)
    (ck / "config.json").write_text("{}")
    script = (ROOT / "scripts" / "offline-gpu" / "engine-check").read_text()
    func = script[script.index("one_case() {") : script.index("\n}\n", script.index("one_case() {")) + 3]
    func = f"root={ROOT}; source scripts/offline-gpu/checkpoint.sh; ckdir={tmp_path / 'ckpt'}\n{func}"
    cfg = f"recipes/{SLUG}/engine-check/config.json"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(ROOT / "src"), keep=str(keep))
    # another server on the recipe's port (the shared CPU server here) must not pass for this one
    busy = (
        subprocess.run(["curl", "-sf", "-m", "5", "http://127.0.0.1:8000/health"], capture_output=True).returncode == 0
    )
    r = subprocess.run(
        ["bash", "-c", f'{func}\nENGINE_CHECK_READY_S=30 one_case 1 {SLUG} {cfg} ""'],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    run = keep / f"{SLUG}-broken"
    assert r.returncode == 0, r.stderr
    launch = (run / "launch.sh").read_text()
    assert "--tensor-parallel-size 1 \\" in launch and launch.rstrip().endswith("--cookbook-not-a-vllm-flag 1")
    resolved = resolve(SLUG)
    if busy:
        assert (run / "rc").read_text().strip() == "port 8000 busy before launch"
        with pytest.raises(ValueError, match=r"never answered \(port 8000 busy before launch\)"):
            E.write(run, resolved, {})
        return
    assert (run / "rc").read_text().strip() == "refused 2"
    assert "unrecognized arguments: --cookbook-not-a-vllm-flag" in (run / "server.log").read_text()
    with pytest.raises(ValueError, match=r"never answered \(refused 2\)"):
        E.write(run, resolved, {})


def test_only_vllms_default_parallel_size_may_follow_the_block():
    block = "vllm serve /ckpt \\\n  --max-num-seqs 4"
    ran = block + " \\\n  --tensor-parallel-size 1 \\\n  --load-format dummy\n"
    assert E.block_differences(ran, block) == []
    two = block + " \\\n  --tensor-parallel-size 2 \\\n  --load-format dummy\n"
    assert E.block_differences(two, block) == [
        "launch.sh adds --tensor-parallel-size 2, which is not a checkpoint substitution"
    ]


def test_vllms_args_with_an_enum_are_read_as_a_dict():
    line = (
        "(APIServer pid=9) INFO 12-05 17:13:20 [utils.py:1] non-default args: {'max_num_seqs': 256, "
        "'compilation_config': {'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'mode': None}}"
    )
    args = E.parse_server_log(line)["args"]
    assert args == {
        "max_num_seqs": 256,
        "compilation_config": {"cudagraph_mode": "CUDAGraphMode.FULL_AND_PIECEWISE", "mode": None},
    }
    assert E.parse_server_log(line.replace("256,", "256 <x"))["args"].startswith("{")  # not a literal: kept as text


H200_ENV = "env: NVIDIA H200, 570.133.20, 143771 MiB\ntorch 2.11.0 vllm 0.26.0\ndevice_mib 143155\nfixes apply: 0\n"
H100_ENV = (
    "env: NVIDIA H100 80GB HBM3, 570.133.20, 81559 MiB\ntorch 2.11.0 vllm 0.26.0\ndevice_mib 81079\nfixes apply: 0\n"
)


def _run_on_h100(tmp_path, resolved):
    """A run of the H200 recipe on an H100: vLLM's pool as the plan for the H100's memory gives it."""
    run = make_run(tmp_path, resolved)
    sets = [*E.scaled_sets(resolved, CKPT), *E.geometry_sets(json.loads(CONFIG.read_text()))]
    p = E.plan_of(resolved, [*sets, f"model.source.size_gib={LOAD_GIB}"], device_mib=81079)
    gib = p.vllm_pool_bytes / 2**30
    log = (run / "server.log").read_text().splitlines()
    log[-2] = f"(EngineCore pid=9) INFO 12-05 06:02:00 [worker.py:5] Available KV cache memory: {gib:.2f} GiB"
    log[-1] = (
        f"(EngineCore pid=9) INFO 12-05 06:02:00 [kv.py:6] GPU KV cache size: {int(gib * 2**30 / p.kv.bytes_per_token):,} tokens"
    )
    (run / "server.log").write_text("\n".join(log) + "\n")
    (run / "env.txt").write_text(H100_ENV)
    return run


def test_a_run_on_an_h100_is_planned_for_its_memory_and_named_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = _run_on_h100(tmp_path, r)
    dest = E.write(run, r, {}, stamp="20261207T000000Z")
    rec = json.loads((dest / E.RECORD).read_text())
    assert rec["card"] == {"name": "NVIDIA H100 80GB HBM3", "platform": "h100", "device_mib": 81079,
                           "device_mib_from": "torch's total on the run's card"}  # fmt: skip
    assert (dest / "env.txt").read_text() == H100_ENV
    assert E.status(r) == (E.ENGINE_CHECKED, [])
    assert E.check(resolve(recipe))[2] == "NVIDIA H100 80GB HBM3, planned for its 81,079 MiB"
    # the same run without its env.txt is judged against the H200's memory: far off the plan
    (run / "env.txt").unlink()
    with pytest.raises(ValueError, match="pool_gib .* off"):
        E.write(run, r, {})


def test_a_card_of_another_kind_or_unnamed_is_refused_standin(tmp_path, recipe):
    r = resolve(recipe)
    run = make_run(tmp_path, r)
    (run / "env.txt").write_text("env: NVIDIA A100-SXM4-80GB, 570.1, 81920 MiB\ndevice_mib 81050\n")
    with pytest.raises(ValueError, match=r"used a NVIDIA A100-SXM4-80GB, not a card of the recipe's kind \(h200\)"):
        E.write(run, r, {})
    (run / "env.txt").write_text("torch 2.11\n" + "x" * 70000)
    with pytest.raises(ValueError, match="env.txt is larger than"):
        E.write(run, r, {})
    (run / "env.txt").write_text("device_mib 1\n")
    with pytest.raises(ValueError, match="does not name the card"):
        E.write(run, r, {})
    (run / "env.txt").write_text("env: NVIDIA H100 <img src=x>, 570.1, 81559 MiB\ndevice_mib 81079\n")
    with pytest.raises(ValueError, match="not a plain product name"):
        E.write(run, r, {})
    # without torch's total the catalogue's figure is used, and the record says so
    (run / "env.txt").write_text("env: NVIDIA H100 80GB HBM3, 570.1, 81559 MiB\n")
    assert E.card_of((run / "env.txt").read_text(), "h200")[0]["device_mib_from"] == "the catalogue's"
    assert not (recipe.parent / E.FOLDER).exists()


def test_a_recipe_page_reads_the_engine_check_record_once(monkeypatch):
    """The badge, the paragraph and the card line come from one read of the newest bundle's record."""
    from cookbook.site.recipe_page import recipe_page

    reads = []
    real = E.read_limited

    def counting(path, *a, **k):
        if Path(path).name == E.RECORD:
            reads.append(path)
        return real(path, *a, **k)

    monkeypatch.setattr(E, "read_limited", counting)
    page = recipe_page(SLUG)
    assert len(reads) == 1, reads
    assert "Engine check: *engine-check stale* (the recipe changed after the run" in page
