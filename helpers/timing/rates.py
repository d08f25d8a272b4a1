"""Rates (TFLOP/s, GB/s) and the ceilings to quote '% of peak' against: measured on this GPU, or the datasheet's."""
from __future__ import annotations

import functools

import torch

from ..device import dtype_name, require_gpu
from .per_call import call_time


def tflops(flops: float, ms: float) -> float:
    """Rate in TFLOP/s for ``flops`` operations done in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    """Rate in GB/s for ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


@functools.lru_cache(maxsize=None)
def measured_peak_tflops(dtype: torch.dtype = torch.bfloat16, n: int = 8192) -> float:
    """Dense matmul rate torch reaches on this GPU (random data, median of runs)."""
    require_gpu()
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    t = call_time(lambda: a @ b, warmup=3, iters=10, flush_l2=False)
    del a, b
    return 2 * n**3 / (t.median_ms * 1e-3) / 1e12


@functools.lru_cache(maxsize=None)
def measured_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    require_gpu()
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = call_time(lambda: dst.copy_(src), warmup=3, iters=10, flush_l2=False)
    del src, dst
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e9


def peak_tflops(dtype: torch.dtype, measured: bool = True) -> float:
    """The ceiling to quote '% of peak' against: measured by default, the datasheet's with ``measured=False``
    (falls back to the measured one when the GPU is not in the datasheet table)."""
    if measured:
        return measured_peak_tflops(dtype)
    value = require_gpu().datasheet_tflops.get(dtype_name(dtype))
    return value if value is not None else measured_peak_tflops(dtype)


def percent_of_peak(tflops_value: float, dtype: torch.dtype) -> dict:
    """``tflops_value`` as a share of both ceilings, labelled: {"% of measured peak": ..., "% of datasheet peak": ...}.

    The measured ceiling is torch's own 8192³ matmul on this GPU (what a kernel can reach in practice);
    the datasheet's is NVIDIA's dense number (nan when this GPU is not in the table). Quote both."""
    measured = measured_peak_tflops(dtype)
    datasheet = require_gpu().datasheet_tflops.get(dtype_name(dtype))
    return {"% of measured peak": 100 * tflops_value / measured,
            "% of datasheet peak": 100 * tflops_value / datasheet if datasheet else float("nan")}
