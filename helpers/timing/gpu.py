"""GPU time without the host: what a call costs the GPU once Python dispatch is out of the way.

``call_time`` (``H.call_time``) times each call with events around it, so it sees the host's dispatch wherever that is slower
than the kernels: on a small shape a path with a heavy Python wrapper (``torch.compile``'s guards, the frontend's
``execute``) looks slower than its kernels are. ``gpu_time`` captures the calls in a CUDA graph and times the
replays: the kernels run back to back, with no Python between them. GPU time is the one clock the cores quote
(what the kernels cost, and what a CUDA graph, notebook 08, gets you); per-call time, what a Python loop pays, is
the second, for a deep dive. They are two measurements, not one split: noise, the replay's own launch and a
different L2 or clock state can put per-call time a little below GPU time. ``gpu_time`` measures;
``gpu_timing_or_reason`` and ``gpu_ms_or_reason`` are views of it for a deep dive's table, where a path may not be
capturable; ``timing_table`` puts the clocks side by side, one row per path.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch

from ..device import require_gpu
from ..errors import CourseError, first_line
from ..handles import get_handle
from .host import host_us
from .per_call import Timing, call_time, check_timer_args


class NotCapturable(CourseError):
    """The function cannot be recorded into a CUDA graph (or recorded nothing)."""


def gpu_time(fn: Callable[[], object], *, calls: int = 1, warmup: int = 3, iters: int = 20,
             flush_l2: bool = True) -> Timing:
    """GPU time of one call of ``fn``: ``calls`` calls captured in a CUDA graph, the graph replayed ``iters``
    times (after ``warmup`` untimed calls), each replay timed with events; per call = replay time / ``calls``.
    With ``flush_l2`` the L2 is overwritten before each replay, outside the events (with ``calls > 1`` only the
    first call of a replay starts cold).

    cuDNN: closures that hold the course's handle (``H.get_handle()``) work as they are — the handle is bound to
    the capture stream for the capture and back to the current stream afterwards. A handle of your own must be
    bound inside ``fn``. Raises ``NotCapturable`` (one line) when capture fails or records nothing.
    """
    check_timer_args(fn, calls=calls, iters=iters, warmup=warmup)
    require_gpu()
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(main)
    with torch.cuda.stream(side):  # warm-up off the main stream, as torch's capture docs ask
        get_handle()
        for _ in range(warmup):
            fn()
    main.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(graph):
                get_handle()  # the course's handle now launches into the capture
                for _ in range(calls):
                    fn()
    except Exception as exc:  # an op that syncs, allocates on the host, or launches elsewhere
        raise NotCapturable(f"cannot capture this function in a CUDA graph: {first_line(exc, 160)}") from None
    finally:
        get_handle()  # back on the current stream
    if any("CUDA Graph is empty" in str(w.message) for w in caught):
        raise NotCapturable("the capture recorded no GPU work: fn launches on another stream "
                            "(a cuDNN handle bound elsewhere?)")
    replays = call_time(graph.replay, warmup=1, iters=iters, flush_l2=flush_l2)
    del graph
    return Timing(replays.median_ms / calls, replays.p10_ms / calls, replays.p90_ms / calls, iters,
                  [t / calls for t in replays.times_ms])


def gpu_timing_or_reason(fn: Callable[[], object], *, label: str | None = None,
                         **kwargs) -> tuple[Timing | None, str]:
    """``(gpu_time(fn, **kwargs), "")``, or ``(None, one-line reason)`` where ``fn`` cannot be captured, printed as
    ``label: no GPU time (reason)`` with ``label``: for a verdict that needs the GPU time's own spread."""
    try:
        return gpu_time(fn, **kwargs), ""
    except NotCapturable as exc:
        if label is not None:
            print(f"{label}: no GPU time ({exc})")
        return None, str(exc)


def gpu_ms_or_reason(fn: Callable[[], object], *, label: str | None = None, **kwargs) -> tuple[float, str]:
    """``gpu_timing_or_reason``'s median ms, NaN where there is none: the course's one way to put a GPU time in a
    table that must not stop at one path that cannot be captured."""
    timing, reason = gpu_timing_or_reason(fn, label=label, **kwargs)
    return (float("nan"), reason) if timing is None else (timing.median_ms, "")


def timing_table(paths: dict, *, baseline: str | None = None, gpu=(), host: bool = False,
                 per: tuple[str, int] | None = None, warmup: int = 10, iters: int = 50, flush_l2: bool = True,
                 gpu_iters: int = 20):
    """pandas table, one row per ``{label: fn}`` of ``paths``, in µs:

    ``µs per call`` (``call_time``'s median), ``GPU µs`` for the labels in ``gpu`` (``gpu_ms_or_reason`` with
    ``gpu_iters`` replays: NaN elsewhere, and where a path cannot be captured, the reason printed), ``host µs per
    call`` with ``host`` (``host_us``), ``µs per <per[0]>`` (the call's time over ``per[1]``), ``speedup vs
    <baseline>`` (the baseline's time over the row's) and ``spread``."""
    import pandas as pd

    per_call = {label: call_time(fn, warmup=warmup, iters=iters, flush_l2=flush_l2) for label, fn in paths.items()}
    us = {label: t.median_ms * 1e3 for label, t in per_call.items()}
    table = {"µs per call": us}
    if gpu:
        table["GPU µs"] = {label: gpu_ms_or_reason(fn, label=label, iters=gpu_iters, flush_l2=flush_l2)[0] * 1e3
                           if label in gpu else float("nan") for label, fn in paths.items()}
    if host:
        table["host µs per call"] = {label: host_us(fn) for label, fn in paths.items()}
    if per is not None:
        table[f"µs per {per[0]}"] = {label: t / per[1] for label, t in us.items()}
    if baseline is not None:
        table[f"speedup vs {baseline}"] = {label: us[baseline] / t for label, t in us.items()}
    table["spread"] = {label: t.spread for label, t in per_call.items()}
    return pd.DataFrame(table)
