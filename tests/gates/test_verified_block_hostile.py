"""Issue 64, item 8: a verified block shows verified only for evidence `gates verify` could have
written, and `show --set` cannot dress a configuration up as verified: a hand-written block naming
a bundle by an absolute path or `../` is refused by `cookbook list` as `gates verify` refuses it,
--set cannot touch the verified block, and `show --set` of a changed setting says unverified."""

from __future__ import annotations

import json
import shutil

import evidence_bundles
import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.evidence.status import status_and_reasons
from cookbook.recipe import resolve

SLUG = evidence_bundles.SLUG


@pytest.fixture
def genuine(tmp_path, monkeypatch):
    return evidence_bundles.genuine_bundle(tmp_path, monkeypatch)


def _point_block_at(tmp_path, ref: str) -> None:
    f = tmp_path / "recipes" / SLUG / "recipe.yaml"
    text = f.read_text()
    old = next(line for line in text.splitlines() if line.startswith("  bundle: "))
    f.write_text(text.replace(old, f"  bundle: {ref}"))


def _listed(slug=SLUG) -> str:
    res = CliRunner().invoke(main, ["list", "--json"])
    assert res.exit_code == 0, res.output
    return next(x for x in json.loads(res.output)["recipes"] if x["slug"] == slug)["status"]


def test_the_genuine_block_is_verified(genuine):
    assert _listed() == "verified"


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link"])
def test_a_block_naming_a_bundle_outside_the_checkout_is_not_verified(genuine, tmp_path, how):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(genuine, outside)
    if how == "absolute":
        ref = str(outside)
    elif how == "dotdot":
        ref = f"../{outside.name}"
    else:
        (tmp_path / "runs").mkdir()
        (tmp_path / "runs" / "b").symlink_to(outside)
        ref = "runs/b"
    _point_block_at(tmp_path, ref)
    word, reasons = status_and_reasons(resolve(SLUG, check=False))
    assert word == "unverified (bundle refused)" and "inside the repository" in reasons[0], (word, reasons)
    assert _listed().startswith("unverified (bundle refused)")


@pytest.mark.parametrize("key", ["verified.bundle=runs/x", "verified.date=2030-01-01", "verified={}", "verified=null"])
@pytest.mark.parametrize("command", ["show", "launch", "plan"])
def test_set_cannot_touch_the_verified_block(genuine, command, key):
    res = CliRunner().invoke(main, [command, SLUG, "--set", key])
    assert res.exit_code == 2 and "only `cookbook gates verify` writes the verified block" in res.output, res.output
    assert "Traceback" not in res.output and "help:" in res.output


def test_show_set_of_a_changed_setting_says_unverified(genuine):
    plain = CliRunner().invoke(main, ["show", SLUG])
    assert "status   verified" in plain.output, plain.output
    res = CliRunner().invoke(main, ["show", SLUG, "--set", "max_model_len=4096"])
    assert res.exit_code == 0, res.output
    status = next(line for line in res.output.splitlines() if line.startswith("status"))
    assert status.startswith("status   unverified (this --set/--quant configuration"), status
    assert "of another configuration than shown" in res.output
