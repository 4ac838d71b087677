"""gguf-to-hf on the packaged Gemma 3 270M: our HF checkpoint against transformers loading the GGUF itself.

Greedy tokens are compared on the same input ids (BOS included, as the GGUF asks), so the
comparison checks the weights and config; the tokenizer is checked separately, including
the BOS that transformers alone drops.
"""

import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest
from convert_helpers import TOOLS

from cookbook.convert.gguf_to_hf import convert_gguf_to_hf
from cookbook.gguf import GGUFError

torch = pytest.importorskip("torch", reason="torch is needed to compare with transformers (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers")

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time"]
NEW_TOKENS = 16


@pytest.fixture(scope="session")
def gemma_hf(tmp_path_factory, gemma_gguf):
    out = tmp_path_factory.mktemp("hf") / "gemma-hf"
    info = convert_gguf_to_hf(gemma_gguf, out, progress=False)
    return out, info


@pytest.fixture(scope="session")
def prompt_ids(gemma_hf):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gemma_hf[0])
    return [tok(p).input_ids for p in PROMPTS]


@pytest.fixture(scope="session")
def reference_greedy(gemma_gguf, prompt_ids):
    """Greedy continuations from transformers loading the GGUF directly (float32)."""
    model = transformers_from_gguf(gemma_gguf)
    out = [greedy(model, ids) for ids in prompt_ids]
    return model, out


def transformers_from_gguf(path):
    """transformers' own GGUF loading: from_pretrained(gguf_file=...) when accelerate is installed
    (it insists on it), else the same loader function it calls, into a model built from its config."""
    import importlib.util

    from transformers import AutoConfig, AutoModelForCausalLM

    if importlib.util.find_spec("accelerate"):
        return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    cfg = dict(load_gguf_checkpoint(str(path), return_tensors=False)["config"])
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg), dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied to the embedding
    model.tie_weights()
    return model.eval()


def greedy(model, ids):
    x = torch.tensor([ids])
    with torch.no_grad():
        y = model.generate(x, max_new_tokens=NEW_TOKENS, do_sample=False)
    return y[0, len(ids) :].tolist()


def test_checkpoint_files_and_metadata(gemma_checkpoint):
    """The recipe's own conversion (bf16, its chat template), the one the fast tier shares."""
    out = gemma_checkpoint
    names = sorted(p.name for p in out.iterdir() if p.name != ".cookbook-model")  # the marker: cookbook.model_folder
    assert names == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert not out.with_name(out.name + ".tmp").exists()
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "gemma3_text" and cfg["architectures"] == ["Gemma3ForCausalLM"]
    assert cfg["tie_word_embeddings"] is True and cfg["vocab_size"] == 262144
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["head_dim"], cfg["sliding_window"]) == (640, 18, 256, 512)
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    tcfg = json.loads((out / "tokenizer_config.json").read_text())
    assert tcfg["add_bos_token"] is True and tcfg["add_eos_token"] is False and tcfg["bos_token"] == "<bos>"


@pytest.mark.slow_tier("serving")
def test_tokenizer_carries_bos_that_transformers_alone_drops(gemma_hf, gemma_gguf, prompt_ids):
    from transformers import AutoTokenizer

    ours = AutoTokenizer.from_pretrained(gemma_hf[0])
    theirs = AutoTokenizer.from_pretrained(gemma_gguf.parent, gguf_file=gemma_gguf.name)
    for p, ids in zip(PROMPTS, prompt_ids):
        assert ids[0] == 2  # <bos>, as tokenizer.ggml.add_bos_token says
        plain = theirs(p).input_ids
        assert plain[0] != 2, "transformers now keeps add_bos_token: this workaround may be dropped"
        assert ids[1:] == plain  # same pieces otherwise
    assert ours.decode(prompt_ids[0], skip_special_tokens=True) == PROMPTS[0]


@pytest.mark.slow
@pytest.mark.slow_tier("serving")
def test_weights_and_greedy_tokens_equal_transformers_on_gguf(gemma_hf, prompt_ids, reference_greedy):
    from transformers import AutoModelForCausalLM

    ref_model, ref_out = reference_greedy
    ours = AutoModelForCausalLM.from_pretrained(gemma_hf[0], dtype=torch.float32)
    a, b = ours.state_dict(), ref_model.state_dict()
    assert set(a) == set(b)
    unequal = [k for k in a if not torch.equal(a[k], b[k])]
    assert not unequal, unequal[:5]
    for ids, want in zip(prompt_ids, ref_out):
        assert greedy(ours, ids) == want
    assert len(set(map(tuple, ref_out))) == len(PROMPTS)  # not all the same degenerate output


def test_refuses_unsupported_architecture(small_gguf, tmp_path):
    with pytest.raises(GGUFError, match="architecture 'llama' is not supported"):
        convert_gguf_to_hf(small_gguf, tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.tmp").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.engine
def test_cpu_vllm_tokenizes_the_recipes_checkpoint_as_ours_does(cpu_server, gemma_checkpoint):
    """The session's CPU server (the recipe's bf16 conversion) adds BOS exactly as our tokenizer does,
    and answers each prompt; the float32 greedy tokens against transformers are the slow tier's."""
    import httpx
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gemma_checkpoint)
    for prompt in PROMPTS:
        body = {"model": "gemma3-270m", "prompt": prompt, "max_tokens": 4, "temperature": 0, "return_token_ids": True}
        r = httpx.post(cpu_server.base_url + "/v1/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        ids = tok(prompt).input_ids
        assert ids[0] == 2 and choice["prompt_token_ids"] == ids, (prompt, choice.get("prompt_token_ids"))
        assert len(choice["token_ids"]) == 4


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.slow_tier("serving")
def test_cpu_vllm_serves_converted_checkpoint_with_same_greedy_tokens(gemma_hf, prompt_ids, reference_greedy, tmp_path):
    from cookbook.engine import engine_python

    _, ref_out = reference_greedy
    port = _free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", OMP_NUM_THREADS="2")
    log = tmp_path / "vllm.log"
    cmd = [
        str(engine_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(gemma_hf[0]),
        "--served-model-name",
        "g",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "4",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 600
        while True:
            if proc.poll() is not None:
                pytest.fail("vLLM exited:\n" + log.read_text()[-3000:])
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("vLLM did not become healthy:\n" + log.read_text()[-3000:])
                time.sleep(2)
        for prompt, ids, want in zip(PROMPTS, prompt_ids, ref_out):
            # the text prompt: vLLM's own tokenization must add BOS exactly as ours does
            body = {
                "model": "g",
                "prompt": prompt,
                "max_tokens": NEW_TOKENS,
                "temperature": 0,
                "return_token_ids": True,
            }
            req = urllib.request.Request(
                base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            resp = json.load(urllib.request.urlopen(req, timeout=300))
            choice = resp["choices"][0]
            assert choice.get("prompt_token_ids", ids) == ids
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(gemma_hf[0])
            got = choice.get("token_ids") or tok(choice["text"], add_special_tokens=False).input_ids
            assert got == want, (prompt, choice["text"], tok.decode(want))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_force_replaces_only_a_folder_the_cookbook_made_with_the_recipes_conversion(
    gemma_gguf, gemma_checkpoint, tmp_path
):
    """The fast tier's one conversion of its own: refusals first (an empty template, a non-empty
    folder without --force, and with --force a folder holding a stranger's file: issue 64, the
    recipe's step passes --force and used to delete it), then the recipe's arguments (bf16, its chat
    template) with --force over a folder the cookbook made (its marker). Peer tools (`vllm bench
    serve`, transformers' apply_chat_template) read the template from tokenizer_config.json; the
    packaged GGUF has none, so the recipe passes its own. The result must equal the recipe's cached
    conversion."""
    from safetensors import safe_open
    from transformers import AutoTokenizer

    from cookbook import model_folder

    template = (TOOLS.parents[1] / "recipes" / "gemma3-270m-cpu" / "chat_template.jinja").read_text()
    empty = tmp_path / "empty.jinja"
    empty.write_text("\n")
    out = tmp_path / "hf"
    r = subprocess.run(
        [str(TOOLS / "gguf-to-hf"), str(gemma_gguf), str(out), "--chat-template", str(empty)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "is empty" in r.stderr and not out.exists()

    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(model_folder.FolderRefused, match="did not write"):
        convert_gguf_to_hf(gemma_gguf, out, progress=False)
    r = subprocess.run([str(TOOLS / "gguf-to-hf"), str(gemma_gguf), str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "did not write (keep.txt)" in r.stderr and "Traceback" not in r.stderr
    assert (out / "keep.txt").exists()

    src = tmp_path / "t.jinja"
    src.write_text(template)
    argv = [str(TOOLS / "gguf-to-hf"), str(gemma_gguf), str(out), "--dtype", "bfloat16"]
    argv += ["--chat-template", str(src), "--force"]
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 2 and f"model folder {out}" in r.stderr and "help:" in r.stderr
    assert (out / "keep.txt").read_text() == "x", "--force replaced a folder the cookbook did not make"

    (out / "keep.txt").unlink()
    model_folder.claim(out)
    (out / "left-from-an-earlier-conversion.json").write_text("{}")
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not (out / "left-from-an-earlier-conversion.json").exists() and (out / model_folder.MARKER).is_file()
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == template
    assert (out / "chat_template.jinja").read_text() == template
    with safe_open(out / "model.safetensors", framework="pt") as f:
        w = f.get_tensor("model.layers.0.mlp.down_proj.weight")
        assert w.dtype == torch.bfloat16 and tuple(w.shape) == (640, 2048)
    for name in sorted(p.name for p in gemma_checkpoint.iterdir()):
        assert (out / name).read_bytes() == (gemma_checkpoint / name).read_bytes(), f"{name} differs from the recipe's"
    text = AutoTokenizer.from_pretrained(out).apply_chat_template(
        [{"role": "user", "content": "Hello"}], tokenize=False, add_generation_prompt=True
    )
    assert "Hello" in text and text != "Hello"
