"""A finished gate run read back from its bundle: what each gate's recompute() reads.

A gate's `recompute(run, cfg)` (beside its `run` and `verdict`) computes its measured figures
again from a RecordedRun: the requests and responses of transcripts/<gate>.jsonl (or its gzip)
by tag, and the /metrics snapshots saved beside them. Everything here reads at most
MAX_FILE_BYTES a file and raises ValueError, naming what it could not read, on anything that
is not what the run wrote; the evidence re-check (cookbook.evidence) turns that into a refusal.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 256 << 20  # a transcript or results.json larger than this is not a gate run's


def read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name} is over {MAX_FILE_BYTES >> 20} MiB")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:  # thousands of nested brackets: a forgery, refused like any bad JSON
        raise ValueError(f"{path.name} nests too deeply to be a bundle file") from None


def transcript(root: Path, gate: str) -> list[dict]:
    """A gate's transcript: transcripts/<gate>.jsonl, or its gzip (`cookbook gates compact`), read
    to at most MAX_FILE_BYTES either way."""
    f = root / "transcripts" / f"{gate}.jsonl"
    gz = f.with_name(f.name + ".gz")
    if f.is_file():
        if f.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"transcripts/{gate}.jsonl is over {MAX_FILE_BYTES >> 20} MiB")
        raw = f.read_bytes()
    elif gz.is_file():
        try:
            with gzip.open(gz, "rb") as fh:
                raw = fh.read(MAX_FILE_BYTES + 1)
        except (OSError, EOFError) as e:
            raise ValueError(f"transcripts/{gate}.jsonl.gz is not a gzip file ({e})") from None
        if len(raw) > MAX_FILE_BYTES:
            raise ValueError(f"transcripts/{gate}.jsonl.gz holds over {MAX_FILE_BYTES >> 20} MiB")
    else:
        raise ValueError(f"transcripts/{gate}.jsonl is missing")
    out = []
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
            except RecursionError:
                raise ValueError(f"transcripts/{gate}.jsonl line {n} nests too deeply") from None
            if not isinstance(rec, dict):
                raise ValueError(f"transcripts/{gate}.jsonl line {n} is not an object")
            out.append(rec)
    return out


@dataclass
class RecordedRun:
    """A bundle's folder and its results.json (already read)."""

    root: Path
    doc: dict

    def requests(self, gate: str) -> dict[str, dict]:
        """The gate's request records by tag (the last one per tag); every request names the
        bundle's served model."""
        model = self.doc.get("served_model_name")
        out = {}
        for rec in transcript(self.root, gate):
            if "tag" not in rec or "request" not in rec:
                continue
            got = (rec.get("request") or {}).get("model")
            if model is not None and got != model:
                raise ValueError(f"request {rec['tag']!r} asked model {got!r}, the bundle's served model is {model!r}")
            out[rec["tag"]] = rec
        return out

    def metrics(self, name: str) -> str:
        """A saved /metrics snapshot (Prometheus text), e.g. speed.metrics-before.prom."""
        f = self.root / name
        if not f.is_file():
            raise ValueError(f"{name} is missing, so the /metrics figures cannot be recomputed")
        return f.read_text(encoding="utf-8")


def need(recs: dict[str, dict], tag: str) -> dict:
    if tag not in recs:
        raise ValueError(f"no transcript record tagged {tag!r}")
    return recs[tag]


def ok_body(rec: dict) -> dict:
    """A plain request's response body; it must have succeeded."""
    if rec.get("status") != 200 or not isinstance(rec.get("response"), dict):
        raise ValueError(f"request {rec.get('tag')!r} has no successful response (status {rec.get('status')})")
    return rec["response"]


def stream_of(rec: dict):
    """A streamed request's chunks as the client's Stream; it must have finished."""
    from cookbook.gates.client import Stream  # lazy: `cookbook list` re-checks without the HTTP client

    if rec.get("status") != 200 or not isinstance(rec.get("chunks"), list):
        raise ValueError(f"streamed request {rec.get('tag')!r} did not finish (status {rec.get('status')})")
    return Stream(chunks=[(c.get("t_s", 0.0), c) for c in rec["chunks"]], done_s=rec.get("elapsed_s") or 0.0)


def end_time(rec: dict) -> float:
    """When the response finished (the record's time), as a Unix timestamp."""
    return datetime.fromisoformat(rec["time"]).timestamp()


def sent_time(rec: dict) -> float:
    """When the request was sent: its end time less its elapsed seconds."""
    return end_time(rec) - (rec.get("elapsed_s") or 0.0)


def level_window_s(recs: list[dict]) -> float:
    """A load level's duration: its first send to its last response, from the records' end times
    (ISO, 1 ms) and elapsed seconds (0.1 ms). The speed gate times a level live by this same rule
    (speed._timed_level), so results.json and `gates verify`'s recomputation agree by construction:
    a wall clock around the whole level also counts the client's own tail after the last response
    (69 ms of a 2.47 s level at 256 streams on an H100, 2026-12-07: 2.8%, past verify's 2%)."""
    if not recs:
        return 0.0
    return max(end_time(rec) for rec in recs) - min(sent_time(rec) for rec in recs)
