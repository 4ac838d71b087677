"""`cookbook launch glm52-mxfp4-8x-gaudi2` reproduces seed 002's Launch block token by token
(the exports may come in any order); the block is cut from the seed file itself."""

import re
import shlex
import subprocess
import sys

from seed_common import ROOT


def commands(block: str) -> list[list[str]]:
    """Shell commands of a block as argv lists: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", block)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        out.append(shlex.split(line, comments=True))
    return out


def document_launch_block(text: str) -> str:
    start = text.index("Launch¶")
    end = text.index("--enable-expert-parallel is required", start)
    block = text[start:end]
    return block[block.index("export ") :]


def split(cmds):
    exports = [c for c in cmds if c[0] == "export"]
    rest = [c for c in cmds if c[0] != "export"]
    return exports, rest


def test_launch_reproduces_the_document(seed_text):
    doc = commands(document_launch_block(seed_text("002")))
    ours_text = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "launch", "glm52-mxfp4-8x-gaudi2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    ours = commands(ours_text)
    doc_exports, doc_rest = split(doc)
    our_exports, our_rest = split(ours)
    assert len(doc_exports) == 21
    assert sorted(map(tuple, our_exports)) == sorted(map(tuple, doc_exports))
    assert len(our_exports) == len(set(map(tuple, our_exports)))
    # the fix-pack check line, then the server command, flag for flag, in order; before them, the
    # cookbook's one addition: outside the image, find the checkout or say how to point at it
    assert [c[0] for c in doc_rest] == ["python3", "vllm"]
    assert [c[0] for c in our_rest] == ["[", "python3", "vllm"]
    assert our_rest[0][:2] == ["[", "-f"] and "COOKBOOK" in our_rest[0][2]
    # The one deliberate change (issue 63): the document's line applies the fix pack at launch; the
    # cookbook's checks it (`--check`, the image applied it at build: ports/glm-5-mxfp4/install.sh)
    # and, on an engine without it, stops naming the command that applies it. Same script, profile
    # and opt-ins as the document's.
    doc_fix, our_fix = doc_rest[0], our_rest[1]
    assert our_fix[:2] == doc_fix[:2] and our_fix[2] == "--check"
    assert doc_fix[-3:] == ["||", "exit", "1"]
    assert our_fix[3 : len(doc_fix) - 2] == doc_fix[2:-3]  # --profile, the profile and the opt-ins
    assert "maint fixes apply --profile v0.30.0" in " ".join(our_fix)
    assert our_rest[2:] == doc_rest[1:]


def test_launch_exports_keep_the_documents_order(seed_text):
    # not required by the issue, but the recipe lists env in the document's order
    doc_exports, _ = split(commands(document_launch_block(seed_text("002"))))
    ours = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "launch", "glm52-mxfp4-8x-gaudi2", "--no-comments"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert split(commands(ours))[0] == doc_exports


def test_document_block_parser_sees_a_changed_flag(seed_text):
    # the comparison is not vacuous: a one-flag change in our block is a difference
    doc = commands(document_launch_block(seed_text("002")))
    changed = subprocess.run(
        [
            sys.executable,
            "-m",
            "cookbook.cli",
            "launch",
            "glm52-mxfp4-8x-gaudi2",
            "--set",
            "gpu_memory_utilization=0.8",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert split(commands(changed))[1] != split(doc)[1]
