"""speed: a serving benchmark in `vllm bench serve`'s terms, then TTFT of uncached long prompts.

At each sweep concurrency the gate streams `sweep_requests` completions with at most that many
in flight (vllm bench --max-concurrency, request rate unbounded). Every prompt is a different
passage of the built-in prose with a unique suffix (the SlimServe document: natural text with
per-request unique suffixes; one repeated prompt flatters n-gram drafting and the prefix
cache). Completions are greedy, `sweep_max_tokens` long with ignore_eos, so every stream
reaches steady decode. The figures carry vllm bench's names and formulas
(vllm/benchmarks/serve.py calculate_metrics): output_throughput, and median / p99 of TTFT,
TPOT, ITL and E2EL in ms. benchmarks/speed_gate_vs_vllm_bench.py runs both on one server.

With `chat` set, a second workload follows the sweep at the same concurrencies and request count:
natural questions (the built-in writing requests, or GSM8K's test questions from the data path)
through /v1/chat/completions, sampled at the recipe's default temperature and top_p, max_tokens
long with ignore_eos; its figures, under the same names, go to measured.chat. The greedy prose
flatters n-gram speculation (a small base model repeats itself under greedy decoding); the chat
workload is what a chat user sends. It is off unless the recipe asks, so bundles recorded before it
stay valid.

Token counts come from server usage, never from chunk counts. Prompts for TTFT start with a
random prefix, so the prefix cache cannot serve them; the prefix-cache hit delta from
/metrics is recorded as proof.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import numpy as np

from cookbook.files import atomic_file
from cookbook.gates import data as gate_data
from cookbook.gates import gatedata, metrics
from cookbook.gates.client import Stream, bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, level_window_s, need, stream_of
from cookbook.recipe.gates_spec.speed import SpeedChat, SpeedGate

FORMULAS = {
    "output_throughput": "sum of usage.completion_tokens over the level's requests / level duration "
    "(first send to last response), tok/s",
    "ttft_ms": "per request: arrival of the first chunk whose usage.completion_tokens > 0, ms after sending",
    "tpot_ms": "per request: (e2el - ttft) / (completion_tokens - 1)",
    "itl_ms": "every gap between successive token-carrying chunks, all requests of the level pooled",
    "e2el_ms": "per request: sending to the last token-carrying chunk",
    "median / p99": "numpy.percentile (linear), as vllm bench serve",
    "ttft_s": "client time from sending an uncached long prompt to its first token, after one untimed prompt of that length",
    "ttft_cold_s": "the same for the untimed prompt: the first prefill of that length (may include kernel compilation)",
    "prefix_cache_hits_during_ttft": "Δ vllm:prefix_cache_hits over the TTFT requests (should be ~0)",
    "chat": "the chat workload (when the gate sets chat): the same figures and formulas per level, "
    "from chat completions at the recipe's sampling",
}
PROMPTS = gatedata.HAYSTACK
LATENCIES = ("ttft", "tpot", "itl", "e2el")
# The /metrics snapshots around the TTFT prompts, saved in the bundle (recompute reads them).
METRICS_BEFORE, METRICS_AFTER = "speed.metrics-before.prom", "speed.metrics-after.prom"
PREFIX_HITS = "vllm:prefix_cache_hits"


def workload_prompts(cfg: SpeedGate, nonce: str) -> dict[int, list[str]]:
    """Per sweep concurrency, `sweep_requests` prompts: passages of the built-in prose at distinct
    offsets (seeded), each ending in a unique suffix that names the run, the level and the request."""
    sents = gate_data.sentences(gatedata.haystack_text(PROMPTS))
    k = cfg.passage_sentences
    total = cfg.sweep_requests * len(cfg.sweep_concurrencies)
    starts = random.Random(cfg.seed).sample(range(len(sents) - k), min(total, len(sents) - k))
    starts += [starts[i % len(starts)] for i in range(total - len(starts))]  # the suffix still differs
    out, n = {}, 0
    for c in cfg.sweep_concurrencies:
        out[c] = []
        for i in range(cfg.sweep_requests):
            passage = " ".join(sents[starts[n] : starts[n] + k])
            out[c].append(f"{passage}\n\n(Reader's note {nonce}-{c}-{i}.) The story goes on:")
            n += 1
    return out


CHAT_PATH = "/v1/chat/completions"


def chat_questions(chat: SpeedChat, data: gate_data.DataPaths | None, n: int) -> list[str]:
    """The chat workload's question set (all of it for a built-in set, the first `n` of GSM8K's test split)."""
    if chat.prompts == "gsm8k":
        return [row["question"] for row in gate_data.gsm8k(data or gate_data.DataPaths(), "test", n)]
    return gate_data.builtin_prompts(chat.prompts, len(gatedata.tasks(chat.prompts)))


def chat_prompts(cfg: SpeedGate, data: gate_data.DataPaths | None = None) -> dict[int, list[str]]:
    """Per sweep concurrency, `sweep_requests` questions of the chat workload: the set in a seeded
    order, continued from level to level, so a set smaller than the sweep recurs (each request
    samples its own answer; prompts of a few dozen tokens give the prefix cache little to save)."""
    assert cfg.chat is not None
    total = cfg.sweep_requests * len(cfg.sweep_concurrencies)
    questions = chat_questions(cfg.chat, data, total)
    order = list(range(len(questions)))
    random.Random(cfg.seed).shuffle(order)
    out, n = {}, 0
    for c in cfg.sweep_concurrencies:
        out[c] = [questions[order[(n + i) % len(order)]] for i in range(cfg.sweep_requests)]
        n += cfg.sweep_requests
    return out


def chat_body(chat: SpeedChat, question: str) -> dict:
    """One chat request of the workload: the question as the one user message, the recipe's sampling."""
    return {
        "messages": [{"role": "user", "content": question}],
        "max_tokens": chat.max_tokens,
        "temperature": chat.temperature,
        "top_p": chat.top_p,
        "ignore_eos": True,
    }


def _pct(xs: list[float], q: float) -> float | None:
    return round(float(np.percentile(xs, q)), 2) if xs else None


def level_metrics(streams: list[Stream], duration_s: float) -> dict:
    """vllm bench serve's figures for one level, from the streams (chunk times in s since each send)."""
    ttft, tpot, itl, e2el, tokens = [], [], [], [], 0
    for s in streams:
        times = s.token_times()
        n = s.completion_tokens or 0
        tokens += n
        if not times:
            continue
        # vllm bench's latency ends at the last token-carrying chunk, not at [DONE].
        ttft.append(times[0][0] * 1000)
        e2el.append(times[-1][0] * 1000)
        if n > 1:
            tpot.append((times[-1][0] - times[0][0]) * 1000 / (n - 1))
        itl += [(b[0] - a[0]) * 1000 for a, b in zip(times, times[1:])]
    row = {
        "requests": len(streams),
        "total_tokens": tokens,
        "duration_s": round(duration_s, 3),
        "output_throughput": round(tokens / duration_s, 2) if duration_s > 0 else None,
    }
    for name, xs in zip(LATENCIES, (ttft, tpot, itl, e2el)):
        row[f"median_{name}_ms"] = _pct(xs, 50)
        row[f"p99_{name}_ms"] = _pct(xs, 99)
    return row


def by_concurrency(rows: list[dict]) -> dict[str, float | None]:
    """output_throughput: each sweep row's figure under its concurrency."""
    return {str(row["concurrency"]): row["output_throughput"] for row in rows}


async def _timed_level(ctx: Context, path: str, bodies: list[dict], c: int, tag: str) -> tuple[dict, list[Stream]]:
    """Every body streamed to `path`, at most `c` in flight; (vllm bench's figures, the streams)."""

    # The client only times while the level runs: parsing and transcript records wait until the
    # level is over (Server.stream's `deferred`), as `vllm bench serve` keeps its work per chunk small.
    deferred: list = []

    async def one(i: int, body: dict) -> Stream:
        return await ctx.server.stream(path, body, tag=f"{tag}{c}/{i}", deferred=deferred)

    try:
        streams = await bounded_gather(c, [one(i, b) for i, b in enumerate(bodies)])
    finally:
        ctx.server.write_deferred(deferred)
    # Timed as verify recomputes it, from what the transcript records of each stream (recorded.py).
    duration = level_window_s([{"time": s.finished, "elapsed_s": round(s.done_s, 4)} for s in streams])
    return {"concurrency": c, **level_metrics([s.parse() for s in streams], duration)}, streams


async def measure_level(ctx: Context, prompts: list[str], c: int, max_tokens: int) -> tuple[dict, list[Stream]]:
    """One level of the greedy prose workload: raw completions, tagged sweep<c>/<i>."""
    bodies = [{"prompt": p, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True} for p in prompts]
    return await _timed_level(ctx, "/v1/completions", bodies, c, "sweep")


async def measure_chat_level(ctx: Context, questions: list[str], c: int, chat: SpeedChat) -> tuple[dict, list[Stream]]:
    """One level of the chat workload: chat completions at the recipe's sampling, tagged chat<c>/<i>."""
    return await _timed_level(ctx, CHAT_PATH, [chat_body(chat, q) for q in questions], c, "chat")


PLOTS_HELP = "install the plots extra: .venv/bin/pip install -e '.[plots]'"


def plot(rows: list[dict], path: Path) -> str | None:
    """Draw the sweep to `path` (PNG); None, or why no plot was drawn (matplotlib is the plots extra)."""
    try:
        import matplotlib
    except ImportError:
        return f"no plot: matplotlib is not installed ({PLOTS_HELP})"

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [row["concurrency"] for row in rows]
    ax.plot(xs, [row["output_throughput"] for row in rows], marker="o")
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("output_throughput (completion tok/s)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.grid(True, alpha=0.3)
    ax.set_title("Concurrency sweep")
    fig.tight_layout()
    with atomic_file(path, overwrite=True) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return None


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def verdict(measured: dict, items: list[dict], cfg: SpeedGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    checks = []
    rows = measured.get("sweep") or []
    levels = [row.get("concurrency") for row in rows]
    checks.append(
        (
            levels == list(cfg.sweep_concurrencies),
            f"sweep measured at {levels}, the gate asks {cfg.sweep_concurrencies}",
        )
    )
    for row in rows:
        c, want = row.get("concurrency"), cfg.sweep_requests
        checks.append(
            (
                row.get("requests") == want and row.get("total_tokens") == want * cfg.sweep_max_tokens,
                f"sweep at {c}: {row.get('total_tokens')} tokens from {row.get('requests')} requests, "
                f"expected {want * cfg.sweep_max_tokens} from {want} (ignore_eos)",
            )
        )
    total = cfg.sweep_requests * len(cfg.sweep_concurrencies)
    distinct = measured.get("distinct_prompts")
    checks.append((distinct == total, f"{distinct} distinct prompts over the sweep, expected {total} (one each)"))
    tput = measured.get("output_throughput") or {}
    for limit, c, what in (
        (cfg.min_output_throughput_1_stream, 1, "min_output_throughput_1_stream"),
        (cfg.min_output_throughput_peak, max(cfg.sweep_concurrencies), "min_output_throughput_peak"),
    ):
        if limit is not None:
            v = tput.get(str(c))
            checks.append((_num(v) and v >= limit, f"output_throughput at {c} streams {v} < {limit} ({what})"))
    for c, limit in sorted(dict(cfg.min_output_throughput_by_concurrency or []).items()):
        v = tput.get(str(c))
        checks.append(
            (
                _num(v) and v >= limit,
                f"output_throughput at {c} streams {v} < {limit} (min_output_throughput_by_concurrency)",
            )
        )
    if cfg.chat is not None:
        checks += chat_verdict(measured.get("chat") or {}, cfg)
    ttft = measured.get("ttft_s") or {}
    checks.append(
        (
            sorted(ttft) == sorted(str(n) for n in cfg.ttft_prompts_tokens),
            f"TTFT measured for {sorted(ttft)} tokens, the gate asks {cfg.ttft_prompts_tokens}",
        )
    )
    hits = measured.get("prefix_cache_hits_during_ttft")
    checks.append((not hits, f"the prefix cache served {hits} tokens of the TTFT prompts, so TTFT is flattered"))
    for limit, n in ((cfg.max_ttft_2k_s, 2048), (cfg.max_ttft_8k_s, 8192)):
        if limit is not None:
            v = ttft.get(str(n))
            checks.append((_num(v) and v <= limit, f"ttft {n} tokens {v} s > {limit} s"))
    return checks


def chat_verdict(chat_m: dict, cfg: SpeedGate) -> list[tuple[bool, str]]:
    """The chat workload's checks: every level measured, every request its max_tokens, the bars."""
    chat = cfg.chat
    assert chat is not None
    rows = chat_m.get("sweep") or []
    levels = [row.get("concurrency") for row in rows]
    checks = [
        (levels == list(cfg.sweep_concurrencies), f"chat measured at {levels}, the gate asks {cfg.sweep_concurrencies}")
    ]
    want = cfg.sweep_requests
    for row in rows:
        checks.append(
            (
                row.get("requests") == want and row.get("total_tokens") == want * chat.max_tokens,
                f"chat at {row.get('concurrency')}: {row.get('total_tokens')} tokens from {row.get('requests')} "
                f"requests, expected {want * chat.max_tokens} from {want} (ignore_eos)",
            )
        )
    sampling = chat_m.get("sampling") or {}
    checks.append(
        (
            sampling == chat_sampling(chat),
            f"chat requests sampled at {sampling}, the gate asks {chat_sampling(chat)}",
        )
    )
    tput = chat_m.get("output_throughput") or {}
    for c, limit in sorted(dict(chat.min_output_throughput_by_concurrency or []).items()):
        v = tput.get(str(c))
        checks.append((_num(v) and v >= limit, f"chat output_throughput at {c} streams {v} < {limit}"))
    return checks


def chat_sampling(chat: SpeedChat) -> dict:
    return {"temperature": chat.temperature, "top_p": chat.top_p, "max_tokens": chat.max_tokens}


def chat_measured(chat: SpeedChat, rows: list[dict], questions: list) -> dict:
    """measured.chat: the workload's figures under the sweep's names, with what it sent."""
    return {
        "prompts": chat.prompts,
        "sampling": chat_sampling(chat),
        "distinct_prompts": len({q for q in questions if isinstance(q, str)}),
        "sweep": rows,
        "output_throughput": by_concurrency(rows),
    }


async def run(ctx: Context, cfg: SpeedGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {
        k: v
        for k, v in {
            "min_output_throughput_1_stream": cfg.min_output_throughput_1_stream,
            "min_output_throughput_peak": cfg.min_output_throughput_peak,
            "min_output_throughput_by_concurrency": {
                str(k): v for k, v in (cfg.min_output_throughput_by_concurrency or [])
            }
            or None,
            "max_ttft_2k_s": cfg.max_ttft_2k_s,
            "max_ttft_8k_s": cfg.max_ttft_8k_s,
            "sweep_max_tokens": cfg.sweep_max_tokens,
            "chat": (
                {
                    **chat_sampling(cfg.chat),
                    "min_output_throughput_by_concurrency": {
                        str(k): v for k, v in (cfg.chat.min_output_throughput_by_concurrency or [])
                    }
                    or None,
                }
                if cfg.chat
                else None
            ),
        }.items()
        if v is not None
    }
    m = r.measured
    m["prompts"] = {"source": PROMPTS, "digest": gatedata.digest(PROMPTS)}

    # The serving benchmark: varied natural prompts, one level at a time.
    prompts = workload_prompts(cfg, uuid.uuid4().hex[:12])
    m["distinct_prompts"] = len({p for ps in prompts.values() for p in ps})
    rows = []
    for c in cfg.sweep_concurrencies:
        ctx.check_fits(0, cfg.sweep_max_tokens, f"sweep at {c}")
        row, _ = await measure_level(ctx, prompts[c], c, cfg.sweep_max_tokens)
        rows.append(row)
        r.items.append({"sweep": row})
    m["sweep"] = rows
    m["output_throughput"] = by_concurrency(rows)

    # The chat workload (when the recipe asks for it): questions through the chat endpoint, sampled.
    if cfg.chat is not None:
        questions = chat_prompts(cfg, ctx.data)
        chat_rows = []
        for c in cfg.sweep_concurrencies:
            ctx.check_fits(0, cfg.chat.max_tokens, f"chat at {c}")
            row, _ = await measure_chat_level(ctx, questions[c], c, cfg.chat)
            chat_rows.append(row)
            r.items.append({"chat": row})
        m["chat"] = chat_measured(cfg.chat, chat_rows, [q for qs in questions.values() for q in qs])

    # TTFT of uncached prompts, one at a time.
    rng = random.Random(cfg.seed)
    for n in cfg.ttft_prompts_tokens:
        ctx.check_fits(n, 2, f"TTFT prompt {n}")
    before = await ctx.server.get_text("/metrics")
    (ctx.out_dir / METRICS_BEFORE).write_text(before)

    async def first_token_s(n: int, tag: str) -> float | None:
        ids = await ctx.uncached_prompt_ids(n, rng)
        body = {"prompt": ids, "max_tokens": 2, "temperature": 0.0, "ignore_eos": True}
        return (await ctx.server.stream("/v1/completions", body, tag=tag)).ttft_s

    ttft, cold = {}, {}
    for n in cfg.ttft_prompts_tokens:
        # An untimed request of the same length first (other tokens, so no cache hit): the first
        # prefill of a new size can include one-time kernel compilation (seen on the H200: 5.2 s
        # cold at 2K, 0.13 s at 8K after it). `vllm bench serve` likewise sends a test prompt first.
        cold[n] = await first_token_s(n, f"ttft{n}-warmup")
        r.items.append({"ttft_prompt_tokens": n, "ttft_cold_s": cold[n]})
        ttft[n] = await first_token_s(n, f"ttft{n}")
        r.items.append({"ttft_prompt_tokens": n, "ttft_s": ttft[n]})
    after = await ctx.server.get_text("/metrics")
    (ctx.out_dir / METRICS_AFTER).write_text(after)
    for key, figures in (("ttft_s", ttft), ("ttft_cold_s", cold)):
        m[key] = {str(n): (round(v, 4) if v is not None else None) for n, v in figures.items()}
    m["prefix_cache_hits_during_ttft"] = metrics.delta(before, after, PREFIX_HITS)

    if rows:
        why = plot(rows, ctx.out_dir / "speed-sweep.png")
        m["sweep_plot"] = None if why else "speed-sweep.png"
        if why:
            m["sweep_plot_note"] = why
    r.judge(verdict(m, r.items, cfg))


SWEEP_COLUMNS = ("concurrency", "requests", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms")
SWEEP_COLUMNS += ("median_itl_ms", "median_e2el_ms")


def sweep_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(SWEEP_COLUMNS) + " |", "|" + "---|" * len(SWEEP_COLUMNS)]
    lines += ["| " + " | ".join(str(x.get(k)) for k in SWEEP_COLUMNS) + " |" for x in rows]
    return "\n".join(lines)


def recompute(recorded: RecordedRun, cfg: SpeedGate) -> tuple[dict, None]:
    """Every sweep level's figures again from the streamed chunks (each level's duration from the
    records' send and end times), the TTFTs from their chunk times and the prefix-cache delta from
    the saved /metrics snapshots (`gates verify` calls it)."""
    recs = recorded.requests("speed")
    rows, prompts = [], []
    for c in cfg.sweep_concurrencies:
        level = [rec for tag, rec in recs.items() if tag.startswith(f"sweep{c}/")]
        for rec in level:
            req = rec["request"]
            if req.get("max_tokens") != cfg.sweep_max_tokens or req.get("temperature") != 0.0:
                raise ValueError(f"request {rec['tag']!r} is not a greedy {cfg.sweep_max_tokens}-token completion")
            prompts.append(req.get("prompt"))
        streams = [stream_of(rec) for rec in level]
        duration = level_window_s(level)
        rows.append({"concurrency": c, **level_metrics(streams, duration)})
    m: dict = {
        "sweep": rows,
        "output_throughput": by_concurrency(rows),
        "distinct_prompts": len({p for p in prompts if isinstance(p, str)}),
    }
    ttft = {}
    for n in cfg.ttft_prompts_tokens:
        rec = need(recs, f"ttft{n}")
        if len(rec["request"].get("prompt") or []) != n:
            raise ValueError(f"the TTFT prompt tagged ttft{n} is not {n} tokens")
        v = stream_of(rec).ttft_s
        ttft[str(n)] = round(v, 4) if v is not None else None
    m["ttft_s"] = ttft
    if cfg.chat is not None:
        m["chat"] = recompute_chat(recs, cfg)
    m["prefix_cache_hits_during_ttft"] = metrics.delta(
        recorded.metrics(METRICS_BEFORE), recorded.metrics(METRICS_AFTER), PREFIX_HITS
    )
    return m, None


def recompute_chat(recs: dict, cfg: SpeedGate) -> dict:
    """measured.chat again from the chat<c>/<i> records: each must be a chat request at the gate's
    sampling and length; the levels' figures from their chunks, as the sweep's."""
    chat = cfg.chat
    assert chat is not None
    rows, questions = [], []
    for c in cfg.sweep_concurrencies:
        level = [rec for tag, rec in recs.items() if tag.startswith(f"chat{c}/")]
        for rec in level:
            req = rec["request"]
            msgs = req.get("messages")
            if rec.get("path") != CHAT_PATH or not isinstance(msgs, list) or len(msgs) != 1:
                raise ValueError(f"request {rec['tag']!r} is not one user message to {CHAT_PATH}")
            got = {k: req.get(k) for k in ("temperature", "top_p", "max_tokens")}
            if got != chat_sampling(chat):
                raise ValueError(f"request {rec['tag']!r} was sent with {got}, the gate asks {chat_sampling(chat)}")
            questions.append((msgs[0] or {}).get("content") if isinstance(msgs[0], dict) else None)
        streams = [stream_of(rec) for rec in level]
        duration = level_window_s(level)
        rows.append({"concurrency": c, **level_metrics(streams, duration)})
    return chat_measured(chat, rows, questions)
