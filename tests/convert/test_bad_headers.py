"""Class 6: bad safetensors headers, index and config files end in one message, never a traceback."""

import json
import struct

import pytest
from hostile_helpers import assert_clean_error, quark_dir, raw_st, run_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cookbook.convert.safetensors_io import SafetensorsError, read_header

GOOD = {"w": {"dtype": "U8", "shape": [2, 2], "data_offsets": [0, 4]}}

BAD_HEADERS = {
    "inf_shape": '{"w": {"dtype": "U8", "shape": [Infinity], "data_offsets": [0, 4]}}',
    "nan_offset": '{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, NaN]}}',
    "float_overflow": '{"w": {"dtype": "U8", "shape": [1e400], "data_offsets": [0, 4]}}',
    "huge_int": '{"w": {"dtype": "U8", "shape": [' + str(10**40) + '], "data_offsets": [0, 4]}}',
    "huge_int_offsets": '{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, ' + str(10**4000) + "]}}",
    "fraction": '{"w": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 2]}}',
    "bool_shape": '{"w": {"dtype": "U8", "shape": [true, 4], "data_offsets": [0, 4]}}',
    "string_offsets": '{"w": {"dtype": "U8", "shape": [4], "data_offsets": ["0", "4"]}}',
    "list_dtype": '{"w": {"dtype": ["U8"], "shape": [4], "data_offsets": [0, 4]}}',
    "three_offsets": '{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 2, 4]}}',
    "entry_is_list": '{"w": [1, 2]}',
    "header_is_list": "[1, 2, 3]",
    "metadata_is_list": '{"__metadata__": [1], "w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}',
    "metadata_value_not_str": '{"__metadata__": {"a": {"b": 1}}, '
    '"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}',
    "deep_nesting": "[" * 100_000 + "]" * 100_000,
    "non_utf8": b'{"w\xff": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}',
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_safetensors_header_is_one_message(tmp_path, case):
    src = quark_dir(tmp_path / "src")
    raw_st(src / "model.safetensors", BAD_HEADERS[case], b"\0" * 4)
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    assert_clean_error(r, "model.safetensors")
    assert "help:" in r.stderr
    assert not (tmp_path / "out").exists()


BAD_INDEXES = {
    "not_json": "{nope",
    "non_utf8": b'{"weight_map": {"w": "model\xff.safetensors"}}',
    "weight_map_list": '{"weight_map": ["model.safetensors"]}',
    "value_int": '{"weight_map": {"w": 5}}',
    "value_list": '{"weight_map": {"w": ["model.safetensors"]}}',
    "index_list": "[1]",
    "deep": '{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("case", sorted(BAD_INDEXES))
def test_bad_index_is_one_message(tmp_path, case):
    src = quark_dir(tmp_path / "src")
    body = BAD_INDEXES[case]
    (src / "model.safetensors.index.json").write_bytes(body if isinstance(body, bytes) else body.encode())
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    assert_clean_error(r, "model.safetensors.index.json")
    assert "help:" in r.stderr


@pytest.mark.parametrize("config", ["{nope", "[1, 2]", b"\xff\xfe{}", '{"quantization_config": []}'])
def test_bad_config_json_is_one_message(tmp_path, config):
    src = quark_dir(tmp_path / "src")
    (src / "config.json").write_bytes(config if isinstance(config, bytes) else config.encode())
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    if r.returncode == 0:  # a config without a usable quantization_config is copied as it is
        assert config == '{"quantization_config": []}'
        return
    assert_clean_error(r, "config.json")


def test_join_sums_file_not_utf8_is_one_message(tmp_path):
    from hostile_helpers import gguf_file

    g = gguf_file(tmp_path / "m.gguf")
    sums = tmp_path / "SUMS"
    sums.write_bytes(b"\xff" * 70 + b"  m.gguf\n")
    assert_clean_error(run_tool("gguf-join", g, "-o", tmp_path / "j.gguf", "--sha256sums", sums), "SUMS")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["dtype", "shape", "data_offsets", "__entry__", "__metadata__"]), value=json_values)
def test_property_header_mutations_never_escape_as_other_errors(tmp_path_factory, field, value):
    header = json.loads(json.dumps(GOOD))
    if field == "__entry__":
        header["w"] = value
    elif field == "__metadata__":
        header["__metadata__"] = value
    else:
        header["w"][field] = value
    p = raw_st(tmp_path_factory.mktemp("s") / "m.safetensors", json.dumps(header), b"\0" * 4)
    try:
        read_header(p)
    except SafetensorsError:
        pass


def test_header_length_field_larger_than_file(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    with pytest.raises(SafetensorsError, match="header length"):
        read_header(p)
