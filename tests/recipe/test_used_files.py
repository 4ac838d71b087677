"""Issue 64, item 4: the recipe hash covers every checkout file a recipe serves with (chat templates,
configs, bucket files; through `extends` too), so overwriting one makes a verified recipe stale and
its old bundle is refused. The paths a recipe names are untrusted: out of the checkout, a link out,
a FIFO, an oversized file, a variable or a missing file is one R025 message from every command."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import evidence_bundles
import pytest
from click.testing import CliRunner
from openai_standin import _handler

from cookbook.cli import main
from cookbook.evidence.recheck import recheck
from cookbook.evidence.resolved_recipe import check_resolved
from cookbook.evidence.status import status_of
from cookbook.recipe import errors as E
from cookbook.recipe import resolve
from cookbook.recipe.lint import lint_file
from cookbook.recipe.used_files import IMAGE_CHECKOUTS, MAX_BYTES, references

REPO = Path(__file__).resolve().parents[2]
SLUG = evidence_bundles.SLUG
TEMPLATE = f"recipes/{SLUG}/chat_template.jinja"


@pytest.fixture
def genuine(tmp_path, monkeypatch):
    return evidence_bundles.genuine_bundle(tmp_path, monkeypatch)


def test_the_template_is_in_the_hash_of_the_recipe_and_of_what_extends_it():
    cpu, avx2 = resolve(SLUG, check=False), resolve("gemma3-270m-cpu-avx2", check=False)
    digest = "sha256:" + __import__("hashlib").sha256((REPO / TEMPLATE).read_bytes()).hexdigest()
    assert cpu.files == {TEMPLATE: digest} and avx2.files == {TEMPLATE: digest}  # through extends
    assert resolve("dsv3-perf-h200", check=False).files.keys() == {"recipes/dsv3-perf-h200/config.json"}
    gaudi = resolve("glm52-mxfp4-8x-gaudi2", check=False)  # by the path the image copies the checkout to
    assert "ports/glm-5-mxfp4/serving/tp8-seqs4-128k.txt" in gaudi.files


def test_overwriting_the_chat_template_makes_the_recipe_stale_and_the_old_bundle_refused(genuine, tmp_path):
    r = resolve(SLUG, check=False)
    assert status_of(r) == "verified" and recheck(r, genuine) == []
    (tmp_path / TEMPLATE).write_text("{{ 'constant' }}")
    r = resolve(SLUG, check=False)
    assert status_of(r) == "stale"
    res = CliRunner().invoke(main, ["list", "--json"])
    row = next(x for x in json.loads(res.output)["recipes"] if x["slug"] == SLUG)
    assert row["status"] == "stale", row
    reasons = recheck(r, genuine)
    assert any("the recipe is now" in x for x in reasons), reasons
    res = CliRunner().invoke(main, ["gates", "verify", SLUG, str(genuine)])
    assert res.exit_code != 0 and "the recipe is now" in res.output, res.output


def test_a_fresh_gates_run_records_the_digests_verify_needs(tmp_path, monkeypatch):
    """`gates run` (what `cookbook serve --gates` and gates/run.sh call) writes recipe.resolved.json
    with used_files, and it hashes to the recipe hash results.json records (stand-in server)."""
    evidence_bundles.copy_cpu_recipe(tmp_path, monkeypatch)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler("gemma3-270m"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "run"
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        CliRunner().invoke(main, ["gates", "run", SLUG, "--base-url", url, "--only", "greedy", "--out", str(out)])
    finally:
        server.shutdown()
        server.server_close()
    recorded = json.loads((out / "recipe.resolved.json").read_text())
    r = resolve(SLUG, check=False)
    assert recorded["used_files"] == r.files == {TEMPLATE: r.files[TEMPLATE]}
    doc = json.loads((out / "results.json").read_text())
    assert doc["recipe_hash"] == r.content_hash and check_resolved(out, doc, r) == []


def test_image_checkouts_are_where_the_ports_copy_the_checkout():
    seen = set()
    for f in (REPO / "ports").glob("*/Dockerfile"):
        seen |= {m.rstrip("/") for m in re.findall(r"^COPY cookbook/ (\S+)", f.read_text(), re.M)}
    assert seen == set(IMAGE_CHECKOUTS)


def test_prose_keys_and_other_variables_are_not_references():
    data = {
        "serve": {"args": {"x": {"value": "$COOKBOOKS/a", "why": "$COOKBOOK/recipes/nope"}}},
        "env": {"A": {"value": "${COOKBOOK}/recipes/a.txt /opt/cookbook/b.txt"}},
        "gates": {"golden": "$COOKBOOK/not/run"},
    }
    assert [rel for _, rel in references(data)] == ["recipes/a.txt", "b.txt"]


def _refused(args: list[str], *needles: str) -> str:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "R025" in res.output and "help:" in res.output, res.output
    for n in needles:
        assert n in res.output, res.output
    return res.output


HOSTILE = [
    ("$COOKBOOK/../../etc/passwd", "leaves"),
    ("$COOKBOOK//etc/passwd", "absolute"),
    ("$COOKBOOK/recipes/$X/t.jinja", "shell variable"),
    ("$COOKBOOK/recipes/nope.jinja", "is not in this checkout"),
    ("$COOKBOOK/", "empty"),
    ("$COOKBOOK/recipes", "directory"),
]


@pytest.mark.parametrize("value,why", HOSTILE, ids=[h[1] for h in HOSTILE])
@pytest.mark.parametrize("command", ["launch", "show", "plan", "serve"])
def test_a_hostile_path_through_set_is_one_message_in_every_command(command, value, why):
    args = [command, SLUG, "--set", f"serve.args.chat_template={value}"]
    _refused(args + (["--dry-run"] if command == "serve" else []), why)


def test_links_out_fifos_and_huge_files_are_refused_without_blocking(genuine, tmp_path):
    d = tmp_path / "recipes" / SLUG
    (d / "out.jinja").symlink_to("/etc/hostname")
    _refused(["show", SLUG, "--set", f"serve.args.chat_template=$COOKBOOK/recipes/{SLUG}/out.jinja"], "leaves")
    os.mkfifo(d / "fifo.jinja")  # read, it would block forever
    _refused(["launch", SLUG, "--set", f"serve.args.chat_template=$COOKBOOK/recipes/{SLUG}/fifo.jinja"], "FIFO")
    with open(d / "big.jinja", "wb") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: no disk used
    _refused(["launch", SLUG, "--set", f"serve.args.chat_template=$COOKBOOK/recipes/{SLUG}/big.jinja"], "bytes")


def test_a_recipe_file_naming_a_bad_path_is_shown_invalid_and_linted(genuine, tmp_path):
    f = tmp_path / "recipes" / SLUG / "recipe.yaml"
    f.write_text(f.read_text().replace("recipes/gemma3-270m-cpu/chat_template.jinja", "../../etc/passwd"))
    assert {d.kind for d in lint_file(f)} >= {E.UNUSABLE_FILE}
    res = CliRunner().invoke(main, ["list", "--json"])
    row = next(x for x in json.loads(res.output)["recipes"] if x["slug"] == SLUG)
    assert row["status"] == "invalid" and "R025" in row["reason"], row
    shutil.rmtree(tmp_path / "recipes" / SLUG / "evidence")
