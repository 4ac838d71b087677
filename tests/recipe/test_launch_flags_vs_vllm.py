"""Every `vllm serve` flag a launch block renders is accepted by the pinned CPU vLLM's own
argument parser, where that vLLM knows the flag. Flags it does not know (fork-only or
platform-only flags) are listed, visibly, as not checked."""

import json
import subprocess
import sys

import pytest
from recipe_helpers import FIXTURES

from cookbook.plan.launch_block import planned
from cookbook.recipe.launch import server_argv
from cookbook.recipe.resolve import all_slugs, resolve

CHECKER = r"""
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
known = set(parser._option_string_actions)
out = {}
for name, flags in json.load(sys.stdin).items():
    res = {"accepted": [], "rejected": {}, "unknown": []}
    for flag, value in flags:
        if flag not in known:
            res["unknown"].append(flag)
            continue
        argv = ["--model", "m", flag] + ([] if value is None else [value])
        try:
            parser.parse_args(argv)
            res["accepted"].append(flag)
        except SystemExit:
            res["rejected"][flag] = value
    out[name] = res
print("RESULT" + json.dumps(out))
"""


def flag_pairs(argv):
    pairs, i = [], 0
    while i < len(argv):
        if argv[i].startswith("--"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            pairs.append((argv[i], value))
            i += 2 if value is not None else 1
        else:
            i += 1
    return pairs


def collect(monkeypatch):
    blocks = {}
    monkeypatch.setenv("COOKBOOK_RECIPES", str(FIXTURES / "valid"))
    for slug in all_slugs():
        blocks[f"fixture:{slug}"] = flag_pairs(server_argv(resolve(slug), planned(resolve(slug)))[3:])
    monkeypatch.delenv("COOKBOOK_RECIPES")
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if r.recipe.abstract:
            continue
        argv = server_argv(resolve(slug), planned(resolve(slug)))
        start = 3 if argv[:2] == ["vllm", "serve"] else 5
        blocks[slug] = flag_pairs(argv[start:])
    return blocks


@pytest.mark.engine
def test_launch_flags_are_accepted_by_pinned_cpu_vllm(monkeypatch, capsys):
    blocks = collect(monkeypatch)
    p = subprocess.run(
        [sys.executable, "-c", CHECKER], input=json.dumps(blocks), capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout.split("RESULT", 1)[1])
    rejected = {name: r["rejected"] for name, r in result.items() if r["rejected"]}
    with capsys.disabled():
        for name, r in result.items():
            if r["unknown"]:
                print(f"\n  not checked ({name}): the pinned CPU vLLM does not know {', '.join(r['unknown'])}")
    assert not rejected, f"flags the pinned vLLM rejects: {rejected}"
    total = sum(len(r["accepted"]) for r in result.values())
    assert total >= 5, "too few flags were checked for this test to mean anything"
