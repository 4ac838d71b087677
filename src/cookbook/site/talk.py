"""A recipe page's "Talk to it" section: curl and openai-client requests to the server the launch
block starts, with its served name and port, the reasoning field where the recipe sets a
reasoning parser, a tool call where it sets a tool parser, and the `content: null` trap."""

from __future__ import annotations

import json
import shlex

from cookbook.site.markdown import code

# Where the trap is explained at length (the recipes cite it too).
TRAP_SOURCE = "the SlimServe README, Reasoning output (seed 000)"


def _openai_client_lines(base: str) -> list[str]:
    """The openai client example's opening lines, up to the client made for this server."""
    return [
        "With the openai client (`pip install openai`):",
        "",
        "```python",
        "from openai import OpenAI",
        "",
        f'client = OpenAI(base_url={json.dumps(base + "/v1")}, api_key="EMPTY")',
    ]


def endpoint(r) -> tuple[str, str | None]:
    """The base URL a client on the serving host uses, and the served model name (None: vLLM
    names the model by the path it was given; /v1/models says it)."""
    port = r.serve.arg("port") or 8000
    host = r.serve.arg("host")
    host = "localhost" if host in (None, "0.0.0.0", "127.0.0.1", "::") else host
    name = r.serve.arg("served_model_name")
    if isinstance(name, list):
        name = name[0] if name else None
    if name is None and "$" not in r.serve.model:
        name = r.serve.model
    # A control character (a newline could end the page's code fence) is never printed: the
    # example asks the server for its name, and a client on the host reaches it at localhost.
    name = name if isinstance(name, str) and name.isprintable() else None
    host = host if isinstance(host, str) and host.isprintable() else "localhost"
    return f"http://{host}:{port}", name


def curl_lines(base: str, name: str | None, body: dict, path: str = "/v1/chat/completions") -> list[str]:
    """A chat-completions (or `path`) curl, its JSON body one field a line (the model from $MODEL
    when the server's name is its path), ending in a pipe for the jq line that follows."""
    # The body goes in single quotes: a quote in a value (a served name) is closed, escaped, reopened.
    model = json.dumps(name).replace("'", "'\\''") if name else '"\'"$MODEL"\'"'  # $MODEL: the quote closes
    fields = [f'    "model": {model}']
    fields += [f"    {json.dumps(k)}: {json.dumps(v)}".replace("'", "'\\''") for k, v in body.items()]
    return [
        f"curl -s {shlex.quote(base + path)} \\",
        "  -H 'Content-Type: application/json' \\",
        "  -d '{",
        ",\n".join(fields),
        "  }' \\",
    ]


def base_model(r) -> str | None:
    """Why the recipe's model is a base model (not instruction-tuned), or None: the packaged Gemma
    3 270M, unless the recipe serves random weights (a benchmark: no answer means anything)."""
    from cookbook.models import gemma

    source = getattr(getattr(getattr(r, "model", None), "source", None), "repo", None)
    gates = getattr(r, "gates", None)
    if source != gemma.SOURCE or getattr(gates, "benchmark_only", None):
        return None
    return gemma.BASE_MODEL_WHY


def base_model_lines(r, base: str, name: str | None) -> list[str]:
    """Completions, greedy, cut at the first line break: what a base model answers well."""
    from cookbook.models import gemma

    (prompt, max_tokens, says), (py_prompt, py_max, py_says) = gemma.COMPLETIONS
    lines = [
        f"The server speaks the OpenAI API at {code(base + '/v1')}" + (f", as model {code(name)}." if name else "."),
        "",
        f"**{r.model.name} as packaged here is a base model**: {base_model(r)}. Ask it for completions "
        "(`/v1/completions`): give the start of a sentence and it writes the rest. Greedy (temperature 0), "
        "the examples below stop at the first line break.",
        "",
        "```bash",
    ]
    if not name:
        lines.append(
            f"MODEL=$(curl -s {shlex.quote(base + '/v1/models')} | jq -r '.data[0].id')   # vLLM names it by its path"
        )
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stop": ["\n"]}
    lines += curl_lines(base, name, body, "/v1/completions")
    lines += ["  | jq -r '.choices[0].text'", "```", ""]
    lines += [f"Measured ({gemma.MEASURED_ON}), it prints: {code(says)}", ""]
    py_model = json.dumps(name) if name else "client.models.list().data[0].id"
    lines += [
        *_openai_client_lines(base),
        "reply = client.completions.create(",
        f"    model={py_model},",
        f"    prompt={json.dumps(py_prompt)},",
        f"    max_tokens={py_max},",
        "    temperature=0,",
        '    stop=["\\n"],',
        ")",
        "print(reply.choices[0].text)",
        "```",
        "",
        f"It prints: {code(py_says)}",
        "",
    ]
    parsers = [f"`--{k.replace('_', '-')}`" for k in ("chat_template", "tool_call_parser") if r.serve.arg(k)]
    if parsers:
        lines += [
            f"The recipe sets {' and '.join(parsers)} for its gates; a chat or tool request of your own gets "
            "this base model's noise, not an answer.",
            "",
        ]
    return lines


def talk_lines(resolved) -> list[str]:
    r = resolved.recipe
    base, name = endpoint(r)
    if base_model(r):
        return ["## Talk to it", "", *base_model_lines(r, base, name)]
    reasoning = r.serve.arg("reasoning_parser")
    tools = r.serve.arg("tool_call_parser") if r.serve.arg("enable_auto_tool_choice") else None
    max_tokens = 2048 if reasoning else 256
    lines = ["## Talk to it", ""]
    lines += [
        f"The server speaks the OpenAI API at {code(base + '/v1')}" + (f", as model {code(name)}." if name else ".")
    ]
    lines.append("")
    message = {"role": "user", "content": "Name three prime numbers."}
    lines += ["```bash"]
    if not name:
        lines.append(
            f"MODEL=$(curl -s {shlex.quote(base + '/v1/models')} | jq -r '.data[0].id')   # vLLM names it by its path"
        )
    lines += curl_lines(base, name, {"max_tokens": max_tokens, "messages": [message]})
    if reasoning:
        lines.append("  | jq '.choices[0] | {reasoning: .message.reasoning, content: .message.content, finish_reason}'")
    else:
        lines.append("  | jq -r '.choices[0].message.content'")
    lines += ["```", ""]
    py_model = json.dumps(name) if name else "client.models.list().data[0].id"
    lines += [
        *_openai_client_lines(base),
        "reply = client.chat.completions.create(",
        f"    model={py_model},",
        '    messages=[{"role": "user", "content": "Name three prime numbers."}],',
        f"    max_tokens={max_tokens},",
        ")",
        "message = reply.choices[0].message",
    ]
    if reasoning:
        lines.append('print(getattr(message, "reasoning", None))  # the thinking, split off by the reasoning parser')
    lines += ["print(message.content)", "```", ""]
    if reasoning:
        lines += [
            f"**Reasoning.** The recipe sets `--reasoning-parser {reasoning}`: the thinking comes back in "
            "`message.reasoning`, the answer in `message.content`. `max_tokens` covers both, and `content` stays "
            '`null` until the thinking ends: a reply with `"content": null` and `finish_reason: "length"` is a '
            "truncated think, not an error; raise `max_tokens` (2048 is a safe start). A `null` content that no "
            "`max_tokens` cures means the parser does not match the model: every reply is classed as thinking "
            f"(as {TRAP_SOURCE} explains). Keep the recipe's parser.",
            "",
        ]
    if tools:
        tool = {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
        ask = {"role": "user", "content": "What is the weather in Paris?"}
        call = curl_lines(
            base, name, {"max_tokens": max_tokens, "messages": [ask], "tools": [tool], "tool_choice": "auto"}
        )
        lines += [
            f"**Tools.** The recipe sets `--enable-auto-tool-choice --tool-call-parser {tools}`: a tool call comes "
            "back in `message.tool_calls` (its `arguments` a JSON string), with `content` empty:",
            "",
            "```bash",
            *call,
            "  | jq '.choices[0].message.tool_calls'",
            "```",
            "",
        ]
    if not reasoning and not tools:
        lines += ["The recipe sets no reasoning or tool parser: any thinking stays inline in `content`.", ""]
    return lines
