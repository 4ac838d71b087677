"""Write a recipe's `gates:` section after calibration (cookbook.gates.calibrate decides the bars).

The section from the top-level line `gates:` to the next top-level key is replaced by the new
mapping; the rest of the file, comments included, stays as written. The `verified:` block (always
the last key, cookbook.recipe.verified) is removed: the bars changed, so the recipe must be
verified again against them.
"""

from __future__ import annotations

import re

import yaml

_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*:", re.MULTILINE)
_VERIFIED = re.compile(r"(^# written by `cookbook gates verify`[^\n]*\n)?^verified:.*\Z", re.MULTILINE | re.DOTALL)
NOTE = "# Bars written by `cookbook gates calibrate` from a calibration run (each gate's calibrated_on says how).\n"


class _Dumper(yaml.SafeDumper):
    """Mappings as blocks, lists inline: the layout recipes are written in."""


_Dumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def with_gates(recipe_text: str, gates: dict) -> str:
    text = _VERIFIED.sub("", recipe_text)
    m = re.search(r"^gates:", text, re.MULTILINE)
    if not m:
        raise ValueError("the recipe has no top-level `gates:` of its own to calibrate")
    later = _TOP_KEY.search(text, m.end())
    tail = text[later.start() :] if later else ""
    head = text[: m.start()].removesuffix(NOTE)
    body = yaml.dump(
        {"gates": gates}, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=110, allow_unicode=True
    )
    return head + NOTE + body + tail
