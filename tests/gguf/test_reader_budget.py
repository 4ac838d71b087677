"""Class 5 (reader): the decoded header has a total budget, not only per-item limits."""

import struct

import pytest

from cookbook.gguf import GGUFError, Limits, read_gguf
from cookbook.gguf.format import ValueType
from cookbook.gguf.writer import encode_string


def header(kvs: list[bytes]) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


def string_array_kv(key: str, n: int) -> bytes:
    return encode_string(key) + struct.pack("<IIQ", ValueType.ARRAY, ValueType.STRING, n) + struct.pack("<Q", 0) * n


def nested_array_kv(key: str, n: int) -> bytes:
    # an array of n empty u8 arrays (12 bytes each in the file, one Python object each once decoded)
    inner = struct.pack("<IQ", ValueType.UINT8, 0)
    return encode_string(key) + struct.pack("<IIQ", ValueType.ARRAY, ValueType.ARRAY, n) + inner * n


@pytest.mark.parametrize("decode", [True, False])
def test_total_array_elements_are_budgeted(tmp_path, decode):
    p = tmp_path / "b.gguf"
    p.write_bytes(header([string_array_kv(f"k{i}", 600) for i in range(3)]))  # each within the per-array limit
    lim = Limits(max_array_elems=1000, max_total_array_elems=1500)
    with pytest.raises(GGUFError, match="max_total_array_elems") as e:
        read_gguf(p, limits=lim, decode_arrays=decode)
    assert "k2" in str(e.value) and "help:" in str(e.value)
    read_gguf(p, limits=Limits(max_array_elems=1000, max_total_array_elems=1800), decode_arrays=decode)


def test_nested_arrays_have_a_total_budget_by_default(tmp_path):
    # 2 x 40k nested arrays: each key within every per-item limit, together past the default budget
    p = tmp_path / "n.gguf"
    p.write_bytes(header([nested_array_kv("a", 40_000), nested_array_kv("b", 40_000)]))
    with pytest.raises(GGUFError, match="max_nested_arrays") as e:
        read_gguf(p)
    assert "b" in str(e.value)
    assert Limits().max_nested_arrays < 80_000


def test_default_budget_admits_a_real_vocabulary(gemma_gguf):
    g = read_gguf(gemma_gguf)
    assert g.fields["tokenizer.ggml.tokens"].value.count == 262_144
