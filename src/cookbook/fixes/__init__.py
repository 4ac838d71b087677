"""The fix pack: ordered, strict patches against pinned vLLM versions.

pack: profiles and their resolution (FixInfo, resolve, known_profiles, FixError).
patchfile: DEP-3 header parsing and the exact applier. tree: apply/check/revert on an
installed vllm package. cli: `cookbook fixes`.
"""
