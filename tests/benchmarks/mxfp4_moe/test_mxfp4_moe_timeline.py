"""The mxfp4-moe instruments (benchmarks/mxfp4_moe/): the timeline's host-side arithmetic that turns
program traces into figures, and the tools' refusal of bad arguments."""

import subprocess
import sys

import benchmark_scripts
import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def timeline():
    yield benchmark_scripts.load("mxfp4_moe/timeline")
    sys.modules.pop("timeline", None)


@pytest.mark.parametrize("split,taper", [(1, False), (3, False), (8, False), (3, True), (6, True), (8, True)])
def test_split_starts_cover_every_step_once(timeline, split, taper):
    steps = 48
    starts = [timeline.split_start(steps, j, split, taper) for j in range(split + 1)]
    assert starts[0] == 0 and starts[-1] == steps
    sizes = [b - a for a, b in zip(starts, starts[1:])]
    assert all(s >= 1 for s in sizes)
    if taper:  # the first split is the longest, the last the shortest
        assert sizes[0] == max(sizes) and sizes[-1] == min(sizes) and sizes[0] > sizes[-1]
    else:
        assert max(sizes) - min(sizes) <= 1


def test_program_bytes_add_up_to_the_experts_read(timeline):
    # 3 blocks (2 active), 4 row tiles of 64 rows (gate and up: 128), H = 6144 over 8 tapered splits
    h, rows, grid = 6144, 128, (3, 4, 8)
    got = timeline.program_bytes(3 * 4 * 8, grid, rows, h, 128, 8, True, active_blocks=2)
    assert sum(got) == 2 * 4 * rows * h * 17 // 32  # packed nibbles (1/2 byte) + E8M0 scales (1/32)
    assert all(b == 0 for b in got[2 * 4 * 8 :])  # the inactive block reads nothing


def test_bandwidth_bins_keep_every_byte(timeline):
    spans = [(0.0, 4.0, 4e6), (1.0, 2.0, 1e6), (3.5, 6.0, 2.5e6), (2.0, 2.0, 5.0)]
    bins = timeline.bandwidth_bins(spans, 1.0, 6.0)
    assert len(bins) == 6
    assert sum(bins) * 1.0 * 1e6 == pytest.approx(7.5e6)  # TB/s x us -> bytes
    assert bins[0] == pytest.approx(1.0) and bins[1] == pytest.approx(2.0)


@pytest.mark.parametrize(
    "script,args,words",
    [
        ("timeline", ["--set", "bogus:1"], "'bogus' is not a LaunchConfig field"),
        ("timeline", ["--variants", "glm5"], "unknown variant(s) ['glm5']"),
        ("ceiling", ["--variants", "glm5"], "unknown variant(s) ['glm5']"),
        ("breakdown", ["--variants", "glm5"], "unknown variant(s) ['glm5']"),
        ("breakdown", ["--set", "bogus:1"], "'bogus' is not a LaunchConfig field"),
        ("bench", ["--ab", "x=bogus:1"], "'bogus' is not a LaunchConfig field"),
    ],
)
def test_bad_arguments_get_one_message_before_any_gpu_work(script, args, words):
    r = subprocess.run(
        [sys.executable, benchmark_scripts.path(f"mxfp4_moe/{script}"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr
