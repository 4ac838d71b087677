"""Builders for hostile inputs (real GGUF and safetensors files) and a runner for the converter CLIs."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
from convert_helpers import TOOLS

from cookbook.convert.safetensors_io import Writer, nbytes_of
from cookbook.gguf.format import GGMLType, ValueType
from cookbook.gguf.reader import GGUFArray
from cookbook.gguf.writer import TensorSpec, encode_kv, write_gguf

# What a terminal must never receive raw from a file: ESC (CSI, OSC title), BEL, C1 CSI, bidi override.
EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def no_raw_controls(text: str) -> bool:
    return not any(c in text for c in RAW_CONTROLS)


def gguf_file(path, kvs=(), tensors=(("a.weight", (8,)),), alignment: int = 32) -> Path:
    """A valid GGUF: kvs are (key, ValueType, value); tensors (name, dims) are F32 of zeros."""
    path = Path(path)
    encoded = [encode_kv(k, t, v) for k, t, v in kvs]
    specs = []
    for name, dims in tensors:
        n = int(np.prod(dims))
        data = np.zeros(n, np.float32).tobytes()
        specs.append(TensorSpec(name, tuple(dims), GGMLType.F32, len(data), data=data))
    write_gguf(path, encoded, specs, alignment)
    return path


def str_array(items) -> GGUFArray:
    return GGUFArray(ValueType.STRING, len(items), list(items))


def st_file(path, tensors: dict) -> Path:
    """A valid safetensors file: tensors name -> (dtype, shape); data is deterministic bytes."""
    path = Path(path)
    specs = [(n, d, tuple(s)) for n, (d, s) in tensors.items()]
    w = Writer(path, specs)
    for n, d, s in specs:
        nb = nbytes_of(d, s)
        if d == "BF16":  # finite values (0x3c00.. is 2**-7 and up)
            w.write(n, (0x3C00 + np.arange(nb // 2) % 128).astype("<u2").tobytes())
        else:
            w.write(n, (np.arange(nb, dtype=np.uint32) * 2654435761 >> 13).astype(np.uint8).tobytes())
    w.close()
    return path


def raw_st(path, header: bytes | str | dict | list, data: bytes = b"") -> Path:
    """A safetensors file with exactly this header (JSON text, bytes, or an object to dump)."""
    if not isinstance(header, (bytes, str)):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode()
    Path(path).write_bytes(struct.pack("<Q", len(header)) + header + data)
    return Path(path)


def quark_tensors(
    prefix: str = "model.layers.0.mlp.experts",
    experts: int = 2,
    H: int = 64,
    I: int = 32,
    bf16: bool = False,
    down=None,
    up=None,
    gate_scale=None,
) -> dict:
    """Per-expert Quark tensors for one layer (shapes overridable to make them wrong)."""
    out = {}
    for e in range(experts):
        p = f"{prefix}.{e}"
        if bf16:
            out[f"{p}.gate_proj.weight"] = ("BF16", (I, H))
            out[f"{p}.up_proj.weight"] = ("BF16", up or (I, H))
            out[f"{p}.down_proj.weight"] = ("BF16", down or (H, I))
            continue
        g = (I, H // 2)
        u = up or g
        d = down or (H, I // 2)
        out[f"{p}.gate_proj.weight"] = ("U8", g)
        out[f"{p}.gate_proj.weight_scale"] = ("U8", gate_scale or (I, max(1, H // 32)))
        out[f"{p}.up_proj.weight"] = ("U8", u)
        out[f"{p}.up_proj.weight_scale"] = ("U8", (u[0], max(1, u[1] * 2 // 32)))
        out[f"{p}.down_proj.weight"] = ("U8", d)
        out[f"{p}.down_proj.weight_scale"] = ("U8", (d[0], max(1, d[1] * 2 // 32)))
    return out


def quark_dir(path, tensors: dict | None = None, config: dict | str | None = None) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    st_file(path / "model.safetensors", tensors or quark_tensors())
    cfg = config if config is not None else {"quantization_config": {"exclude": []}}
    (path / "config.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return path


def run_tool(name: str, *args, timeout: float = 60, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(TOOLS / name), *map(str, args)],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def tree(root) -> dict:
    """path -> bytes (or link target / 'dir') of everything under root, to compare before and after."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if p.is_symlink():
                out[str(p)] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[str(p)] = "dir"
            else:
                out[str(p)] = p.read_bytes()
    return out


def assert_clean_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: "), r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
