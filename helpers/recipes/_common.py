"""What every recipe does first: the frontend's own ``cudnn.graph`` (fp32 intermediates and math) on the course's
handle."""
from __future__ import annotations

import torch

from ..device import has_gpu
from ..handles import get_handle
from ..libcudnn import load_cudnn


def new_graph(io_dtype: torch.dtype, handle=None, **options):
    """The graph ``with cudnn.graph(handle, io_data_type=io_dtype) as (graph, _)`` opens: ``io_dtype`` in memory, fp32
    intermediates and math (its defaults), on ``handle`` (default: ``H.get_handle()``; none on a machine without a
    GPU, where construction works up to ``validate()``). ``options`` go on to ``cudnn.pygraph`` (``kernel_cache=``,
    ``is_dynamic_shape_enabled=`` ...)."""
    cudnn = load_cudnn(need_gpu=False)   # construction needs no libcudnn on a machine without a GPU
    if handle is None and has_gpu():
        handle = get_handle()
    with cudnn.graph(handle, io_data_type=io_dtype, intermediate_data_type=torch.float32,
                     compute_data_type=torch.float32, **options) as (graph, _):
        return graph
