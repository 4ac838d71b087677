"""Checkpoint converters: GGUF join/merge/split/set/inspect, GGUF -> HF, Quark MXFP4 fuse.

The click group is `cookbook.commands.convert:convert`; `tools/convert/<name>` are thin wrappers.
"""
