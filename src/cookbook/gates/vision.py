"""vision: an image request answered from the picture.

Each request sends one built-in picture, a 64x64 PNG of one plain colour made here (so the
gate needs no file and no network: the SlimServe document's example points at a web image an
offline host cannot fetch), as a data: URL in an OpenAI `image_url` content part, and asks for
its colour in one word. An answer naming the colour counts; a server that drops the image
cannot know it (the colours are drawn with the gate's seed).
"""

from __future__ import annotations

import base64
import random
import re
import struct
import zlib

from cookbook.gates.client import bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.recipe.gates_spec.vision import VisionGate

COLOURS = {
    "red": (220, 20, 20),
    "green": (20, 170, 40),
    "blue": (20, 40, 220),
    "yellow": (240, 220, 20),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "orange": (250, 140, 0),
    "purple": (130, 30, 160),
}
QUESTION = "What colour fills this image? Answer with one word."
FORMULAS = {"correct_fraction": "answers whose content names the picture's colour (a whole word) / requests"}


def png(rgb: tuple[int, int, int], size: int = 64) -> bytes:
    """A size x size PNG of one colour (8-bit RGB, no filter)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def data_url(colour: str) -> str:
    return "data:image/png;base64," + base64.b64encode(png(COLOURS[colour])).decode()


def colours_for(cfg: VisionGate) -> list[str]:
    rng = random.Random(cfg.seed)
    return [rng.choice(sorted(COLOURS)) for _ in range(cfg.requests)]


def body_for(colour: str, cfg: VisionGate) -> dict:
    content = [{"type": "image_url", "image_url": {"url": data_url(colour)}}, {"type": "text", "text": QUESTION}]
    return {"messages": [{"role": "user", "content": content}], "temperature": 0.0, "max_tokens": cfg.max_tokens}


def item_of(colour: str, content) -> dict:
    text = content if isinstance(content, str) else ""
    named = [c for c in COLOURS if re.search(rf"\b{c}\b", text.lower())]
    return {"colour": colour, "answer": text[-200:], "correct": colour in named and len(named) == 1}


def measure(items: list[dict]) -> dict:
    n = len(items)
    return {"requests": n, "correct_fraction": round(sum(i["correct"] for i in items) / n, 4) if n else 0.0}


def verdict(measured: dict, items: list[dict], cfg: VisionGate) -> list[tuple[bool, str]]:
    n, frac = measured.get("requests"), measured.get("correct_fraction")
    wrong = [f"{i.get('colour')}: {str(i.get('answer'))[:60]!r}" for i in items if not i.get("correct")]
    return [
        (n == cfg.requests, f"{n} requests measured, the gate sends {cfg.requests}"),
        (
            isinstance(frac, (int, float)) and frac >= cfg.min_correct_fraction,
            f"correct_fraction {frac} < {cfg.min_correct_fraction}; wrong: {'; '.join(wrong[:4])}",
        ),
    ]


async def run(ctx: Context, cfg: VisionGate) -> None:
    r = ctx.result
    r.formulas, r.thresholds = FORMULAS, {"min_correct_fraction": cfg.min_correct_fraction}

    async def one(i: int, colour: str) -> dict:
        body = await ctx.server.post("/v1/chat/completions", body_for(colour, cfg), tag=f"image{i}")
        item = {"image": i, **item_of(colour, (body["choices"][0].get("message") or {}).get("content"))}
        r.items.append(item)
        return item

    items = await bounded_gather(cfg.max_concurrent_requests, [one(i, c) for i, c in enumerate(colours_for(cfg))])
    r.measured = measure(items)
    r.judge(verdict(r.measured, items, cfg))


def recompute(recorded: RecordedRun, cfg: VisionGate) -> tuple[dict, list[dict]]:
    recs = recorded.requests("vision")
    items = []
    for i, colour in enumerate(colours_for(cfg)):
        rec = need(recs, f"image{i}")
        if rec["request"].get("messages") != body_for(colour, cfg)["messages"]:
            raise ValueError(f"request image{i} does not carry the gate's picture and question")
        content = (ok_body(rec)["choices"][0].get("message") or {}).get("content")
        items.append({"image": i, **item_of(colour, content)})
    return measure(items), items
