"""Per-tensor FP8 quantisation, the one way the course makes FP8 inputs (04's GEMM, 05's attention, the
exercises)."""
from __future__ import annotations

import torch


def to_fp8(x: torch.Tensor, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x8, descale)``: ``x`` scaled so its largest magnitude lands on the FP8 format's largest finite value
    (448 for e4m3), rounded to ``dtype`` (default ``torch.float8_e4m3fn``), and ``descale = 1 / scale`` as an
    fp32 tensor of ``x``'s rank with every dimension 1 (``[1, 1, 1]`` for a 3-D ``x``) on ``x``'s device — what a
    graph multiplies the FP8 result by to undo the scaling. An all-zero ``x`` gets scale 448 / 1e-12, not inf."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"to_fp8 expects a torch.Tensor, got {type(x).__name__}")
    dtype = dtype or getattr(torch, "float8_e4m3fn", None)
    if dtype is None or dtype.itemsize != 1 or not dtype.is_floating_point:
        raise TypeError(f"to_fp8 needs an FP8 dtype (this torch has {'none' if dtype is None else dtype})")
    fmax = torch.finfo(dtype).max
    scale = fmax / x.detach().abs().amax().float().clamp(min=1e-12)
    x8 = (x.detach().float() * scale).clamp(-fmax, fmax).to(dtype)
    return x8, (1.0 / scale).reshape([1] * x.dim())
