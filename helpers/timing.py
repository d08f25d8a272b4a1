"""Timing: GPU time with CUDA events (warm-up, median of many runs, optional L2 flush), wall time of
named steps, and the ceilings to quote '% of peak' against (measured on this GPU, or the datasheet's)."""
from __future__ import annotations

import functools
import statistics
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch

from .device import device_info, dtype_name, require_gpu


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    times_ms: list = field(repr=False, default_factory=list)
    cut_off: bool = False  # stopped early because one run exceeded max_ms

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: relative run-to-run noise."""
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms else float("nan")

    def __str__(self) -> str:
        flag = " (cut off)" if self.cut_off else ""
        return f"{self.median_ms:.4f} ms median (p10 {self.p10_ms:.4f}, p90 {self.p90_ms:.4f}, n={self.runs}){flag}"


_flush_buffers: dict = {}


def flush_l2_cache(device: int | None = None) -> None:
    """Overwrite a buffer twice the L2 size so the next run starts cold."""
    index = torch.cuda.current_device() if device is None else device
    buf = _flush_buffers.get(index)
    if buf is None:
        nbytes = max(2 * device_info(index).l2_bytes, 64 * 2**20)
        buf = _flush_buffers[index] = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{index}")
    buf.zero_()


def _quantile(sorted_values: list, q: float) -> float:
    idx = q * (len(sorted_values) - 1)
    lo, hi = int(idx), min(int(idx) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (idx - lo)


def benchmark(fn: Callable[[], object], *, warmup: int = 10, iters: int = 50, flush_l2: bool = True,
              max_ms: float | None = None) -> Timing:
    """Time ``fn`` on the current stream with CUDA events.

    Each of ``iters`` runs is timed on its own (events around the call only), after
    ``warmup`` untimed calls. With ``flush_l2`` the L2 is overwritten before each
    timed run, outside the events. ``max_ms`` bounds a pathologically slow ``fn``:
    if the first timed run takes longer, timing stops there (``cut_off=True``).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if iters < 1 or warmup < 0:
        raise ValueError(f"need iters >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")
    require_gpu()
    stream = torch.cuda.current_stream()
    if max_ms is not None:  # one probe run decides whether warm-up is affordable
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        first = start.elapsed_time(end)
        if first > max_ms:
            return Timing(first, first, first, 1, [first], cut_off=True)
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        if flush_l2:
            flush_l2_cache()
        s.record(stream)
        fn()
        e.record(stream)
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return Timing(statistics.median(times), _quantile(times, 0.1), _quantile(times, 0.9), iters, times)


def alternating_rounds(fns: dict, *, rounds: int = 3, warmup: int = 5, iters: int = 20,
                       timer: Callable | None = None) -> dict:
    """``{name: [median ms of each round]}``: every function of ``fns`` timed in ``rounds`` rounds that take
    turns (round 1 of each, then round 2 of each, ...), so a drift of the GPU's clocks hits them all alike.
    ``timer(fn, warmup=, iters=)`` returns a ``Timing`` (default ``benchmark``)."""
    if rounds < 1:
        raise ValueError(f"need rounds >= 1, got {rounds}")
    timer = timer or benchmark
    medians = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            medians[name].append(timer(fn, warmup=warmup, iters=iters).median_ms)
    return medians


def host_timing(fn: Callable[[], object], *, warmup: int = 1, iters: int = 50) -> Timing:
    """Host time of one call of ``fn`` as a ``Timing`` (ms): the wall time of each of ``iters`` calls made back
    to back while the GPU runs behind (no synchronisation between them), after ``warmup`` untimed calls. What the
    Python side of a call costs: dispatch, argument checks, the launch itself; not the kernels (those are
    ``gpu_time``'s). Fits ``alternating_rounds(..., timer=host_timing)``."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if iters < 1 or warmup < 0:
        raise ValueError(f"need iters >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    times.sort()
    return Timing(statistics.median(times), _quantile(times, 0.1), _quantile(times, 0.9), iters, times)


def host_us(fn: Callable[[], object], *, calls: int = 50) -> float:
    """Host time of one call of ``fn`` in µs: the median of ``host_timing`` over ``calls`` calls."""
    if calls < 1:
        raise ValueError(f"need calls >= 1, got {calls}")
    return host_timing(fn, iters=calls).median_ms * 1e3


def tflops(flops: float, ms: float) -> float:
    """Rate in TFLOP/s for ``flops`` operations done in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    """Rate in GB/s for ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


# ---------------------------------------------------------------- wall time of named steps
class StepTimer:
    """Wall time of named steps: ``with timer("validate"): graph.validate()``."""

    def __init__(self):
        self.ms: "OrderedDict[str, float]" = OrderedDict()

    @contextmanager
    def __call__(self, step: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[step] = (time.perf_counter() - t0) * 1e3

    @property
    def total_ms(self) -> float:
        return sum(self.ms.values())

    def table(self):
        import pandas as pd

        df = pd.DataFrame({"step": list(self.ms), "ms": list(self.ms.values())})
        return pd.concat([df, pd.DataFrame({"step": ["total"], "ms": [self.total_ms]})], ignore_index=True).set_index("step")


# ---------------------------------------------------------------- ceilings
@functools.lru_cache(maxsize=None)
def measured_peak_tflops(dtype: torch.dtype = torch.bfloat16, n: int = 8192) -> float:
    """Dense matmul rate torch reaches on this GPU (random data, median of runs)."""
    require_gpu()
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    t = benchmark(lambda: a @ b, warmup=3, iters=10, flush_l2=False)
    del a, b
    return 2 * n**3 / (t.median_ms * 1e-3) / 1e12


@functools.lru_cache(maxsize=None)
def measured_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    require_gpu()
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = benchmark(lambda: dst.copy_(src), warmup=3, iters=10, flush_l2=False)
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
