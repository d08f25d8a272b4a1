"""Timing, one module per clock. Notebooks reach these through ``H``; nothing is re-exported here.

==========  ==============================================================================================
per_call    ``benchmark``: time per call with CUDA events (what a Python loop pays); ``alternating_rounds``
gpu         ``gpu_time``: the GPU alone, calls captured in a CUDA graph and replayed; ``timing_table``
host        ``host_timing``/``host_us``: the host's side of a call; ``StepTimer``: wall time of named steps
sweep       ``perf_sweep``: every path at every point of a grid, one tidy table
kernels     ``kernels_launched``/``kernel_times``: which kernels a call launches, and their GPU time
rates       ``tflops``/``gbps`` and the ceilings to quote them against (measured, datasheet)
==========  ==============================================================================================
"""
