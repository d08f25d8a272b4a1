"""act(x @ w + b) as one cuDNN graph: a matmul with its bias and activation fused as the epilogue.

Taught in notebook 04 (which adds a scale and an AMAX output); reused by 07 (dynamic shapes and the
kernel cache) and 08 (CUDA graphs). Tensors are named x, w, b, y in the variant pack.

Also here: ``gemm_amax_graph``, notebook 04 section 8's bf16 GEMM with an AMAX in its epilogue (no bias, no
activation), whose candidate plans notebook 03 times (tensors x, w, y, amax).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..graphs import GraphIO
from ..libcudnn import load_cudnn
from ._common import new_graph

# activation name -> (graph op, PyTorch reference)
ACTIVATIONS = {
    "gelu": (lambda g, v: g.gelu(v, name="gelu"), F.gelu),
    "relu": (lambda g, v: g.relu(v, name="relu"), F.relu),
    "silu": (lambda g, v: g.swish(v, swish_beta=1.0, name="silu"), F.silu),
}


def make_tensors(batch: int, m: int, k: int, n: int, *, dtype: torch.dtype, bias_scale: float = 0.5,
                 device: str = "cuda") -> dict:
    """x [batch,m,k], w [batch,k,n] scaled by 1/sqrt(k), bias b [1,1,n] (times ``bias_scale``), empty y [batch,m,n]."""
    return dict(x=torch.randn(batch, m, k, device=device, dtype=dtype),
                w=(torch.randn(batch, k, n, device=device) / k**0.5).to(dtype),
                b=(bias_scale * torch.randn(1, 1, n, device=device)).to(dtype),
                y=torch.empty(batch, m, n, device=device, dtype=dtype))


def graph(t: dict, *, act: str = "gelu", handle=None, **options):
    """The graph for tensors ``t`` (x, w, b, y), not yet built: returns ``(graph, io)``.
    ``options`` go to ``cudnn.pygraph`` (``kernel_cache=``, ``is_dynamic_shape_enabled=``, ...)."""
    if act not in ACTIVATIONS:
        raise ValueError(f"act must be one of {sorted(ACTIVATIONS)}, got {act!r}")
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g, dtype=t["x"].dtype)
    xw = g.matmul(io.input("x", t["x"]), io.input("w", t["w"]), name="matmul")
    io.output("y", ACTIVATIONS[act][0](g, g.add(xw, io.input("b", t["b"]), name="bias")), t["y"])
    return g, io


def reference(t: dict, *, act: str = "gelu") -> torch.Tensor:
    """act(x @ w + b) in fp32 on the upcast inputs (set ``torch.backends.cuda.matmul.allow_tf32 = False``)."""
    return ACTIVATIONS[act][1](t["x"].float() @ t["w"].float() + t["b"].float())


def make_gemm_amax_tensors(batch: int, m: int, k: int, n: int, *, dtype: torch.dtype, device: str = "cuda") -> dict:
    """x [batch,m,k] row-major; w [batch,k,n] column-major (the transposed view of a contiguous [batch,n,k], the
    layout of notebook 04 section 8), scaled by 1/sqrt(k); empty y [batch,m,n]; a zeroed fp32 amax [1,1,1]."""
    return dict(x=torch.randn(batch, m, k, device=device, dtype=dtype),
                w=(torch.randn(batch, n, k, device=device) / k**0.5).to(dtype).transpose(1, 2),
                y=torch.empty(batch, m, n, device=device, dtype=dtype),
                amax=torch.zeros(1, 1, 1, device=device, dtype=torch.float32))


def gemm_amax_graph(t: dict, *, handle=None, **options):
    """y = x @ w stored in y's dtype, and max|y| reduced into ``t["amax"]`` (its [1,1,1] shape: everything is
    reduced) as a second output of the same graph; not yet built: returns ``(graph, io)``."""
    cudnn = load_cudnn(need_gpu=False)
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g, dtype=t["x"].dtype)
    y = g.matmul(io.input("x", t["x"]), io.input("w", t["w"]), compute_data_type=torch.float32, name="matmul")
    io.output("y", y, t["y"])
    amax = g.reduction(y, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32, name="amax")
    io.output("amax", amax, t["amax"])
    return g, io


def gemm_amax_reference(t: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(x @ w, max|x @ w| shaped [1,1,1]) in fp32 on the upcast inputs."""
    y = t["x"].float() @ t["w"].float()
    return y, y.abs().amax().reshape(1, 1, 1)
