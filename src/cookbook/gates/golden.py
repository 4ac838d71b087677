"""golden: lossless serving, checked teacher-forced against a recorded golden.

The GLM-5.2 NVFP4 document gates every piece of its stack as "lossless against a 64K-token
temp-0 teacher-forced golden": the served checkpoint reads one long text (no sampling at all:
prompt_logprobs), and at every position the token it ranks first, and the logprob it gives the
text's own token, must equal those recorded once on a reference server of the same checkpoint
(e.g. the same stack without speculation). A speculative server that is not lossless, a kernel
that changes numerics, or another checkpoint disagrees.

The text is the built-in prose put together in passes (cookbook.gates.data.long_sentences,
seeded), cut to `length_tokens` of the server's own tokenizer, so two servers of one checkpoint
read the same ids; the golden records the ids' sha256 and a mismatch is a failure, not a
comparison. Every run writes its own figures as golden.json in the bundle (that file, copied
to the data path's golden/ folder, is how a golden is recorded) and a copy of the reference it
compared with as golden-reference.json (recompute reads it; verify checks it is the file whose
sha256 the recipe pins in golden_sha256). A recipe that pins no golden_sha256 cannot pass this
gate: the golden would be whatever file the runner supplies, even one recorded from the server
under test.
"""

from __future__ import annotations

import hashlib
import json
import math

from cookbook.gates import data as gate_data
from cookbook.gates import gatedata
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body, read_json
from cookbook.gates.result import GateFailure
from cookbook.recipe.gates_spec.golden import GoldenGate

OWN, REFERENCE = "golden.json", "golden-reference.json"
FORMULAS = {
    "top1_agreement": "positions whose rank-1 prompt_logprobs token equals the golden's / positions compared",
    "mean_abs_logprob_diff": "mean over positions of |logprob of the text's token - the golden's|",
}


def ids_sha256(ids: list[int]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def file_sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def figures_of(ids: list[int], body: dict) -> dict:
    """top-1 ids and the text token's logprob at every position after the first, from prompt_logprobs."""
    plp = (body.get("choices") or [{}])[0].get("prompt_logprobs")
    if not isinstance(plp, list) or len(plp) != len(ids):
        raise ValueError(
            f"prompt_logprobs has {len(plp) if isinstance(plp, list) else 'no'} entries for {len(ids)} ids"
        )
    top1, logprob = [], []
    for tok, entry in zip(ids[1:], plp[1:]):
        own = entry.get(str(tok)) if isinstance(entry, dict) else None
        if not isinstance(own, dict) or not isinstance(own.get("logprob"), (int, float)):
            raise ValueError("a prompt_logprobs entry lacks the text's own token and its logprob")
        best = [k for k, v in entry.items() if isinstance(v, dict) and v.get("rank") == 1 and k.isdigit()]
        top1.append(int(best[0]) if best else None)
        logprob.append(float(own["logprob"]))
    return {"ids_sha256": ids_sha256(ids), "positions": len(top1), "top1": top1, "logprob": logprob}


def compare(own: dict, ref: dict) -> dict:
    if own["ids_sha256"] != ref.get("ids_sha256"):
        return {"same_text": False, "positions": 0, "top1_agreement": 0.0, "mean_abs_logprob_diff": None}
    pairs = list(zip(own["top1"], ref.get("top1") or []))
    diffs = [abs(a - b) for a, b in zip(own["logprob"], ref.get("logprob") or []) if math.isfinite(a - b)]
    return {
        "same_text": True,
        "positions": len(pairs),
        "top1_agreement": round(sum(a == b for a, b in pairs) / len(pairs), 6) if pairs else 0.0,
        "mean_abs_logprob_diff": round(sum(diffs) / len(diffs), 6) if diffs else None,
    }


def verdict(measured: dict, items: list[dict], cfg: GoldenGate) -> list[tuple[bool, str]]:
    agree, diff = measured.get("top1_agreement"), measured.get("mean_abs_logprob_diff")
    checks = [
        (
            measured.get("same_text") is True,
            "the text's token ids differ from the golden's (another tokenizer or text): nothing was compared",
        ),
        (
            measured.get("positions") == cfg.length_tokens - 1,
            f"{measured.get('positions')} positions compared, the gate reads {cfg.length_tokens - 1}",
        ),
        (
            isinstance(agree, (int, float)) and agree >= cfg.min_top1_agreement,
            f"top1_agreement {agree} < {cfg.min_top1_agreement} against the golden {cfg.golden}",
        ),
        (
            isinstance(diff, (int, float)) and diff <= cfg.max_mean_abs_logprob_diff,
            f"mean_abs_logprob_diff {diff} > {cfg.max_mean_abs_logprob_diff} against the golden {cfg.golden}",
        ),
    ]
    got = measured.get("reference_sha256")
    if cfg.golden_sha256 is None:
        # Unpinned, the golden is whatever file the runner supplies (even one recorded from the
        # server under test), so agreeing with it proves nothing: the gate cannot pass.
        checks.append(
            (
                False,
                f"the recipe pins no gates.golden.golden_sha256, so the golden compared with ({got}) is only "
                "the runner's word; record it on the reference server and pin its sha256 in the recipe",
            )
        )
    else:
        checks.append(
            (got == cfg.golden_sha256, f"the golden compared with has {got}, the recipe pins {cfg.golden_sha256}")
        )
    return checks


async def _text_ids(ctx: Context, cfg: GoldenGate) -> list[int]:
    sents = gate_data.haystack(ctx.data, gatedata.HAYSTACK)
    per_sentence = len(await ctx.server.tokenize(prompt=" ".join(sents[:200]))) / 200
    n = int(cfg.length_tokens / max(per_sentence, 1.0) * 1.3) + 20
    ids = await ctx.server.tokenize(prompt=" ".join(gate_data.long_sentences(sents, n, cfg.seed)))
    if len(ids) < cfg.length_tokens:
        raise GateFailure(f"the built-in prose gave {len(ids)} tokens, the gate reads {cfg.length_tokens}")
    return ids[: cfg.length_tokens]


def _reference_text(ctx: Context, cfg: GoldenGate) -> str:
    d = ctx.data.golden_dir
    f = d / cfg.golden if d else None
    # A plain file of the data folder only (the name is a bare file name, checked by the schema).
    if f is None or f.is_symlink() or not f.is_file():
        raise GateFailure(
            f"no recorded golden {cfg.golden} in {d or 'the data path (no --data-dir)'}/: run this gate once on the "
            f"reference server (same checkpoint, e.g. without speculation) and copy its bundle's {OWN} to "
            f"<data path>/golden/{cfg.golden}"
        )
    if f.stat().st_size > 64 << 20:
        raise GateFailure(f"{f} is over 64 MiB; a golden is a few MB")
    try:
        return f.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise GateFailure(f"the golden {cfg.golden} is not a golden.json (not UTF-8: {e.reason})") from None


async def run(ctx: Context, cfg: GoldenGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {
        "min_top1_agreement": cfg.min_top1_agreement,
        "max_mean_abs_logprob_diff": cfg.max_mean_abs_logprob_diff,
    }
    ctx.check_fits(cfg.length_tokens, 1, "golden text")
    ids = await _text_ids(ctx, cfg)
    body = {"prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 1}
    own = figures_of(ids, await ctx.server.post("/v1/completions", body, tag="text"))
    (ctx.out_dir / OWN).write_text(json.dumps(own) + "\n", encoding="utf-8")
    ref_text = _reference_text(ctx, cfg)
    (ctx.out_dir / REFERENCE).write_text(ref_text, encoding="utf-8")
    try:
        ref = json.loads(ref_text)
        if not isinstance(ref, dict):
            raise ValueError("not an object")
    except ValueError as e:
        raise GateFailure(f"the golden {cfg.golden} is not a golden.json ({e})") from None
    r.measured = {**compare(own, ref), "reference_sha256": file_sha256(ref_text)}
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: GoldenGate) -> tuple[dict, None]:
    rec = need(recorded.requests("golden"), "text")
    ids = rec["request"].get("prompt")
    if not isinstance(ids, list) or len(ids) != cfg.length_tokens or rec["request"].get("prompt_logprobs") != 1:
        raise ValueError(f"request 'text' is not a {cfg.length_tokens}-token prompt with prompt_logprobs 1")
    own = figures_of(ids, ok_body(rec))
    f = recorded.root / REFERENCE
    if not f.is_file():
        raise ValueError(f"{REFERENCE} is missing, so the comparison cannot be recomputed")
    ref_text = f.read_text(encoding="utf-8")
    ref = read_json(f)
    if not isinstance(ref, dict):
        raise ValueError(f"{REFERENCE} is not a golden")
    return {**compare(own, ref), "reference_sha256": file_sha256(ref_text)}, None
