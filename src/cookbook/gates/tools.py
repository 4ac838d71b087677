"""tools: tool_choice required / named / auto / none and a json_schema response_format.

Each case runs greedy and sampled, non-streamed and streamed (as the recipe says).
Arguments are compared as parsed JSON, never as strings. Greedy runs must produce the
expected call and their streamed form, assembled from deltas, must equal the non-streamed
one; sampled runs are checked for validity only (speculative decoding and batching make
sampled text legitimately differ).
"""

from __future__ import annotations

import json
from typing import Any

from cookbook.gates.client import ServerError, bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body, stream_of
from cookbook.recipe.gates_spec.tools import ToolsGate

WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": WEATHER_PARAMS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current time in a timezone.",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
        },
    },
]
TOOL_PROMPT = "What is the weather like in Paris right now? Use celsius."
EXPECTED_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}

EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
EXTRACT_PROMPT = (
    "Extract the city and the temperature unit from this sentence as JSON: 'How warm is it in Paris today, in celsius?'"
)
EXPECTED_JSON = {"city": "Paris", "unit": "celsius"}

FORMULAS = {
    "passed_fraction": "passed checks / checks; a check is one (case, streamed?, greedy|sampled) request",
    "argument_match": "json.loads(arguments) == expected, string values compared stripped and case-folded",
    "stream_equals_non_stream": "tool calls assembled from streamed deltas (name once, argument fragments "
    "concatenated) == non-streamed calls, as parsed JSON (greedy only)",
}


def schema_errors(value: Any, schema: dict, where: str = "$") -> list[str]:
    """Every way `value` breaks JSON Schema `schema` (all of draft 2020-12, by jsonschema), one line each."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{where}{e.json_path[1:]}: {e.message}" for e in errors]


def canon(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canon(v) for v in value]
    return value


def parse_calls(raw_calls: list[dict] | None) -> tuple[list[dict], list[str]]:
    """[{name, arguments(parsed)}] and problems (unparseable arguments, missing names)."""
    calls, problems = [], []
    for i, c in enumerate(raw_calls or []):
        fn = c.get("function") or {}
        name, args = fn.get("name"), fn.get("arguments")
        if not name:
            problems.append(f"call {i}: no function name")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except (json.JSONDecodeError, TypeError):
            problems.append(f"call {i}: arguments are not JSON: {args!r}")
            parsed = None
        if parsed is not None and not isinstance(parsed, dict):
            problems.append(f"call {i}: arguments are {type(parsed).__name__}, not an object")
        calls.append({"name": name, "arguments": parsed, "id": c.get("id")})
    return calls, problems


def assemble_stream(chunks: list[dict]) -> dict:
    """Rebuild a message from streamed deltas: content, tool calls by index, finish reasons."""
    content, calls, finishes, name_events = [], {}, [], {}
    for ch in chunks:
        for choice in ch.get("choices", []):
            if choice.get("finish_reason"):
                finishes.append(choice["finish_reason"])
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", 0), {"id": None, "function": {"name": None, "arguments": ""}})
                if tc.get("id") and not slot["id"]:
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    name_events[tc.get("index", 0)] = name_events.get(tc.get("index", 0), 0) + 1
                    slot["function"]["name"] = fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
    return {
        "content": "".join(content) if content else None,
        "tool_calls": [calls[i] for i in sorted(calls)] or None,
        "finish_reasons": finishes,
        "name_events": name_events,
    }


def check_message(case: str, msg: dict, finish_reason: str | None, greedy: bool) -> tuple[list[str], Any]:
    """Problems with one response for a case, and the parsed value compared across stream modes."""
    problems: list[str] = []
    tools_by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    if case == "none":
        if msg.get("tool_calls"):
            problems.append("tool_choice none produced tool calls")
        if not (msg.get("content") or "").strip():
            problems.append("tool_choice none produced no content")
        return problems, msg.get("content")
    if case == "json_schema":
        try:
            value = json.loads(msg.get("content") or "")
        except json.JSONDecodeError:
            return [f"content is not JSON: {(msg.get('content') or '')[:200]!r}"], None
        problems += schema_errors(value, EXTRACT_SCHEMA)
        if greedy and not problems and canon(value) != canon(EXPECTED_JSON):
            problems.append(f"JSON {value} != expected {EXPECTED_JSON}")
        return problems, value
    calls, problems = parse_calls(msg.get("tool_calls"))
    if not calls:
        return [f"tool_choice {case} produced no tool call (content: {(msg.get('content') or '')[:120]!r})"], None
    for c in calls:
        if c["name"] not in tools_by_name:
            problems.append(f"unknown function {c['name']!r}")
        elif isinstance(c["arguments"], dict):
            problems += schema_errors(c["arguments"], tools_by_name[c["name"]], c["name"])
        if not c.get("id"):
            problems.append("tool call has no id")
    if case == "named" and any(c["name"] != EXPECTED_CALL["name"] for c in calls):
        problems.append(f"named tool_choice {EXPECTED_CALL['name']} answered with {[c['name'] for c in calls]}")
    if case == "auto" and finish_reason not in (None, "tool_calls"):
        problems.append(f"finish_reason {finish_reason!r}, expected 'tool_calls'")
    if greedy and not problems:
        if len(calls) != 1:
            problems.append(f"{len(calls)} tool calls, expected 1")
        elif (
            canon(calls[0]["arguments"]) != canon(EXPECTED_CALL["arguments"])
            or calls[0]["name"] != EXPECTED_CALL["name"]
        ):
            problems.append(
                f"call {calls[0]['name']}({calls[0]['arguments']}) != expected "
                f"{EXPECTED_CALL['name']}({EXPECTED_CALL['arguments']})"
            )
    return problems, [{"name": c["name"], "arguments": c["arguments"]} for c in calls]


def request_for(case: str) -> dict:
    if case == "json_schema":
        return {
            "messages": [{"role": "user", "content": EXTRACT_PROMPT}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "city_unit", "schema": EXTRACT_SCHEMA, "strict": True},
            },
        }
    choice: Any = {
        "required": "required",
        "auto": "auto",
        "none": "none",
        "named": {"type": "function", "function": {"name": EXPECTED_CALL["name"]}},
    }[case]
    return {"messages": [{"role": "user", "content": TOOL_PROMPT}], "tools": TOOLS, "tool_choice": choice}


STREAMS = {"off": [False], "on": [True], "both": [False, True]}
SAMPLINGS = {"greedy": [True], "sampled": [False], "both": [True, False]}


def score_plain(case: str, body: dict, greedy: bool) -> tuple[list[str], Any]:
    """Problems and compared value of one non-streamed response."""
    choice = body["choices"][0]
    return check_message(case, choice.get("message") or {}, choice.get("finish_reason"), greedy)


def score_stream(case: str, chunks: list[dict], greedy: bool) -> tuple[list[str], Any]:
    """Problems and compared value of one streamed response, assembled from its chunks."""
    msg = assemble_stream(chunks)
    problems, value = check_message(case, msg, msg["finish_reasons"][-1] if msg["finish_reasons"] else None, greedy)
    if len(msg["finish_reasons"]) != 1:
        problems.append(f"{len(msg['finish_reasons'])} chunks carry a finish_reason, expected 1")
    if any(n != 1 for n in msg["name_events"].values()):
        problems.append(f"function name streamed {msg['name_events']} times, expected once per call")
    return problems, value


def stream_mismatch(case: str, streamed: Any, plain: Any) -> str | None:
    """Greedy only: the streamed value must equal the non-streamed one."""
    same = (canon(streamed) == canon(plain)) if case != "none" else streamed == plain
    return None if same else f"streamed {streamed!r} != non-streamed {plain!r}"


def check_tag(case: str, sampling: str, stream: bool) -> str:
    """One check's name: its transcript tag, and how failed_checks lists it."""
    return f"{case}/{sampling}/{'stream' if stream else 'plain'}"


def label(item: dict) -> str:
    return check_tag(item["case"], item["sampling"], item["stream"])


def compare_to_plain(case: str, greedy: bool, stream: bool, values: dict, value: Any, problems: list[str]) -> None:
    """Keep this response's value; a greedy streamed one must equal the plain one (stream_mismatch)."""
    values[stream] = value
    if stream and greedy and False in values and not problems and values[False] is not None:
        mismatch = stream_mismatch(case, value, values[False])
        if mismatch:
            problems.append(mismatch)


def measure(items: list[dict]) -> dict:
    """The gate's figures from every check's item."""
    passed = sum(i["passed"] for i in items)
    return {
        "checks": len(items),
        "passed": passed,
        "passed_fraction": round(passed / len(items), 4) if items else 0,
        "failed_checks": [label(i) for i in items if not i["passed"]],
    }


def verdict(measured: dict, items: list[dict], cfg: ToolsGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    n, passed = measured.get("checks"), measured.get("passed")
    want = len(cfg.cases) * len(STREAMS[cfg.stream]) * len(SAMPLINGS[cfg.sampling])
    if not isinstance(n, int) or not isinstance(passed, int) or n <= 0:
        return [(False, f"checks {n!r} / passed {passed!r} are not counts")]
    frac = passed / n
    return [
        (n == want, f"{n} checks measured, the gate makes {want}"),
        (
            frac >= cfg.min_passed_fraction,
            f"passed_fraction {frac:.3f} < {cfg.min_passed_fraction}: "
            + "; ".join(f"{label(i)}: {(i.get('problems') or ['?'])[0]}" for i in items if not i.get("passed"))[:1500],
        ),
    ]


async def run(ctx: Context, cfg: ToolsGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"min_passed_fraction": cfg.min_passed_fraction}
    streams = STREAMS[cfg.stream]
    samplings = SAMPLINGS[cfg.sampling]

    async def one(case: str, greedy: bool) -> list[dict]:
        base = {
            **request_for(case),
            "max_tokens": cfg.max_tokens,
            "seed": cfg.seed,
            "temperature": 0.0 if greedy else cfg.sampled_temperature,
        }
        mode = "greedy" if greedy else "sampled"
        out, values = [], {}
        for stream in streams:
            tag = check_tag(case, mode, stream)
            item = {"case": case, "sampling": mode, "stream": stream}
            try:
                if stream:
                    s = await ctx.server.stream("/v1/chat/completions", base, tag=tag)
                    problems, value = score_stream(case, [c for _, c in s.chunks], greedy)
                else:
                    body = await ctx.server.post("/v1/chat/completions", base, tag=tag)
                    problems, value = score_plain(case, body, greedy)
            except ServerError as e:
                problems, value = [f"server refused: {e}"], None
            compare_to_plain(case, greedy, stream, values, value, problems)
            item.update(passed=not problems, problems=problems, got=value)
            r.items.append(item)
            out.append(item)
        return out

    jobs = [one(case, g) for case in cfg.cases for g in samplings]
    results = [i for group in await bounded_gather(cfg.max_concurrent_requests, jobs) for i in group]
    r.measured = measure(results)
    r.judge(verdict(r.measured, results, cfg))


def recompute(recorded: RecordedRun, cfg: ToolsGate) -> tuple[dict, list[dict]]:
    """The measured figures again from the bundle's transcript, streamed answers reassembled from
    their chunks (`gates verify` calls it)."""
    recs = recorded.requests("tools")
    items = []
    for case in cfg.cases:
        for greedy in SAMPLINGS[cfg.sampling]:
            mode = "greedy" if greedy else "sampled"
            values: dict = {}
            for stream in STREAMS[cfg.stream]:
                rec = need(recs, check_tag(case, mode, stream))
                chunks = rec.get("chunks")
                if rec.get("status") != 200 or (stream and any("error" in c for c in chunks or [])):
                    problems, value = [f"server refused (status {rec.get('status')})"], None
                elif stream:
                    problems, value = score_stream(case, [c for _, c in stream_of(rec).chunks], greedy)
                else:
                    problems, value = score_plain(case, ok_body(rec), greedy)
                compare_to_plain(case, greedy, stream, values, value, problems)
                items.append(
                    {"case": case, "sampling": mode, "stream": stream, "passed": not problems, "problems": problems}
                )
    return measure(items), items
