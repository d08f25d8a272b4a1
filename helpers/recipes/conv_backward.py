"""The convolution's backward as cuDNN graphs: dgrad fused with the ReLU backward, and wgrad (NHWC tensors).

Taught in notebook 02 (deep dive D); its exercise grades a learner's dgrad + ReLU backward against these.
For a block ``y = conv(x, w)`` whose input ``x`` is the previous layer's ReLU output, the backward takes ``dy``
(the loss's gradient with respect to the conv's output) and gives

- ``dx = relu_backward(conv_dgrad(dy, w), x)``: the gradient reaching the previous layer's pre-activation, the
  ReLU's mask (``x > 0``) applied in dgrad's epilogue instead of by a second kernel;
- ``dw = conv_wgrad(x, dy)``: the filter's gradient.

Tensors are named dy, w, x, dx (dgrad) and x, dy, dw (wgrad) in the variant pack.
"""
from __future__ import annotations

import torch

from ..checking import poison_
from ..graphs import GraphIO
from . import conv_bias_relu
from ._common import CL, new_graph, seeded_randn
from .conv_bias_relu import out_size


def make_tensors(n: int, c: int, hw: int, k: int, rs: int = 3, pad: int = 1, stride: int = 1, *,
                 dtype: torch.dtype, seed: int | None = None, device: str = "cuda") -> dict:
    """x [n,c,hw,hw] = relu(noise) (a ReLU's output: about half zeros), w [k,c,rs,rs] scaled by 1/sqrt(c·rs·rs),
    dy [n,k,p,p] (the incoming gradient), and NaN-poisoned dx (like x) and dw (like w); all NHWC in ``dtype``."""
    rand = seeded_randn(seed, device)

    def nhwc(values):
        return values.to(dtype).to(memory_format=CL)

    p = out_size(hw, rs, pad, stride)
    t = dict(x=nhwc(torch.relu(rand(n, c, hw, hw))), w=nhwc(rand(k, c, rs, rs) / (c * rs * rs) ** 0.5),
             dy=nhwc(rand(n, k, p, p)))
    t["dx"] = poison_(torch.empty_like(t["x"]))
    t["dw"] = poison_(torch.empty_like(t["w"]))
    return t


def dgrad_drelu_graph(t: dict, *, padding: int = 1, stride: int = 1, handle=None, **options):
    """dx = relu_backward(conv_dgrad(dy, w), x) for tensors ``t`` (dy, w, x, dx), not yet built: ``(graph, io)``."""
    g = new_graph(t["dy"].dtype, handle, **options)
    io = GraphIO(g, dtype=t["dy"].dtype)
    dgrad = g.conv_dgrad(io.input("dy", t["dy"], layout=CL), io.input("w", t["w"], layout=CL),
                         padding=[padding, padding], stride=[stride, stride], dilation=[1, 1], name="dgrad")
    dgrad.set_dim(list(t["dx"].shape))   # a strided dgrad's size is ambiguous: say it
    io.output("dx", g.relu_backward(dgrad, io.input("x", t["x"], layout=CL), name="drelu"), t["dx"])
    return g, io


def wgrad_graph(t: dict, *, padding: int = 1, stride: int = 1, handle=None, **options):
    """dw = conv_wgrad(x, dy) for tensors ``t`` (x, dy, dw), not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle, **options)
    io = GraphIO(g, dtype=t["x"].dtype)
    dw = g.conv_wgrad(io.input("x", t["x"], layout=CL), io.input("dy", t["dy"], layout=CL),
                      padding=[padding, padding], stride=[stride, stride], dilation=[1, 1], name="wgrad")
    io.output("dw", dw, t["dw"])
    return g, io


def reference(t: dict, *, padding: int = 1, stride: int = 1,
              relu_mask: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dw) from torch autograd in fp32 (TF32 off): the gradients of ``sum(conv2d(x, w) * dy)``, dx masked by
    ``x > 0`` (the ReLU that produced x) unless ``relu_mask=False``."""
    x = t["x"].float().requires_grad_(True)
    w = t["w"].float().requires_grad_(True)
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        y = torch.nn.functional.conv2d(x, w, padding=padding, stride=stride)
        dx, dw = torch.autograd.grad(y, (x, w), grad_outputs=t["dy"].float())
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    return (dx * (t["x"] > 0) if relu_mask else dx), dw


def flops(t: dict) -> float:
    """The forward's FLOPs: dgrad and wgrad each do as many multiply-adds as the forward."""
    return conv_bias_relu.flops({"x": t["x"], "w": t["w"], "y": t["dy"]})
