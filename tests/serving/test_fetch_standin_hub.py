"""`cookbook fetch` with the real huggingface_hub client against a stand-in for the Hub
(tests/helpers/standin_hub.py; the real Hub is not reachable from the test machines): include
patterns, resume after a cut connection, a disk-full refusal before the first byte, a checksum
mismatch refused, and the recipe's convert step (gguf-join of the fetched shards) run after."""

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.convert.gguf_join import split_gguf
from cookbook.gguf.reader import read_gguf

pytest.importorskip("huggingface_hub", reason="the data extra: pip install -e '.[data]'")
from standin_hub import StandinHub  # noqa: E402

REPO = "QuixiAI/GLM-5.2-Vision-GGUF"
Q2K = "antirez-routed/GLM-5.2-UD-Q2_K_RoutedQ2K-{:05d}-of-00002.gguf"
WANTED = {Q2K.format(1), Q2K.format(2), "mmproj-GLM-5.2-Vision-f16.gguf", "chat_template.jinja"}


@pytest.fixture
def shards(small_gguf, tmp_path):
    (tmp_path / "split").mkdir()
    out = split_gguf(small_gguf, tmp_path / "split" / "s", max_tensors=1)
    assert len(out) >= 2
    return [p.read_bytes() for p in out[:2]], small_gguf


@pytest.fixture
def hub(monkeypatch, tmp_path, shards):
    hubs = []
    (one, two), _ = shards

    def make(extra=None, **faults):
        files = {
            Q2K.format(1): one,
            Q2K.format(2): two,
            "antirez-routed/GLM-5.2-UD-Q4_K_RoutedQ4K-00001-of-00001.gguf": b"GGUF" + b"\0" * 4000,
            "UD-Q6_K_XL/GLM-5.2-UD-Q6_K_XL-00001-of-00001.gguf": b"GGUF" + b"\1" * 4000,
            "mmproj-GLM-5.2-Vision-f16.gguf": b"GGUF" + b"\2" * 3000,
            "chat_template.jinja": b"{{ messages }}\n",
            "README.md": b"# GLM-5.2-Vision GGUF\n",
        } | (extra or {})
        h = StandinHub(files, repo=REPO, repo_type="model", **faults)
        hubs.append(h)
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        return h

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the recipe exports MODELS=$HOME/models
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    yield make
    for h in hubs:
        h.close()


def models(tmp_path):
    return tmp_path / "home" / "models" / "GLM-5.2-Vision-GGUF"


def fetch(*args):
    return CliRunner().invoke(main, ["fetch", "glm52-2", *args])


def test_fetch_takes_only_the_include_patterns_and_runs_the_join(hub, tmp_path, shards):
    h = hub()
    r = fetch()
    assert r.exit_code == 0, r.output
    assert set(h.resolved("GET")) == WANTED  # not the Q4_K or Q6_K shards, not the README
    d = models(tmp_path)
    got = {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() and ".cache" not in p.parts}
    assert WANTED <= got
    joined = read_gguf(d / "GLM-5.2-Vision-Q2_K.gguf")  # the recipe's gguf-join step ran on the shards
    original = read_gguf(shards[1])
    assert [t.name for t in joined.tensors] == [t.name for t in original.tensors][: len(joined.tensors)]
    assert "weights per GPU" in r.output and "KV pool" in r.output  # the plan came first
    assert r.output.index("KV pool") < r.output.index("fetch QuixiAI")


def test_dry_run_lists_files_sizes_and_steps_and_downloads_nothing(hub, tmp_path):
    h = hub()
    r = fetch("--dry-run")
    assert r.exit_code == 0, r.output
    for path in WANTED:
        assert path in r.output
    assert "1. gguf-join" in r.output and "still to download" in r.output
    assert h.resolved("GET") == [] and h.resolved("HEAD") == []
    assert not models(tmp_path).exists()


def test_a_cut_connection_resumes_with_a_range_request(hub, tmp_path):
    """huggingface_hub writes in 10 MiB chunks; the projector (12 MiB here) is cut after 11 MiB,
    so one chunk is on disk and the client asks for the rest with a Range request."""
    mmproj = "mmproj-GLM-5.2-Vision-f16.gguf"
    data = b"GGUF" + bytes(range(256)) * (12 * 4096)
    h = hub(cut={mmproj: 11 * 2**20}, extra={mmproj: data})
    r = fetch()
    assert r.exit_code == 0, r.output
    starts = [int(v.split("=")[1].rstrip("-")) for p, v in h.ranges if p == mmproj]
    assert starts and starts[0] >= 10 * 2**20  # resumed, not started over
    assert (models(tmp_path) / mmproj).read_bytes() == data


def test_too_little_disk_is_refused_before_the_first_byte(hub, tmp_path):
    h = hub(listed_size={Q2K.format(2): 2**60})
    r = fetch()
    assert r.exit_code == 2
    assert "error: the download needs" in r.stderr and "GiB free" in r.stderr and "help:" in r.stderr
    assert h.resolved("GET") == [] and h.resolved("HEAD") == []
    assert not models(tmp_path).exists()


def test_a_checksum_mismatch_is_refused_and_the_file_deleted(hub, tmp_path):
    hub(corrupt={Q2K.format(2)})
    r = fetch()
    assert r.exit_code == 1
    assert "checksum mismatch" in r.stderr and Q2K.format(2) in r.stderr and "sha256 expected" in r.stderr
    d = models(tmp_path)
    assert not (d / Q2K.format(2)).exists()
    assert not (d / "GLM-5.2-Vision-Q2_K.gguf").exists()  # no convert step on bad bytes


def test_a_configuration_that_does_not_fit_downloads_nothing(hub, tmp_path):
    h = hub()
    r = CliRunner().invoke(
        main,
        [
            "fetch",
            "glm52-2",
            "--set",
            "max_model_len=1048576",
            "--set",
            "max_num_seqs=1",
            "--set",
            "serve.args.speculative_config=null",
            "--set",
            "serve.args.kv_cache_memory_bytes=300000000000",
        ],
    )
    assert r.exit_code == 2 and "does not fit" in r.stderr
    assert h.requests == []


def test_a_recipe_without_a_hub_repository_says_so():
    r = CliRunner().invoke(main, ["fetch", "k3-6", "--dry-run"])
    assert r.exit_code == 2 and "not a Hub repository id" in r.stderr and "help:" in r.stderr


def test_a_source_without_patterns_is_the_whole_repository(monkeypatch, tmp_path):
    """amd/GLM-5.2-MXFP4 names no include patterns: every file is listed (dry run)."""
    h = StandinHub(
        {"config.json": b"{}", "model-00001-of-00001.safetensors": b"\0" * 64, "README.md": b"x"},
        repo="amd/GLM-5.2-MXFP4",
        repo_type="model",
    )
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    try:
        r = CliRunner().invoke(
            main, ["fetch", "glm52-mxfp4-8x-gaudi2", "--dry-run", "--local-dir", str(tmp_path / "m")]
        )
    finally:
        h.close()
    assert r.exit_code == 0, r.output
    for name in ("config.json", "model-00001-of-00001.safetensors", "README.md"):
        assert name in r.output
    assert "1. quark-mxfp4-fuse" in r.output


def test_a_listed_path_leaving_the_folder_is_refused_before_any_download(hub, tmp_path):
    evil = "antirez-routed/GLM-5.2-UD-Q2_K_RoutedQ2K-/../../../../evil.gguf"  # matches the quant's pattern
    h = hub(extra={evil: b"GGUF" + b"\0" * 16})
    r = fetch()
    assert r.exit_code == 2 and "leaves the download folder" in r.stderr
    assert h.resolved("GET") == [] and h.resolved("HEAD") == []
    assert not (tmp_path / "evil.gguf").exists() and not (tmp_path / "home" / "evil.gguf").exists()
