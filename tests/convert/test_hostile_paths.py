"""Class 1: no filesystem path may come from file contents (tensor names, index entries, symlinks)."""

import json
import os

from hostile_helpers import assert_clean_error, quark_dir, quark_tensors, run_tool, st_file, tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cookbook.convert.quark_fuse import QuarkError, fuse_checkpoint


def _outside(tmp_path, out):
    """Everything under tmp_path except the output folder."""
    return {k: v for k, v in tree(tmp_path).items() if not k.startswith(str(out) + os.sep) and k != str(out)}


def test_tensor_name_cannot_steer_scratch_files_outside_the_output(tmp_path):
    # The MTP (BF16) experts go through a scratch file; today its name comes from the tensor name.
    (tmp_path / "victim").mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's file\n")
    prefix = "/../victim/x.mlp.experts"
    # a link where the scratch file would land: writing through it would overwrite precious.txt
    (tmp_path / "victim" / "x.mlp.experts.w13_weight_scale.part").symlink_to(precious)
    src = quark_dir(tmp_path / "src", quark_tensors(prefix, bf16=True))
    out = tmp_path / "out"
    before = _outside(tmp_path, out)
    r = run_tool("quark-mxfp4-fuse", src, out)
    assert "Traceback" not in r.stderr
    assert precious.read_text() == "the user's file\n"
    assert _outside(tmp_path, out) == before  # nothing written, truncated or deleted outside out/
    assert r.returncode == 0, r.stderr  # the odd name is only a tensor name: the checkpoint converts
    names = json.loads(r.stdout)
    assert names["encoded_layers"] == 1


def test_index_entry_outside_the_source_folder_is_refused(tmp_path):
    outside = st_file(tmp_path / "elsewhere.safetensors", quark_tensors())
    for entry in ("../elsewhere.safetensors", str(outside), "sub/../../elsewhere.safetensors"):
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        (src / "config.json").write_text("{}")
        (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": entry}}))
        r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
        assert_clean_error(r, "model.safetensors.index.json", "not a plain file name")
        assert not (tmp_path / "out").exists()


def test_symlinked_shard_leaving_the_source_folder_is_refused(tmp_path):
    outside = st_file(tmp_path / "elsewhere.safetensors", quark_tensors())
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text("{}")
    (src / "model.safetensors").symlink_to(outside)
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    assert_clean_error(r, "model.safetensors", "outside the source folder")
    assert not (tmp_path / "out").exists()


def test_symlinked_side_file_leaving_the_source_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("ssh key\n")
    src = quark_dir(tmp_path / "src")
    (src / "tokenizer.json").symlink_to(secret)
    r = run_tool("quark-mxfp4-fuse", src, tmp_path / "out")
    assert_clean_error(r, "tokenizer.json", "outside the source folder")
    assert not (tmp_path / "out").exists()


def test_symlink_inside_the_source_folder_is_copied_as_a_file(tmp_path):
    src = quark_dir(tmp_path / "src")
    (src / "real.json").write_text('{"a": 1}')
    (src / "tokenizer.json").symlink_to("real.json")
    fuse_checkpoint(src, tmp_path / "out", progress=False)
    copied = tmp_path / "out" / "tokenizer.json"
    assert not copied.is_symlink() and copied.read_text() == '{"a": 1}'


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.text(st.sampled_from("/.\\\x00\x1bab~"), min_size=1, max_size=12))
def test_property_no_tensor_name_writes_outside_the_output(tmp_path_factory, prefix):
    base = tmp_path_factory.mktemp("p")
    (base / "victim").mkdir()
    name = prefix + ".mlp.experts"
    src = quark_dir(base / "src", quark_tensors(name, bf16=True))
    out = base / "o" / "out"
    (base / "o").mkdir()
    before = _outside(base, out)
    try:
        fuse_checkpoint(src, out, progress=False)
    except QuarkError:
        pass
    assert _outside(base, out) == before
