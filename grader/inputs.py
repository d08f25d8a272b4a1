"""The checkers' own tensors, graphs and references, made here rather than by the lesson recipes they match, so that
changing a recipe cannot change what a grader accepts. Each maker draws the numbers its recipe draws, in the same
order and dtype (``tests/test_grader_inputs.py`` compares them bit for bit on the CPU, and the graphs op by op).
The GPU is touched only inside the functions, so this module imports on any machine.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.checking import poison_
from helpers.device import has_gpu, require_gpu, versions
from helpers.graphs import GraphIO
from helpers.handles import get_handle
from helpers.libcudnn import load_cudnn


def _randn(device: str, seed: int | None):
    """``randn(*shape)`` in fp32 from one generator seeded ``seed`` (the global one for None), as the recipes draw."""
    gen = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    return lambda *shape: torch.randn(*shape, device=device, dtype=torch.float32, generator=gen)


def _out_size(size: int, filt: int, pad: int, stride: int) -> int:
    return (size + 2 * pad - filt) // stride + 1


def conv_tensors(n: int, c: int, hw: int, k: int, rs: int = 3, pad: int = 1, stride: int = 1, *, dtype,
                 seed: int | None = None, device: str = "cuda") -> dict:
    """NHWC x [n,c,hw,hw], w [k,c,rs,rs] scaled by 1/sqrt(c·rs·rs), b [1,k,1,1], NaN-poisoned y (notebook 02's)."""
    rand, nhwc = _randn(device, seed), torch.channels_last
    p = _out_size(hw, rs, pad, stride)
    y = torch.empty(n, k, p, p, device=device, dtype=dtype).to(memory_format=nhwc)
    return dict(x=rand(n, c, hw, hw).to(dtype).to(memory_format=nhwc),
                w=(rand(k, c, rs, rs) / math.sqrt(c * rs * rs)).to(dtype).to(memory_format=nhwc),
                b=rand(1, k, 1, 1).to(dtype).to(memory_format=nhwc), y=poison_(y) if device != "meta" else y)


def dgrad_tensors(n: int, c: int, hw: int, k: int, rs: int = 3, pad: int = 1, stride: int = 1, *, dtype,
                  seed: int | None = None, device: str = "cuda") -> dict:
    """NHWC x = relu(noise) [n,c,hw,hw] (a ReLU's output: about half zeros), w [k,c,rs,rs] scaled by 1/sqrt(c·rs·rs),
    the incoming gradient dy [n,k,p,p] and a NaN-poisoned dx like x (notebook 02's backward)."""
    rand = _randn(device, seed)

    def nhwc(values):
        return values.to(dtype).to(memory_format=torch.channels_last)

    p = _out_size(hw, rs, pad, stride)
    t = dict(x=nhwc(torch.relu(rand(n, c, hw, hw))), w=nhwc(rand(k, c, rs, rs) / (c * rs * rs) ** 0.5),
             dy=nhwc(rand(n, k, p, p)))
    return dict(dy=t["dy"], w=t["w"], x=t["x"], dx=poison_(torch.empty_like(t["x"])))


def norm_tensors(rows: int, hidden: int, *, dtype, seed: int | None = None, device: str = "cuda") -> dict:
    """x, dy [rows,hidden,1,1], scale near 1 [1,hidden,1,1]; NaN-poisoned dx, inv_var [rows,1,1,1] fp32 and dscale
    (notebook 04's RMSNorm; a residual r is drawn between x and dy, as the lesson draws it)."""
    rand = _randn(device, seed)
    x, _, dy = (rand(rows, hidden, 1, 1).to(dtype) for _ in range(3))
    scale = (1 + 0.1 * rand(1, hidden, 1, 1)).to(dtype)
    return dict(x=x, dy=dy, scale=scale, dx=poison_(torch.empty_like(x)),
                inv_var=poison_(torch.empty(rows, 1, 1, 1, device=device)), dscale=poison_(torch.empty_like(scale)))


def rms_reference(t: dict, eps: float = 1e-5) -> dict:
    """torch's ``F.rms_norm`` in fp32 on the upcast inputs and its autograd backward for ``t["dy"]``: inv_var
    [rows,1,1,1], dx, dscale, shaped like the graph's tensors."""
    x, dy = t["x"].float().flatten(1).requires_grad_(True), t["dy"].float().flatten(1)
    scale = t["scale"].float().flatten(1).flatten().requires_grad_(True)
    dx, dscale = torch.autograd.grad(F.rms_norm(x, (x.shape[1],), scale, eps), (x, scale), grad_outputs=dy)
    inv_var = torch.rsqrt(x.detach().square().mean(1) + eps)
    return dict(inv_var=inv_var.reshape(-1, 1, 1, 1), dx=dx.reshape(t["x"].shape),
                dscale=dscale.reshape(t["scale"].shape))


def conv_reference(t: dict):
    """relu(conv2d(x, w) + b) in float64 (padding 1, stride 1)."""
    x, w, b = (t[name].double() for name in "xwb")
    return torch.relu(torch.nn.functional.conv2d(x, w, b.flatten(), stride=1, padding=1))


def new_graph(io_dtype, handle=None, **options):
    """An empty graph: ``io_dtype`` in memory, fp32 intermediates and math, on ``handle`` (default the course's;
    none without a GPU, where construction works up to ``validate()``); ``options`` go to ``cudnn.pygraph``."""
    if handle is None and has_gpu():
        handle = get_handle()
    with load_cudnn(need_gpu=False).graph(handle, io_data_type=io_dtype, intermediate_data_type=torch.float32,
                                          compute_data_type=torch.float32, **options) as (graph, _):
        return graph


def conv_graph(t: dict, **options):
    """relu(conv(x, w) + b) for NHWC tensors ``t`` (x, w, b, y; padding 1, stride 1), not yet built: ``(graph, io)``."""
    nhwc = torch.channels_last
    g = new_graph(t["x"].dtype, **options)
    io = GraphIO(g, dtype=t["x"].dtype)
    conv = g.conv_fprop(io.input("x", t["x"], layout=nhwc), io.input("w", t["w"], layout=nhwc),
                        padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv")
    io.output("y", g.relu(g.bias(conv, io.input("b", t["b"], layout=nhwc), name="bias"), name="relu"), t["y"])
    return g, io


def matmul_graph(t: dict, *, act: str, handle=None):
    """act(x @ w + b) for tensors ``t`` (x, w, b, y), ``act`` "gelu" or "silu"; not yet built: ``(graph, io)``."""
    g = new_graph(t["x"].dtype, handle)
    io = GraphIO(g, dtype=t["x"].dtype)
    summed = g.add(g.matmul(io.input("x", t["x"]), io.input("w", t["w"]), name="matmul"), io.input("b", t["b"]),
                   name="bias")
    io.output("y", g.gelu(summed, name="gelu") if act == "gelu" else g.swish(summed, swish_beta=1.0, name="silu"),
              t["y"])
    return g, io


def fingerprint() -> dict:
    """This machine as the course's plan cache keys its entries (needs a GPU): GPU model, SM version and count, driver,
    CUDA runtime, cuDNN backend and frontend."""
    cudnn = load_cudnn()
    d = require_gpu()
    v = versions()
    return {"gpu": d.name, "sm": d.sm_version, "sm_count": int(d.sm_count), "driver": v.get("driver"),
            "cuda_runtime": v.get("cuda (torch build)"), "cudnn_backend": int(cudnn.backend_version()),
            "cudnn_frontend": str(cudnn.__version__)}
