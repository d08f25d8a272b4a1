"""BatchNorm in training: its inputs, its backward as a cuDNN graph, and torch's reference (NHWC tensors).

Taught in notebook 02 (deep dive E), beside the folded-BN exercise: at inference BatchNorm is a fixed per-channel
affine map that folds into the conv's epilogue; in training its mean and variance come from the batch itself, so
it is a reduction over N·H·W that must finish before any output can be normalised — its own graph.

The forward is written out in the notebook (tensors x, scale, bias, running_mean, running_var, eps, momentum;
outputs y, mean, inv_var and the running statistics, updated in place like torch's):
``y = (x - mean) · inv_var · scale + bias`` with ``inv_var = 1/sqrt(var + eps)`` over N, H, W;
``running = (1 - momentum) · running + momentum · batch`` (the running variance takes the unbiased batch
variance). Backward (dy, x, scale, mean, inv_var → dx, dscale, dbias).
x, y, dy, dx in the I/O dtype; scale, bias and every statistic in fp32, shaped [1, C, 1, 1].
"""
from __future__ import annotations

import torch

from ..checking import poison_
from ..graphs import GraphIO
from ._common import CL, new_graph, outputs, seeded_randn


def make_tensors(n: int, c: int, hw: int, *, dtype: torch.dtype, seed: int | None = None,
                 device: str = "cuda") -> dict:
    """x [n,c,hw,hw] NHWC (mean 0.5, std 2 per element), fp32 scale/bias [1,c,1,1], running mean 0 and var 1 (a
    fresh layer's), dy like x, and NaN-poisoned outputs: y, dx (like x); mean, inv_var, dscale, dbias [1,c,1,1]."""
    rand = seeded_randn(seed, device)
    stat = (1, c, 1, 1)
    t = dict(x=(0.5 + 2 * rand(n, c, hw, hw)).to(dtype).to(memory_format=CL),
             scale=1 + 0.25 * rand(*stat), bias=0.1 * rand(*stat),
             running_mean=torch.zeros(stat, device=device), running_var=torch.ones(stat, device=device))
    t["dy"] = rand(n, c, hw, hw).to(dtype).to(memory_format=CL)
    for name, like in (("y", "x"), ("dx", "x"), ("mean", "scale"), ("inv_var", "scale"), ("dscale", "scale"),
                       ("dbias", "scale")):
        t[name] = poison_(torch.empty_like(t[like]))
    return t


def backward_graph(t: dict, *, handle=None, **options):
    """dx, dscale, dbias from dy, x, scale and the forward's saved mean and inv_var; not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    dx, dscale, dbias = g.batchnorm_backward(
        grad=io.input("dy", t["dy"], layout=CL), input=io.input("x", t["x"], layout=CL),
        scale=io.input("scale", t["scale"]), mean=io.input("mean", t["mean"]),
        inv_variance=io.input("inv_var", t["inv_var"]), name="bn_backward")
    outputs(io, t, dx=dx, dscale=dscale, dbias=dbias)
    return g, io


def reference(t: dict, running_mean: torch.Tensor, running_var: torch.Tensor, *, eps: float = 1e-5,
              momentum: float = 0.1) -> dict:
    """torch's own training BatchNorm in fp32 on the upcast x (``torch.native_batch_norm``, training=True), forward
    and backward: y, mean, inv_var, the updated running statistics (from copies of ``running_mean`` and
    ``running_var``, the values *before* the graph ran), and dx, dscale, dbias for ``t["dy"]``."""
    x = t["x"].float().requires_grad_(True)
    scale = t["scale"].flatten().clone().requires_grad_(True)
    bias = t["bias"].flatten().clone().requires_grad_(True)
    rm, rv = running_mean.flatten().clone(), running_var.flatten().clone()
    y, mean, inv_var = torch.native_batch_norm(x, scale, bias, rm, rv, True, momentum, eps)
    dx, dscale, dbias = torch.autograd.grad(y, (x, scale, bias), grad_outputs=t["dy"].float())
    stat = (1, -1, 1, 1)
    return dict(y=y.detach(), mean=mean.reshape(stat), inv_var=inv_var.reshape(stat), running_mean=rm.reshape(stat),
                running_var=rv.reshape(stat), dx=dx, dscale=dscale.reshape(stat), dbias=dbias.reshape(stat))
