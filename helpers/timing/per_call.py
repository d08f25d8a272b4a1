"""Time per call with CUDA events: warm-up, the median of many runs, an optional L2 flush; and rounds that
take turns, so a drift of the GPU's clocks hits every path alike."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..device import device_info, require_gpu


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

    @classmethod
    def of(cls, times_ms) -> "Timing":
        """Median, p10 and p90 of one time per run (ms)."""
        times = sorted(times_ms)
        return cls(statistics.median(times), _quantile(times, 0.1), _quantile(times, 0.9), len(times), times)

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


def check_timer_args(fn, **counts: int) -> None:
    """Every timer's refusal, before it needs a GPU: ``fn`` not callable, or a count out of range (``calls`` and
    ``iters`` ≥ 1, ``warmup`` ≥ 0; given as two or more)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    need = {name: 0 if name == "warmup" else 1 for name in counts}
    if any(counts[name] < low for name, low in need.items()):
        rules = [f"{name} >= {low}" for name, low in need.items()]
        raise ValueError(f"need {', '.join(rules[:-1])} and {rules[-1]}, got "
                         f"{', '.join(f'{name}={value}' for name, value in counts.items())}")


def call_time(fn: Callable[[], object], *, warmup: int = 10, iters: int = 50, flush_l2: bool = True,
              max_ms: float | None = None) -> Timing:
    """Time each call of ``fn`` on the current stream with CUDA events: what a Python loop of calls pays, the
    host's dispatch included wherever it is slower than the kernels (``gpu_time`` is the kernels alone).

    Each of ``iters`` runs is timed on its own (events around the call only), after
    ``warmup`` untimed calls. With ``flush_l2`` the L2 is overwritten before each
    timed run, outside the events. ``max_ms`` bounds a pathologically slow ``fn``:
    if the first timed run takes longer, timing stops there (``cut_off=True``).
    """
    check_timer_args(fn, iters=iters, warmup=warmup)
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
    return Timing.of(s.elapsed_time(e) for s, e in zip(starts, ends))


def alternating_rounds(fns: dict, *, rounds: int = 3, warmup: int = 5, iters: int = 20,
                       timer: Callable | None = None) -> dict:
    """``{name: [median ms of each round]}``: every function of ``fns`` timed in ``rounds`` rounds that take
    turns (round 1 of each, then round 2 of each, ...), so a drift of the GPU's clocks hits them all alike.
    ``timer(fn, warmup=, iters=)`` returns a ``Timing`` (default ``call_time``)."""
    if rounds < 1:
        raise ValueError(f"need rounds >= 1, got {rounds}")
    timer = timer or call_time
    medians = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            medians[name].append(timer(fn, warmup=warmup, iters=iters).median_ms)
    return medians


benchmark = call_time   # the old name, which stored notebooks import; issue 56 removes it
