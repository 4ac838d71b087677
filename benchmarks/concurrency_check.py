"""The plan's typical-request concurrency against a live vLLM server: send N typical requests at once
(the recipe's plan.traffic: random prompts of its prompt length, outputs of its output length with
ignore_eos), and read from /metrics, every `--poll` seconds until all have finished, the most
requests running (vllm:num_requests_running), the most waiting (vllm:num_requests_waiting) and the
preemptions they caused (vllm:num_preemptions_total, after - before).

    python benchmarks/concurrency_check.py glm52-fp8-8x-h200 --url http://127.0.0.1:8000 \
        --model NAME --requests 40 --expect-seqs 32 --out DIR [--dry-run]

Against a running server, `--expect-seqs` is the plan's figure for that pool, min(max_num_seqs, the
typical figure `cookbook plan` prints for the same pool). The check passes when the peak running
equals min(N, expect) and no request was preempted while N <= the typical figure. The result goes to
DIR/concurrency-SLUG-N.json; a result already there is kept (resumable: the run is skipped).

On a GPU host it can serve the block itself, as the engine check scales it (one GPU, the dummy
checkpoint), with `--kv-cache-memory-bytes` sized so that the plan's typical figure is
`--target-seqs` (default 16) and max_model_len 16,384 (so vLLM's start-up check passes in that small
pool): it sends that many typical requests (all must run at once, none preempted), then `--over` more
(past the plan's figure vLLM must preempt or make some wait; if it does neither, the plan is
conservative there, and the check says so):

    python benchmarks/concurrency_check.py glm52-fp8-8x-h200 --checkpoint CK \\
        --config recipes/glm52-fp8-8x-h200/engine-check/config.json --out DIR [--dry-run]
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
    """What disagrees with the plan; empty when the server did what the plan says. Up to the typical
    figure every request runs at once and none is preempted; past it (with max_num_seqs above it) the
    pool runs out before the requests finish, so vLLM preempts or keeps some waiting."""
    bad = []
    want = min(res["requests"], expect_seqs)
    if res["failed"]:
        bad.append(f"{res['failed']} request(s) failed")
    if res["requests"] <= typical_seqs:
        if res["peak_running"] != want:
            bad.append(f"peak running {res['peak_running']}, the plan says {want}")
        if res["preemptions"]:
            bad.append(f"{res['preemptions']} preemption(s) with {res['requests']} <= {typical_seqs} typical requests")
    elif expect_seqs > typical_seqs and not res["preemptions"] and not res["peak_waiting"]:
        bad.append(
            f"{res['requests']} > {typical_seqs} typical requests ran without a preemption or a wait: "
            "the plan is conservative here"
        )
    return bad


SAVED_KEYS = ("requests", "peak_running", "peak_waiting", "preemptions", "failed")


def read_saved(path: Path) -> dict:
    """A result saved by an earlier run, read back for --resume: a small regular file holding a JSON
    object with the figures the verdict reads; one message and exit 2 otherwise."""
    import stat

    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > 2**20:
            raise ValueError("not a small regular file")
        res = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(res, dict) or any(
            not isinstance(res.get(k), int) or isinstance(res.get(k), bool) for k in SAVED_KEYS
        ):
            raise ValueError(f"not a saved result (needs the integers {', '.join(SAVED_KEYS)})")
    except (OSError, ValueError, RecursionError) as e:
        raise SystemExit(f"error: {path}: {e}\n  help: remove it to measure again") from None
    return res


def pool_for(slug: str, config: dict, checkpoint: str, target: int, max_model_len: int):
    """(the --set items, the plan) of the block served on one GPU with an explicit KV pool sized so that
    `target` typical requests fit and one more does not (the plan's figure), at `max_model_len`."""
    from cookbook.evidence.engine_check import geometry_sets, scaled_sets
    from cookbook.plan.budget import make_plan
    from cookbook.recipe.resolve import resolve

    r = resolve(slug)
    sets = [*scaled_sets(r, checkpoint), *geometry_sets(config), f"max_model_len={max_model_len}"]
    probe = make_plan(resolve(slug, sets=sets, check=False), gpus=1)
    if probe.typical is None:
        raise SystemExit(f"error: {slug} states no plan.traffic\n  help: add plan.traffic to the recipe")
    held, extra = probe.typical.held_bytes, probe.typical.in_flight_bytes
    pool = int(extra + (target + 0.5) * held)
    pool = max(pool, int(probe.seq_bytes_at_ctx) + 1)  # vLLM's start-up check: one max_model_len sequence
    sets.append(f"kv_cache_memory_bytes={pool}")
    return sets, make_plan(resolve(slug, sets=sets, check=False), gpus=1)


def serve_and_check(a) -> int:
    """Serve the recipe's block (scaled as the engine check scales it, the pool set) and check it at the
    plan's typical figure and past it."""
    import subprocess

    import hopper_side_by_side as sxs

    config = json.loads(Path(a.config).read_text(encoding="utf-8"))
    sets, plan = pool_for(a.recipe, config, a.checkpoint, a.target_seqs, a.max_model_len)
    typical, seqs = plan.typical.seqs, plan.setup.max_num_seqs
    argv = [sys.executable, "-m", "cookbook.cli", "launch", a.recipe] + [x for s in sets for x in ("--set", s)]
    block = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.rstrip()
    block += " \\\n  --load-format dummy --tokenizer-mode hf"
    plan_line = (
        f"plan: {typical} typical requests ({plan.traffic.prompt_tokens} + {plan.traffic.output_tokens} tokens) "
        f"in a {plan.pool_bytes / 2**30:.2f} GiB pool, max_num_seqs {seqs}"
    )
    if a.dry_run:
        print(f"{block}\n\n{plan_line}; sending {typical} then {typical + a.over} requests")
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "launch.sh").write_text(block + "\n", encoding="utf-8")
    stop = sxs._serve(block, a.out / "server.log", a.port, a.ready_timeout)
    bad = []
    try:
        model = sxs.served_name(block, a.checkpoint)
        for n in (typical, typical + a.over):
            path = a.out / f"concurrency-{a.recipe}-{n}.json"
            if path.exists() or path.is_symlink():
                res = read_saved(path)
            else:
                res = check(
                    f"http://127.0.0.1:{a.port}", model, n, plan.traffic.prompt_tokens, plan.traffic.output_tokens
                )
                res.update(
                    recipe=a.recipe, expect_seqs=min(seqs, typical), typical_seqs=typical, plan=plan_line, sets=sets
                )
                tmp = path.with_name(path.name + ".part")
                tmp.write_text(json.dumps(res, indent=1, sort_keys=True), encoding="utf-8")
                os.replace(tmp, path)
            found = verdict(res, min(seqs, typical) if n <= typical else seqs, typical)
            print(f"{n} requests: running {res['peak_running']}, waiting {res['peak_waiting']}, "
                  f"preemptions {res['preemptions']}" + "".join(f"; disagrees: {b}" for b in found))  # fmt: skip
            bad += found
    finally:
        stop()
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", help="the served model name")
    ap.add_argument("--requests", type=int, help="N typical requests sent at once")
    ap.add_argument("--expect-seqs", type=int, help="min(max_num_seqs, the plan's typical figure)")
    ap.add_argument("--checkpoint", help="serve the block itself on this dummy checkpoint (GPU host)")
    ap.add_argument("--config", help="with --checkpoint: its config.json (the engine check's)")
    ap.add_argument("--target-seqs", type=int, default=16, help="with --checkpoint: size the pool for this many")
    ap.add_argument("--over", type=int, default=8, help="with --checkpoint: then send this many more")
    ap.add_argument("--max-model-len", type=int, default=16384, help="with --checkpoint (vLLM's start-up check)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--ready-timeout", type=int, default=1800)
    ap.add_argument("--typical-seqs", type=int, help="the plan's typical figure for this pool (default: expect)")
    ap.add_argument("--prompt-tokens", type=int, help="default: the recipe's plan.traffic")
    ap.add_argument("--output-tokens", type=int, help="default: the recipe's plan.traffic")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if a.checkpoint:
        if not a.config or not 1 <= a.target_seqs <= 4096 or not 0 <= a.over <= 4096 or a.max_model_len < 1:
            print("error: --checkpoint needs --config, --target-seqs 1..4096, --over 0..4096\n"
                  "  help: e.g. --checkpoint CK --config recipes/glm52-fp8-8x-h200/engine-check/config.json",
                  file=sys.stderr)  # fmt: skip
            return 2
        return serve_and_check(a)
    if a.model is None or a.requests is None or a.expect_seqs is None:
        print("error: --model, --requests and --expect-seqs are needed against a running server\n"
              "  help: or --checkpoint CK --config CONFIG to serve the block here", file=sys.stderr)  # fmt: skip
        return 2
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
    if path.exists() or path.is_symlink():
        res = read_saved(path)
        print(f"{path}: already measured, kept")
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
