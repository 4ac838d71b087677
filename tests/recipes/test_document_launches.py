"""The two other launch blocks the seed documents print in full, against `cookbook launch`:
DeepSeek-V4-Flash's "equivalent by hand" (seed 000, whose file name the document elides) and
the NVFP4 build's "equivalent bare launch" (seed 001, whose model dir is a placeholder)."""

import json
import re
import shlex

from cookbook.plan.launch_block import launch_block
from cookbook.recipe.resolve import resolve


def commands(block: str) -> list[list[str]]:
    joined = re.sub(r"\\\n", " ", block)
    return [
        shlex.split(line, comments=True)
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def between(text: str, start: str, end_line_contains: str) -> str:
    i = text.index(start)
    j = text.index(end_line_contains, i)
    return text[i : text.index("\n", j)]


def ours(slug: str):
    cmds = commands(launch_block(resolve(slug), comments=False))
    env = dict(c[1].split("=", 1) for c in cmds if c[0] == "export")
    return env, [c for c in cmds if c[0] != "export"]


def test_dsv4_4_is_the_documents_by_hand_command(seed_text):
    block = between(seed_text("000"), "GGUF=$MODELS/antirez-deepseek-v4-gguf", "FULL_DECODE_ONLY")
    doc = commands(block)
    assert doc[0] == ["GGUF=$MODELS/antirez-deepseek-v4-gguf"]
    prefix, argv = doc[1][0], doc[1][1:]
    env, cmds = ours("dsv4-4")
    assert env["GGUF"] == "$MODELS/antirez-deepseek-v4-gguf"
    assert f"VLLM_ROCM_USE_AITER={env['VLLM_ROCM_USE_AITER']}" == prefix
    assert len(cmds) == 1
    mine = cmds[0]
    i, j = argv.index("--model"), mine.index("--model")
    # the document elides the file name: "$GGUF/DeepSeek-V4-Flash-...-mxfp4-0731.gguf"
    assert argv[i + 1].startswith("$GGUF/DeepSeek-V4-Flash-") and argv[i + 1].endswith("0731.gguf")
    assert mine[j + 1].startswith("$GGUF/DeepSeek-V4-Flash-") and mine[j + 1].endswith("0731.gguf")
    assert argv[: i + 1] + argv[i + 2 :] == mine[: j + 1] + mine[j + 2 :]


def test_nvfp4_default_is_the_documents_bare_launch(seed_text):
    block = between(seed_text("001"), "export NCCL_MAX_NCHANNELS", "--port 8001")
    doc = commands(block)
    doc_env = dict(kv.split("=", 1) for c in doc if c[0] == "export" for kv in c[1:])
    doc_argv = next(c for c in doc if c[0] == "vllm")
    env, cmds = ours("glm52-nvfp4-4x-rtxpro6000")
    assert env == doc_env
    mine = cmds[0]
    assert doc_argv[:2] == mine[:2] == ["vllm", "serve"]
    assert doc_argv[2] == "<repo-dir>" and mine[2] == "/models/1m"  # the docker run's weights mount

    def flags(argv):
        # JSON-valued flags compare as data (the document writes them without spaces)
        out = []
        for tok in argv[3:]:
            out.append(json.loads(tok) if tok.startswith("{") else tok)
        return out

    doc_flags, my_flags = flags(doc_argv), flags(mine)
    assert sorted(map(json.dumps, doc_flags)) == sorted(map(json.dumps, my_flags))

    # and flag for flag in the same pairs: each flag keeps its value
    def pairs(f):
        return {
            f[k]: f[k + 1] if k + 1 < len(f) and not str(f[k + 1]).startswith("--") else True
            for k in range(len(f))
            if str(f[k]).startswith("--")
        }

    assert pairs(doc_flags) == pairs(my_flags)
