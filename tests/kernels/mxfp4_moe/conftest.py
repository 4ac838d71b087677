"""Kernel tests run on the CPU through Triton's interpreter unless a CUDA GPU is present.

TRITON_INTERPRET must be set before triton is first imported (its own library functions,
e.g. tl.sort, are made at import time), so it is set here. CI exports TRITON_INTERPRET=1
itself; if some earlier test imported triton without it, these tests stop with that reason.
"""

import os
import sys
from pathlib import Path

import pytest

try:
    import torch
except ImportError:  # the tests skip themselves with the reason
    torch = None

HERE = Path(__file__).parent
_NEED_INTERPRETER = torch is not None and not torch.cuda.is_available()
_TRITON_WAS_LOADED = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
if _NEED_INTERPRETER:
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def _interpreter_ready():
    if _NEED_INTERPRETER and _TRITON_WAS_LOADED:
        pytest.fail(
            "triton was imported before TRITON_INTERPRET=1 was set; run with "
            "TRITON_INTERPRET=1 in the environment (as CI does)"
        )


@pytest.hookimpl(tryfirst=True)  # before the root conftest picks the tier
def pytest_collection_modifyitems(items):
    """`make test` runs the first case of each parametrised kernel test; the rest of the grid is the
    slow tier's (area "kernels"). In Triton's CPU interpreter each case costs seconds.

    pytest hands every conftest hook the whole session's items: only this folder's are marked, so a
    plain `pytest` over tests/ keeps the other folders' parametrised cases in the fast tier."""
    seen = set()
    for item in items:
        if getattr(item, "callspec", None) is None or not item.path.is_relative_to(HERE):
            continue
        fn = (item.path, item.originalname)
        if fn in seen:
            item.add_marker(pytest.mark.slow_tier("kernels"))
        seen.add(fn)
