"""engine-checked: a status between reported and verified, earned on the hardware kind.

What it proves: the pinned engine accepts the recipe's exact launch block (only its parallel sizes
scaled to one GPU), builds the model's architecture from an architecture-faithful checkpoint (the
model's own widths, expert counts, attention type and quant format; fewer layers; random weights),
answers requests, and allocates a KV pool that `cookbook plan` predicts within 5% (KV bytes per
token as vLLM logs them, the pool, its token count, and vLLM's "Maximum concurrency" where the log
gives it) for that geometry, or the bundle explains the difference. What it does not
prove: output quality (the weights are random), full-depth speed, multi-GPU communication (one GPU).
A card of the recipe's architecture may stand in for its own (an H100 for an H200 recipe, when no
H200 can be had): the run's env.txt names it, the plan is made for its memory, and the record and
the page say which card it was.

The run (scripts/offline-gpu/engine-check, on the device) leaves a folder per recipe: launch.sh
(the block that ran), config.json (the checkpoint's config), server.log, metrics.prom,
responses.json and rc. `cookbook maint engine-check write SLUG RUN_DIR` copies them into
recipes/<slug>/evidence/engine-check/<stamp>/ with engine-check.json (the figures, the plan's
figures, the recipe's content hash) and manifest.json, only when check() finds nothing wrong.
`write` also takes an existing bundle in place of a run folder: its run files are planned again
(vLLM's figures unchanged, the plan's recomputed) and the new record says so (`rederived_from`);
the launch block must still be the recipe's, so a recipe whose block changed stays stale.

The status is re-derived from the newest such bundle every time (no block in recipe.yaml):
    engine-checked           the bundle's recipe hash is the recipe's, and check() passes
    engine-check stale       the recipe changed after the run
    engine-check refused     the bundle fails the re-check (edited files, a block that is not the
                             recipe's, a server that never answered, figures off the plan)
The plan and the block are the planner's own (cookbook.plan), called here: of the evidence wing only
this module imports the planner (tests/test_layering.py), so the verified re-check stays the gates'.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import time
from pathlib import Path

from cookbook.evidence.manifest import check_manifest
from cookbook.files import atomic_dir
from cookbook.gates.bundle import MANIFEST, manifest_of
from cookbook.model_folder import VARIABLE
from cookbook.recipe.launch import export_lines, fixes_line
from cookbook.recipe.resolve import resolve

ENGINE_CHECKED, STALE, REFUSED = "engine-checked", "engine-check stale", "engine-check refused"
RECORD = "engine-check.json"
RECORD_FORMAT = 1
FOLDER = Path("evidence") / "engine-check"  # under recipes/<slug>/
RUN_FILES = ("launch.sh", "config.json", "server.log", "metrics.prom", "responses.json", "rc")
# The card the run used (nvidia-smi's name and memory, torch's device total); runs before 2026-12-07
# lack it and are planned for the recipe's own platform.
ENV_FILE = "env.txt"
TOLERANCE = 0.05
MAX_LOG_BYTES = 64 << 20
# Flags a run may add after the block: the checkpoint's weights are random and its tokenizer is not
# the model's (dummy-checkpoint carries a GGUF's); and the one-GPU size, which the run script sets
# on every recipe and which lands after the block, as vLLM's default 1, when the recipe sets none.
ADDED_FLAGS = {
    "--load-format": {"dummy"},
    "--tokenizer-mode": {"hf", "auto", "slow"},
    "--tensor-parallel-size": {"1"},
}
# A line of vLLM's log without its prefix ("(EngineCore pid=12) INFO 12-05 06:00:00 [file.py:12] ").
_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\)\s+)?(?:\w+\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s+)?")
_CACHE: dict = {}  # (what, recipe, its hash, --set, config) -> the plan or the block: both are pure


def _cached(kind: str, resolved, sets, more: tuple, make):
    # the same recipe text, --set and config: the same answer
    key = (kind, str(resolved.path), resolved.content_hash, tuple(sets), json.dumps(more, sort_keys=True))
    if key not in _CACHE:
        _CACHE[key] = make(resolve(resolved.path, sets=list(sets), check=False), *more)
    return _CACHE[key]


def plan_of(resolved, sets, config: dict | None = None, device_mib: int | None = None):
    """cookbook.plan.budget.Plan of the recipe with those --set, on one GPU (config: a checkpoint's
    config.json, filling the geometry where the recipe is silent; device_mib: the card the run used,
    where it is not the recipe's platform's)."""
    from cookbook.plan.budget import make_plan

    def make(r, config=None, device_mib=None):
        return make_plan(r, gpus=1, config=config, device_mib=device_mib)

    return _cached("plan", resolved, sets, (config, device_mib), make)


# nvidia-smi's product name -> the catalogue's platform (only the kinds this project's runs have had)
_CARD_PLATFORM = ((re.compile(r"\bH100\b"), "h100"), (re.compile(r"\bH200\b"), "h200"))


def card_of(text: str, recipe_platform: str) -> tuple[dict | None, list[str]]:
    """(the card a run used, reasons it cannot stand for the recipe's) from the run's env.txt:
    `env: NAME, DRIVER, MEMORY MiB` and `device_mib N` (torch's total). A card of the recipe's
    architecture (an H100 for an H200 recipe) is planned for its own memory; another one is refused."""
    from cookbook import platforms

    name = mib = None
    for line in text.splitlines()[:50]:
        if line.startswith("env: ") and name is None:
            name = line[5:].split(",")[0].strip()[:100]
        elif m := re.fullmatch(r"device_mib (\d{1,9})", line.strip()):
            mib = int(m.group(1))
    if not name:
        return None, [f"{ENV_FILE} does not name the card (its 'env: NAME, DRIVER, MEMORY' line)"]
    if not re.fullmatch(r"[A-Za-z0-9 ._()-]+", name):  # it goes onto the recipe's page
        return None, [f"{ENV_FILE} names the card {name!r}: not a plain product name"]
    plat = next((p for rx, p in _CARD_PLATFORM if rx.search(name)), None)
    want = platforms.CATALOGUE.get(recipe_platform)
    if plat is None or want is None or platforms.CATALOGUE[plat].arch != want.arch:
        return None, [f"the run used a {name}, not a card of the recipe's kind ({recipe_platform})"]
    source = "torch's total on the run's card" if mib else "the catalogue's"
    mib = mib or platforms.CATALOGUE[plat].device_mib
    return {"name": name, "platform": plat, "device_mib": mib, "device_mib_from": source}, []


def block_of(resolved, sets) -> str:
    """The launch block `cookbook launch SLUG --set ...` prints."""
    from cookbook.plan.launch_block import launch_block

    return _cached("block", resolved, sets, (), launch_block)


_ENUM_REPR = re.compile(r"<(\w+\.\w+): [^<>]{0,200}>")


def read_limited(path: Path, limit: int = MAX_LOG_BYTES) -> str:
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"{path.name} is missing or not a regular file")
    if path.stat().st_size > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return path.read_text(encoding="utf-8", errors="replace")


def parse_server_log(text: str) -> dict:
    """What vLLM said it did: its parsed non-default args, the backends it chose, the KV pool."""
    out: dict = {"args": None, "backends": [], "available_kv_gib": None, "kv_tokens": None, "model_load_gib": None}
    concurrency = None
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw.strip())
        if "non-default args:" in line and out["args"] is None:
            body = line.split("non-default args:", 1)[1].strip()
            # an enum prints as <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, which is no literal: its name
            body = _ENUM_REPR.sub(lambda m: repr(m.group(1)), body)
            try:
                out["args"] = ast.literal_eval(body)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                out["args"] = body  # kept as vLLM wrote it
        elif re.search(r"\bbackend\b", line, re.I) and line not in out["backends"] and len(out["backends"]) < 40:
            out["backends"].append(line[:300])
        if m := re.search(r"Available KV cache memory: ([\d.]+) GiB", line):
            out["available_kv_gib"] = float(m.group(1))
        if m := re.search(r"GPU KV cache size: ([\d,]+) tokens", line):
            out["kv_tokens"] = int(m.group(1).replace(",", ""))
        if m := re.search(r"Model loading took ([\d.]+) GiB", line):
            out["model_load_gib"] = float(m.group(1))
        if m := re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", line):
            concurrency = float(m.group(1))
    if out["available_kv_gib"] and out["kv_tokens"]:
        out["kv_bytes_per_token"] = round(out["available_kv_gib"] * 2**30 / out["kv_tokens"], 1)
    if concurrency is not None:  # vLLM 0.26 logs it; a log without it keeps the record as it was
        out["max_concurrency"] = concurrency
    return out


def parse_metrics(text: str) -> dict:
    """vllm:cache_config_info's labels: the blocks and block size the engine allocated."""
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            return dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
    return {}


def answered(text: str) -> int:
    """Completion choices with text in responses.json (a JSON list of OpenAI completion answers)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return 0
    n = 0
    for resp in doc if isinstance(doc, list) else []:
        for c in (resp.get("choices") or []) if isinstance(resp, dict) else []:
            n += isinstance(c, dict) and isinstance(c.get("text"), str) and bool(c["text"])
    return n


def scaled_sets(resolved, checkpoint: str) -> list[str]:
    """The --set of the block a one-GPU run serves: every parallel size 1, the host local, the
    model the checkpoint. Nothing else of the recipe changes."""
    sets = [f"serve.model={checkpoint}", "host=127.0.0.1"]
    for key, arg in sorted(resolved.recipe.serve.args.items()):
        if key.endswith("_parallel_size") and isinstance(arg.value, int) and arg.value > 1:
            sets.append(f"{key}=1")
    return sets


def geometry_sets(config: dict) -> list[str]:
    """The --set that plan the checkpoint's geometry (layers reduced) with the recipe's architecture."""
    layers = int(config["num_hidden_layers"])
    sets = [f"model.architecture.layers={layers}", f"model.architecture.vocab_size={int(config['vocab_size'])}"]
    ratios = config.get("compress_ratios")
    if isinstance(ratios, list):
        sets.append(f"model.architecture.compress_ratios={json.dumps(ratios[:layers])}")
        sets.append(f"model.architecture.indexer.layers={sum(1 for r in ratios[:layers] if r == 4)}")
    elif "index_topk" in config:  # DSA: vLLM 0.26.0's rule (models/deepseek_v2.py): a layer keeps its indexer
        freq, off = max(int(config.get("index_topk_freq", 1)), 1), int(config.get("index_skip_topk_offset", 2))
        sets.append(
            f"model.architecture.indexer.layers={sum(1 for i in range(layers) if max(i - off + 1, 0) % freq == 0)}"
        )
    if "first_k_dense_replace" in config:
        sets.append(f"model.architecture.dense_layers={min(int(config['first_k_dense_replace']), layers)}")
    return sets


def host_side_lines(resolved) -> list[str]:
    """Lines of the block the engine never sees: the fix-pack check (it runs before the server; the
    run applied the profile itself: scripts/offline-gpu/engine-check), and the model folder's export
    when the run's checkpoint replaced serve.model (scaled_sets), so the export is unused."""
    out = [fixes_line(resolved) or ""]
    if resolved.recipe.serve.model.strip('"') in (f"${VARIABLE}", f"${{{VARIABLE}}}"):
        out += [x for x in export_lines(resolved) if x.startswith(f"export {VARIABLE}=")]
    return [x for x in out if x]


def block_differences(ran: str, expected: str, host_side: list[str] | tuple = ()) -> list[str]:
    """The run's launch.sh against the recipe's block rendered with scaled_sets: the same lines,
    then only the flags ADDED_FLAGS allows. `host_side`: groups of the block's lines that change
    nothing the engine runs (host_side_lines); a run recorded before blocks carried one is compared
    without it."""
    want = [x for x in expected.rstrip("\n").splitlines() if x and not x.startswith("#")]  # blank lines neither
    got = [x for x in ran.rstrip("\n").splitlines() if x and not x.startswith("#")]
    for group in host_side:
        lines = group.splitlines()
        if lines and not any(x in got for x in lines):
            want = [x for x in want if x not in lines]
    if got[: len(want) - 1] != want[:-1] or not got[len(want) - 1 :] or got[len(want) - 1].rstrip(" \\") != want[-1]:
        return ["launch.sh is not the recipe's launch block with only its parallel sizes scaled to one GPU"]
    out = []
    for extra in got[len(want) :]:
        flag, _, value = extra.strip().rstrip("\\").strip().partition(" ")
        if value not in ADDED_FLAGS.get(flag, ()):
            out.append(f"launch.sh adds {flag} {value}, which is not a checkpoint substitution")
    return out


def _off(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-9)


def config_of(text: str) -> dict:
    """A checkpoint's config.json with the geometry a plan needs; ValueError otherwise."""
    config = json.loads(text)
    if not isinstance(config, dict) or any(
        not isinstance(config.get(k), int) or isinstance(config.get(k), bool) or not 0 < config[k] < 10**7
        for k in ("num_hidden_layers", "vocab_size")
    ):
        raise ValueError("config.json needs num_hidden_layers and vocab_size as positive integers")
    return config


def figures(run: Path, resolved, explanations: dict[str, str]) -> tuple[dict, list[str]]:
    """(the record's figures, every reason the run does not earn engine-checked)."""
    reasons: list[str] = []
    try:
        # a server that never came up leaves no metrics and no answers; older runs have no env.txt
        optional = ("metrics.prom", "responses.json", ENV_FILE)
        texts = {f: read_limited(run / f) for f in RUN_FILES if f not in optional}
        for f in optional:
            texts[f] = read_limited(run / f, 1 << 16) if (run / f).exists() or (run / f).is_symlink() else ""
        metrics = texts["metrics.prom"]
        config = config_of(texts["config.json"])
    except (ValueError, OSError, RecursionError) as e:
        return {}, [f"the run folder cannot be read: {e}"]
    rc = texts["rc"].strip()
    if not rc.startswith("ready"):
        reasons.append(f"the server never answered ({rc or 'no rc'}): the engine refused the block or did not start")
    serve_line = next((x for x in texts["launch.sh"].splitlines() if x.startswith("vllm serve ")), "")
    checkpoint = serve_line.split()[2] if len(serve_line.split()) > 2 else ""
    sets = scaled_sets(resolved, checkpoint)
    reasons += block_differences(texts["launch.sh"], block_of(resolved, sets), host_side_lines(resolved))
    log = parse_server_log(texts["server.log"])
    n = answered(texts["responses.json"])
    if rc.startswith("ready") and n == 0:
        reasons.append("no request was answered (responses.json holds no completion text)")
    try:
        geometry = geometry_sets(config)
    except (ValueError, TypeError, OverflowError) as e:
        return {}, [*reasons, f"config.json's geometry cannot be read ({e})"]
    card = None
    if texts[ENV_FILE]:
        card, why_not = card_of(texts[ENV_FILE], resolved.recipe.hardware.platform)
        reasons += why_not
    mib = card["device_mib"] if card else None
    plan_sets = [*sets, *geometry, f"model.source.size_gib={log.get('model_load_gib') or 0}"]
    plan = plan_of(resolved, plan_sets, device_mib=mib)
    geometry_from = "recipe"
    if not plan.vllm_kv_bytes_per_token:
        # a recipe that leaves its attention geometry to the checkpoint (as `cookbook plan --checkpoint`
        # does): the served checkpoint's config.json fills it
        plan, geometry_from = plan_of(resolved, plan_sets, config, mib), "recipe, then the checkpoint's config.json"
    planned = {
        # KV bytes per token as vLLM's log gives them: its pool over its token count at max_model_len
        "kv_bytes_per_token": round(plan.vllm_kv_bytes_per_token, 1),
        "pool_gib": round(plan.vllm_pool_bytes / 2**30, 2),
        "pool_tokens": plan.pool_tokens,
        # full max_model_len sequences the pool holds, by the formula of vLLM's "Maximum concurrency"
        "max_concurrency": round(plan.logged_seqs_at_ctx, 2),
    }
    engine = {k: log.get(k) for k in ("kv_bytes_per_token", "available_kv_gib", "kv_tokens")}
    if "max_concurrency" in log:
        engine["max_concurrency"] = log["max_concurrency"]
    pairs = (
        ("kv_bytes_per_token", "kv_bytes_per_token"),
        ("pool_gib", "available_kv_gib"),
        ("pool_tokens", "kv_tokens"),
        ("max_concurrency", "max_concurrency"),
    )
    comparison = {}
    for mine, theirs in pairs:
        if engine.get(theirs) is None:
            if rc.startswith("ready") and theirs != "max_concurrency":
                reasons.append(f"server.log does not say vLLM's {theirs}")
            continue
        off = round(_off(planned[mine], engine[theirs]), 4)
        comparison[mine] = {"plan": planned[mine], "vllm": engine[theirs], "off": off}
        if off > TOLERANCE and not explanations.get(mine):
            reasons.append(
                f"cookbook plan's {mine} {planned[mine]} is {off:.1%} off vLLM's {engine[theirs]}: more than "
                f"{TOLERANCE:.0%}, and the bundle does not explain it (--explain {mine}=...)"
            )
    record = {
        "record_format": RECORD_FORMAT,
        "recipe": resolved.slug,
        "recipe_hash": resolved.content_hash,
        "checkpoint": checkpoint,
        **({"card": card} if card else {}),
        "scaled_sets": sets,
        "geometry_sets": geometry,
        "geometry_from": geometry_from,
        "rc": rc,
        "answered_choices": n,
        "vllm": {"args": log["args"], "backends": log["backends"], "model_load_gib": log["model_load_gib"], **engine},
        "cache_config_info": parse_metrics(metrics),
        "comparison": comparison,
        "sequences": _sequences(plan, parse_metrics(metrics)),
        "explanations": dict(sorted(explanations.items())),
        "proves": "the engine accepts the flags, builds the architecture and fits the plan on this GPU kind",
        "does_not_prove": "quality, full-depth speed, multi-GPU communication",
    }
    return record, reasons


def _sequences(plan, cache_info: dict) -> dict:
    """Full max_model_len sequences the pool holds, each figure beside its source (informational: the
    tolerance applies to `comparison`)."""
    out = {
        "plan_full_length_seqs": plan.max_seqs_at_ctx,
        "plan_seq_gib": round(plan.seq_bytes_at_ctx / 2**30, 4),
    }
    try:
        out["vllm_scheduler_max_concurrency"] = round(float(cache_info["kv_cache_max_concurrency"]), 2)
    except (KeyError, ValueError):
        pass
    return out


def bundles(resolved) -> list[Path]:
    folder = resolved.path.parent / FOLDER
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder.is_dir() else []


def card_line(record: dict) -> str:
    """Where a record's run served, for a page: the card and the memory it was planned for ('' for a
    run from before cards were recorded)."""
    card = record.get("card")
    try:
        return f"{card['name']}, planned for its {int(card['device_mib']):,} MiB" if isinstance(card, dict) else ""
    except (ValueError, KeyError, TypeError):
        return ""


def is_bundle(folder: Path) -> bool:
    """A folder `write` made (its record and manifest beside the run files), not a raw run folder."""
    return (folder / RECORD).is_file() and (folder / MANIFEST).is_file()


def write(run: Path, resolved, explanations: dict[str, str], stamp: str | None = None) -> Path:
    """The bundle, written only when figures() finds nothing wrong; raises ValueError with every reason.

    `run` may be an existing bundle: its run files (untouched, by its manifest) are planned again, so
    vLLM's figures stay what that run measured and only the plan's side is recomputed; the new
    record says which bundle and run it came from (`rederived_from`)."""
    rederived = None
    if is_bundle(run):
        problems = check_manifest(run)
        try:
            old = json.loads(read_limited(run / RECORD, 1 << 20))
        except (ValueError, OSError) as e:
            problems.append(f"{RECORD} cannot be read ({e})")
            old = {}
        if problems:
            raise ValueError("the bundle's files are not the ones it recorded: " + "; ".join(problems))
        rederived = {
            "bundle": run.name,
            "run_date": old.get("date"),
            "recipe_hash_then": old.get("recipe_hash"),
            "note": "vLLM's figures are the ones that run measured (its server.log and metrics.prom, copied "
            "unchanged); only the plan's side was computed again, by the cookbook of this bundle's date",
        }
    record, reasons = figures(run, resolved, explanations)
    if reasons:
        raise ValueError("; ".join(reasons))
    if rederived:
        record["rederived_from"] = rederived
    dest = resolved.path.parent / FOLDER / (stamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    with atomic_dir(dest) as tmp:
        for f in (*RUN_FILES, ENV_FILE):
            if (run / f).is_file():
                shutil.copyfile(run / f, tmp / f)
        record["date"] = time.strftime("%Y-%m-%d", time.gmtime())
        (tmp / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / MANIFEST).write_text(json.dumps(manifest_of(tmp), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return dest


def status(resolved) -> tuple[str | None, list[str]]:
    """(ENGINE_CHECKED / STALE / REFUSED, the reasons) from the newest bundle; (None, []) without one."""
    word, reasons, _ = check(resolved)
    return word, reasons


def check(resolved) -> tuple[str | None, list[str], str]:
    """status(), and where the run served for a page (card_line), the record read once."""
    found = bundles(resolved)
    if not found:
        return None, [], ""
    bundle = found[-1]
    reasons = check_manifest(bundle)
    try:
        record = json.loads(read_limited(bundle / RECORD, 1 << 20))
    except (ValueError, OSError) as e:
        return REFUSED, [*reasons, f"{RECORD} cannot be read ({e})"], ""
    if not isinstance(record, dict) or record.get("record_format") != RECORD_FORMAT:
        return REFUSED, [*reasons, f"{RECORD} is not an engine-check record"], ""
    where = card_line(record)
    if record.get("recipe_hash") != resolved.content_hash:
        return STALE, [f"the recipe changed after the run ({bundle.name})"], where
    if reasons:
        return REFUSED, reasons, where
    again, reasons = figures(bundle, resolved, record.get("explanations") or {})
    for key in ("vllm", "comparison", "sequences", "rc", "answered_choices", "checkpoint", "card"):
        if again.get(key) != record.get(key):
            reasons.append(f"{RECORD}'s {key} is not what the bundle's files give")
    return (REFUSED, reasons, where) if reasons else (ENGINE_CHECKED, [], where)
