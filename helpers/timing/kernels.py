"""Kernel attribution: which kernels a call launches on the GPU, and the GPU time of each (``torch.profiler``)."""
from __future__ import annotations

import warnings
from typing import Callable

from .per_call import check_timer_args


def _kernel_events(fn: Callable[[], object]) -> list:
    """The profiler's GPU kernel events of one call of ``fn`` (memcpy/memset left out), after one untimed call
    (so one-time work — lazy init, compilation — is not counted)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    check_timer_args(fn)
    fn()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # torch warns that a profiler without a schedule keeps only its last cycle: one cycle is all we record
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        events = prof.events()
    return [e for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]


def kernels_launched(fn: Callable[[], object]) -> list[str]:
    """Names of the GPU kernels one call of ``fn`` launches, in launch order (memcpy/memset left out)."""
    return [e.name for e in _kernel_events(fn)]


def kernel_times(fn: Callable[[], object]) -> dict:
    """``{kernel name: GPU µs}`` of one call of ``fn``, longest first (a kernel launched twice adds up)."""
    times: dict = {}
    for e in _kernel_events(fn):
        times[e.name] = times.get(e.name, 0.0) + e.time_range.elapsed_us()
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def short_kernel_name(name: str, width: int = 60) -> str:
    """A kernel's name without template arguments and parameter list, cut to ``width``."""
    return name.split("<")[0].split("(")[0][:width]
