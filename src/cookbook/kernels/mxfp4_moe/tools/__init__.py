"""The mxfp4-moe kernel's benchmark and analysis tools, each run as a module on a CUDA GPU unless it
says otherwise (`python -m cookbook.kernels.mxfp4_moe.tools.NAME --help`):

bench         time (and tune) the kernel against the card's copy bandwidth and a PyTorch baseline
breakdown     device time per launch of one call (torch.profiler)
timeline      when each program of the Gluon kernels runs, and the bandwidth over the call
ceiling       a plain read of the same bytes, in one and in two launches, next to the kernel
compare_vllm  against vLLM 0.26.0's Triton MXFP4 MoE kernels (triton_kernels.matmul_ogs)
sass_local    the frag kernels' inner loop compiled for sm_90 here (no GPU needed)
sass_summary  opcode histogram of the kernels in a Triton cache (needs cuobjdump)

harness holds what they share.
"""
