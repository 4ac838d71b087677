"""A quantized checkpoint against the float one, in transformers on the CPU: perplexity of both on
one text, the share of positions where their next-token argmax agrees, and the mean KL divergence.

    .venv/bin/python benchmarks/quant_quality.py FLOAT_DIR QUANT_DIR TEXT [--tokens 1024]

FLOAT_DIR is gguf-to-hf's checkpoint, QUANT_DIR gguf-to-w4a16's or gguf-to-w8a8's (transformers
decompresses compressed-tensors weights as it loads them). Both see the same token ids.
"""

from __future__ import annotations

import argparse
import math


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("float_dir")
    ap.add_argument("quant_dir")
    ap.add_argument("text")
    ap.add_argument("--tokens", type=int, default=1024)
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.float_dir)
    with open(a.text, encoding="utf-8") as f:
        ids = torch.tensor([tok(f.read()).input_ids[: a.tokens]])
    target = ids[0, 1:]

    def logits(path: str):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        with torch.no_grad():
            return torch.log_softmax(model(ids).logits[0, :-1].float(), -1)

    p, q = logits(a.float_dir), logits(a.quant_dir)
    ppl = [math.exp(torch.nn.functional.nll_loss(x, target).item()) for x in (p, q)]
    agree = (p.argmax(-1) == q.argmax(-1)).float().mean().item()
    kl = (p.exp() * (p - q)).sum(-1).mean().item()
    print(f"tokens {len(target)}  perplexity float {ppl[0]:.2f} quantized {ppl[1]:.2f}")
    print(f"next-token argmax agreement {agree:.3f}  mean KL(float || quantized) {kl:.4f}")


if __name__ == "__main__":
    main()
