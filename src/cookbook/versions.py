"""Engine version comparison: the one place a reported version is matched against a pin.

Imports nothing of the cookbook, so every layer (the evidence wing, the gates) can use it.
"""

from __future__ import annotations


def same_release(reported, pinned) -> bool:
    """Whether an engine that reports version `reported` is the release `pinned` names: equal as
    packaging versions (0.32 == 0.32.0), a local build label ignored (0.26.0+cu129 is 0.26.0); never a
    prefix match (0.3 and 0 are not 0.32.0)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(Version(str(reported)).public) == Version(Version(str(pinned)).public)
    except InvalidVersion:
        return False
