"""Scaled dot-product attention (forward) as one cuDNN graph.

Taught in notebook 05 (section 3 builds it step by step); reused by 06 (plan serialization).
Tensors are named q, k, v and o (plus stats for training) in the variant pack.
"""
from __future__ import annotations

import torch

from ..checking import poison_
from ..graphs import GraphIO
from ._common import cudnn_module, new_graph


def causal_mask(causal: bool) -> dict:
    """The current spelling of a top-left causal mask as ``sdpa`` keyword arguments (empty: no mask)."""
    if not causal:
        return {}
    cudnn = cudnn_module()
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


def flops(b: int, h: int, s: int, d: int, *, causal: bool, backward: bool = False) -> float:
    """Matmul FLOPs of attention (Q·Kᵀ and P·V; half of them under a causal mask; the backward is 2.5×)."""
    forward = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return 2.5 * forward if backward else forward
