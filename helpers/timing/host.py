"""Host time: what the Python side of a call costs while the GPU runs behind, and the wall time of named steps."""
from __future__ import annotations

import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable

import torch

from .per_call import Timing, check_timer_args


def host_timing(fn: Callable[[], object], *, warmup: int = 1, iters: int = 50) -> Timing:
    """Host time of one call of ``fn`` as a ``Timing`` (ms): the wall time of each of ``iters`` calls made back
    to back while the GPU runs behind (no synchronisation between them), after ``warmup`` untimed calls. What the
    Python side of a call costs: dispatch, argument checks, the launch itself; not the kernels (those are
    ``gpu_time``'s). Fits ``alternating_rounds(..., timer=host_timing)``."""
    check_timer_args(fn, iters=iters, warmup=warmup)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return Timing.of(times)


def host_us(fn: Callable[[], object], *, calls: int = 50) -> float:
    """Host time of one call of ``fn`` in µs: the median of ``host_timing`` over ``calls`` calls."""
    if calls < 1:
        raise ValueError(f"need calls >= 1, got {calls}")
    return host_timing(fn, iters=calls).median_ms * 1e3


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
