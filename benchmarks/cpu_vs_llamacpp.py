#!/usr/bin/env python3
"""The CPU recipe against llama.cpp's own llama-server and against vLLM at default flags.

Servers, started one at a time on this machine, each measured by the same client (`vllm bench
serve`, the pinned engine's own benchmark, run in this process), on the same prompts:

  recipe           the recipe's launch block, as `cookbook launch` prints it (the bf16 HF
                   checkpoint converted from the GGUF);
  defaults         `vllm serve $CHECKPOINT_DIR` with only served name, host, port and max model
                   length; of the recipe's env only paths and the KV cache size (vLLM's own
                   binding and reserved core, not the recipe's); --defaults-keep names recipe
                   settings it keeps too (`--defaults-keep dtype`: do the recipe's other
                   settings pay at the recipe's own dtype?);
  llama.cpp        llama-server (scripts/build-llama-server) on the same Q4_K_M GGUF, started
                   again for each concurrency and load with the flags for it: one slot per stream
                   (-np C), a context of 1024 tokens a slot, threads and batch threads = cores on a
                   quiet machine and cores - 1 under the competing load (its threads wait for each
                   other at every step, so one that loses its core stalls them all: llama-bench
                   prints both counts under that load), flash attention, the recipe's chat template
                   (--jinja), no weight repacking (-nr: its AMX path crashes llama-server on this
                   CPU, see llama_argv);
  llama.cpp+ngram  the same with llama.cpp's own draft-free n-gram speculation
                   (--spec-type ngram-simple, a 3-token lookup drafting 3 tokens: the peer of the
                   recipe's n-gram speculation);
  and any --variant of the recipe (tuning experiments).

Two workloads, the speed gate's (cookbook.gates.speed): `prose`, passages of the built-in prose
with unique suffixes, raw completions, greedy; `chat`, the speed gate's chat workload (the
recipe's speed.chat, else its defaults: the built-in writing requests through
/v1/chat/completions at temperature 0.8, top_p 0.95). 128 tokens each with ignore_eos. Each
workload is measured `quiet` and `loaded`: under a competing CPU load the benchmark makes itself,
one busy process (a Python spin loop) at the benchmark's own nice, started a second before the
measurement and killed after it. The load average is recorded before every measurement.

Rounds alternate the servers' order (round 2 runs them in reverse), and quiet/loaded order too.
Every measurement gets its own prompts (the same for every server), and vLLM's prefix cache is
reset before each. The client sends `Connection: close` with every request: llama-server ends
every streamed response by closing its connection without saying so (cpp-httplib reads the
stream provider's final `false` as a failed write), so a client that keeps connections alive
sometimes sends its next request into a socket being closed (aiohttp's ServerDisconnectedError).
Failed requests are counted beside the throughput, which counts completed requests' tokens.

Prints, per workload, load and concurrency: each server's output tok/s over the rounds (lowest
to highest), failed requests, and recipe / llama.cpp (the better of the two llama.cpp servers in
the same round) and recipe / defaults, each a per-round ratio; first, llama-bench's raw decode
(tg128) at the same threads, with and without flash attention and repacking, the 1-stream
ceiling of llama.cpp. Writes vllm bench's JSON per
measurement, the table and summary.json to --out (default .cache/bench/cpu-vs-llamacpp-<time>/).
Each `vllm bench serve` runs in a child forked from this process, so what a run leaves in memory
goes with it. A run that stopped part-way (killed, a lost session) is finished with `--resume DIR`
and the same arguments: it keeps every measurement saved in DIR, sends the missing ones the prompts
the first part sent, and prints one table over both parts; kept rows say so as they are read.

    .venv/bin/python benchmarks/cpu_vs_llamacpp.py [--servers recipe defaults llama.cpp llama.cpp+ngram]
        [--concurrencies 1 4 16] [--requests 4 8 16] [--rounds 2] [--workloads prose chat] [--loads quiet loaded]
        [--set KEY=VALUE ...]  [--variant NAME:KEY=VALUE;KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import shlex
import stat
import subprocess
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import httpx

from cookbook.gates import speed
from cookbook.recipe import shell
from cookbook.recipe.gates_spec.speed import SpeedChat
from cookbook.recipe.model import Setting
from cookbook.recipe.paths import repo_root
from cookbook.recipe.resolve import resolve
from cookbook.serving import local
from cookbook.untrusted import loads_json, printable, read_regular

KEEP_FOR_DEFAULTS = ("served_model_name", "host", "port", "max_model_len")
# The recipe's env a defaults server keeps: where things are and how much memory the KV cache may
# take (vLLM-CPU's own default sizes it from the host's memory), not how the engine runs.
KEEP_ENV_FOR_DEFAULTS = ("COOKBOOK", "CHECKPOINT_DIR", "VLLM_CPU_KVCACHE_SPACE")
LLAMA, LLAMA_SPEC = "llama.cpp", "llama.cpp+ngram"
SERVERS = ("recipe", "defaults", LLAMA, LLAMA_SPEC)
WORKLOADS = ("prose", "chat")
LOADS = ("quiet", "loaded")
FIGURES = ("output_throughput", "median_ttft_ms", "median_tpot_ms", "completed", "failed")
CTX_PER_SLOT = 1024
SAVED_LIMIT = 64 << 20  # a saved measurement's JSON (16 requests' details: well under 1 MB)
LLAMA_SPEC_FLAGS = "--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 3"
BUSY = "while True: pass"


def llama_binaries() -> tuple[str, str]:
    """(llama-server, llama-bench), built once by scripts/build-llama-server."""
    server = subprocess.run(
        [str(repo_root() / "scripts" / "build-llama-server")], check=True, capture_output=True, text=True
    ).stdout.strip()
    return server, str(Path(server).with_name("llama-bench"))


def llama_argv(
    binary: str, gguf: Path, model: str, port: int, slots: int, threads: int, template: str | None, spec: str = ""
) -> list[str]:
    """llama-server for `slots` streams: a slot each, CTX_PER_SLOT tokens a slot, every core for
    decode and batch, flash attention, the recipe's chat template; `spec` adds speculation flags."""
    argv = [binary, "-m", str(gguf), "--alias", model, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-np", str(slots), "-cb", "-c", str(CTX_PER_SLOT * slots), "-t", str(threads), "-tb", str(threads)]
    # -nr: no weight repacking. On a CPU with AMX, llama.cpp repacks Q4_K weights for its AMX kernels,
    # and llama-server (llama-cpp-python 0.3.36's sources) then dies with SIGSEGV in
    # ggml_backend_amx_mul_mat at its first batched decode; llama-bench's 1-token decode runs
    # either way, and prints both (--repack 0,1).
    argv += ["-fa", "on", "-nr", "--no-webui"]
    if template:
        argv += ["--jinja", "--chat-template-file", template]
    return argv + shlex.split(spec)


def start_llama(argv: list[str], port: int, workdir: Path, tag: str) -> local.Server:
    log = workdir / f"llama-server-{tag}.log"
    local.step(f"launch: {local.quote_cmd(argv)}  (log: {log})")
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    return local.Server(proc, log, f"http://127.0.0.1:{port}")


def llama_bench(binary: str, gguf: Path, threads: list[int], out: Path, loaded: bool, reuse: bool = False) -> dict:
    """llama-bench's raw decode at each of `threads`: llama.cpp's own ceiling for one stream, no server
    in the way. Quiet: 128 tokens (tg128), flash attention off and on, repacking off and on. Loaded
    (under the benchmark's competing process): 32 tokens with the server's flags (fa on, no repacking),
    since a thread count that loses a core to the competitor decodes several times slower there.
    `reuse`: the figures a run being resumed saved in `out`, where it has them."""
    n, reps, fa, repack = ("128", "3", "0,1", "0,1") if not loaded else ("32", "2", "1", "0")
    argv = [binary, "-m", str(gguf), "-t", ",".join(map(str, threads)), "-p", "0", "-n", n, "-r", reps]
    argv += ["-fa", fa, "--repack", repack, "-o", "json"]
    tag = "loaded" if loaded else "quiet"
    saved = out / f"llama-bench-{tag}.json"
    if reuse and in_resumed_folder(saved, empty_is_missing=True):
        rows, load = read_saved(saved, list), None  # the resumed run's; its load is in its log
    else:
        local.step(f"llama-bench ({tag}): {local.quote_cmd(argv)}")
        load = loadavg()
        with competing_load(loaded):
            p = subprocess.run(argv, capture_output=True, text=True)
        saved.write_text(p.stdout)
        (out / f"llama-bench-{tag}.log").write_text(p.stderr)
        if p.returncode != 0:
            return {"error": f"exit {p.returncode}", "loadavg_before": load}
        rows = json.loads(p.stdout)
    return {
        "argv": argv,
        "loadavg_before": load,
        f"tg{n}_tok_s": {_bench_key(r): round(r["avg_ts"], 1) for r in rows},
        f"tg{n}_stddev": {_bench_key(r): round(r["stddev_ts"], 1) for r in rows},
    }


def _bench_key(row: dict) -> str:
    return f"t{row.get('n_threads')}-fa{int(bool(row.get('flash_attn')))}-repack{int(bool(row.get('repack')))}"


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


@contextlib.contextmanager
def competing_load(on: bool):
    """One busy process at this process's nice for the block (none when `on` is false)."""
    if not on:
        yield None
        return
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(1.0)
        yield busy.pid
    finally:
        busy.kill()
        busy.wait()


def bench_argv(
    base_url: str,
    model: str,
    tokenizer: str,
    data: Path,
    n: int,
    c: int,
    max_tokens: int,
    chat: SpeedChat | None,
    result_dir: Path,
    result_name: str,
) -> list[str]:
    """`vllm bench serve`'s arguments for one measurement: raw completions, greedy (prose), or chat
    completions at the chat workload's sampling (`chat`); ignore_eos; Connection: close."""
    argv = ["--base-url", base_url, "--model", model, "--tokenizer", tokenizer]
    if chat is None:
        argv += ["--backend", "openai", "--endpoint", "/v1/completions", "--temperature", "0"]
    else:
        argv += ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
        argv += ["--temperature", str(chat.temperature), "--top-p", str(chat.top_p)]
    argv += ["--dataset-name", "custom", "--dataset-path", str(data), "--custom-output-len", str(max_tokens)]
    argv += ["--skip-chat-template", "--disable-shuffle", "--num-prompts", str(n), "--max-concurrency", str(c)]
    argv += ["--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]
    argv += ["--header", "Connection=close"]
    argv += ["--save-result", "--save-detailed", "--result-dir", str(result_dir), "--result-filename", result_name]
    return argv


def in_fork(fn, *args):
    """fn(*args) in a child forked from this process, its return value sent back (pickled); a child
    that dies raises concurrent.futures.process.BrokenProcessPool. What fn leaves behind dies with
    the child."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")) as pool:
        return pool.submit(fn, *args).result()


def run_bench(argv: list[str], log: Path) -> dict:
    """vllm bench serve, its output to `log`; a run that fails as a whole (its first test request
    failed, or the child died) is returned as all requests failed. vLLM is imported once, here, and
    each run goes to a child forked from this process: when the runs shared this process, it grew
    to 17 GB over some 140 runs of a two-round `make bench` and was OOM-killed (24 GiB machine,
    2026-12-07); with a child per run it stayed at 654 MB over the 8 runs that finished that run."""
    from vllm.benchmarks import serve as vllm_bench  # imported here, before the fork
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    vllm_bench.add_cli_args(parser)
    args = parser.parse_args(argv)
    failed = {"completed": 0, "failed": args.num_prompts, "output_throughput": 0.0}
    try:
        return in_fork(_bench_here, args, log, failed)
    except BrokenProcessPool as e:
        return {**failed, "errors": [f"the vllm bench serve child died: {e}"]}


def _bench_here(args, log: Path, failed: dict) -> dict:
    from vllm.benchmarks import serve as vllm_bench

    with open(log, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        try:
            return vllm_bench.main(args)
        except Exception as e:  # noqa: BLE001 - the run's failure is a figure, reported beside the others
            print(f"vllm bench serve failed: {type(e).__name__}: {e}")
            return {**failed, "errors": [str(e)]}


def reset_prefix_cache(base_url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(base_url + "/reset_prefix_cache", timeout=60)


def requests_per_level(requests: list[int], levels: list[int]) -> dict[int, int]:
    if len(requests) not in (1, len(levels)):
        sys.exit(f"error: --requests: give one number, or one per concurrency ({len(levels)})")
    per = dict(zip(levels, requests * len(levels) if len(requests) == 1 else requests))
    low = [c for c, n in per.items() if n < c]
    if low:
        sys.exit(f"error: --requests: fewer requests than streams at {low}")
    return per


def span(xs: list) -> str:
    xs = [x for x in xs if isinstance(x, (int, float))]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return f"{lo:.1f}" if abs(hi - lo) < 0.05 else f"{lo:.1f}-{hi:.1f}"


def ratio_span(xs: list) -> str:
    xs = [x for x in xs if isinstance(x, (int, float))]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return f"{lo:.2f}x" if abs(hi - lo) < 0.005 else f"{lo:.2f}-{hi:.2f}x"


def tables(results: list[dict], servers: list[str], levels: list[int], workloads, loads) -> list[str]:
    """Markdown: per workload and load, a row per concurrency: each server's tok/s over the rounds
    and its failed requests, then the per-round ratios."""
    lines = []
    llamas = [s for s in (LLAMA, LLAMA_SPEC) if s in servers]
    for w in workloads:
        for ld in loads:
            lines += [f"\n### {w}, {ld}\n"]
            head = ["streams"] + [f"{s} tok/s (failed)" for s in servers]
            if "recipe" in servers and llamas:
                head.append("recipe / llama.cpp")
            if "recipe" in servers and "defaults" in servers:
                head.append("recipe / defaults")
            head.append("median TPOT ms: " + " / ".join(servers))
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for c in levels:
                cell = {
                    s: [r for r in results if (r["server"], r["workload"], r["load"], r["c"]) == (s, w, ld, c)]
                    for s in servers
                }
                row = [str(c)]
                for s in servers:
                    failed = sum(r.get("failed") or 0 for r in cell[s])
                    row.append(f"{span([r.get('output_throughput') for r in cell[s]])} ({failed})")
                rounds = sorted({r["round"] for rs in cell.values() for r in rs})

                def per_round(s, rnd, key="output_throughput"):
                    return next((r.get(key) for r in cell[s] if r["round"] == rnd), None)

                if "recipe" in servers and llamas:
                    vs = []
                    for rnd in rounds:
                        best = max((per_round(s, rnd) or 0 for s in llamas), default=0)
                        rec = per_round("recipe", rnd)
                        vs.append(rec / best if rec is not None and best else None)
                    row.append(ratio_span(vs))
                if "recipe" in servers and "defaults" in servers:
                    vs = []
                    for rnd in rounds:
                        rec, dfl = per_round("recipe", rnd), per_round("defaults", rnd)
                        vs.append(rec / dfl if rec is not None and dfl else None)
                    row.append(ratio_span(vs))
                row.append(" / ".join(span([r.get("median_tpot_ms") for r in cell[s]]) for s in servers))
                lines.append("| " + " | ".join(row) + " |")
    return lines


def defaults_server(name: str, recipe, keep: list[str]):
    """Recipe NAME (resolved as `recipe`, with its --set) resolved again with vLLM's defaults: only
    the settings KEEP_FOR_DEFAULTS and `keep` name, and of its env only KEEP_ENV_FOR_DEFAULTS.
    Exits with a message on a name the recipe lacks."""
    unknown = [k for k in keep if k not in recipe.recipe.serve.args]
    if unknown:
        sys.exit(
            f"error: --defaults-keep {' '.join(unknown)}: not a serve setting of {recipe.slug}; "
            f"name one of: {', '.join(sorted(recipe.recipe.serve.args))}"
        )
    names = (*KEEP_FOR_DEFAULTS, *keep)
    defaults = resolve(name)
    defaults.recipe.serve.args = {k: v for k, v in recipe.recipe.serve.args.items() if k in names}
    defaults.recipe.serve.args.setdefault("max_model_len", Setting(value=10240))
    defaults.recipe.env = {k: v for k, v in defaults.recipe.env.items() if k in KEEP_ENV_FOR_DEFAULTS}
    return defaults


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="gemma3-270m-cpu")
    ap.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    ap.add_argument("--concurrencies", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument(
        "--requests",
        type=int,
        nargs="+",
        default=[4, 8, 16],
        help="requests a level: one number, or one per concurrency (default 4 8 16: two rounds of everything "
        "take about 40 minutes on the 2-core AVX-512 Xeon, and about 115 on the 2-core AVX2 EPYC, where vLLM's "
        "defaults decode bfloat16 at about 10 tok/s)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="passes over the servers, each in the other order")
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument("--loads", nargs="+", choices=LOADS, default=list(LOADS))
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for the recipe's server")
    ap.add_argument(
        "--defaults-keep",
        nargs="+",
        default=[],
        metavar="KEY",
        help="recipe serve settings the defaults server keeps as well (for example dtype)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE;KEY=VALUE",
        help="also measure the recipe with these sets, as server NAME (tuning experiments)",
    )
    ap.add_argument(
        "--llama-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="-t and -tb of llama-server, quiet (default: cores)",
    )
    ap.add_argument(
        "--llama-threads-loaded",
        type=int,
        default=max(1, (os.cpu_count() or 1) - 1),
        help="-t and -tb of llama-server under the competing load (default: cores less the one it takes; "
        "llama.cpp's threads wait for each other at every step, so one that loses its core to the competitor "
        "stalls the rest: on 2 cores, 2 threads decoded 1.7-6.5 tok/s there and 1 thread 26-28)",
    )
    ap.add_argument("--llama-spec-flags", default=LLAMA_SPEC_FLAGS, help="llama.cpp+ngram's speculation flags")
    ap.add_argument("--no-llama-bench", action="store_true", help="skip llama-bench (quiet and loaded)")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="finish a run that stopped (its --out folder, the same arguments): keeps every measurement it "
        "saved, with its prompts, and runs only the missing ones",
    )
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("error: --rounds: give 1 or more")
    levels = args.concurrencies
    per_level = requests_per_level(args.requests, levels)
    recipe = resolve(args.recipe, sets=args.sets)
    cfg = recipe.recipe.gates.speed
    if cfg is None:
        sys.exit(f"error: {args.recipe} declares no speed gate, whose workloads this benchmark uses")
    chat = cfg.chat or SpeedChat()
    cfg = cfg.model_copy(
        update={"sweep_concurrencies": levels, "sweep_requests": max(per_level.values()), "chat": chat}
    )
    max_tokens = cfg.sweep_max_tokens
    if max_tokens != chat.max_tokens:
        sys.exit(f"error: the prose workload asks {max_tokens} tokens and the chat one {chat.max_tokens}")
    defaults = defaults_server(args.recipe, recipe, args.defaults_keep)
    vllm_servers = {"recipe": recipe, "defaults": defaults}
    for v in args.variant:
        name, _, sets = v.partition(":")
        vllm_servers[name] = resolve(args.recipe, sets=args.sets + [x for x in sets.split(";") if x])
    servers = args.servers + [v.partition(":")[0] for v in args.variant]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or repo_root() / ".cache" / "bench" / f"cpu-vs-llamacpp-{stamp}"
    if args.resume:
        if not (args.resume / "round-1").is_dir():
            sys.exit(f"error: --resume {args.resume}: no round-1/ there; give the --out folder of the run to finish")
        # A round folder that is a link (round-1 -> /etc) would be read from and written into where it points.
        for entry in sorted(args.resume.glob("round-*")):
            if entry.is_symlink() or not entry.resolve().is_relative_to(args.resume.resolve()):
                sys.exit(
                    f"error: --resume {printable(args.resume)}: {printable(entry.name)} is a link out of the folder; "
                    "a run writes its rounds as folders: remove the link and resume again"
                )
        out = args.resume
    out.mkdir(parents=True, exist_ok=True)
    model = str(recipe.recipe.serve.arg("served_model_name"))
    env = local.prepare(recipe, out)
    env["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache before each measurement
    exported = local.exported_env(recipe, env)
    tokenizer, gguf = exported["CHECKPOINT_DIR"], Path(env["SOURCE_FILE"])
    template = recipe.recipe.serve.arg("chat_template")  # llama-server gets the recipe's own template
    template = str(Path(shell.expand(str(template), exported)).resolve()) if template else None
    port = int(recipe.recipe.serve.arg("port", 8000))
    llama_server = llama_bench_bin = None
    if LLAMA in servers or LLAMA_SPEC in servers or not args.no_llama_bench:
        llama_server, llama_bench_bin = llama_binaries()

    summary: dict = {
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "recipe": recipe.slug,
        "recipe_sets": args.sets,
        "variants": args.variant,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or ''}".strip(", "),
        "nice": os.nice(0),
        "requests_per_level": per_level,
        "max_tokens": max_tokens,
        "chat": chat.model_dump(),
        "defaults_env": sorted(defaults.recipe.env),
        "defaults_args": sorted(defaults.recipe.serve.args),
        "loadavg_at_start": loadavg(),
    }
    threads = {"quiet": args.llama_threads, "loaded": args.llama_threads_loaded}
    summary["llama_threads"] = threads
    if not args.no_llama_bench:
        reuse = bool(args.resume)
        summary["llama_bench"] = llama_bench(llama_bench_bin, gguf, [args.llama_threads], out, False, reuse)
        local.step(f"llama-bench: {summary['llama_bench']}")
        if "loaded" in args.loads:
            both = sorted({args.llama_threads_loaded, args.llama_threads})
            summary["llama_bench_loaded"] = llama_bench(llama_bench_bin, gguf, both, out, True, reuse)
            local.step(f"llama-bench under the competing load: {summary['llama_bench_loaded']}")

    # Prompts per (round, load, concurrency), the same for every server: prose passages from a seed
    # of their own (so no passage recurs from one measurement to the next), the chat questions in
    # a seeded order.
    prompts: dict = {}
    for rnd in range(1, args.rounds + 1):
        for k, ld in enumerate(LOADS):
            sub = cfg.model_copy(update={"seed": cfg.seed + 100 * rnd + k})
            prose = speed.workload_prompts(sub, uuid.uuid4().hex[:12])
            chats = speed.chat_prompts(sub)
            for c in levels:
                prompts[(rnd, ld, "prose", c)] = prose[c][: per_level[c]]
                prompts[(rnd, ld, "chat", c)] = chats[c][: per_level[c]]
    if args.resume:  # the prose prompts carry a random suffix: the resumed run's own, from its files
        prompts.update(saved_prompts(out, prompts))

    warm = cfg.model_copy(update={"seed": cfg.seed + 99})
    warm_prompts = {
        "prose": speed.workload_prompts(warm, "warm-up")[levels[0]][:2],
        "chat": speed.chat_prompts(warm)[levels[0]][:2],
    }

    results: list[dict] = []
    t_start = time.monotonic()

    def loads_in(rnd: int) -> list[str]:
        return args.loads if rnd % 2 else list(reversed(args.loads))

    def saved(where: Path, c: int, loads_order) -> dict:
        """The measurements a resumed run already has in `where`, by tag."""
        if not args.resume:
            return {}
        tags = [f"{w}-{ld}-c{c}" for w in args.workloads for ld in loads_order]
        return {t: where / f"bench-{t}.json" for t in tags if in_resumed_folder(where / f"bench-{t}.json")}

    def measure(base_url: str, name: str, rnd: int, c: int, vllm_server: bool, where: Path, loads_order) -> None:
        kept = saved(where, c, loads_order)
        for w in args.workloads:
            for ld in loads_order:
                ps = prompts[(rnd, ld, w, c)]
                tag = f"{w}-{ld}-c{c}"
                if tag in kept:
                    res = read_saved(kept[tag], dict)
                    load_file = where / f"load-{tag}.json"
                    before = read_saved(load_file, list) if in_resumed_folder(load_file) else None
                    add_row(res, rnd, name, w, ld, c, before, " (kept from the run resumed)")
                    continue
                data = where / f"prompts-{tag}.jsonl"
                data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ps))
                if vllm_server:
                    reset_prefix_cache(base_url)
                before = loadavg()
                local.step(f"round {rnd}, {name}: {w}, {ld}, {c} streams ({len(ps)} requests), load {before}")
                argv = bench_argv(
                    base_url,
                    model,
                    tokenizer,
                    data,
                    len(ps),
                    c,
                    max_tokens,
                    chat if w == "chat" else None,
                    where,
                    f"bench-{tag}.json",
                )
                with competing_load(ld == "loaded"):
                    res = run_bench(argv, where / f"bench-{tag}.log")
                (where / f"load-{tag}.json").write_text(json.dumps(before))
                add_row(res, rnd, name, w, ld, c, before, "")

    def add_row(res: dict, rnd: int, name: str, w: str, ld: str, c: int, before, how: str) -> None:
        row = {"round": rnd, "server": name, "workload": w, "load": ld, "c": c, "loadavg_before": before}
        row.update({f: res.get(f) for f in FIGURES})
        row["errors"] = sorted({str(e).strip().splitlines()[-1][:200] for e in res.get("errors") or [] if e})
        row["generated_texts"] = res.get("generated_texts") if w == "prose" and ld == "quiet" else None
        results.append(row)
        local.note(
            f"{name} {w} {ld} c={c}: {row['output_throughput'] or 0:.1f} tok/s, "
            f"TPOT {row['median_tpot_ms'] or 0:.1f} ms, failed {row['failed']}{how}"
        )

    try:
        for rnd in range(1, args.rounds + 1):
            order = servers if rnd % 2 else list(reversed(servers))
            for name in order:
                where = out / f"round-{rnd}" / name.replace(".", "").replace("+", "-")
                where.mkdir(parents=True, exist_ok=True)
                if name in (LLAMA, LLAMA_SPEC):
                    # started again for each concurrency and load: its best flags differ by both
                    spec = args.llama_spec_flags if name == LLAMA_SPEC else ""
                    for c in levels:
                        for ld in loads_in(rnd):
                            if len(saved(where, c, [ld])) == len(args.workloads):
                                measure("", name, rnd, c, False, where, [ld])
                                continue
                            argv = llama_argv(llama_server, gguf, model, port, c, threads[ld], template, spec)
                            server = start_llama(argv, port, where, f"c{c}-{ld}")
                            try:
                                local.wait_ready(server, 300)
                                warm_up(server.base_url, model, tokenizer, warm_prompts, chat, where)
                                measure(server.base_url, name, rnd, c, False, where, [ld])
                            finally:
                                server.stop()
                elif all(len(saved(where, c, args.loads)) == len(args.workloads) * len(args.loads) for c in levels):
                    for c in levels:
                        measure("", name, rnd, c, True, where, loads_in(rnd))
                else:
                    server = local.launch(vllm_servers[name], env, where)
                    try:
                        local.wait_ready(server, 900)
                        warm_up(server.base_url, model, tokenizer, warm_prompts, chat, where)
                        for c in levels:
                            measure(server.base_url, name, rnd, c, True, where, loads_in(rnd))
                    finally:
                        server.stop()
    finally:
        summary["wall_s"] = round(time.monotonic() - t_start)
        summary["loadavg_at_end"] = loadavg()
        summary["results"] = [{k: v for k, v in r.items() if k != "generated_texts"} for r in results]
        summary["identical_greedy_outputs"] = identical_outputs(results, servers)
        lines = [f"command: {summary['command']}", f"date: {summary['date']}, {summary['machine']}"]
        if "llama_bench" in summary:
            lb = summary["llama_bench"]
            lines.append(f"llama-bench tg128 at {args.llama_threads} threads: {lb.get('tg128_tok_s')} tok/s")
        if "llama_bench_loaded" in summary:
            lb = summary["llama_bench_loaded"]
            lines.append(f"llama-bench tg32 under the competing load: {lb.get('tg32_tok_s')} tok/s")
        lines.append(f"llama-server threads (-t, -tb): {threads}")
        lines += tables(results, servers, levels, args.workloads, args.loads)
        lines.append(f"\nidentical greedy outputs (prose, quiet): {summary['identical_greedy_outputs']}")
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        (out / "table.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        print(f"\n{summary['wall_s']} s; written to {out}")


def in_resumed_folder(path: Path, empty_is_missing: bool = False) -> bool:
    """Whether a run being resumed left `path`: any entry there counts, so that read_saved reads it or
    refuses a FIFO, a folder or a dangling link with one message (measuring anew would write into it:
    a FIFO hangs the run, a dangling link writes where it points). With empty_is_missing an empty
    regular file counts as missing (a llama-bench that printed nothing is run again)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return not (empty_is_missing and stat.S_ISREG(st.st_mode) and st.st_size == 0)


def read_saved(path: Path, kind: type):
    """A JSON file a run being resumed saved (a folder the user names, maybe in /tmp): a regular file
    of at most SAVED_LIMIT bytes holding a `kind`; else one message and exit."""
    try:
        doc = loads_json(read_regular(path, SAVED_LIMIT), what=path.name, max_bytes=SAVED_LIMIT)
    except (OSError, ValueError) as e:
        sys.exit(
            f"error: --resume: {printable(path)}: cannot be read as JSON ({printable(e)}); "
            "remove it and resume again to measure it anew"
        )
    if not isinstance(doc, kind):
        sys.exit(f"error: --resume: {printable(path)}: holds no JSON {kind.__name__}; remove it and resume again")
    return doc


def saved_prompts(out: Path, prompts: dict) -> dict:
    """The prompts a run being resumed sent, per (round, load, workload, concurrency), from the first
    server folder of that round that has them (every server of a round gets the same prompts). Each
    file must hold as many prompts as this run would send: else the arguments differ, and it exits."""
    found = {}
    for key in prompts:
        rnd, ld, w, c = key
        for f in sorted((out / f"round-{rnd}").glob(f"*/prompts-{w}-{ld}-c{c}.jsonl")):
            try:
                lines = read_regular(f, SAVED_LIMIT).decode("utf-8", "replace").splitlines()
                ps = [json.loads(line)["prompt"] for line in lines if line]
                why = "" if all(isinstance(p, str) for p in ps) else "a prompt that is not text"
            except (OSError, ValueError, TypeError, KeyError) as e:
                why = f"{type(e).__name__}: {e}"
            if why:
                sys.exit(
                    f'error: --resume: {printable(f)}: not one {{"prompt": TEXT}} a line ({printable(why)}); '
                    "remove that round's folder to measure it anew"
                )
            if len(ps) != len(prompts[key]):
                sys.exit(
                    f"error: --resume: {printable(f)} holds {len(ps)} prompts where these arguments send "
                    f"{len(prompts[key])}; resume with the arguments of the run that wrote it"
                )
            found[key] = ps
            break
    return found


def warm_up(base_url: str, model: str, tokenizer: str, prompts: dict, chat: SpeedChat, where: Path) -> None:
    """Two short requests of each workload, untimed, on prompts of their own: a fresh server's first
    requests compile or fault in pages."""
    for w, ch in (("prose", None), ("chat", chat)):
        data = where / f"warm-up-{w}.jsonl"
        data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts[w]))
        argv = bench_argv(base_url, model, tokenizer, data, len(prompts[w]), 1, 16, ch, where, f"warm-up-{w}.json")
        run_bench(argv, where / f"warm-up-{w}.log")


def identical_outputs(results: list[dict], servers: list[str]) -> dict:
    """Greedy prose outputs of each vLLM server that match the defaults', prompt by prompt, per concurrency
    (round 1, quiet): speculation is lossless up to bf16 numerics under other batch shapes."""
    out = {}
    base = {r["c"]: r for r in results if r["server"] == "defaults" and r["round"] == 1 and r.get("generated_texts")}
    for s in servers:
        if s in ("defaults", LLAMA, LLAMA_SPEC):
            continue
        mine = {r["c"]: r for r in results if r["server"] == s and r["round"] == 1 and r.get("generated_texts")}
        out[f"{s} vs defaults"] = {
            str(c): f"{sum(a == b for a, b in zip(mine[c]['generated_texts'], base[c]['generated_texts']))}/"
            f"{len(base[c]['generated_texts'])}"
            for c in sorted(set(mine) & set(base))
        }
    return out


if __name__ == "__main__":
    main()
