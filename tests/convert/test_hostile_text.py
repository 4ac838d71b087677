"""Class 2: untrusted text (GGUF keys, values, tensor names, index entries) never reaches the terminal raw."""

import json
import struct

from hostile_helpers import (
    EVIL,
    assert_clean_error,
    gguf_file,
    no_raw_controls,
    quark_dir,
    quark_tensors,
    run_tool,
    str_array,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cookbook.convert.inspect import inspect
from cookbook.gguf import GGUFError, read_gguf
from cookbook.gguf.format import ValueType
from cookbook.gguf.writer import encode_string


def hostile_gguf(path):
    return gguf_file(
        path,
        kvs=[
            ("general.architecture", ValueType.STRING, "llama"),
            (f"k{EVIL}", ValueType.STRING, f"v{EVIL}"),
            ("list", ValueType.ARRAY, str_array([EVIL, "ok"])),
        ],
        tensors=[(f"t{EVIL}", (8,))],
    )


def test_inspect_text_escapes_keys_values_and_tensor_names(tmp_path):
    r = run_tool("gguf-inspect", hostile_gguf(tmp_path / "h.gguf"))
    assert r.returncode == 0, r.stderr
    assert no_raw_controls(r.stdout), r.stdout
    assert "k\\x1b[2J" in r.stdout and "t\\x1b[2J" in r.stdout and "\\u202eevil" in r.stdout


def test_inspect_json_escapes_too(tmp_path):
    r = run_tool("gguf-inspect", hostile_gguf(tmp_path / "h.gguf"), "--json")
    assert r.returncode == 0 and no_raw_controls(r.stdout)
    assert f"k{EVIL}" in json.loads(r.stdout)["metadata"]  # the JSON still round-trips the exact key


def test_reader_error_naming_a_hostile_key_is_escaped(tmp_path):
    # a key followed by an unknown value type: the error names the key (its field)
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + encode_string(f"k{EVIL}") + struct.pack("<I", 99)
    p = tmp_path / "bad.gguf"
    p.write_bytes(data + b"\0" * 16)
    r = run_tool("gguf-inspect", p)
    assert_clean_error(r, "unknown value type 99", "k\\x1b")
    assert no_raw_controls(r.stderr)


def test_non_utf8_string_value_is_shown_as_hex_escapes(tmp_path):
    raw = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + encode_string("k")
        + struct.pack("<I", 8)
        + encode_string(b"\xff\x1b[31m")
    )
    p = tmp_path / "n.gguf"
    p.write_bytes(raw)
    out = inspect(p)
    assert no_raw_controls(out) and "\\xff" in out


def test_set_error_on_hostile_file_name_is_escaped(tmp_path):
    p = tmp_path / f"m{EVIL}.gguf"
    p.write_bytes(b"nope" * 10)
    r = run_tool("gguf-set", p, "a=1")
    assert_clean_error(r, "magic")
    assert no_raw_controls(r.stderr)


def test_quark_error_naming_a_hostile_tensor_prefix_is_escaped(tmp_path):
    t = quark_tensors(f"x{EVIL}.mlp.experts", experts=2)
    del t[f"x{EVIL}.mlp.experts.1.up_proj.weight_scale"]
    r = run_tool("quark-mxfp4-fuse", quark_dir(tmp_path / "src", t), tmp_path / "out")
    assert_clean_error(r, "is missing", "x\\x1b")
    assert no_raw_controls(r.stderr)


def test_index_entry_with_control_characters_is_escaped(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": f"m{EVIL}.safetensors"}}))
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    assert_clean_error(r, "m\\x1b")
    assert no_raw_controls(r.stderr)


def test_printable_helper():
    from cookbook.untrusted import printable

    assert printable("plain text: ok, ünïcode") == "plain text: ok, ünïcode"
    assert printable("a\x1bb\nc\u202e\x9b") == "a\\x1bb\\x0ac\\u202e\\x9b"
    assert printable("bad\udcff") == "bad\\xff"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(min_size=1, max_size=20), value=st.text(max_size=20), name=st.text(min_size=1, max_size=20))
def test_property_inspect_and_errors_print_only_printable_text(tmp_path_factory, key, value, name):
    name = name.encode("utf-8", "surrogatepass")[:60].decode("utf-8", "ignore") or "t"
    d = tmp_path_factory.mktemp("h")
    try:
        p = gguf_file(d / "h.gguf", kvs=[(key, ValueType.STRING, value)], tensors=[(name, (8,))])
    except (UnicodeEncodeError, GGUFError):
        return  # lone surrogates cannot be written as UTF-8 keys
    for line in inspect(p).splitlines():
        assert line.isprintable(), line
    # the same text in an error: a duplicate of the key
    p.write_bytes(p.read_bytes().replace(struct.pack("<Q", 1), struct.pack("<Q", 2), 1))
    try:
        read_gguf(p)
    except GGUFError as e:
        for line in str(e).splitlines():
            assert line.isprintable(), line
