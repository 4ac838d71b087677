"""A Hopper recipe's launch block against the peer recipe's command for the same model, on one GPU,
the same engine and the same architecture-faithful random-weight checkpoint the engine check uses
(scripts/offline-gpu/engine-check: reduced depth, `--load-format dummy`, `--tokenizer-mode hf`).

    python benchmarks/hopper_side_by_side.py glm52-fp8-8x-h200 --checkpoint CK --out DIR [--dry-run]

Each side serves on its own (tensor parallel 1, as the engine check scales the block); `vllm bench
serve` runs random 1,024-token prompts with 256-token outputs at 1, 16, 64 and 256 concurrent
requests, plus one long-context case (65,536-token prompts, 1 request at a time). Two rounds, the
order alternating (recipe then peer, then peer then recipe); the load average is recorded before and
after every cell. Every finished cell is written at once to DIR/side-by-side-SLUG.json (atomically),
so a stopped run started again with the same arguments skips what it has and goes on.

The recorded-run JSON is what the README table is built from (`table()`, and
tests/benchmarks/test_hopper_side_by_side.py checks the README against it): no typed table.

The peer's commands are vllm-project/recipes at 8959cf64 (models/zai-org/GLM-5.2.yaml: the FP8 on
8xH200 command; models/deepseek-ai/DeepSeek-V4-Flash.yaml: base_args, the tool-calling and reasoning
features, the default single_node_tep strategy), carried as facts (flags), not text.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHORT = (1024, 256)
LEVELS = (1, 16, 64, 256)
LONG = (65536, 256, 1)
ROUNDS = 2
# The engine check's substitutions (scripts/offline-gpu/engine-check): random weights, and the
# carried Gemma tokenizer in place of the model's (vLLM's default mode for DeepSeek-V4 expects its own).
CHECKPOINT_FLAGS = ["--load-format", "dummy", "--tokenizer-mode", "hf"]
PEER = {
    # models/zai-org/GLM-5.2.yaml, guide "FP8 on 8xH200 (standard)"
    "glm52": [
        "--kv-cache-dtype", "fp8",
        "--tensor-parallel-size", "8",
        "--speculative-config.method", "mtp",
        "--speculative-config.num_speculative_tokens", "5",
        "--tool-call-parser", "glm47",
        "--reasoning-parser", "glm45",
        "--enable-auto-tool-choice",
        "--served-model-name", "glm-5.2-fp8",
    ],
    # models/deepseek-ai/DeepSeek-V4-Flash.yaml: base_args, features tool_calling and reasoning,
    # default_strategy single_node_tep (TP over the node with expert parallelism)
    "dsv4": [
        "--trust-remote-code",
        "--kv-cache-dtype", "fp8",
        "--block-size", "256",
        "--tensor-parallel-size", "8",
        "--enable-expert-parallel",
        "--tokenizer-mode", "deepseek_v4",
        "--tool-call-parser", "deepseek_v4",
        "--enable-auto-tool-choice",
        "--reasoning-parser", "deepseek_v4",
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Cell:
    round: int
    side: str  # "recipe" or "peer"
    input_len: int
    output_len: int
    concurrency: int

    @property
    def key(self) -> str:
        return f"r{self.round}-{self.side}-{self.input_len}x{self.output_len}-c{self.concurrency}"

    @property
    def prompts(self) -> int:
        return 4 if self.input_len >= LONG[0] else max(16, 4 * self.concurrency)


def cells() -> list[Cell]:
    out = []
    for r in range(1, ROUNDS + 1):
        order = ("recipe", "peer") if r % 2 else ("peer", "recipe")
        for side in order:
            out += [Cell(r, side, *SHORT, c) for c in LEVELS]
            out.append(Cell(r, side, *LONG))
    return out


def recipe_block(slug: str, checkpoint: str, port: int) -> str:
    """The recipe's own launch block, scaled as the engine check scales it, plus the checkpoint flags."""
    block = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "launch", slug, "--set", "tensor_parallel_size=1",
         "--set", "host=127.0.0.1", "--set", f"port={port}", "--set", f"serve.model={checkpoint}"],
        check=True, capture_output=True, text=True, cwd=ROOT,
    ).stdout.rstrip()  # fmt: skip
    return block + " \\\n  " + " ".join(CHECKPOINT_FLAGS)


def peer_block(family: str, checkpoint: str, port: int) -> str:
    flags = list(PEER[family])
    flags[flags.index("--tensor-parallel-size") + 1] = "1"
    argv = ["vllm", "serve", checkpoint, *flags, "--host", "127.0.0.1", "--port", str(port), *CHECKPOINT_FLAGS]
    return shlex.join(argv)


def served_name(block: str, checkpoint: str) -> str:
    words = shlex.split(block.replace("\\\n", " "), comments=True)
    return words[words.index("--served-model-name") + 1] if "--served-model-name" in words else checkpoint


def bench_argv(cell: Cell, port: int, model: str, checkpoint: str, result: Path) -> list[str]:
    return [
        "vllm", "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
        "--model", model, "--tokenizer", checkpoint, "--dataset-name", "random",
        "--random-input-len", str(cell.input_len), "--random-output-len", str(cell.output_len),
        "--max-concurrency", str(cell.concurrency), "--num-prompts", str(cell.prompts),
        "--ignore-eos", "--seed", "0", "--save-result", "--result-dir", str(result.parent),
        "--result-filename", result.name,
    ]  # fmt: skip


def load_record(path: Path) -> dict:
    if not path.exists():
        return {"cells": {}}
    if not path.is_file() or path.stat().st_size > 16 * 2**20:
        raise SystemExit(f"error: {path} is not a small regular file\n  help: remove it or pass another --out")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise SystemExit(f"error: {path}: not JSON ({e})\n  help: remove it to start again") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("cells"), dict):
        raise SystemExit(f"error: {path}: no 'cells' mapping\n  help: remove it to start again")
    return rec


def save_record(path: Path, rec: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def run(slug, family, checkpoint, out: Path, *, start, bench, card: str = "") -> dict:
    """Every cell not yet in the record: `start(side) -> stop()` serves one side, `bench(cell) -> dict`
    measures a cell (vllm bench serve's result JSON). Returns the record."""
    path = out / f"side-by-side-{slug}.json"
    rec = load_record(path)
    rec.update(recipe=slug, family=family, checkpoint=checkpoint, card=card or rec.get("card", ""))
    todo = [c for c in cells() if c.key not in rec["cells"]]
    side, stop = None, None
    try:
        for c in todo:
            if c.side != side:
                if stop:
                    stop()
                side, stop = c.side, start(c.side)
            before = os.getloadavg()
            result = bench(c)
            rec["cells"][c.key] = {
                "round": c.round,
                "side": c.side,
                "input_len": c.input_len,
                "output_len": c.output_len,
                "concurrency": c.concurrency,
                "prompts": c.prompts,
                "load_before": [round(x, 2) for x in before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **{k: result.get(k) for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms", "completed")},
            }
            save_record(path, rec)
    finally:
        if stop:
            stop()
    return rec


def table(rec: dict) -> str:
    """The README table: per level, each side's median over its rounds, and recipe / peer."""
    rows = {}
    for c in rec["cells"].values():
        rows.setdefault((c["input_len"], c["output_len"], c["concurrency"]), {}).setdefault(c["side"], []).append(c)
    lines = [
        "| prompt + output, concurrency | recipe tok/s | peer tok/s | recipe / peer | TTFT ms (recipe, peer) "
        "| TPOT ms (recipe, peer) |",
        "|---|---|---|---|---|---|",
    ]

    def med(side, key):
        vals = [c[key] for c in side if c.get(key) is not None]
        return statistics.median(vals) if vals else None

    for (i, o, conc), sides in sorted(rows.items()):
        r, p = sides.get("recipe", []), sides.get("peer", [])
        rt, pt = med(r, "output_throughput"), med(p, "output_throughput")
        ratio = f"{rt / pt:.2f}x" if rt and pt else "n/a"

        def f(x):
            return "n/a" if x is None else f"{x:,.1f}"

        lines.append(
            f"| {i:,} + {o:,}, {conc} | {f(rt)} | {f(pt)} | {ratio} | {f(med(r, 'median_ttft_ms'))}, "
            f"{f(med(p, 'median_ttft_ms'))} | {f(med(r, 'median_tpot_ms'))}, {f(med(p, 'median_tpot_ms'))} |"
        )
    return "\n".join(lines)


def _serve(block: str, log: Path, port: int, timeout_s: int):
    """Start a block in its own session; wait for /health; return its stop()."""
    import urllib.request

    with open(log, "ab") as f:
        proc = subprocess.Popen(["bash", "-c", block], stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"error: the server stopped ({proc.returncode}) before it was ready; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                break
        except OSError:
            time.sleep(5)
    else:
        os.killpg(proc.pid, 15)
        raise SystemExit(f"error: the server was not ready in {timeout_s} s; see {log}")

    def stop():
        os.killpg(proc.pid, 15)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)

    return stop


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", choices=["glm52-fp8-8x-h200", "dsv4-flash-8x-h200", "dsv4-flash-4x-h200",
                                       "dsv4-flash-8x-h100"])  # fmt: skip
    ap.add_argument("--checkpoint", required=True, help="the engine check's dummy checkpoint folder")
    ap.add_argument("--out", required=True, type=Path, help="folder for the recorded-run JSON (resumable)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--card", default="", help="the GPU, as nvidia-smi names it (recorded)")
    ap.add_argument("--ready-timeout", type=int, default=1800)
    ap.add_argument("--dry-run", action="store_true", help="print both blocks and the cells to run, run nothing")
    a = ap.parse_args(argv)
    family = "glm52" if a.recipe.startswith("glm52") else "dsv4"
    blocks = {"recipe": recipe_block(a.recipe, a.checkpoint, a.port), "peer": peer_block(family, a.checkpoint, a.port)}
    if a.dry_run:
        for side, block in blocks.items():
            print(f"# {side}\n{block}\n")
        done = load_record(a.out / f"side-by-side-{a.recipe}.json")["cells"] if a.out.is_dir() else {}
        for c in cells():
            print(("done  " if c.key in done else "to do ") + c.key)
        return 0
    a.out.mkdir(parents=True, exist_ok=True)

    def start(side):
        return _serve(blocks[side], a.out / f"server-{side}.log", a.port, a.ready_timeout)

    def bench(c: Cell) -> dict:
        res = a.out / f"bench-{c.key}.json"
        model = served_name(blocks[c.side], a.checkpoint)
        subprocess.run(bench_argv(c, a.port, model, a.checkpoint, res), check=True)
        return json.loads(res.read_text(encoding="utf-8"))

    rec = run(a.recipe, family, a.checkpoint, a.out, start=start, bench=bench, card=a.card)
    print(table(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
