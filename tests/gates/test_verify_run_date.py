"""`gates verify` writes the day the gates ran (results.json's `started`), not the day of the verify."""

import evidence_bundles
import yaml

from cookbook.evidence import verify
from cookbook.gates.bundle import load_results
from cookbook.recipe import resolve


def test_verified_date_is_the_runs_day(tmp_path, monkeypatch):
    bundle = evidence_bundles.genuine_bundle(tmp_path, monkeypatch)
    started = load_results(bundle)["started"]
    assert started.startswith("2026-12-05")  # the sealed CPU bundle ran on 2026-12-05, days before any verify here
    r = resolve("gemma3-270m-cpu")
    r.path.write_text(r.path.read_text()[: r.path.read_text().index("# written by `cookbook gates verify`")])
    reasons, block = verify.verify(resolve("gemma3-270m-cpu"), bundle)
    assert reasons == []
    assert block["date"] == "2026-12-05"
    assert yaml.safe_load(r.path.read_text())["verified"]["date"] == "2026-12-05"


def test_run_date_reads_utc_day():
    assert verify.run_date({"started": "2026-12-05T23:30:00-02:00"}) == "2026-12-06"
    assert verify.run_date({"started": None, "finished": "2026-01-02T00:00:00+00:00"}) == "2026-01-02"
    try:
        verify.run_date({"started": "yesterday"})
    except ValueError as e:
        assert "no start or finish time" in str(e)
    else:
        raise AssertionError("a bundle without a run time was given a date")
