"""relu(conv2d(x, w) + b) on NHWC (channels-last) tensors as one cuDNN graph.

Taught in notebook 02 (section 4 builds it op by op); reused by 03 (autotuning), 06 (plan
serialization) and 07 (dynamic shapes). Tensors are named x, w, b, y in the variant pack.
"""
from __future__ import annotations

import math

import torch

from ..checking import poison_
from ..graphs import GraphIO
from ._common import CL, new_graph, seeded_randn


def out_size(size: int, filt: int, pad: int, stride: int) -> int:
    """Output height (or width) of a convolution without dilation."""
    return (size + 2 * pad - filt) // stride + 1


def make_tensors(n: int, c: int, hw: int, k: int, rs: int = 3, pad: int = 1, stride: int = 1, *,
                 dtype: torch.dtype, seed: int | None = None, device: str = "cuda") -> dict:
    """Random NHWC x [n,c,hw,hw], filter w [k,c,rs,rs] scaled by 1/sqrt(c·rs·rs) (outputs stay near 1),
    bias b [1,k,1,1], and a NaN-poisoned NHWC output y. ``seed`` makes them reproducible across processes."""
    rand = seeded_randn(seed, device)
    p = out_size(hw, rs, pad, stride)
    y = torch.empty(n, k, p, p, device=device, dtype=dtype).to(memory_format=CL)
    return dict(x=rand(n, c, hw, hw).to(dtype).to(memory_format=CL),
                w=(rand(k, c, rs, rs) / math.sqrt(c * rs * rs)).to(dtype).to(memory_format=CL),
                b=rand(1, k, 1, 1).to(dtype).to(memory_format=CL),
                y=poison_(y) if device != "meta" else y)


def graph(t: dict, *, padding: int = 1, stride: int = 1, handle=None, **options):
    """The graph for tensors ``t`` (x, w, b, y), not yet built: returns ``(graph, io)``.
    ``options`` go to ``cudnn.pygraph`` (e.g. ``kernel_cache=cache, is_dynamic_shape_enabled=True``)."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g, dtype=t["x"].dtype)
    conv = g.conv_fprop(io.input("x", t["x"], layout=CL), io.input("w", t["w"], layout=CL),
                        padding=[padding, padding], stride=[stride, stride], dilation=[1, 1], name="conv")
    out = g.relu(g.bias(conv, io.input("b", t["b"], layout=CL), name="bias"), name="relu")
    io.output("y", out, t["y"])
    return g, io


def reference(t: dict, *, padding: int = 1, stride: int = 1) -> torch.Tensor:
    """The same computation in float64 PyTorch (no TF32, no rounding to the I/O dtype)."""
    x, w, b = (t[name].double() for name in "xwb")
    return torch.relu(torch.nn.functional.conv2d(x, w, b.flatten(), stride=stride, padding=padding))


def flops(t: dict) -> float:
    """2 · N·K·P·Q · C·R·S multiply-adds for the tensors' shapes."""
    n, c, _, _ = t["x"].shape
    k, _, r, s = t["w"].shape
    _, _, p, q = t["y"].shape
    return 2.0 * n * k * p * q * c * r * s
