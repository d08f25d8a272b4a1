"""Plumbing one notebook needs and no other uses, one module per notebook it serves.

Not the cuDNN API a notebook teaches (that stays in the notebook) and not the graphs later notebooks reuse
(``helpers.recipes``): the benchmark scaffolding and test benches around them.

===========  ========  ========================================================================================
module       serves    what
===========  ========  ========================================================================================
attention    05        torch's attention paths to time, the FA3 switch, the sweep tables' columns, the gap analysis
transformer  08        a small transformer block, its training step (eager and captured), the loss curves
cpp_op       08        the capstone's C++ rung: builds cudnn_sdpa_op.cpp (TORCH_LIBRARY + the frontend's C++ API)
===========  ========  ========================================================================================
"""
