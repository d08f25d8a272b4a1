"""Benchmark sweeps in the spirit of Triton's ``perf_report``: every path at every point of a
parameter grid, timed the same way, returned as one tidy table (a row per point and path).

    def paths(S, d):                        # set-up for one point: build, allocate, check — untimed
        graph = ...
        return {"cuDNN graph": lambda: graph.execute(...), "torch flash": ...}

    df = perf_sweep([dict(S=s, d=128) for s in (1024, 4096)], paths,
                    flops=lambda S, d: 4 * S * S * d, peak=peak_tflops(torch.bfloat16))
    H.plot_lines(df, x="S", y="TFLOP/s", hue="path", ylabel="TFLOP/s", title="...", logx=True)

A path that cannot run at a point is a row too, with the reason in ``status``: ``paths`` may
map it to a string instead of a function, and a path whose first (untimed) call raises is
recorded as ``unavailable: ...``.
"""
from __future__ import annotations

import itertools
import warnings
from typing import Callable, Iterable

import torch

from ..errors import first_line
from .per_call import call_time
from .rates import gbps, tflops

COLUMNS = ["path", "status", "ms", "p10 ms", "p90 ms", "spread", "TFLOP/s", "% of peak", "GB/s", "peak MiB"]


def grid(**axes: Iterable) -> list[dict]:
    """Every combination of the axes' values, as a list of points: ``grid(S=[1, 2], d=[64])``."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*(list(v) for v in axes.values()))]


def peak_extra_mib(fn: Callable[[], object]) -> float:
    """MiB allocated at the peak of one call of ``fn``, above what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    del result
    return peak / 2**20


def _probe(fn: Callable[[], object]) -> str | None:
    """Run ``fn`` once, untimed; the reason it cannot run, or None. Backend warnings are not shown here:
    a path that works warns again (if at all) where it is timed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        torch.cuda.synchronize()
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        return "unavailable: " + first_line(exc, 80)
    return None


def perf_sweep(points: list[dict] | dict, paths: Callable[..., dict], *, flops: Callable[..., float] | None = None,
               nbytes: Callable[..., float] | None = None, peak: float | None = None, warmup: int = 10,
               iters: int = 50, flush_l2: bool = True, max_ms: float | None = None, memory: bool = False,
               progress: bool = True, desc: str = "sweep"):
    """Time ``paths(**point)`` at every point; a pandas DataFrame with the point's keys, then ``COLUMNS``.

    ``points``: a list of dicts, or a dict of lists (every combination, see ``grid``).
    ``paths(**point)`` returns ``{label: fn}``; a value may also be ``(fn, memory_fn)`` (memory is
    measured on ``memory_fn``, e.g. one that allocates fresh outputs) or a string (the path does not
    run at this point; the string is its status). ``flops``/``nbytes`` (functions of the point) give
    TFLOP/s and GB/s; ``peak`` (TFLOP/s) gives '% of peak'. Timing is ``call_time`` with
    ``warmup``/``iters``/``flush_l2``/``max_ms``; ``memory=True`` adds the peak extra MiB of one call.
    """
    import pandas as pd

    if isinstance(points, dict):
        points = grid(**points)
    points = [dict(p) for p in points]
    if not points:
        raise ValueError("perf_sweep needs at least one point")
    if not callable(paths):
        raise TypeError(f"paths must be a function of the point's parameters, got {type(paths).__name__}")
    iterator = points
    if progress:
        from ..progress import progress as _progress

        iterator = _progress(points, desc)
    rows = []
    for point in iterator:
        work = flops(**point) if flops else None
        moved = nbytes(**point) if nbytes else None
        for label, entry in paths(**point).items():
            row = dict(point, path=label)
            rows.append(row)
            if isinstance(entry, str):
                row["status"] = entry
                continue
            fn, memory_fn = entry if isinstance(entry, tuple) else (entry, entry)
            reason = _probe(fn)
            if reason:
                row["status"] = reason
                continue
            if memory:
                row["peak MiB"] = peak_extra_mib(memory_fn)
            t = call_time(fn, warmup=warmup, iters=iters, flush_l2=flush_l2, max_ms=max_ms)
            row.update({"status": "cut off" if t.cut_off else "ok", "ms": t.median_ms, "p10 ms": t.p10_ms,
                        "p90 ms": t.p90_ms, "spread": t.spread})
            if work is not None:
                row["TFLOP/s"] = tflops(work, t.median_ms)
                if peak:
                    row["% of peak"] = 100 * row["TFLOP/s"] / peak
            if moved is not None:
                row["GB/s"] = gbps(moved, t.median_ms)
    df = pd.DataFrame(rows)
    keys = list(points[0])
    return df[keys + [c for c in COLUMNS if c in df.columns]]
