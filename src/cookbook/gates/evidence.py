"""Re-check an evidence bundle: `verified` is earned from the evidence, never from its status strings.

`recheck(resolved, bundle)` lists every reason the bundle cannot stand behind the recipe:

- results.json's own claims (complete, every declared gate passed, this recipe's hash, an
  environment recorded: cookbook.gates.verify.refusals);
- the manifest: every file listed with its sha256 and size, present and unchanged, and no
  file that is not listed (a bundle without manifest.json is refused: it cannot be checked);
- the environment: environment.lock's sha256 equals the one in results.json, or an image
  digest of the form sha256:<64 hex>;
- recipe.resolved.json: its content hash, recomputed, equals results.json's and the recipe's;
- every declared gate: its measured values recomputed from the transcripts and saved
  /metrics snapshots where they hold the raw data (a disagreement with results.json is a
  refusal), then judged again by the gate's own verdict() against the recipe's CURRENT
  thresholds (not the bundle's copy of them).

What this cannot prove: that the server was really this model and engine. A server that
imitates one, or a bundle forged consistently from scratch, cannot be told apart without
attestation; that is why CI rebuilds the CPU recipe's evidence from scratch on every landing.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from cookbook.gates.bundle import MANIFEST, MANIFEST_FORMAT, RESULTS, bundle_files, sha256_file

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_FILE_BYTES = 256 << 20  # a transcript or results.json larger than this is not a gate run's


# ---- files -----------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name} is over {MAX_FILE_BYTES >> 20} MiB")
    return json.loads(path.read_text(encoding="utf-8"))


def check_manifest(root: Path) -> list[str]:
    """Every listed file present with its size and sha256; nothing unlisted; no links."""
    f = root / MANIFEST
    if not f.is_file():
        return [
            f"the bundle has no {MANIFEST} (sha256 of every file, written by `gates run` when it "
            "finishes), so its files cannot be checked; bundles written before the manifest existed "
            "are refused: run the gates again"
        ]
    try:
        man = _read_json(f)
        files = man["files"]
        if man.get("manifest_format") != MANIFEST_FORMAT or not isinstance(files, dict):
            raise ValueError(f"manifest_format {man.get('manifest_format')!r}, expected {MANIFEST_FORMAT}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        return [f"{MANIFEST} is not a bundle manifest ({e})"]
    out = []
    present = set(bundle_files(root))
    for rel, want in sorted(files.items()):
        p = root / rel
        if rel.startswith("/") or ".." in rel.split("/") or rel == MANIFEST:
            out.append(f"{MANIFEST} lists {rel!r}, which is not a path inside the bundle")
            continue
        if p.is_symlink() or not p.is_file():
            out.append(f"{rel} is listed in {MANIFEST} but {'is a link' if p.is_symlink() else 'missing'}")
            continue
        if not isinstance(want, dict) or p.stat().st_size != want.get("size") or sha256_file(p) != want.get("sha256"):
            out.append(f"{rel} differs from {MANIFEST} (edited after the run: size or sha256 changed)")
    for rel in sorted(present - set(files)):
        kind = "a link" if (root / rel).is_symlink() else "a file"
        out.append(f"{rel} is {kind} in the bundle that {MANIFEST} does not list (added after the run)")
    return out


def check_environment(root: Path, doc: dict) -> list[str]:
    env = doc.get("environment") or {}
    kind = env.get("kind")
    if kind == "image":
        digest = env.get("digest")
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            return [f"the image digest {digest!r} is not of the form sha256:<64 lowercase hex>"]
        return []
    if kind == "env-lock":
        want = env.get("sha256")
        if not isinstance(want, str) or not HEX64.fullmatch(want):
            return [f"results.json records the environment lock's sha256 as {want!r}, not 64 lowercase hex"]
        lock = root / "environment.lock"
        if lock.is_symlink() or not lock.is_file():
            return ["environment.lock is missing, though results.json records an environment lock"]
        got = sha256_file(lock)
        if got != want:
            return [f"environment.lock has sha256 {got}, results.json records {want} (the lock was edited)"]
        return []
    return []  # no environment at all: verify.refusals says so


def check_resolved(root: Path, doc: dict, resolved) -> list[str]:
    from cookbook.recipe.resolve import content_hash

    f = root / "recipe.resolved.json"
    if not f.is_file():
        return ["recipe.resolved.json is missing, so the recipe the gates ran on cannot be checked"]
    try:
        data = _read_json(f)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
    except (ValueError, UnicodeDecodeError) as e:
        return [f"recipe.resolved.json cannot be read ({e})"]
    got = content_hash({**data, "selected_quant": doc.get("quant")})
    out = []
    if got != doc.get("recipe_hash"):
        out.append(
            f"recipe.resolved.json hashes to {got}, results.json records {doc.get('recipe_hash')} "
            "(the resolved recipe was edited)"
        )
    if got != resolved.content_hash:
        out.append(f"recipe.resolved.json hashes to {got}, the recipe is now {resolved.content_hash}")
    return out


# ---- transcripts -------------------------------------------------------------------------------


def transcript(root: Path, gate: str) -> list[dict]:
    f = root / "transcripts" / f"{gate}.jsonl"
    if not f.is_file():
        raise ValueError(f"transcripts/{gate}.jsonl is missing")
    if f.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"transcripts/{gate}.jsonl is over {MAX_FILE_BYTES >> 20} MiB")
    out = []
    for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError(f"transcripts/{gate}.jsonl line {n} is not an object")
            out.append(rec)
    return out


def _tagged(records: list[dict], model: str | None) -> dict[str, dict]:
    """Request records by tag (the last one per tag); every request names the served model."""
    out = {}
    for rec in records:
        if "tag" not in rec or "request" not in rec:
            continue
        got = (rec.get("request") or {}).get("model")
        if model is not None and got != model:
            raise ValueError(f"request {rec['tag']!r} asked model {got!r}, the bundle's served model is {model!r}")
        out[rec["tag"]] = rec
    return out


def _need(recs: dict[str, dict], tag: str) -> dict:
    if tag not in recs:
        raise ValueError(f"no transcript record tagged {tag!r}")
    return recs[tag]


def _ok_body(rec: dict) -> dict:
    if rec.get("status") != 200 or not isinstance(rec.get("response"), dict):
        raise ValueError(f"request {rec.get('tag')!r} has no successful response (status {rec.get('status')})")
    return rec["response"]


def _stream(rec: dict):
    from cookbook.gates.client import Stream

    if rec.get("status") != 200 or not isinstance(rec.get("chunks"), list):
        raise ValueError(f"streamed request {rec.get('tag')!r} did not finish (status {rec.get('status')})")
    return Stream(chunks=[(c.get("t_s", 0.0), c) for c in rec["chunks"]], done_s=rec.get("elapsed_s") or 0.0)


def _time(rec: dict) -> float:
    return datetime.fromisoformat(rec["time"]).timestamp()


# Each recompute returns (measured values derived from the raw evidence, items or None).


def _greedy(root, doc, cfg, model):
    from cookbook.gates import greedy

    recs = _tagged(transcript(root, "greedy"), model)
    runs = []
    for i, prompt in enumerate(cfg.prompts):
        texts = []
        for k in range(cfg.repeats):
            rec = _need(recs, f"prompt{i}/run{k}")
            req = rec["request"]
            if req.get("messages") != [{"role": "user", "content": prompt}] or req.get("temperature") != 0.0:
                raise ValueError(f"request prompt{i}/run{k} is not the gate's prompt at temperature 0")
            texts.append(_ok_body(rec)["choices"][0]["message"].get("content") or "")
        runs.append(texts)
    scored = greedy.score(runs)
    return {"identical_prompts": sum(s["identical"] for s in scored), "prompts": len(scored)}, scored


def _logprobs(root, doc, cfg, model):
    from cookbook.gates import logprobs

    recs = _tagged(transcript(root, "logprobs"), model)
    items = []
    for i in range(cfg.requests):
        rec = _need(recs, f"request{i}")
        if rec["request"].get("top_logprobs") != cfg.top_logprobs or not rec["request"].get("logprobs"):
            raise ValueError(f"request{i} did not ask for {cfg.top_logprobs} top logprobs")
        items.append({"request": i, **logprobs.score_response(_ok_body(rec), cfg.top_logprobs, cfg.clamp_sentinel)})
    return {
        "tokens_checked": sum(s["tokens"] for s in items),
        "bad_tokens": sum(s["bad_tokens"] for s in items),
        "requests_ok": sum(s["ok"] for s in items),
        "requests": len(items),
    }, items


def _tools(root, doc, cfg, model):
    from cookbook.gates import tools

    recs = _tagged(transcript(root, "tools"), model)
    items = []
    for case in cfg.cases:
        for greedy in tools.SAMPLINGS[cfg.sampling]:
            mode = "greedy" if greedy else "sampled"
            values = {}
            for stream in tools.STREAMS[cfg.stream]:
                rec = _need(recs, f"{case}/{mode}/{'stream' if stream else 'plain'}")
                chunks = rec.get("chunks")
                if rec.get("status") != 200 or (stream and any("error" in c for c in chunks or [])):
                    problems, value = [f"server refused (status {rec.get('status')})"], None
                elif stream:
                    problems, value = tools.score_stream(case, [c for _, c in _stream(rec).chunks], greedy)
                else:
                    problems, value = tools.score_plain(case, _ok_body(rec), greedy)
                values[stream] = value
                if stream and greedy and False in values and not problems and values[False] is not None:
                    mismatch = tools.stream_mismatch(case, value, values[False])
                    if mismatch:
                        problems.append(mismatch)
                items.append(
                    {"case": case, "sampling": mode, "stream": stream, "passed": not problems, "problems": problems}
                )
    passed = sum(i["passed"] for i in items)
    return {
        "checks": len(items),
        "passed": passed,
        "passed_fraction": round(passed / len(items), 4) if items else 0,
        "failed_checks": [tools.label(i) for i in items if not i["passed"]],
    }, items


_NEEDLE = re.compile(r"The special magic number for the ([a-z ]+?) is (\d{7})\.")


def _needles(root, doc, cfg, model):
    from cookbook.gates import needles

    recs = _tagged(transcript(root, "needles"), model)
    items = []
    for filler in cfg.fillers:
        for L in cfg.lengths_tokens:
            for depth in cfg.depths_pct:
                rec = _need(recs, f"{filler}/{L}/{depth}")
                req, body = rec["request"], _ok_body(rec)
                choice = body["choices"][0]
                if cfg.mode == "completion":
                    prompt, content = req["prompt"], choice.get("text")
                    context = prompt.rsplit("\n\n", 1)[0]
                else:
                    prompt, content = req["messages"][0]["content"], (choice.get("message") or {}).get("content")
                    context = prompt.removeprefix("Read the text below carefully.\n\n").rsplit("\n\n", 1)[0]
                hidden = _NEEDLE.findall(context)
                if len(hidden) != cfg.codes_per_prompt:
                    raise ValueError(
                        f"request {rec['tag']!r} hides {len(hidden)} codes, the gate hides {cfg.codes_per_prompt}"
                    )
                hay = context
                for key, code in hidden:
                    hay = hay.replace(needles.needle_sentence(key, code), " ")
                items.append({"length_tokens": L, **needles.score(content, [c for _, c in hidden], hay)})
    hidden_n, found = sum(len(i["codes"]) for i in items), sum(i["found_count"] for i in items)
    by_len: dict[str, list[int]] = {}
    for i in items:
        d = by_len.setdefault(str(i["length_tokens"]), [0, 0])
        d[0] += i["found_count"]
        d[1] += len(i["codes"])
    return {
        "found_fraction": round(found / hidden_n, 4) if hidden_n else 0,
        "codes_found": found,
        "codes_hidden": hidden_n,
        "echoed_responses": sum(i["echoed"] for i in items),
        "found_by_length": {k: f"{a}/{b}" for k, (a, b) in by_len.items()},
    }, items


def _gsm8k(root, doc, cfg, model):
    """Answers re-extracted from the transcripts; the gold answers come from results.json's items
    (the test set is not in the bundle)."""
    from cookbook.gates import gsm8k

    recs = _tagged(transcript(root, "gsm8k"), model)
    claimed = {i.get("index"): i for i in (doc["gates"]["gsm8k"].get("items") or [])}
    items = []
    for i in range(cfg.n):
        rec = _need(recs, f"q{i}")
        choice = _ok_body(rec)["choices"][0]
        content = gsm8k.read_message(choice, cfg.reasoning_field)[0] if cfg.mode == "chat" else choice.get("text")
        gold = (claimed.get(i) or {}).get("gold")
        if not isinstance(gold, str):
            raise ValueError(f"results.json has no gold answer for problem {i}")
        item = {
            "index": i,
            **gsm8k.score_item(content, f"#### {gold}"),
            "content": content,
            "finish_reason": choice.get("finish_reason"),
        }
        items.append(item)
    n = len(items)
    return {
        "n": n,
        "accuracy_strict": round(sum(i["strict_correct"] for i in items) / n, 4),
        "accuracy_flexible": round(sum(i["flexible_correct"] for i in items) / n, 4),
        "truncated_fraction": round(sum(i["finish_reason"] == "length" for i in items) / n, 4),
        "null_content": sum(i["content"] is None for i in items),
    }, items


def _prom(root: Path, name: str) -> str:
    f = root / name
    if not f.is_file():
        raise ValueError(f"{name} is missing, so the /metrics figures cannot be recomputed")
    return f.read_text(encoding="utf-8")


def _spec_acceptance(root, doc, cfg, model):
    from cookbook.gates import metrics

    stats = metrics.spec_decode_stats(
        _prom(root, "spec_acceptance.metrics-before.prom"), _prom(root, "spec_acceptance.metrics-after.prom")
    )
    recs = _tagged(transcript(root, "spec_acceptance"), model)
    tokens = sum(
        (_ok_body(_need(recs, f"q{i}")).get("usage") or {}).get("completion_tokens") or 0 for i in range(cfg.requests)
    )
    measured = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()}
    return {**measured, "completion_tokens": tokens}, None


def _stress(root, doc, cfg, model):
    from cookbook.gates import stress

    recs = _tagged(transcript(root, "stress"), model)
    items, gaps_all, ends = [], [], []
    for i in range(cfg.decodes):
        rec = _need(recs, f"decode{i}")
        s = _stream(rec)
        gaps = stress.decode_gaps(s.token_times())
        gaps_all += gaps
        ends.append(_time(rec))
        items.append({"decode": i, "tokens": s.completion_tokens})
    sent = []
    for j in range(len(cfg.prefill_tokens)):
        rec = _need(recs, f"prefill{j}")
        _ok_body(rec)
        sent.append(_time(rec) - (rec.get("elapsed_s") or 0.0))
        items.append({"prefill": j})
    max_gap = round(max(gaps_all), 4) if gaps_all else float("inf")
    return {
        "max_decode_gap_s": max_gap,
        "prefill_overlapped_decodes": bool(sent) and any(e > min(sent) for e in ends),
    }, items


def _speed(root, doc, cfg, model):
    from cookbook.gates import metrics, speed

    recs = _tagged(transcript(root, "speed"), model)
    rows, prompts = [], []
    for c in cfg.sweep_concurrencies:
        level = [rec for tag, rec in recs.items() if tag.startswith(f"sweep{c}/")]
        for rec in level:
            req = rec["request"]
            if req.get("max_tokens") != cfg.sweep_max_tokens or req.get("temperature") != 0.0:
                raise ValueError(f"request {rec['tag']!r} is not a greedy {cfg.sweep_max_tokens}-token completion")
            prompts.append(req.get("prompt"))
        streams = [_stream(rec) for rec in level]
        # The level's duration: first send to last response, from the records' end times and elapsed.
        sent = [_time(rec) - (rec.get("elapsed_s") or 0.0) for rec in level]
        done = [_time(rec) for rec in level]
        duration = max(done) - min(sent) if level else 0.0
        rows.append({"concurrency": c, **speed.level_metrics(streams, duration)})
    m: dict[str, Any] = {
        "sweep": rows,
        "output_throughput": {str(row["concurrency"]): row["output_throughput"] for row in rows},
        "distinct_prompts": len({p for p in prompts if isinstance(p, str)}),
    }
    ttft = {}
    for n in cfg.ttft_prompts_tokens:
        rec = _need(recs, f"ttft{n}")
        if len(rec["request"].get("prompt") or []) != n:
            raise ValueError(f"the TTFT prompt tagged ttft{n} is not {n} tokens")
        v = _stream(rec).ttft_s
        ttft[str(n)] = round(v, 4) if v is not None else None
    m["ttft_s"] = ttft
    m["prefix_cache_hits_during_ttft"] = metrics.delta(
        _prom(root, "speed.metrics-before.prom"), _prom(root, "speed.metrics-after.prom"), "vllm:prefix_cache_hits"
    )
    return m, None


RECOMPUTE = {
    "greedy": _greedy,
    "logprobs": _logprobs,
    "tools": _tools,
    "needles": _needles,
    "gsm8k": _gsm8k,
    "spec_acceptance": _spec_acceptance,
    "stress": _stress,
    "speed": _speed,
}

# How closely a recomputed figure must match results.json: transcripts keep chunk times to
# 0.1 ms, so times and rates derived from them differ from the live figures in the last digit.
TOLERANCE = {
    "max_decode_gap_s": (1e-3, 0.0),
    # A level's duration is recomputed from the records' end times (1 ms) and elapsed (0.1 ms).
    "sweep": (0.5, 0.02),
    "output_throughput": (0.5, 0.02),
    "ttft_s": (1e-3, 0.0),
}


def _agree(claimed: Any, got: Any, abs_tol: float, rel_tol: float) -> bool:
    if isinstance(got, dict):
        return (
            isinstance(claimed, dict)
            and set(claimed) >= set(got)
            and all(_agree(claimed[k], v, abs_tol, rel_tol) for k, v in got.items())
        )
    if isinstance(got, list):
        return (
            isinstance(claimed, list)
            and len(claimed) == len(got)
            and all(_agree(a, b, abs_tol, rel_tol) for a, b in zip(claimed, got))
        )
    if isinstance(got, bool) or got is None or isinstance(got, str):
        return claimed == got and type(claimed) is type(got)
    if isinstance(got, (int, float)):
        if isinstance(claimed, bool) or not isinstance(claimed, (int, float)):
            return False
        if math.isinf(got) or math.isinf(claimed):
            return claimed == got
        return math.isclose(claimed, got, abs_tol=max(abs_tol, 1e-9), rel_tol=rel_tol)
    return claimed == got


def check_gates(root: Path, doc: dict, resolved) -> list[str]:
    """Every declared gate: figures recomputed from the raw evidence agree with results.json, and
    the gate's verdict() on them passes against the recipe's current thresholds."""
    out = []
    spec = resolved.recipe.gates
    model = doc.get("served_model_name")
    for name in spec.declared():
        g = (doc.get("gates") or {}).get(name)
        if not isinstance(g, dict) or g.get("status") != "passed":
            continue  # verify.refusals names it
        cfg = getattr(spec, name)
        claimed = g.get("measured") if isinstance(g.get("measured"), dict) else {}
        try:
            got, items = RECOMPUTE[name](root, doc, cfg, model)
        except Exception as e:  # a forged or damaged transcript: say what could not be read
            out.append(f"gate {name}: cannot recompute its figures from the bundle: {type(e).__name__}: {e}")
            continue
        for key, value in got.items():
            if key not in claimed:
                out.append(
                    f"gate {name}: results.json does not record {key}, which the raw evidence gives as "
                    f"{json.dumps(value)}"
                )
            else:
                tol = TOLERANCE.get(key, (0.0, 0.0))
                if not _agree(claimed[key], value, *tol):
                    out.append(
                        f"gate {name}: results.json says {key} = {json.dumps(claimed[key])}, "
                        f"the bundle's raw evidence gives {json.dumps(value)}"
                    )
        claimed_items = g.get("items") if isinstance(g.get("items"), list) else []
        module = importlib.import_module(f"cookbook.gates.{name}")
        # The evidence's figures (recomputed ones where the bundle holds the raw data), and, when
        # results.json claims other figures, those too: a 'passed' whose own numbers fail is refused.
        judged = [
            ("judged again from the raw evidence", {**claimed, **got}, items if items is not None else claimed_items)
        ]
        if {**claimed, **got} != {**got, **claimed}:
            judged.append(("its own recorded figures", {**got, **claimed}, claimed_items))
        for what, measured, its_items in judged:
            try:
                failures = [msg for ok, msg in module.verdict(measured, its_items, cfg) if not ok]
            except (TypeError, KeyError, ValueError, AttributeError) as e:
                failures = [f"its measured values cannot be judged ({type(e).__name__}: {e})"]
            if failures:
                out.append(
                    f"gate {name} says passed, but {what} fail the recipe's thresholds: " + "; ".join(failures)[:600]
                )
    return out


# ---- the whole re-check ------------------------------------------------------------------------


def recheck(resolved, bundle: Path) -> list[str]:
    """Every reason `bundle` cannot verify `resolved` (empty: it can)."""
    from cookbook.gates.verify import refusals

    root = Path(bundle)
    if not (root / RESULTS).is_file():
        return [f"{root}: no {RESULTS}, so not an evidence bundle"]
    try:
        doc = _read_json(root / RESULTS)
        if not isinstance(doc, dict) or not isinstance(doc.get("gates", {}), dict):
            raise ValueError("not a results mapping")
    except (ValueError, UnicodeDecodeError) as e:
        return [f"{RESULTS} cannot be read ({e})"]
    try:
        out = refusals(resolved, doc)
    except (AttributeError, TypeError) as e:
        out = [f"{RESULTS} is malformed ({type(e).__name__}: {e})"]
    out += check_manifest(root)
    out += check_environment(root, doc)
    out += check_resolved(root, doc, resolved)
    out += check_gates(root, doc, resolved)
    served = _served_name(resolved)
    if doc.get("served_model_name") != served:
        out.append(f"the bundle's server served {doc.get('served_model_name')!r}, the recipe serves {served!r}")
    return out


def _served_name(resolved) -> str:
    serve = resolved.recipe.serve
    return str(serve.arg("served_model_name") or serve.model)


def environment_of(doc: dict) -> str | None:
    """The `environment:` string the verified block records for this bundle."""
    env = doc.get("environment") or {}
    if env.get("kind") == "image":
        return f"image {env.get('digest')}"
    if env.get("kind") == "env-lock":
        return f"env-lock sha256:{env.get('sha256')}"
    return None


def bundle_path(ref: str) -> Path:
    """A verified block's `bundle:`, relative to the checkout root (or the recipes folder's parent)."""
    from cookbook.recipe import paths

    p = Path(ref)
    if p.is_absolute():
        return p
    root = paths.repo_root() / p
    return root if root.exists() else paths.recipes_dir().parent / p


def _code_fingerprint() -> str:
    """sha256 over the gate suite's source: a cached re-check is valid only for the code that made it."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _cache_file(root: Path, resolved) -> Path:
    """Where a passed re-check is remembered: keyed by the manifest's sha256 (which pins every file's
    sha256), the recipe's content hash and the checking code."""
    import hashlib

    from cookbook.recipe import paths

    key = hashlib.sha256(
        "\0".join([sha256_file(root / MANIFEST), resolved.content_hash, _code_fingerprint()]).encode()
    ).hexdigest()
    return paths.repo_root() / ".cache" / "evidence" / f"{key}.passed"


def block_problem(resolved, cached: bool = False) -> tuple[str, list[str]] | None:
    """None when the recipe's verified block names a present bundle that passes the re-check and
    agrees with the block; else ('bundle missing' | 'bundle refused', reasons).

    cached=True (list, lint, docs): a full re-check that passed is remembered under .cache/evidence/;
    the files are still checked against the manifest every time, so an edit is seen at once."""
    block = resolved.recipe.verified
    if not block.bundle:
        return "bundle missing", ["the verified block names no bundle"]
    path = bundle_path(block.bundle)
    if not (path / RESULTS).is_file():
        return "bundle missing", [f"the verified block's bundle {block.bundle} is not there"]
    try:
        doc = _read_json(path / RESULTS)
    except (ValueError, UnicodeDecodeError) as e:
        return "bundle refused", [f"{RESULTS} cannot be read ({e})"]
    if not isinstance(doc, dict) or block.environment != environment_of(doc):
        return "bundle refused", [
            f"the verified block records environment {block.environment!r}, the bundle "
            f"{environment_of(doc) if isinstance(doc, dict) else None!r}"
        ]
    if cached:
        reasons = check_manifest(path)
        if reasons:
            return "bundle refused", reasons
        memo = _cache_file(path, resolved)
        if memo.is_file():
            return None
    reasons = recheck(resolved, path)
    if reasons:
        return "bundle refused", reasons
    if cached:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            memo.write_text(f"{path}\n", encoding="utf-8")
        except OSError:
            pass  # a read-only checkout just re-checks every time
    return None
