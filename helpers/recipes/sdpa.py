"""Scaled dot-product attention as cuDNN graphs: the forward (``sdpa``) and the backward (``sdpa_backward``).

Taught in notebook 05 (section 3 builds the forward step by step, section 5 the backward); used by 06 (plan
serialization) and 08 (both graphs wrapped as a PyTorch custom op). In the variant pack the forward's tensors
are named q, k, v and o (plus stats for training); the backward's q, k, v, o, dO, stats in and dq, dk, dv out.
"""
from __future__ import annotations

import torch

from ..checking import poison_
from ..graphs import GraphIO
from ..libcudnn import load_cudnn
from ._common import new_graph


def causal_mask(causal: bool) -> dict:
    """The current spelling of a top-left causal mask as ``sdpa`` keyword arguments (empty: no mask)."""
    if not causal:
        return {}
    cudnn = load_cudnn(need_gpu=False)
    return dict(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, diagonal_band_right_bound=0)


def forward_graph(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, attn_scale: float,
                  generate_stats: bool, handle=None):
    """SDPA forward for q [B,H,S,D] and k, v [B,H_kv,S,D] in any layout their strides describe (H_kv < H:
    grouped-query attention). Not yet built. Returns ``(graph, io, outputs)``: outputs are new, NaN-poisoned
    buffers — ``o`` like q, and ``stats`` [B,H,S,1] fp32 (the log-sum-exp the backward needs) when
    ``generate_stats``."""
    g = new_graph(q.dtype, handle)
    io = GraphIO(g, dtype=q.dtype)
    o_graph, stats_graph = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=attn_scale,
                                  generate_stats=generate_stats, name="sdpa", **causal_mask(causal))
    outputs = {"o": torch.empty_like(q)}   # same layout as q (v has the same head dim)
    if generate_stats:
        outputs["stats"] = torch.empty(*q.shape[:3], 1, device=q.device, dtype=torch.float32)
    if q.device.type != "meta":
        for buf in outputs.values():
            poison_(buf)
    io.output("o", o_graph, outputs["o"])
    if generate_stats:
        io.output("stats", stats_graph, outputs["stats"])
    return g, io, outputs


def backward_graph(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
                   stats: torch.Tensor, *, causal: bool, attn_scale: float, handle=None):
    """SDPA backward: dQ, dK, dV from the forward's q, k, v, o and stats [B,H,S,1] fp32 and the incoming
    gradient ``do`` (like o), each in any layout its strides describe (k, v may have fewer heads: GQA).
    ``causal`` and ``attn_scale`` must be the forward's. Not yet built. Returns ``(graph, io, outputs)``:
    outputs are new, NaN-poisoned buffers ``dq``, ``dk``, ``dv``, each like its input (same layout)."""
    g = new_graph(q.dtype, handle)
    io = GraphIO(g, dtype=q.dtype)
    inputs = [io.input(name, t) for name, t in [("q", q), ("k", k), ("v", v), ("o", o), ("dO", do)]]
    inputs.append(io.input("stats", stats, dtype=torch.float32))
    dq_graph, dk_graph, dv_graph = g.sdpa_backward(*inputs, attn_scale=attn_scale, name="sdpa_backward",
                                                   **causal_mask(causal))
    outputs = {"dq": torch.empty_like(q), "dk": torch.empty_like(k), "dv": torch.empty_like(v)}
    if q.device.type != "meta":
        for buf in outputs.values():
            poison_(buf)
    for name, graph_tensor in [("dq", dq_graph), ("dk", dk_graph), ("dv", dv_graph)]:
        io.output(name, graph_tensor, outputs[name])
    return g, io, outputs


def flops(b: int, h: int, s: int, d: int, *, causal: bool, backward: bool = False) -> float:
    """Matmul FLOPs of attention (Q·Kᵀ and P·V; half of them under a causal mask; the backward is 2.5×)."""
    forward = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return 2.5 * forward if backward else forward
