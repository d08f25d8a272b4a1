"""What a call launches on the GPU, read with ``torch.profiler``."""
from __future__ import annotations

import warnings
from typing import Callable


def kernels_launched(fn: Callable[[], object]) -> list[str]:
    """Names of the GPU kernels one call of ``fn`` launches (memcpy/memset left out).

    ``fn`` runs once untimed first, so one-time work (lazy init, compilation) is not counted.
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    fn()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # torch warns that a profiler without a schedule keeps only its last cycle: one cycle is all we record
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        events = prof.events()
    return [e.name for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]
