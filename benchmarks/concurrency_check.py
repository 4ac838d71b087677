"""The plan's typical-request concurrency against a live vLLM server: send N typical requests at once
(the recipe's plan.traffic: random prompts of its prompt length, outputs of its output length with
ignore_eos), and read from /metrics, every `--poll` seconds until all have finished, the most
requests running (vllm:num_requests_running), the most waiting (vllm:num_requests_waiting) and the
preemptions they caused (vllm:num_preemptions_total, after - before).

    python benchmarks/concurrency_check.py glm52-fp8-8x-h200 --url http://127.0.0.1:8000 \
        --model NAME --requests 40 --expect-seqs 32 --out DIR [--dry-run]

Run it against the engine check's server (scripts/offline-gpu/engine-check serves the recipe's block
on one GPU): `--expect-seqs` is the plan's figure for that pool, min(max_num_seqs, the typical
figure `cookbook plan` prints for the same pool). The check passes when the peak running equals
min(N, expect) and no request was preempted while N <= the typical figure. The result goes to
DIR/concurrency-SLUG-N.json; a result already there is kept (resumable: the run is skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

METRICS = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "preemptions": "vllm:num_preemptions_total",
}


def read_metrics(text: str) -> dict:
    """The three figures from a Prometheus exposition (summed over engines / label sets)."""
    out = dict.fromkeys(METRICS, 0.0)
    for key, name in METRICS.items():
        for m in re.finditer(rf"^{re.escape(name)}(?:\{{[^}}\n]*\}})? ([0-9.eE+-]+)$", text, re.M):
            out[key] += float(m.group(1))
    return out


def _get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read(8 * 2**20).decode("utf-8", "replace")


def _complete(url: str, model: str, prompt: list[int], max_tokens: int, errors: list) -> None:
    body = json.dumps(
        {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
    ).encode()
    req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=3600) as r:
            r.read()
    except OSError as e:
        errors.append(str(e))


def check(url, model, n, prompt_tokens, output_tokens, poll_s=0.5, vocab=1000, seed=0) -> dict:
    rng = random.Random(seed)
    before = read_metrics(_get(f"{url}/metrics"))
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=_complete,
            args=(url, model, [rng.randrange(10, vocab) for _ in range(prompt_tokens)], output_tokens, errors),
            daemon=True,
        )
        for _ in range(n)
    ]
    for t in threads:
        t.start()
    peak_running = peak_waiting = 0.0
    samples = 0
    while any(t.is_alive() for t in threads):
        m = read_metrics(_get(f"{url}/metrics"))
        peak_running, peak_waiting = max(peak_running, m["running"]), max(peak_waiting, m["waiting"])
        samples += 1
        time.sleep(poll_s)
    after = read_metrics(_get(f"{url}/metrics"))
    return {
        "requests": n,
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "peak_running": int(peak_running),
        "peak_waiting": int(peak_waiting),
        "preemptions": int(after["preemptions"] - before["preemptions"]),
        "samples": samples,
        "errors": errors[:5],
        "failed": len(errors),
        "load": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def verdict(res: dict, expect_seqs: int, typical_seqs: int) -> list[str]:
    """What disagrees with the plan; empty when the server did what the plan says."""
    bad = []
    want = min(res["requests"], expect_seqs)
    if res["failed"]:
        bad.append(f"{res['failed']} request(s) failed")
    if res["peak_running"] != want:
        bad.append(f"peak running {res['peak_running']}, the plan says {want}")
    if res["requests"] <= typical_seqs and res["preemptions"]:
        bad.append(f"{res['preemptions']} preemption(s) with {res['requests']} <= {typical_seqs} typical requests")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True, help="the served model name")
    ap.add_argument("--requests", type=int, required=True, help="N typical requests sent at once")
    ap.add_argument("--expect-seqs", type=int, required=True, help="min(max_num_seqs, the plan's typical figure)")
    ap.add_argument("--typical-seqs", type=int, help="the plan's typical figure for this pool (default: expect)")
    ap.add_argument("--prompt-tokens", type=int, help="default: the recipe's plan.traffic")
    ap.add_argument("--output-tokens", type=int, help="default: the recipe's plan.traffic")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if a.requests < 1 or a.expect_seqs < 1 or a.requests > 4096:
        print("error: --requests must be 1..4096 and --expect-seqs >= 1\n  help: e.g. --requests 40", file=sys.stderr)
        return 2
    if a.prompt_tokens is None or a.output_tokens is None:
        from cookbook.recipe.resolve import resolve

        t = resolve(a.recipe).recipe.plan.traffic if resolve(a.recipe).recipe.plan else None
        if t is None:
            print(f"error: {a.recipe} states no plan.traffic\n  help: pass --prompt-tokens and --output-tokens")
            return 2
        a.prompt_tokens = a.prompt_tokens or t.prompt_tokens
        a.output_tokens = a.output_tokens or t.output_tokens
    path = a.out / f"concurrency-{a.recipe}-{a.requests}.json"
    if a.dry_run:
        print(f"{a.requests} x ({a.prompt_tokens} + {a.output_tokens} tokens) at once to {a.url}; expect "
              f"{min(a.requests, a.expect_seqs)} running; result: {path}" + (" (done)" if path.exists() else ""))  # fmt: skip
        return 0
    if path.exists():
        print(f"{path}: already measured, kept")
        res = json.loads(path.read_text(encoding="utf-8"))
    else:
        a.out.mkdir(parents=True, exist_ok=True)
        res = check(a.url, a.model, a.requests, a.prompt_tokens, a.output_tokens)
        res.update(recipe=a.recipe, expect_seqs=a.expect_seqs, typical_seqs=a.typical_seqs or a.expect_seqs)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(json.dumps(res, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    bad = verdict(res, a.expect_seqs, a.typical_seqs or a.expect_seqs)
    print(json.dumps(res, indent=1, sort_keys=True))
    for b in bad:
        print(f"disagrees: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
