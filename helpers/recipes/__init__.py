"""Graphs and procedures that a notebook teaches and later notebooks reuse.

The notebook that teaches one writes it out in full; later notebooks import it from here and say
where it was taught. Each module names its teaching notebook.

==================  ===========  =======================================================
module              taught in    reused by
==================  ===========  =======================================================
conv_bias_relu      02           03 (tuned), 06 (serialized), 07 (dynamic shapes)
matmul_bias_act     04           03 (GEMM + AMAX plans), 07 (kernel cache), 08 (CUDA graphs)
sdpa                05           06 (serialized), 08 (the custom op)
autotune            03           04 (FP8 plans), 06 (the tuned plan, reloaded by name)
plancache           06           (the plan cache is 06's own subject; nothing later reuses it yet)
conv_backward       02 (D)       02's training loop and its dgrad + ReLU backward exercise
batchnorm           02 (E)       (BatchNorm in training: 02's deep dive E only)
norms               04 (G)       04's FP8 RMSNorm and its RMSNorm backward exercise
==================  ===========  =======================================================
"""

from ._common import new_graph  # noqa: E402  (the one public name of the private module)

__all__ = ["new_graph"]
