"""Run a recipe's declared gates against a live server, one gate at a time, into a bundle."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cookbook.gates.bundle import Bundle
from cookbook.gates.client import RequestTimeout, Server, ServerDown, ServerError, Transcript
from cookbook.gates.context import Context
from cookbook.gates.data import DataPaths
from cookbook.gates.registry import gate_module
from cookbook.gates.result import GateFailure, GateResult
from cookbook.gates.server_reported import reported
from cookbook.recipe.gates_spec import GATE_NAMES, GatesSpec


@dataclass
class SuiteConfig:
    base_url: str
    model: str
    spec: GatesSpec
    out_dir: Path
    data: DataPaths = field(default_factory=DataPaths)
    only: list[str] | None = None
    header: dict[str, Any] = field(default_factory=dict)  # recipe slug, hash, resolved data...
    env_lock_text: str | None = None
    env_lock_source: str | None = None
    image_digest: str | None = None
    image: dict[str, str] | None = None  # ref, id, digest of the serving image
    request_timeout_s: float = 300.0
    # The whole suite's deadline; None: the declared gates' timeout_s added up, plus SUITE_SLACK_S.
    suite_timeout_s: float | None = None
    echo: Callable[[str], None] = print


async def _probe(server: Server) -> list[dict]:
    body = await asyncio.wait_for(server.get_json("/v1/models"), timeout=15)
    data = body.get("data", []) if isinstance(body, dict) else []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


PREFLIGHT_TIMEOUT_S = 15.0


def unreachable(base_url: str, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """Why nothing answers GET /v1/models at base_url (connection refused, dropped, no answer in
    timeout_s); None when something does (even an HTTP error: that server is there, and the suite
    records what it says). `gates run` asks before it writes any bundle."""

    async def ask() -> None:
        server = Server(base_url, "", timeout_s)
        try:
            await _probe(server)
        except ServerError:
            pass
        finally:
            await server.aclose()

    try:
        asyncio.run(ask())
    except (ServerDown, RequestTimeout, asyncio.TimeoutError) as e:
        return str(e) or f"no answer in {timeout_s:g} s"
    return None


# Time for the preflight probes and snapshots around the gates, on top of their own limits.
SUITE_SLACK_S = 120.0


# After a gate timed out, one token must come back within this before the next gate runs: a server
# whose API answers but whose engine stalls would otherwise hold every later gate to its full timeout.
STALL_PROBE_S = 60.0


async def _answers_a_token(server: Server) -> str | None:
    """None when a 1-token completion comes back within STALL_PROBE_S; else why not. Sent outside
    any transcript, so no gate's evidence holds it."""
    body = {"model": server.model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0}
    try:
        r = await asyncio.wait_for(server._send("POST", "/v1/completions", json=body), timeout=STALL_PROBE_S)
    except (ServerDown, RequestTimeout, asyncio.TimeoutError) as e:
        return str(e) or f"no answer within {STALL_PROBE_S:g} s"
    return None if r.status_code == 200 else f"HTTP {r.status_code}"


class SuiteDeadline(Exception):
    """The suite's own deadline passed while a gate ran."""


async def _run_gate(name: str, cfg_gate, ctx: Context, left_s: float) -> None:
    try:
        await asyncio.wait_for(gate_module(name).run(ctx, cfg_gate), timeout=min(cfg_gate.timeout_s, left_s))
    except asyncio.TimeoutError:
        if left_s < cfg_gate.timeout_s:  # the suite's deadline came first
            raise SuiteDeadline from None
        raise


async def run_suite(cfg: SuiteConfig) -> Bundle:
    declared = cfg.spec.declared()
    if not declared:  # refused before any bundle is written (`gates run` says so first)
        raise GateFailure("the recipe declares no gates, so there is nothing to run")
    bundle = Bundle(
        cfg.out_dir,
        {
            "base_url": cfg.base_url,
            "served_model_name": cfg.model,
            "declared_gates": declared,
            "only": cfg.only,
            **cfg.header,
        },
    )
    bundle.set_environment(
        lock_text=cfg.env_lock_text, source=cfg.env_lock_source, image_digest=cfg.image_digest, image=cfg.image
    )
    server = Server(cfg.base_url, cfg.model, cfg.request_timeout_s)
    try:
        return await _run(cfg, declared, bundle, server)
    finally:
        server.transcript.close()
        await server.aclose()


def _not_run(bundle: Bundle, names: list[str], reason: str, fault: str, echo) -> None:
    """Each gate recorded as not run; one line says so for all of them (not the reason once a gate)."""
    names = [n for n in names if n not in bundle.doc["gates"]]
    for name in names:
        bundle.record(GateResult(name=name, status="failed", reason=f"not run: {reason}", fault=fault))
    if names:
        echo(
            f"  {', '.join(names)}: failed, not run: {reason}"
            if len(names) > 1
            else f"  {names[0]:<16} failed   not run: {reason}"
        )


async def _preflight(cfg: SuiteConfig, declared: list[str], bundle: Bundle, server: Server) -> tuple[bool, Any]:
    """Reachable, and serving the recipe's model name: (True, its max_model_len), the server's own
    files written into the bundle; else (False, None), every gate recorded as not run and the bundle finished."""
    echo = cfg.echo
    try:
        models = await _probe(server)
    except (ServerDown, ServerError, RequestTimeout, asyncio.TimeoutError) as e:
        reason = f"server at {cfg.base_url} is not answering /v1/models ({e or 'timeout'}); start it first"
        _not_run(bundle, declared, reason, "server_down", echo)
        bundle.finish(fault="server_down")
        return False, None
    bundle.write_json("models.json", models)
    served = [m.get("id") for m in models]
    if cfg.model not in served:
        reason = (
            f"server serves {served}, the recipe's served_model_name is {cfg.model!r}; "
            "launch with --served-model-name or point --base-url at the right server"
        )
        _not_run(bundle, declared, reason, "wrong_model", echo)
        bundle.finish(fault="wrong_model")
        return False, None
    max_len = next((m.get("max_model_len") for m in models if m.get("id") == cfg.model), None)
    try:
        bundle.write_json("version.json", await server.get_json("/version"))
    except (ServerError, ServerDown, RequestTimeout, ValueError):
        pass
    try:
        bundle.write_text("metrics-before.prom", await server.get_text("/metrics"))
    except (ServerDown, ServerError, RequestTimeout) as e:
        bundle.doc["metrics_before_error"] = str(e)  # not every OpenAI-compatible server has /metrics
    # What the server says of its own configuration; `verify` checks it against the recipe.
    try:
        bundle.doc["server_reported"] = reported(bundle.root, cfg.model)
    except (ValueError, UnicodeDecodeError, OSError) as e:
        bundle.doc["server_reported"] = {"error": str(e)[:300]}
    return True, max_len


@dataclass
class _Loop:
    """What the gates before this one left: the fault that stops or checks the next, and the deadline."""

    budget_s: float
    deadline: float
    fault: str | None = None
    stalled_why: str = ""


async def _skip(cfg: SuiteConfig, name: str, bundle: Bundle, server: Server, loop: _Loop) -> bool:
    """Whether gate `name` does not run (recorded so) after what the earlier gates left."""
    echo = cfg.echo
    if loop.fault == "suite_deadline":
        _not_run(bundle, [name], f"the suite's deadline ({loop.budget_s:g} s) had passed", "suite_deadline", echo)
        return True
    if cfg.only and name not in cfg.only:
        bundle.record(GateResult(name=name, status="skipped", reason="not selected (--only)"))
        echo(f"  {name:<16} skipped  not selected (--only)")
        return True
    if loop.fault == "server_down":
        try:
            await _probe(server)
            loop.fault = None
        except (ServerDown, ServerError, RequestTimeout, asyncio.TimeoutError):
            _not_run(bundle, [name], "the server went down during an earlier gate", "server_down", echo)
            return True
    if loop.fault == "timed_out":  # the last gate timed out: is the engine still answering at all?
        why = await _answers_a_token(server)
        loop.fault = None if why is None else "server_stalled"
        loop.stalled_why = why
    if loop.fault == "server_stalled":
        _not_run(
            bundle,
            [name],
            f"the server stopped answering: after a gate timed out, a 1-token completion got no answer ({loop.stalled_why})",
            "server_stalled",
            echo,
        )
        return True
    return False


async def _gate(cfg: SuiteConfig, name: str, bundle: Bundle, server: Server, loop: _Loop, max_len) -> None:
    """Run gate `name`, its transcript and result into the bundle; a fault it ends with goes into `loop`."""
    echo, gate_cfg = cfg.echo, getattr(cfg.spec, name)
    result = GateResult(name=name, thresholds={})
    server.transcript.close()
    server.transcript = Transcript(bundle.path(f"transcripts/{name}.jsonl"))
    server.extra = dict(gate_cfg.request_extra)
    ctx = Context(server=server, data=cfg.data, out_dir=bundle.root, result=result, max_model_len=max_len)
    echo(f"  {name:<16} running ...")
    t0 = time.perf_counter()
    try:
        await _run_gate(name, gate_cfg, ctx, loop.deadline - time.monotonic())
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Interrupted (Ctrl-C): the running gate is recorded as failed, and the bundle stays
        # incomplete, so it can never verify.
        result.status, result.fault = "failed", "interrupted"
        result.reason = f"interrupted while running; {len(result.items)} items kept"
        result.wall_s = round(time.perf_counter() - t0, 2)
        bundle.record(result)
        bundle.doc["fault"] = "interrupted"
        bundle.save()
        echo(f"  {name:<16} failed   interrupted")
        raise
    except SuiteDeadline:
        result.status, result.fault, loop.fault = "failed", "suite_deadline", "suite_deadline"
        result.reason = (
            f"the suite's deadline ({loop.budget_s:g} s, --suite-timeout-s) passed while it ran; "
            f"{len(result.items)} items kept"
        )
    except asyncio.TimeoutError:
        result.status, result.fault, loop.fault = "failed", "timeout", "timed_out"
        result.reason = f"timed out after {gate_cfg.timeout_s:g} s (timeout_s); {len(result.items)} items kept"
    except ServerDown as e:
        result.status, result.fault, loop.fault = "failed", "server_down", "server_down"
        result.reason = f"server connection lost: {e}"
    except RequestTimeout as e:
        result.status, result.fault, loop.fault = "failed", "request_timeout", "timed_out"
        result.reason = f"{e} (--request-timeout-s); {len(result.items)} items kept"
    except GateFailure as e:
        result.status, result.fault, result.reason = "failed", "cannot_run", str(e)
    except ServerError as e:
        result.status, result.fault, result.reason = "failed", "server_error", f"server error: {e}"
    except Exception as e:  # a malformed response or a bug: keep the evidence, say where
        result.status, result.fault = "failed", "error"
        result.reason = f"unexpected {type(e).__name__}: {e}"
        bundle.write_text(f"error-{name}.txt", traceback.format_exc())
    result.wall_s = round(time.perf_counter() - t0, 2)
    bundle.record(result)
    echo(f"  {name:<16} {result.status:<8} {result.wall_s:>8.1f} s  {result.reason[:160]}")


async def _run(cfg: SuiteConfig, declared: list[str], bundle: Bundle, server: Server) -> Bundle:
    ready, max_len = await _preflight(cfg, declared, bundle, server)
    if not ready:
        return bundle
    budget_s = cfg.suite_timeout_s or sum(getattr(cfg.spec, n).timeout_s for n in declared) + SUITE_SLACK_S
    loop = _Loop(budget_s, time.monotonic() + budget_s)
    for name in declared:
        if not await _skip(cfg, name, bundle, server, loop):
            await _gate(cfg, name, bundle, server, loop, max_len)
    try:
        bundle.write_text("metrics-after.prom", await server.get_text("/metrics"))
    except (ServerDown, ServerError, RequestTimeout) as e:
        bundle.doc["metrics_after_error"] = str(e)
    bundle.finish(fault=None if loop.fault == "timed_out" else loop.fault)
    return bundle


def summary_table(doc: dict) -> str:
    rows = [("gate", "status", "wall s", "reason / key figures")]
    for name in GATE_NAMES:
        g = doc["gates"].get(name)
        if not g:
            continue
        figures = ", ".join(
            f"{k}={v}" for k, v in g["measured"].items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)
        )[:90]
        text = g["reason"] if g["status"] != "passed" else figures
        rows.append((name, g["status"], f"{g['wall_s']:.1f}", text[:110]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * (sum(widths) + 6 + 40))
    return "\n".join(lines)


def exit_code(doc: dict) -> int:
    return 1 if any(g["status"] == "failed" for g in doc["gates"].values()) else 0
