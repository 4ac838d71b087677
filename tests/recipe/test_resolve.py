import pytest

from cookbook.recipe import RecipeError, resolve
from cookbook.recipe import errors as E


def ids(exc):
    return [d.kind.id for d in exc.value.diagnostics]


def test_extends_merges_parent_and_keeps_reasons(valid_recipes):
    r = resolve("demo-4")
    assert r.recipe.hardware.gpus == 4
    assert r.recipe.hardware.platform == "mi300x"  # inherited
    assert r.recipe.serve.arg("tensor_parallel_size") == 4
    assert r.recipe.serve.args["block_size"].why == "sparse MLA only accepts multiples of 64"
    assert r.quant == "Q2_K"


def test_quant_on_too_few_gpus_is_refused_with_reason_and_alternative(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", quant="Q4_K")
    assert ids(exc) == ["R103"]
    d = exc.value.diagnostics[0]
    assert "Q4_K needs 4+ GPUs; demo-2 has 2" in d.problem
    assert "404 GiB of weights do not fit" in d.problem
    assert "demo-4" in d.help


def test_quant_allowed_on_enough_gpus(valid_recipes):
    assert resolve("demo-4", quant="Q4_K").quant == "Q4_K"


def test_unknown_quant_lists_offered(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", quant="Q8_0")
    assert ids(exc) == ["R102"]
    assert "Q2_K, Q4_K" in exc.value.diagnostics[0].help


def test_unknown_recipe_suggests_close_names(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-3")
    assert ids(exc) == ["R101"]
    assert "demo-2" in exc.value.diagnostics[0].help


def test_set_breaking_rules_reports_every_rule(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-4", sets=["block_size=32", "tensor_parallel_size=5"])
    assert ids(exc) == ["R106", "R106"]
    text = str(exc.value)
    assert "5 ranks do not split 96 heads" in text
    assert "block size 32: sparse MLA only accepts multiples of 64 [demo doc]" in text


def test_set_changes_value_and_records_why(valid_recipes):
    r = resolve("demo-2", sets=["serve.args.max_model_len=8192", "VLLM_ROCM_USE_AITER=1"])
    assert r.recipe.serve.arg("max_model_len") == 8192
    assert "--set" in r.recipe.serve.args["max_model_len"].why


@pytest.mark.parametrize(
    "item,key",
    [
        ("blok_size=3", "serve.args.blok_size"),  # shorthand may only change existing keys
        ("foo.bar=1", "foo.bar"),
        ("hardware.gpuz=4", "hardware.gpuz"),
    ],
)
def test_set_unknown_key_is_refused(valid_recipes, item, key):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", sets=[item])
    assert ids(exc) == ["R104"]
    assert exc.value.diagnostics[0].key == key


def test_set_malformed(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", sets=["no-equals-sign"])
    assert ids(exc) == ["R105"]


def test_set_wrong_type_is_a_validation_error(valid_recipes):
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", sets=["hardware.gpus=many"])
    assert ids(exc) == ["R105"]  # refused as a --set, with the expected type (issue 47)


def test_content_hash_changes_with_settings_and_quant(valid_recipes):
    a = resolve("demo-4").content_hash
    assert a == resolve("demo-4").content_hash
    assert a != resolve("demo-4", sets=["serve.args.max_model_len=8192"]).content_hash
    assert a != resolve("demo-4", quant="Q4_K").content_hash


def test_registry_ids_are_unique_and_documented():
    import re
    from pathlib import Path

    ids_ = [k.id for k in E.REGISTRY.values()]
    assert len(ids_) == len(set(ids_))
    assert all(re.fullmatch(r"R\d{3}", i) for i in ids_)
    assert all(len(k.doc) > 40 and k.title for k in E.REGISTRY.values())
    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    for i in ids_:
        assert f"## {i}:" in page
    # every ErrorKind the code uses is registered (no ad-hoc IDs)
    src = Path(E.__file__).resolve().parents[1]
    used = set()
    for f in src.rglob("*.py"):
        used |= set(re.findall(r"\bE\.([A-Z_]{4,})\b", f.read_text()))
    assert used <= {n for n in dir(E) if isinstance(getattr(E, n), E.ErrorKind)} | {"REGISTRY"}


def test_rules_merge_by_id_across_extends(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(__import__("recipe_helpers").FIXTURES / "valid", tmp_path / "r")
    child = tmp_path / "r" / "demo-4" / "recipe.yaml"
    child.write_text(
        child.read_text()
        + (
            "rules:\n"
            "  - id: block-size-64\n    kind: requires\n    require: 'serve.args.block_size % 128 == 0'\n"
            "    message: 'child says 128'\n"
            "  - id: child-only\n    when: 'serve.args.max_model_len > 1000'\n    message: 'child rule'\n"
        )
    )
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "r"))
    with pytest.raises(RecipeError) as exc:
        resolve("demo-4", sets=["serve.args.max_model_len=4096", "tensor_parallel_size=5"])
    text = str(exc.value)
    assert "ranks do not split" in text  # parent rule kept
    assert "child says 128" in text  # parent rule replaced by id
    assert "child rule" in text  # child rule appended
    assert [r.id for r in resolve("demo-2").recipe.rules] == ["tp-divides-heads", "block-size-64"]


def _demo_copy(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(__import__("recipe_helpers").FIXTURES / "valid", tmp_path / "r")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "r"))
    return tmp_path / "r"


def test_rule_cites_a_settings_why_instead_of_copying_it(tmp_path, monkeypatch):
    root = _demo_copy(tmp_path, monkeypatch)
    before = resolve("demo-2", check=False).content_hash
    parent = root / "demo-2" / "recipe.yaml"
    copied = 'message: "block size {serve.args.block_size}: sparse MLA only accepts multiples of 64"'
    assert copied in parent.read_text()
    parent.write_text(
        parent.read_text().replace(copied, 'message: "block size {serve.args.block_size}: {serve.args.block_size.why}"')
    )
    assert resolve("demo-2", check=False).content_hash == before  # the same rule, written once
    with pytest.raises(RecipeError) as exc:
        resolve("demo-2", sets=["block_size=48"])
    assert "block size 48: sparse MLA only accepts multiples of 64 [demo doc]" in str(exc.value)
    # A variant that rewords the setting's why for itself does not reword the inherited rule.
    child = root / "demo-4" / "recipe.yaml"
    child.write_text(child.read_text() + '    block_size: {value: 64, why: "the child\'s own words"}\n')
    msg = next(r.message for r in resolve("demo-4").recipe.rules if r.id == "block-size-64")
    assert msg == "block size {serve.args.block_size}: sparse MLA only accepts multiples of 64"


def test_lint_reports_a_why_citation_of_no_setting(tmp_path, monkeypatch):
    from cookbook.recipe import errors as E
    from cookbook.recipe.lint import lint_file

    root = _demo_copy(tmp_path, monkeypatch)
    parent = root / "demo-2" / "recipe.yaml"
    parent.write_text(
        parent.read_text().replace(
            'help: "use a TP size that divides the head count"', 'help: "{serve.args.no_such.why}"'
        )
    )
    diags = [d for d in lint_file(parent) if d.key == "rules.0.help"]
    assert [d.kind for d in diags] == [E.BAD_VALUE]
    assert "serve.args.no_such is not a setting with a why" in diags[0].problem
