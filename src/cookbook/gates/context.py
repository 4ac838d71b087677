"""What a gate receives: the server, the data paths, its result (filled as it goes) and helpers."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cookbook.gates import data as gate_data
from cookbook.gates.client import Server
from cookbook.gates.result import GateFailure, GateResult


@dataclass
class Context:
    server: Server
    data: gate_data.DataPaths
    out_dir: Path
    result: GateResult
    max_model_len: int | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    def check_fits(self, prompt_tokens: int, max_tokens: int, what: str) -> None:
        if self.max_model_len and prompt_tokens + max_tokens > self.max_model_len:
            raise GateFailure(
                f"{what}: {prompt_tokens} prompt + {max_tokens} completion tokens exceed the served "
                f"max_model_len {self.max_model_len}; lower the gate's lengths or raise --max-model-len"
            )

    async def source_token_ids(self) -> list[int]:
        """A long run of natural-text token ids, tokenized once: moby-dick.txt from the data path's
        haystack/ if there, else the prose that ships with the cookbook (about 16K Gemma 3 tokens)."""
        if "source_ids" not in self.cache:
            try:
                sents = gate_data.haystack(self.data, "moby-dick.txt")
                text = " ".join(sents[200:4000])
            except GateFailure:
                from cookbook.gates import gatedata

                text = " ".join(gate_data.haystack(self.data, gatedata.HAYSTACK))
            self.cache["source_ids"] = await self.server.tokenize(prompt=text)
        return self.cache["source_ids"]

    async def uncached_prompt_ids(self, n_tokens: int, rng: random.Random) -> list[int]:
        """Exactly n_tokens prompt ids starting with a random prefix, so the prefix cache cannot hit."""
        src = await self.source_token_ids()
        # uuid4, not the seeded rng: two gates with the same seed must still not share a prefix.
        prefix = await self.server.tokenize(prompt=f"Request {uuid.uuid4()}. ")
        need = n_tokens - len(prefix)
        ids = list(prefix)
        while need > 0:
            start = rng.randrange(0, max(1, len(src) - min(need, len(src))))
            take = src[start : start + need]
            ids += take
            need -= len(take)
        return ids[:n_tokens]
