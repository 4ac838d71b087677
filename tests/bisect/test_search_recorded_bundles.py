"""The binary search on a recorded series of real evidence bundles: the probe reads each
version's results.json (cookbook.bisect.probe.outcome_from_bundle), as a live step does."""

import json
import math

import pytest
from recorded_bundles import GATE, record_series, write_bundle

from cookbook.bisect.probe import outcome_from_bundle
from cookbook.bisect.search import Bisection, EndsDoNotHold

# 17 releases: 16 gaps between the ends, so every search takes exactly log2(16) = 4 probes
VERSIONS = [f"0.{minor}.0" for minor in range(16, 33)]


def series(tmp_path, first_bad: str, overrides=None):
    cut = VERSIONS.index(first_bad)
    verdicts = {v: ("pass" if i < cut else "fail") for i, v in enumerate(VERSIONS)}
    verdicts.update(overrides or {})
    return record_series(tmp_path / "recorded", verdicts)


def probe_of(root, calls=None):
    def probe(version):
        if calls is not None:
            calls.append(version)
        return outcome_from_bundle(root / version, GATE)

    return probe


@pytest.mark.parametrize("first_bad", VERSIONS[1:])
def test_finds_the_first_bad_in_log2_steps(tmp_path, first_bad):
    root = series(tmp_path, first_bad)
    search = Bisection(VERSIONS, probe_of(root))
    answer = search.run()
    assert answer.first_bad == first_bad and not answer.is_range
    assert answer.last_good == VERSIONS[VERSIONS.index(first_bad) - 1]
    assert [s.role for s in search.steps[:2]] == ["good end", "bad end"]
    assert len(search.steps) == 2 + math.ceil(math.log2(len(VERSIONS) - 1)) == 6
    assert len({s.version for s in search.steps}) == len(search.steps)  # no version probed twice


def test_each_step_carries_its_bundle_verdict_and_figure(tmp_path):
    root = series(tmp_path, "0.27.0")
    search = Bisection(VERSIONS, probe_of(root))
    search.run()
    by_version = {s.version: s for s in search.steps}
    good = by_version["0.16.0"]
    assert good.verdict == "pass" and good.figure == "identical_prompts=3, prompts=3"
    assert good.bundle == str(root / "0.16.0")
    bad = by_version["0.32.0"]
    assert bad.verdict == "fail" and "2 of 3 prompts differ" in bad.reason


def test_a_skip_is_stepped_around_and_the_answer_stays_exact(tmp_path):
    # 0.24.0 is the first midpoint; its server never came up (a real runner bundle, server_down)
    root = series(tmp_path, "0.27.0", {"0.24.0": "down"})
    doc = json.loads((root / "0.24.0" / "results.json").read_text())
    assert doc["fault"] == "server_down" and doc["gates"][GATE]["reason"].startswith("not run:")
    calls = []
    search = Bisection(VERSIONS, probe_of(root, calls))
    answer = search.run()
    assert answer.first_bad == "0.27.0" and answer.candidates == ["0.27.0"]
    assert calls[2] == "0.24.0" and calls[3] in ("0.23.0", "0.25.0")  # the untested version nearest the middle
    skipped = [s for s in search.steps if s.verdict == "skip"]
    assert [s.version for s in skipped] == ["0.24.0"] and "never ran" in skipped[0].reason


def test_skips_that_hide_the_answer_give_a_range(tmp_path):
    root = series(tmp_path, "0.27.0", {"0.25.0": "down", "0.26.0": "down"})
    answer = Bisection(VERSIONS, probe_of(root)).run()
    assert answer.is_range and answer.first_bad is None
    assert answer.last_good == "0.24.0"
    assert answer.candidates == ["0.25.0", "0.26.0", "0.27.0"]


def test_a_version_without_a_bundle_is_a_skip(tmp_path):
    root = series(tmp_path, "0.20.0")
    (root / "0.24.0" / "results.json").unlink()
    answer = Bisection(VERSIONS, probe_of(root)).run()
    assert answer.first_bad == "0.20.0"


def test_a_good_end_that_fails_is_refused_after_one_step(tmp_path):
    root = series(tmp_path, "0.16.0")  # everything fails
    search = Bisection(VERSIONS, probe_of(root))
    with pytest.raises(EndsDoNotHold, match=r"the good end 0\.16\.0 does not pass \(it was fail") as e:
        search.run()
    assert e.value.exit_code == 1 and "older --good" in e.value.help
    assert [s.version for s in search.steps] == ["0.16.0"]


def test_a_bad_end_that_passes_is_refused_after_two_steps(tmp_path):
    root = record_series(tmp_path / "recorded", {v: "pass" for v in VERSIONS})
    search = Bisection(VERSIONS, probe_of(root))
    with pytest.raises(EndsDoNotHold, match=r"the bad end 0\.32\.0 does not fail \(it was pass\)"):
        search.run()
    assert [s.version for s in search.steps] == ["0.16.0", "0.32.0"]


def test_a_good_end_whose_server_never_started_is_refused(tmp_path):
    root = series(tmp_path, "0.27.0", {"0.16.0": "down"})
    with pytest.raises(EndsDoNotHold, match=r"good end 0\.16\.0 does not pass \(it was skip: the gate never ran") as e:
        Bisection(VERSIONS, probe_of(root), slug="gemma3-270m-cpu").run()
    assert "cookbook upgrade gemma3-270m-cpu --engine 0.16.0 --dry-run" in e.value.help


def test_two_adjacent_versions_need_only_the_ends(tmp_path):
    root = tmp_path / "recorded"
    write_bundle(root, "0.31.0", "pass")
    write_bundle(root, "0.32.0", "fail")
    search = Bisection(["0.31.0", "0.32.0"], probe_of(root))
    assert search.run().first_bad == "0.32.0" and len(search.steps) == 2


def test_fewer_than_two_versions_is_refused():
    with pytest.raises(Exception, match="two versions at least"):
        Bisection(["0.32.0"], lambda v: None)


def test_a_hostile_figure_name_is_escaped(tmp_path):
    bundle = write_bundle(tmp_path, "0.31.0", "pass")
    doc = json.loads((bundle / "results.json").read_text())
    doc["gates"][GATE]["measured"] = {"\x1b[2Jcleared": 3}
    (bundle / "results.json").write_text(json.dumps(doc))
    assert outcome_from_bundle(bundle, GATE).figure == "\\x1b[2Jcleared=3"
