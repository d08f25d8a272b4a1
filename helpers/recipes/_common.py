"""What every recipe does: the frontend's own ``cudnn.graph`` (fp32 intermediates and math) on the course's handle,
seeded inputs, and a graph's named inputs and outputs in order (so in UID order)."""
from __future__ import annotations

from typing import Callable

import torch

from ..device import has_gpu
from ..handles import get_handle
from ..libcudnn import load_cudnn

CL = torch.channels_last   # the convolutions' NHWC layout


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


def seeded_randn(seed: int | None, device: str) -> Callable[..., torch.Tensor]:
    """``randn(*shape)``: fp32 normal samples on ``device``, the same in every process for one ``seed``."""
    gen = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    return lambda *shape: torch.randn(*shape, device=device, dtype=torch.float32, generator=gen)


def inputs(io, t: dict, *names: str, **kwargs) -> list:
    """``io.input(name, t[name], **kwargs)`` for each name, in order."""
    return [io.input(name, t[name], **kwargs) for name in names]


def outputs(io, t: dict, **graph_tensors) -> None:
    """Each graph tensor marked an output written into ``t[name]``, in order."""
    for name, graph_tensor in graph_tensors.items():
        io.output(name, graph_tensor, t[name])
