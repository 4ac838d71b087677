"""Memory planning: will a recipe fit its GPUs, and with how much context and concurrency.

`geometry` turns a recipe's architecture block (and a checkpoint's own metadata) into the
planner's view of the model; `weights` counts weight bytes per tensor group (from the real
file's tensor table when one is given); `kv` counts KV bytes per token; `budget` sizes the
KV pool the way vLLM does and searches the largest context and concurrency that fit;
`render` prints it. README.md in this folder says how vLLM sizes the pool and what
the plan assumes where it cannot measure.
"""
