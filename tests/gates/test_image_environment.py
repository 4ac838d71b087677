"""A bundle from a server in the recipe's image records the image's ID and digest, and
`gates verify` binds the verified block to them. Starts from the real CPU bundle (as
test_forged_bundles does), with its environment replaced by an image's and the manifest resealed."""

import json

import evidence_bundles
import pytest

from cookbook.evidence import verify
from cookbook.gates.bundle import Bundle, write_manifest
from cookbook.recipe import resolve

SLUG = evidence_bundles.SLUG
DIGEST = "sha256:" + "a" * 64
IMAGE_ID = "sha256:" + "b" * 64


@pytest.fixture
def genuine(tmp_path, monkeypatch):
    return evidence_bundles.genuine_bundle(tmp_path, monkeypatch)


def as_image_bundle(bundle, env):
    evidence_bundles.edit_results(bundle, lambda d: d.update(environment=env))
    (bundle / "environment.lock").unlink()
    write_manifest(bundle)


def test_the_writer_records_ref_id_and_digest(tmp_path):
    b = Bundle(tmp_path / "b", {"recipe": "x"})
    b.set_environment(image={"ref": "cookbook/x:0123456789ab", "id": IMAGE_ID, "digest": DIGEST})
    env = json.loads((tmp_path / "b" / "results.json").read_text())["environment"]
    assert env == {"kind": "image", "digest": DIGEST, "id": IMAGE_ID, "ref": "cookbook/x:0123456789ab"}
    assert not (tmp_path / "b" / "environment.lock").exists()


def test_verify_binds_verified_to_the_image(genuine):
    as_image_bundle(genuine, {"kind": "image", "digest": DIGEST, "id": IMAGE_ID, "ref": "cookbook/x:t"})
    reasons, block = verify.verify(resolve(SLUG, check=False), genuine)
    assert reasons == []
    assert block["environment"] == f"image {DIGEST} (id {IMAGE_ID})"


def test_a_local_image_whose_digest_is_its_id(genuine):
    as_image_bundle(genuine, {"kind": "image", "digest": IMAGE_ID, "id": IMAGE_ID, "ref": "cookbook/x:t"})
    reasons, block = verify.verify(resolve(SLUG, check=False), genuine)
    assert reasons == [] and block["environment"] == f"image {IMAGE_ID}"


def test_a_bogus_image_id_is_refused(genuine):
    as_image_bundle(genuine, {"kind": "image", "digest": DIGEST, "id": "latest"})
    reasons, block = verify.verify(resolve(SLUG, check=False), genuine)
    assert block is None and any("the image ID 'latest' is not of the form sha256:" in r for r in reasons)
