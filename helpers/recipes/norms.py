"""RMSNorm and LayerNorm as cuDNN graphs, forward and backward, and RMSNorm with an FP8 output fused.

Taught in notebook 04 (deep dive G); its exercise grades a learner's RMSNorm backward against these.
Every tensor is a [rows, hidden, 1, 1] view of a row-major [rows, hidden] activation (the layout the frontend's
norm engines and NVIDIA's ``cudnn.ops.norm`` use): each row is normalised over its ``hidden`` values. x, r, y, h,
dy, dx in the I/O dtype; scale (γ) and bias (β) [1, hidden, 1, 1] in the I/O dtype; the statistics (mean,
inv_var = 1/sqrt(var + eps)) [rows, 1, 1, 1] in fp32; eps a host scalar.

- ``rmsnorm_graph``: y = x · inv_rms(x) · γ (notebook 04 writes out the same with the residual add h = x + r
  fused in front);
- ``rmsnorm_fp8_graph``: the same RMSNorm, its output multiplied by a quantisation scale and stored as FP8 e4m3,
  with max|y| (the AMAX the next scale comes from) as a second output — what FP8 training runs before a GEMM;
- ``layernorm_graph``: y = (x - mean) · inv_var · γ + β; ``*_backward_graph``: dx, dγ (and dβ) from dy and the
  forward's saved statistics.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checking import poison_
from ..graphs import GraphIO
from ..libcudnn import load_cudnn
from ._common import inputs, new_graph, outputs, seeded_randn


def make_tensors(rows: int, hidden: int, *, dtype: torch.dtype, seed: int | None = None,
                 device: str = "cuda") -> dict:
    """Inputs x, r (a residual), dy [rows,hidden,1,1]; γ near 1 and β near 0 [1,hidden,1,1]; NaN-poisoned outputs
    y, h, dx (like x), inv_var and mean [rows,1,1,1] fp32, dscale and dbias (like γ)."""
    rand = seeded_randn(seed, device)
    t = dict(x=rand(rows, hidden, 1, 1).to(dtype), r=rand(rows, hidden, 1, 1).to(dtype),
             dy=rand(rows, hidden, 1, 1).to(dtype), scale=(1 + 0.1 * rand(1, hidden, 1, 1)).to(dtype),
             bias=(0.1 * rand(1, hidden, 1, 1)).to(dtype))
    for name in ("y", "h", "dx"):
        t[name] = poison_(torch.empty_like(t["x"]))
    for name in ("inv_var", "mean"):
        t[name] = poison_(torch.empty(rows, 1, 1, 1, device=device))
    for name in ("dscale", "dbias"):
        t[name] = poison_(torch.empty_like(t["scale"]))
    return t


def _training():
    """The forward phase that saves the statistics the backward reads."""
    return load_cudnn(need_gpu=False).norm_forward_phase.TRAINING


def rmsnorm_graph(t: dict, *, eps: float = 1e-5, handle=None, **options):
    """y = rmsnorm(x) · γ, inv_var saved (training). Not yet built: ``(graph, io)``. (The add + RMSNorm graph is
    written out in notebook 04.)"""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    x, scale = inputs(io, t, "x", "scale")
    y, inv_var = g.rmsnorm(input=x, scale=scale, epsilon=io.scalar("eps", eps, rank=4), norm_forward_phase=_training(),
                           name="rmsnorm")
    outputs(io, t, y=y, inv_var=inv_var)
    return g, io


def rmsnorm_fp8_graph(t: dict, *, eps: float = 1e-5, handle=None, **options):
    """RMSNorm whose output leaves as FP8: y8 = e4m3(rmsnorm(x) · γ · q_scale), amax = max|rmsnorm(x) · γ| (before
    the scale), inv_var saved. ``t`` needs y8 (FP8 e4m3, like x), q_scale and amax (fp32 [1,1,1,1]); not yet built."""
    cudnn = load_cudnn(need_gpu=False)
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    x, scale = inputs(io, t, "x", "scale")
    y, inv_var = g.rmsnorm(input=x, scale=scale, epsilon=io.scalar("eps", eps, rank=4), norm_forward_phase=_training(),
                           name="rmsnorm")
    io.output("inv_var", inv_var, t["inv_var"])
    amax = g.reduction(y, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32, name="amax")
    io.output("amax", amax, t["amax"])
    io.output("y8", g.mul(y, io.input("q_scale", t["q_scale"]), name="quantize"), t["y8"])
    return g, io


def rmsnorm_backward_graph(t: dict, *, handle=None, **options):
    """dx, dγ from dy, x, γ and the forward's inv_var (no β); not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    dy, x, scale, inv_var = inputs(io, t, "dy", "x", "scale", "inv_var")
    dx, dscale, _ = g.rmsnorm_backward(grad=dy, input=x, scale=scale, inv_variance=inv_var, has_dbias=False,
                                       name="rmsnorm_backward")
    outputs(io, t, dx=dx, dscale=dscale)
    return g, io


def layernorm_graph(t: dict, *, eps: float = 1e-5, handle=None, **options):
    """y = (x - mean) · inv_var · γ + β, mean and inv_var saved (training); not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    x, scale, bias = inputs(io, t, "x", "scale", "bias")
    y, mean, inv_var = g.layernorm(input=x, scale=scale, bias=bias, epsilon=io.scalar("eps", eps, rank=4),
                                   norm_forward_phase=_training(), name="layernorm")
    outputs(io, t, y=y, mean=mean, inv_var=inv_var)
    return g, io


def layernorm_backward_graph(t: dict, *, handle=None, **options):
    """dx, dγ, dβ from dy, x, γ and the forward's mean and inv_var; not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g)
    dy, x, scale, mean, inv_var = inputs(io, t, "dy", "x", "scale", "mean", "inv_var")
    dx, dscale, dbias = g.layernorm_backward(grad=dy, input=x, scale=scale, mean=mean, inv_variance=inv_var,
                                             name="layernorm_backward")
    outputs(io, t, dx=dx, dscale=dscale, dbias=dbias)
    return g, io


def _rows(v: torch.Tensor) -> torch.Tensor:
    """[rows, hidden, 1, 1] → [rows, hidden] in fp32."""
    return v.float().flatten(1)


def rms_reference(t: dict, *, residual: bool = False, eps: float = 1e-5) -> dict:
    """torch's ``F.rms_norm`` in fp32 on the upcast inputs, forward and autograd backward (for ``t["dy"]``): h (the
    sum, when ``residual``), y, inv_var [rows,1,1,1], dx, dscale — shaped like the graph's tensors."""
    x = (_rows(t["x"]) + _rows(t["r"]) if residual else _rows(t["x"])).requires_grad_(True)
    scale = _rows(t["scale"]).flatten().requires_grad_(True)
    y = F.rms_norm(x, (x.shape[1],), scale, eps)
    dx, dscale = torch.autograd.grad(y, (x, scale), grad_outputs=_rows(t["dy"]))
    inv_var = torch.rsqrt(x.detach().square().mean(1) + eps)
    return dict(h=x.detach().reshape(t["x"].shape), y=y.detach().reshape(t["x"].shape),
                inv_var=inv_var.reshape(-1, 1, 1, 1), dx=dx.reshape(t["x"].shape),
                dscale=dscale.reshape(t["scale"].shape))


def layer_reference(t: dict, *, eps: float = 1e-5) -> dict:
    """torch's ``F.layer_norm`` in fp32 on the upcast inputs, forward and autograd backward: y, mean, inv_var, dx,
    dscale, dbias, shaped like the graph's tensors."""
    x = _rows(t["x"]).requires_grad_(True)
    scale = _rows(t["scale"]).flatten().requires_grad_(True)
    bias = _rows(t["bias"]).flatten().requires_grad_(True)
    y = F.layer_norm(x, (x.shape[1],), scale, bias, eps)
    dx, dscale, dbias = torch.autograd.grad(y, (x, scale, bias), grad_outputs=_rows(t["dy"]))
    var, mean = torch.var_mean(x.detach(), dim=1, unbiased=False)
    return dict(y=y.detach().reshape(t["x"].shape), mean=mean.reshape(-1, 1, 1, 1),
                inv_var=torch.rsqrt(var + eps).reshape(-1, 1, 1, 1), dx=dx.reshape(t["x"].shape),
                dscale=dscale.reshape(t["scale"].shape), dbias=dbias.reshape(t["scale"].shape))


def bytes_moved(t: dict, *, reads: int, writes: int) -> float:
    """The least DRAM traffic of a pass over ``reads`` + ``writes`` activation-sized tensors (γ, β and the
    per-row statistics are under 0.1 % at 8192 wide and are left out)."""
    return float((reads + writes) * t["x"].numel() * t["x"].element_size())
